"""The Triton kernel of the timed calls' digests (`digest`): one pass over a tensor, the weights
computed in registers from the element's index and the call's keys, per-program partial sums.

`sums_kernel[(P,)](x, out, n, k0, k1, BLOCK=..., WIDE=...)`: program `p` reads the whole blocks
`p, p + P, ...` of the flat `x` (`n` elements, unmasked, vectorized loads) and program 0 also the
last, partial block; it writes (the count of non-finite elements, sum a, sum b) to `out[p]`
(float64), accumulating in float32, or float64 with `WIDE`. The weights are `digest.weights`'s
bit for bit (the same hash, in uint32; the masks keep it so whatever integer type a literal gets),
so the judge's PyTorch sums differ from these only by rounding. `n`, `k0` and `k1` are int32 and
not specialized: one compile per dtype (`digest.warm`).
"""

import triton
import triton.language as tl


@triton.jit
def _fmix32(h):
    # the masks keep uint32 arithmetic whatever integer type the literals give
    h = h ^ (h >> 16)
    h = (h * 0x85EBCA6B) & 0xFFFFFFFF
    h = h ^ (h >> 13)
    h = (h * 0xC2B2AE35) & 0xFFFFFFFF
    return h ^ (h >> 16)


@triton.jit
def _step(x_ptr, offs, n, k0, k1, acc_a, acc_b, bad, MASKED: tl.constexpr):
    # one block of elements `offs`: the non-finite ones counted, the others summed with their weights
    if MASKED:
        v = tl.load(x_ptr + offs, mask=offs < n, other=0)
    else:
        v = tl.load(x_ptr + offs)
    v = v.to(acc_a.dtype)
    ok = (v == v) & (tl.abs(v) != float("inf"))
    bad += tl.where(ok, 0, 1)
    v = tl.where(ok, v, 0.0)
    h = _fmix32((offs & 0xFFFFFFFF).to(tl.uint32) ^ k0)
    h = _fmix32((h + k1) & 0xFFFFFFFF)
    acc_a += ((h & 0xFFFF).to(acc_a.dtype) - 32767.5) * (1.0 / 32768.0) * v
    acc_b += ((h >> 16).to(acc_a.dtype) - 32767.5) * (1.0 / 32768.0) * v
    return acc_a, acc_b, bad


@triton.jit(do_not_specialize=["n", "k0", "k1"])
def sums_kernel(x_ptr, out_ptr, n, k0, k1, BLOCK: tl.constexpr, WIDE: tl.constexpr):
    # program p: the whole blocks p, p + P, ... of x (unmasked loads), and program 0 the last,
    # partial block; writes (non-finite count, sum a, sum b) to out[p]
    if WIDE:
        acc_a = tl.zeros([BLOCK], dtype=tl.float64)
    else:
        acc_a = tl.zeros([BLOCK], dtype=tl.float32)
    acc_b = acc_a
    bad = tl.zeros([BLOCK], dtype=tl.int32)
    lanes = tl.arange(0, BLOCK).to(tl.int64)
    pid = tl.program_id(0)
    whole = n // BLOCK
    for b in range(pid, whole, tl.num_programs(0)):
        acc_a, acc_b, bad = _step(x_ptr, lanes + b * BLOCK, n, k0, k1, acc_a, acc_b, bad, False)
    if pid == 0:
        acc_a, acc_b, bad = _step(x_ptr, lanes + whole * BLOCK, n, k0, k1, acc_a, acc_b, bad, True)
    row = out_ptr + pid * 3
    tl.store(row, tl.sum(bad, axis=0).to(tl.float64))
    tl.store(row + 1, tl.sum(acc_a, axis=0).to(tl.float64))
    tl.store(row + 2, tl.sum(acc_b, axis=0).to(tl.float64))
