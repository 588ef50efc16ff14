"""The timed calls' fresh inputs and digests (`inputs.refresh`, `digest`), on the CPU: the judge
must write the very values the harness wrote from a call's seed, and tell an output within the
tolerances from a stale or skipped one through a few weighted sums."""

from __future__ import annotations

import os as _os
import sys as _sys

_sys.path.insert(0, _os.path.join(_os.path.dirname(_os.path.abspath(__file__)), ".."))

import math  # noqa: E402
import subprocess  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402
from ksmith.evaluator import digest  # noqa: E402
from ksmith.evaluator.compare import DEFAULT_RELATIVE, DEFAULT_TOLERANCES  # noqa: E402
from ksmith.evaluator.evaluate import pick  # noqa: E402
from ksmith.evaluator.inputs import make_inputs, nonnegative, refresh  # noqa: E402


def get_inputs():
    return [torch.randn(64, 32), torch.rand(500), torch.randint(0, 7, (40,)), 3]


def template():
    return make_inputs(get_inputs, 11, 0)


def test_fresh_values_are_new_every_seed_the_same_for_the_same_seed_and_keep_domains():
    base = template()
    flags = nonnegative(base)
    assert flags == [False, True, False, False]
    a = [x.clone() if isinstance(x, torch.Tensor) else x for x in base]
    b = [torch.empty_like(x).fill_(9) if isinstance(x, torch.Tensor) else x for x in base]
    pointers = [x.data_ptr() for x in a if isinstance(x, torch.Tensor)]
    refresh(a, flags, 123, get_inputs)
    refresh(b, flags, 123, get_inputs)
    assert [x.data_ptr() for x in a if isinstance(x, torch.Tensor)] == pointers, "in place: the graph's buffers"
    for x, y, old in zip(a, b, base):
        if isinstance(x, torch.Tensor):
            assert torch.equal(x, y), "the judge writes the harness's values from the seed"
            assert not torch.equal(x, old), "new values at every seed, integer inputs too"
    assert (a[1] >= 0).all() and (a[0] < 0).any(), "a non-negative input stays non-negative"
    assert a[2].dtype == torch.int64 and int(a[2].min()) >= 0 and int(a[2].max()) < 7, "the task's own range"
    assert a[3] == 3
    c = [x.clone() if isinstance(x, torch.Tensor) else x for x in base]
    refresh(c, flags, 124, get_inputs)
    assert not torch.equal(c[0], a[0]) and not torch.equal(c[2], a[2])


def test_an_integer_input_of_another_shape_keeps_its_values():
    def varying():
        return [torch.randn(8), torch.randint(0, 3, (int(torch.randint(2, 9, (1,))),))]

    base = make_inputs(varying, 5, 0)
    x = [t.clone() for t in base]
    for seed in range(20):
        refresh(x, nonnegative(base), seed, varying)
        assert x[1].shape == base[1].shape


KEYS = [[0, 1], [17, 4000], [123456789, 987654321], [2**31 - 1, 2**31 - 2]]


def test_the_weights_are_a_uniform_hash_of_index_and_keys():
    wa, wb = digest.weights(0, 1 << 16, 5, 9, "cpu")
    again = digest.weights(0, 1 << 16, 5, 9, "cpu")
    assert torch.equal(wa, again[0]) and torch.equal(wb, again[1]), "the judge computes the harness's weights"
    tail = digest.weights(1000, 50, 5, 9, "cpu")
    assert torch.equal(tail[0], wa[1000:1050]), "a weight depends on its element's index, not on the chunk"
    for w in (wa, wb):
        assert float(w.abs().max()) < 1.0 and abs(float(w.mean())) < 0.01
        assert float(w.std()) == pytest.approx(digest.WEIGHT_STD, rel=0.01)
        assert bool(((w * 32768 + 32767.5) == (w * 32768 + 32767.5).round()).all()), "exact in float32"
    assert abs(float(torch.corrcoef(torch.stack([wa, wb]))[0, 1])) < 0.02, "the two sums weigh independently"
    for other in (digest.weights(0, 1 << 16, 6, 9, "cpu"), digest.weights(0, 1 << 16, 5, 10, "cpu")):
        assert abs(float(torch.corrcoef(torch.stack([wa, other[0]]))[0, 1])) < 0.02, "other keys, other weights"
    keys = digest.draw_keys()
    assert len(keys) == 2 and all(0 <= k < 2**31 for k in keys)
    per_tensor = {digest.tensor_keys(keys, i) for i in [0, 1, 2, digest.INPUTS, digest.INPUTS + 1]}
    assert len(per_tensor) == 5 and all(0 <= k < 2**31 for pair in per_tensor for k in pair)


def _ref(n=4096):
    torch.manual_seed(0)
    return torch.randn(n) * 3


@pytest.mark.parametrize("keys", KEYS)
def test_outputs_within_the_tolerances_pass_and_stale_ones_fail(keys):
    ref = _ref()
    tol, rel = DEFAULT_TOLERANCES, DEFAULT_RELATIVE

    def check(cand):
        return digest.compare_outputs(digest.output_digest([cand], keys), [ref], keys, tol, rel)

    ok, dev = check(ref.clone())
    assert ok and dev < 1e-3
    # an error at the edge of the float32 tolerance in every element (random signs): passes
    atol, rtol = DEFAULT_TOLERANCES["float32"]
    sign = torch.randint(0, 2, ref.shape) * 2 - 1
    ok, dev = check(ref + 0.99 * sign * (atol + rtol * ref.abs()))
    assert ok and dev < 1.0
    # another input's output (stale), a skipped call (left zero), the output of half the work
    other = torch.randn(ref.shape) * 3
    half = ref.clone()
    half[: half.numel() // 2] = 0
    for wrong in (other, torch.zeros_like(ref), half):
        ok, dev = check(wrong)
        assert not ok and dev > 1.0
    nan = ref.clone()
    nan[3] = math.nan
    assert not check(nan)[0], "a non-finite element where the reference has none"


def test_non_finite_reference_elements_are_counted_not_summed():
    ref = _ref(256)
    ref[5] = math.nan
    ref[9] = math.inf
    d = digest.output_digest([ref.clone()], [3, 8])
    assert float(d[0]) == 2 and all(math.isfinite(float(x)) for x in d)
    assert digest.compare_outputs(d, [ref], [3, 8], DEFAULT_TOLERANCES, DEFAULT_RELATIVE)[0]
    moved = ref.clone()
    moved[5], moved[6] = moved[6].item(), math.nan
    assert not digest.compare_outputs(digest.output_digest([moved], [3, 8]), [ref], [3, 8], {}, {})[0]


def test_integer_outputs_must_be_equal_and_numbers_within_tolerance():
    ints = torch.randint(0, 1000, (100,))
    keys = [5, 6]

    def check(outs):
        return digest.compare_outputs(digest.output_digest(outs, keys), [ints, 2.5], keys, {}, {})[0]

    assert check([ints, 2.5])
    off = ints.clone()
    off[50] += 1
    assert not check([off, 2.5]) and not check([ints, 2.7]) and not check([ints])


def test_the_harness_rows_are_the_judges_digest():
    # what the harness takes after a call (`call_digest`, then `assemble` on the host) is what
    # the judge computes from the same outputs and inputs
    base = template()
    keys = [42, 4242]
    outs = [torch.randn(8, 3), 7, torch.randint(0, 5, (6,))]
    sums, numbers = digest.call_digest(outs, base, keys)
    got_out, got_in = digest.assemble([True, False, True], sums, numbers)
    assert torch.equal(got_out, digest.output_digest(outs, keys))
    assert torch.equal(got_in, digest.input_digest(base, keys))
    assert got_out.numel() == 3 * digest.PER_TENSOR and got_in.numel() == 3 * digest.PER_TENSOR


def test_an_input_the_call_changed_shows():
    base = template()
    flags = nonnegative(base)
    keys = [12, 13]
    harness = [x.clone() if isinstance(x, torch.Tensor) else x for x in base]
    refresh(harness, flags, 77, get_inputs)
    judge = [x.clone() if isinstance(x, torch.Tensor) else x for x in base]
    refresh(judge, flags, 77, get_inputs)
    assert digest.same_inputs(digest.input_digest(harness, keys), judge, keys)
    harness[0][3, 4] = 0.0
    assert not digest.same_inputs(digest.input_digest(harness, keys), judge, keys)
    harness = [x.clone() if isinstance(x, torch.Tensor) else x for x in judge]
    harness[2][0] += 1
    assert not digest.same_inputs(digest.input_digest(harness, keys), judge, keys), "an index input too"


KERNEL_CHECK = """
import math, sys, torch, triton
from ksmith.evaluator import digest
from ksmith.evaluator.compare import DEFAULT_RELATIVE, DEFAULT_TOLERANCES
from ksmith.evaluator.digest_kernel import sums_kernel

assert type(sums_kernel).__name__ == "InterpretedFunction"
torch.manual_seed(1)
keys = [123456789, 2000000001]
k0, k1 = digest.tensor_keys(keys, 0)
for dt in (torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int64, torch.int32, torch.bool):
    n = 3 * 1024 + 37  # whole blocks and a partial one
    if dt.is_floating_point:
        x = (torch.randn(n) * 3).to(dt)
        x[7], x[100] = math.nan, -math.inf
    elif dt == torch.bool:
        x = torch.rand(n) > 0.5
    else:
        x = torch.randint(-1000, 1000, (n,), dtype=dt)
    want = digest.oracle_sums(x, k0, k1)
    for programs in (1, 2, 4):
        part = torch.zeros((digest.MAX_PROGRAMS, 3), dtype=torch.float64)
        v = x.view(torch.uint8) if dt == torch.bool else x
        sums_kernel[(programs,)](v, part, n, k0, k1, BLOCK=1024, WIDE=dt not in digest.NARROW)
        got = part.sum(0)
        assert got[0] == want[0], (dt, got, want)
        if dt.is_floating_point:
            scale = (1e-12 if dt == torch.float64 else 1e-5) * float(x.double().nan_to_num(0, 0, 0).norm())
            assert torch.allclose(got, want, rtol=0, atol=scale), (dt, got, want)
        else:
            assert torch.equal(got, want), (dt, programs, got, want)
# float32 accumulation over many elements per lane (64 here; 16 for 2^24 elements on a GPU) stays
# within what the judge allows: an exact output and the very inputs pass
n = 1 << 18
ref = torch.randn(n) * 3
x = torch.randn(n)
part = torch.zeros((2, digest.MAX_PROGRAMS, 3), dtype=torch.float64)
for i, (t, index) in enumerate([(ref, 0), (x, digest.INPUTS)]):
    sums_kernel[(4,)](t, part[i], n, *digest.tensor_keys(keys, index), BLOCK=1024, WIDE=False)
out, ins = digest.assemble([True], part.sum(1), [])
ok, dev = digest.compare_outputs(out, [ref], keys, DEFAULT_TOLERANCES, DEFAULT_RELATIVE)
assert ok and dev < 0.05, dev
assert digest.same_inputs(ins, [x], keys)
print("kernel ok")
"""


def test_the_kernel_computes_the_judges_sums():
    # the GPU's one-pass kernel, run by Triton's interpreter: the same weights bit for bit (exact
    # sums for integer and bool tensors, float64's to its rounding), float32 accumulation within
    # the judge's bounds
    env = dict(_os.environ, TRITON_INTERPRET="1", PYTHONPATH=_os.path.join(_os.path.dirname(__file__), ".."))
    done = subprocess.run([_sys.executable, "-c", KERNEL_CHECK], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "kernel ok" in done.stdout, done.stderr[-3000:]


def test_the_signature_names_shapes_dtypes_and_kinds():
    assert digest.signature([torch.zeros(2, 3), 1.5]) == [[[2, 3], "float32"], "float"]


def test_the_worker_picks_distinct_calls_or_all_of_few():
    assert pick(3, 8) == [0, 1, 2]
    draws = [pick(500, 8) for _ in range(20)]
    assert all(len(d) == 8 == len(set(d)) and d == sorted(d) and max(d) < 500 for d in draws)
    assert len({tuple(d) for d in draws}) == 20
