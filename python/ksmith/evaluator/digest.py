"""Digests of timed calls: how the judge checks the outputs of calls it never saw, chosen after the
fact among all the timed calls.

After every timed call (untimed, and the same after every call, so nothing tells a call that will
be checked from one that will not) the harness reduces, on the device and without waiting for it,
each output tensor and each input tensor to `PER_TENSOR` numbers: the count of its non-finite
elements and `SUMS` weighted sums of its other elements, `sum_j w(j) * x_j`. The weights are a
hash of the element's index and of two keys drawn after the call (`draw_keys`, made distinct per
tensor by `tensor_keys`): what a call's weights are is decided only once the call has returned,
and nothing of them is in memory before. An input's sums show whether the call changed it. The
worker then picks some calls and the judge writes the same fresh inputs (from the call's seed,
`inputs.refresh`), runs the reference, reduces its outputs with the same keys and compares
(`compare_outputs`, `same_inputs`).

Cost: on a GPU one fused pass per tensor (`digest_kernel`, Triton) reads the tensor once and
computes the weights in registers: per-program partial sums (float32 accumulation; float64 for
float64, integer and bool tensors, whose sums are then exact up to rounding far below any
difference of one unit), added up in float64 by one small reduction for all the tensors of a call.
No weight is stored, nothing is generated at the tensor's size, nothing is copied. The harness
compiles the kernel for the task's dtypes (`warm`) before the candidate is imported, so no timing
waits for a compile. Elsewhere (the CPU's rehearsal, a dtype the kernel does not read, a tensor of
more than `KERNEL_MAX` elements) and in the judge, `oracle_sums` computes the same numbers with
PyTorch in float64, `CHUNK` elements at a time.

The weights: `h = fmix(fmix(j ^ k0) + k1)` (murmur3's 32-bit finalizer, `j` the index's low 32
bits), and `w = (b - 32767.5) / 32768` for `b` each 16-bit half of `h` (one half per sum): uniform
on (-1, 1) in steps of 2^-15, exact in float32, mean 0, standard deviation `WEIGHT_STD`.

Why a random weighted sum tells a wrong output from a right one: for an error vector `e` (the
candidate's output minus the reference's) the difference of the two sums is `sum_j w_j e_j`, of
standard deviation `WEIGHT_STD * ||e||_2` over the keys and sub-Gaussian with that variance
(uniform weights are). An output within the comparison's tolerances has `||e||_2 <= E`, where `E`
is the smaller of the relative limit times `||ref||_2` (where that criterion applies, see
`compare`) and `||atol + rtol |ref| ||_2`; such a difference exceeds `Z * WEIGHT_STD * E` with
probability below `2 exp(-Z^2 / 2)` = 3e-8 per sum. An output computed for other inputs, or not at
all, or half of it, has `||e||_2` of the order of `||ref||_2`, hundreds of times `E`, and passes
one sum with probability about `Z * E / ||ref||_2` (below 1 % for float32) and all `SUMS` sums
with its power. A non-finite element where the reference has none changes the count.
"""

from __future__ import annotations

import math
import secrets
from collections.abc import Iterable
from typing import Any

import torch
import triton

from .compare import NOISE_FLOOR, relative_limit, tolerance
from .digest_kernel import sums_kernel as sums_kernel

#: Weighted sums per tensor.
SUMS = 2
#: Numbers per tensor (and per output) in a digest: the non-finite count, then the sums.
PER_TENSOR = 1 + SUMS
#: The weights' standard deviation (uniform on (-1, 1)).
WEIGHT_STD = 1.0 / math.sqrt(3.0)
#: How many standard deviations of an output at the edge of the tolerances a sum may be off.
Z = 6.0
#: The harness's float32 accumulation, relative to `||ref||_2`, a sum may be off by besides.
ROUNDING = 1e-5
#: An input's sum may differ from the judge's by this much relative to `||input||_2` and still be
#: the same values (float32 accumulation on the harness's side); a changed input is off by far more.
INPUT_TOLERANCE = 1e-5
#: Inputs' tensor indexes (`tensor_keys`) start here; outputs' are their positions.
INPUTS = 1 << 16
#: Elements one program of the kernel reads per step, and the most programs per tensor.
BLOCK = 1024
MAX_PROGRAMS = 1024
#: Tensors above this many elements are summed by `oracle_sums` (the kernel's int32 loop bound).
KERNEL_MAX = 2**31 - 2 * BLOCK * MAX_PROGRAMS
#: Elements `oracle_sums` reduces at a time (bounds its temporary memory).
CHUNK = 1 << 22
#: Dtypes the kernel reads; its float32 accumulation is for the first three.
NARROW = (torch.float16, torch.bfloat16, torch.float32)
KERNEL_DTYPES = NARROW + (torch.float64, torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8, torch.bool)

_M32 = 0xFFFFFFFF
_KEY = 0x7FFFFFFF


def draw_keys() -> list[int]:
    """A call's two keys (31-bit: the kernel takes them as int32 scalars), drawn after it returned."""
    return [secrets.randbits(31), secrets.randbits(31)]


def tensor_keys(keys: list[int], index: int) -> tuple[int, int]:
    """The keys of the call's tensor `index` (an output's position, or `INPUTS` + an input's)."""
    return (int(keys[0]) + 0x3C6EF372 * (index + 1)) & _KEY, (int(keys[1]) ^ (0x2545F491 * (index + 1))) & _KEY


# -- the weights, in PyTorch (the judge's and the CPU's) -------------------------------------------
def _mul32(h: torch.Tensor, c: int) -> torch.Tensor:
    """`h * c mod 2^32` for `h` in [0, 2^32), without leaving int64."""
    return (h * (c & 0xFFFF) + (((h * (c >> 16)) & 0xFFFF) << 16)) & _M32


def _fmix(h: torch.Tensor) -> torch.Tensor:
    h = h ^ (h >> 16)
    h = _mul32(h, 0x85EBCA6B)
    h = h ^ (h >> 13)
    h = _mul32(h, 0xC2B2AE35)
    return h ^ (h >> 16)


def weights(start: int, count: int, k0: int, k1: int, device: str | torch.device) -> tuple[torch.Tensor, ...]:
    """The `SUMS` float64 weight vectors of elements `start` .. `start + count - 1` under the
    tensor keys `k0`, `k1` (see the module doc)."""
    j = torch.arange(start, start + count, dtype=torch.int64, device=device) & _M32
    h = _fmix((j ^ k0) & _M32)
    h = _fmix((h + k1) & _M32)
    return ((h & 0xFFFF).to(torch.float64) - 32767.5) / 32768, ((h >> 16).to(torch.float64) - 32767.5) / 32768


def _flat(t: torch.Tensor) -> torch.Tensor:
    """`t`'s elements as a flat tensor (a complex tensor's real and imaginary parts)."""
    v = t.detach()
    if v.is_complex():
        v = torch.view_as_real(v)
    return v.reshape(-1)


def oracle_sums(t: torch.Tensor, k0: int, k1: int) -> torch.Tensor:
    """The `PER_TENSOR` numbers of `t` under the tensor keys `k0`, `k1`, in float64 with PyTorch
    (a float64 vector on `t`'s device)."""
    v = _flat(t)
    out = torch.zeros(PER_TENSOR, dtype=torch.float64, device=v.device)
    for start in range(0, v.numel(), CHUNK):
        x = v[start : start + CHUNK].to(torch.float64)
        finite = torch.isfinite(x)
        x = torch.where(finite, x, torch.zeros((), dtype=torch.float64, device=x.device))
        parts = [(~finite).sum().to(torch.float64)]
        parts += [(x * w).sum() for w in weights(start, x.numel(), k0, k1, x.device)]
        out += torch.stack(parts)
    return out


# -- the weights, in one pass on a GPU (`digest_kernel`) ----------------------------------------
def _kernel_takes(v: torch.Tensor) -> bool:
    return v.is_cuda and v.dtype in KERNEL_DTYPES and 0 < v.numel() <= KERNEL_MAX


def _kernel_sums(v: torch.Tensor, k0: int, k1: int, part: torch.Tensor) -> None:
    """The kernel over the flat `v` into `part` (`MAX_PROGRAMS` x 3 float64, zeros)."""
    wide = v.dtype not in NARROW
    if v.dtype == torch.bool:
        v = v.view(torch.uint8)
    grid = (min(triton.cdiv(v.numel(), BLOCK), MAX_PROGRAMS),)
    sums_kernel[grid](v, part, v.numel(), k0, k1, BLOCK=BLOCK, WIDE=wide)


def call_sums(tensors: list[tuple[torch.Tensor, tuple[int, int]]]) -> torch.Tensor:
    """The `PER_TENSOR` numbers of each (tensor, tensor keys) of a call: a float64
    [len, PER_TENSOR] tensor on the first tensor's device (the host for none). On a GPU one
    kernel per tensor into one buffer of partial sums and one reduction for all, nothing waited
    for; elsewhere `oracle_sums`."""
    if not tensors:
        return torch.zeros((0, PER_TENSOR), dtype=torch.float64)
    device = tensors[0][0].device
    flats = [(_flat(t).to(device), k) for t, k in tensors]
    if not any(_kernel_takes(v) for v, _ in flats):
        return torch.stack([oracle_sums(v, *k) for v, k in flats])
    parts = torch.zeros((len(flats), MAX_PROGRAMS, PER_TENSOR), dtype=torch.float64, device=device)
    for (v, k), part in zip(flats, parts):
        if _kernel_takes(v):
            _kernel_sums(v, k[0], k[1], part)
        elif v.numel() > 0:
            part[0].copy_(oracle_sums(v, *k))
    return parts.sum(dim=1)


def warm(dtypes: Iterable[torch.dtype], device: str) -> None:
    """Compiles the kernel for each of `dtypes` (on a GPU; nothing elsewhere), so that no timing
    waits for a compile."""
    if not device.startswith("cuda"):
        return
    probes = [(torch.ones(3 * BLOCK, dtype=dt, device=device), (1, 2)) for dt in set(dtypes) if dt in KERNEL_DTYPES]
    if probes:
        call_sums(probes)
        torch.cuda.synchronize()


# -- a call's digest ---------------------------------------------------------------------------
def call_digest(outs: list[Any], inputs: list[Any], keys: list[int]) -> tuple[torch.Tensor, list[Any]]:
    """A timed call's digest, as the harness takes it right after the call: the sums of its output
    tensors, then of its input tensors (`call_sums`, on the device, not waited for), and its
    outputs that are not tensors, as they are (`assemble` makes the rows)."""
    tensors = [(o, tensor_keys(keys, i)) for i, o in enumerate(outs) if isinstance(o, torch.Tensor)]
    tensors += [(x, tensor_keys(keys, INPUTS + i)) for i, x in enumerate(inputs) if isinstance(x, torch.Tensor)]
    numbers = [o for o in outs if not isinstance(o, torch.Tensor)]
    return call_sums(tensors), numbers


def assemble(outs_kinds: list[bool], sums: torch.Tensor, numbers: list[Any]) -> tuple[torch.Tensor, torch.Tensor]:
    """A call's digest rows on the host from `call_digest`'s parts: the outputs' (`PER_TENSOR`
    numbers per output, in order: a tensor's sums, or for a number 0 and its value) and the
    inputs'; `outs_kinds` says which outputs are tensors."""
    sums = sums.to(torch.float64).cpu()
    rows = []
    k = 0
    values = iter(numbers)
    for is_tensor in outs_kinds:
        if is_tensor:
            rows.append(sums[k])
            k += 1
        else:
            rows.append(torch.tensor([0.0] + [_number(next(values))] * SUMS, dtype=torch.float64))
    out = torch.cat(rows) if rows else torch.zeros(0, dtype=torch.float64)
    return out, sums[k:].reshape(-1)


def _number(o: Any) -> float:
    return float(o) if isinstance(o, (int, float, bool)) else math.nan


def output_digest(outs: list[Any], keys: list[int]) -> torch.Tensor:
    """The digest of outputs `outs` under `keys` as the judge takes it (`oracle_sums`): a host
    float64 vector of `PER_TENSOR` numbers per output."""
    rows = []
    for i, o in enumerate(outs):
        if isinstance(o, torch.Tensor):
            rows.append(oracle_sums(o, *tensor_keys(keys, i)).cpu())
        else:
            rows.append(torch.tensor([0.0] + [_number(o)] * SUMS, dtype=torch.float64))
    return torch.cat(rows) if rows else torch.zeros(0, dtype=torch.float64)


def input_digest(inputs: list[Any], keys: list[int]) -> torch.Tensor:
    """The digest of the input tensors of `inputs` under `keys` as the judge takes it: a host
    float64 vector of `PER_TENSOR` numbers per input tensor."""
    rows = [
        oracle_sums(x, *tensor_keys(keys, INPUTS + i)).cpu()
        for i, x in enumerate(inputs)
        if isinstance(x, torch.Tensor)
    ]
    return torch.cat(rows) if rows else torch.zeros(0, dtype=torch.float64)


def signature(outs: list[Any]) -> list[Any]:
    """What a call's outputs are: per output, [shape, dtype] for a tensor, its type's name
    otherwise (the judge compares it with the reference's)."""
    return [
        [list(o.shape), str(o.dtype).replace("torch.", "")] if isinstance(o, torch.Tensor) else type(o).__name__
        for o in outs
    ]


def compare_outputs(
    cand: torch.Tensor,
    ref_outs: list[Any],
    keys: list[int],
    tolerances: dict[str, Any],
    relative: dict[str, float] | None,
) -> tuple[bool, float]:
    """Whether the candidate's digest `cand` (host float64 vector) matches the reference's
    outputs `ref_outs` reduced with the same keys, within the tolerances (see the module doc), and
    the largest deviation in units of its bound (above 1: fails)."""
    ref = output_digest(ref_outs, keys)
    if cand.numel() != ref.numel():
        return False, math.inf
    worst = 0.0
    for i, r in enumerate(ref_outs):
        c_part = cand[i * PER_TENSOR : (i + 1) * PER_TENSOR]
        r_part = ref[i * PER_TENSOR : (i + 1) * PER_TENSOR]
        if isinstance(r, torch.Tensor):
            if float(c_part[0]) != float(r_part[0]):
                return False, math.inf  # not as many non-finite elements
            bound = _bound(r, tolerances, relative)
        else:
            atol, rtol = tolerance(torch.float32, tolerances)
            bound = atol + rtol * abs(float(r_part[1]))
        for c, x in zip(c_part[1:].tolist(), r_part[1:].tolist()):
            if c == x or (math.isnan(c) and math.isnan(x)):
                continue
            dev = abs(c - x) / bound if bound > 0 else math.inf
            if not dev <= 1.0:
                return False, dev if dev == dev else math.inf
            worst = max(worst, dev)
    return True, worst


def _norm(t: torch.Tensor) -> torch.Tensor:
    """`t`'s finite elements as a float64 flat tensor (non-finite ones as 0)."""
    v = _flat(t).to(torch.float64)
    return torch.nan_to_num(v, nan=0.0, posinf=0.0, neginf=0.0)


def _bound(r: torch.Tensor, tolerances: dict[str, Any], relative: dict[str, float] | None) -> float:
    """How far a sum over the output `r`'s elements may be off (see the module doc)."""
    v = _norm(r)
    norm = float(torch.linalg.vector_norm(v))
    if r.dtype == torch.bool or not (r.is_floating_point() or r.is_complex()):
        return 1e-9 * norm + 1e-9  # integers: the same values, up to the sums' rounding
    atol, rtol = tolerance(r.dtype, tolerances)
    allowed = float(torch.linalg.vector_norm(atol + rtol * v.abs()))
    if norm / max(v.numel(), 1) ** 0.5 > atol * NOISE_FLOOR:
        allowed = min(allowed, relative_limit(r.dtype, relative) * norm)
    return Z * WEIGHT_STD * allowed + ROUNDING * norm


def same_inputs(cand: torch.Tensor, pristine: list[Any], keys: list[int]) -> bool:
    """Whether the inputs a timed call left behind (their digest, `cand`) are the fresh values it
    was given (`pristine`, the judge's own copy)."""
    ref = input_digest(pristine, keys)
    if cand.numel() != ref.numel():
        return False
    norms = [float(torch.linalg.vector_norm(_norm(x))) for x in pristine if isinstance(x, torch.Tensor)]
    for i, n in enumerate(norms):
        c = cand[i * PER_TENSOR : (i + 1) * PER_TENSOR].tolist()
        r = ref[i * PER_TENSOR : (i + 1) * PER_TENSOR].tolist()
        if c[0] != r[0] or any(not abs(a - b) <= INPUT_TOLERANCE * n + 1e-12 for a, b in zip(c[1:], r[1:])):
            return False
    return True
