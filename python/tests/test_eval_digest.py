"""The timed calls' fresh inputs and digests (`inputs.refresh`, `digest`), on the CPU: the judge
must write the very values the harness wrote from a call's seed, and tell an output within the
tolerances from a stale or skipped one through a few weighted sums."""

from __future__ import annotations

import os as _os
import sys as _sys

_sys.path.insert(0, _os.path.join(_os.path.dirname(_os.path.abspath(__file__)), ".."))

import math  # noqa: E402

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


def test_a_shifted_sum_weighs_element_j_with_weight_j_plus_shift():
    w = digest.weights(50, 7, "cpu")
    assert torch.equal(w, digest.weights(50, 7, "cpu")) and not torch.equal(w, digest.weights(50, 8, "cpu"))
    v = torch.randn(30)
    for shift in (0, 1, 29, 30, 1000):
        r = shift % 30
        expect = float((v.double() * torch.roll(w[:30].double(), -r)).sum())
        assert float(digest._shifted_dot(v, w, shift)) == pytest.approx(expect, rel=1e-5, abs=1e-5)


def _ref_and_weights(n=4096):
    torch.manual_seed(0)
    ref = torch.randn(n) * 3
    w = digest.weights(n, 99, "cpu")
    return ref, w


@pytest.mark.parametrize("shifts", [[0, 1], [17, 4000], [123456789, 987654321]])
def test_outputs_within_the_tolerances_pass_and_stale_ones_fail(shifts):
    ref, w = _ref_and_weights()
    tol, rel = DEFAULT_TOLERANCES, DEFAULT_RELATIVE

    def check(cand):
        return digest.compare_outputs(digest.output_digest([cand], w, shifts), [ref], w, shifts, tol, rel)

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
    ref, w = _ref_and_weights(256)
    ref[5] = math.nan
    ref[9] = math.inf
    cand = ref.clone()
    d = digest.output_digest([cand], w, [3, 8])
    assert float(d[0]) == 2 and all(math.isfinite(float(x)) for x in d)
    assert digest.compare_outputs(d, [ref], w, [3, 8], DEFAULT_TOLERANCES, DEFAULT_RELATIVE)[0]


def test_integer_outputs_must_be_equal_and_numbers_within_tolerance():
    w = digest.weights(100, 1, "cpu")
    ints = torch.randint(0, 1000, (100,))
    shifts = [5, 6]
    assert digest.compare_outputs(digest.output_digest([ints, 2.5], w, shifts), [ints, 2.5], w, shifts, {}, {})[0]
    off = ints.clone()
    off[50] += 1
    assert not digest.compare_outputs(digest.output_digest([off, 2.5], w, shifts), [ints, 2.5], w, shifts, {}, {})[0]
    assert not digest.compare_outputs(digest.output_digest([ints, 2.7], w, shifts), [ints, 2.5], w, shifts, {}, {})[0]
    assert not digest.compare_outputs(digest.output_digest([ints], w, shifts), [ints, 2.5], w, shifts, {}, {})[0]


def test_an_input_the_call_changed_shows():
    base = template()
    w = digest.weights(2048, 4, "cpu")
    flags = nonnegative(base)
    harness = [x.clone() if isinstance(x, torch.Tensor) else x for x in base]
    refresh(harness, flags, 77, get_inputs)
    judge = [x.clone() if isinstance(x, torch.Tensor) else x for x in base]
    refresh(judge, flags, 77, get_inputs)
    assert digest.same_inputs(digest.input_digest(harness, w, 12), judge, w, 12)
    harness[0][3, 4] = 0.0
    assert not digest.same_inputs(digest.input_digest(harness, w, 12), judge, w, 12)


def test_the_signature_names_shapes_dtypes_and_kinds():
    assert digest.signature([torch.zeros(2, 3), 1.5]) == [[[2, 3], "float32"], "float"]


def test_the_worker_picks_distinct_calls_or_all_of_few():
    assert pick(3, 8) == [0, 1, 2]
    draws = [pick(500, 8) for _ in range(20)]
    assert all(len(d) == 8 == len(set(d)) and d == sorted(d) and max(d) < 500 for d in draws)
    assert len({tuple(d) for d in draws}) == 20
