"""Unit tests of the evaluator's pieces that need no child process: static checks, comparisons,
timing statistics, inputs, the protocol codec."""

from __future__ import annotations

import os as _os
import sys as _sys

_sys.path.insert(0, _os.path.join(_os.path.dirname(_os.path.abspath(__file__)), ".."))

import json  # noqa: E402
import math  # noqa: E402
import types  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402
from ksmith.evaluator import (  # noqa: E402
    compare,
    evaluate,
    protocol,
    timing,  # noqa: E402
)
from ksmith.evaluator.inputs import (
    make_inputs,  # noqa: E402
    tensor_bytes,  # noqa: E402
)
from ksmith.evaluator.static_check import check  # noqa: E402
from ksmith.evaluator.timing import buffer_sets, trimmed_stats  # noqa: E402
from ksmith.shared import outputs  # noqa: E402

KERNEL = """
import torch
import triton
import triton.language as tl

@triton.jit
def k(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)
"""


def program(body: str, header: str = "") -> str:
    return header + KERNEL + "\nclass ModelNew(torch.nn.Module):\n" + body


LAUNCH = "    def forward(self, x):\n        k[(1,)](x, x.numel(), BLOCK=16)\n        return x\n"


@pytest.mark.parametrize(
    "src,status,hack",
    [
        (program(LAUNCH), None, None),
        (program(LAUNCH, "import subprocess\n"), "hacked", "sandbox_escape"),
        (program(LAUNCH, "import multiprocessing\n"), "hacked", "background_thread"),
        (program(LAUNCH, "from concurrent.futures import ThreadPoolExecutor\n"), "hacked", "background_thread"),
        (
            program(
                "    def forward(self, x):\n        s = torch.cuda.Stream()\n        k[(1,)](x, 1, BLOCK=16)\n       "
                " return x\n"
            ),
            "hacked",
            "side_stream",
        ),
        (
            program("    def forward(self, x):\n        k[(1,)](x, 1, BLOCK=16)\n        return eval('x')\n"),
            "hacked",
            "sandbox_escape",
        ),
        (
            program(
                "    def forward(self, x):\n        k[(1,)](x, 1, BLOCK=16)\n        return getattr(x, 'cl' + "
                "'one')()\n"
            ),
            "hacked",
            "sandbox_escape",
        ),
        (
            program(
                "    def forward(self, x):\n        k[(1,)](x, 1, BLOCK=16)\n        return "
                "x.__class__.__subclasses__()\n"
            ),
            "hacked",
            "sandbox_escape",
        ),
        (program(LAUNCH, "import time\n") + "time.perf_counter = lambda: 0.0\n", "hacked", "timer_patch"),
        (program(LAUNCH, "import json, time, weakref, typing, dataclasses, functools\n"), None, None),
        (program(LAUNCH, "import os\n"), "hacked", "sandbox_escape"),
        (program(LAUNCH, "import ctypes\n"), "hacked", "sandbox_escape"),
        (program(LAUNCH, "from importlib import import_module\n"), "hacked", "sandbox_escape"),
        (program(LAUNCH, "import einops\n"), "hacked", "sandbox_escape"),
        (program(LAUNCH) + "torch.cuda.synchronize = lambda: None\n", "hacked", "timer_patch"),
        (program(LAUNCH) + "setattr(torch.cuda, 'synchronize', None)\n", "hacked", "sandbox_escape"),
        (program(LAUNCH) + "torch.set_float32_matmul_precision('medium')\n", "hacked", "precision_downgrade"),
        (
            program("    def forward(self, x):\n        return torch.compile(lambda y: y)(x) if k else x\n"),
            "hacked",
            "torch_fallback",
        ),
        (program(LAUNCH, "from torch.utils.cpp_extension import load_inline\n"), "static_rejected", None),
        (program("    def forward(self, x):\n        return x\n"), "static_rejected", None),
        (KERNEL + "\nclass Model(torch.nn.Module):\n" + LAUNCH, "static_rejected", None),
        (
            program(
                "    def forward(self, x):\n        try:\n            k[(1,)](x, 1, BLOCK=16)\n        except "
                "Exception:\n            pass\n        return x\n"
            ),
            "hacked",
            "try_except_fallback",
        ),
        (
            program(
                "    def forward(self, x):\n        k[(1,)](x, 1, BLOCK=16)\n        return x\n\nclass "
                "Lazy(torch.Tensor):\n    pass\n"
            ),
            "hacked",
            "lazy_output",
        ),
        ("def broken(:\n", "compile_error", None),
    ],
)
def test_static_verdicts(src, status, hack):
    v = check(src)
    assert (v.status, v.hack) == (status, hack), v.message


def test_static_allows_common_names():
    # `input` is the usual name of forward's argument in PyTorch code
    v = check(
        program(
            "    def forward(self, input):\n        k[(1,)](input, input.numel(), BLOCK=16)\n        return input\n"
        )
    )
    assert v.status is None, v.message


def test_static_names_the_line():
    v = check(program(LAUNCH, "import socket\n"))
    assert v.message.startswith("line 1:") and "socket" in v.message


def test_static_names_the_capability_an_import_gives():
    for module, capability in (
        ("subprocess", "processes"),
        ("pathlib", "files"),
        ("urllib.request", "the network"),
        ("ctypes", "native code"),
        ("gc", "interpreter internals"),
    ):
        v = check(program(LAUNCH, f"import {module}\n"))
        assert (v.status, v.hack) == ("hacked", "sandbox_escape") and capability in v.message, (module, v.message)


def test_static_try_without_launch_is_only_a_warning():
    v = check(
        program(
            "    def forward(self, x):\n        try:\n            n = int(x.shape[0])\n        except ValueError:\n  "
            "          n = 1\n        k[(1,)](x, n, BLOCK=16)\n        return x\n"
        )
    )
    assert v.status is None and any("try" in w for w in v.warnings)
    assert v.kernels == ["k"]


def test_static_reachability_through_helpers():
    src = (
        KERNEL + "\ndef launch(x):\n    k[(1,)](x, x.numel(), BLOCK=16)\n    return x\n\nclass "
        "ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return launch(x)\n"
    )
    assert check(src).status is None
    unreachable = KERNEL + "\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x * 2\n"
    v = check(unreachable)
    assert v.status == "static_rejected" and "reachable" in v.message


def test_tolerance_is_dtype_aware():
    ref = [torch.ones(100)]
    assert compare.output_errors([torch.ones(100) + 5e-5], ref, compare.DEFAULT_TOLERANCES)[0]
    assert not compare.output_errors([torch.ones(100) + 1e-3], ref, compare.DEFAULT_TOLERANCES)[0]
    ref16 = [torch.ones(100, dtype=torch.float16)]
    assert compare.output_errors([torch.ones(100, dtype=torch.float16) + 5e-3], ref16, compare.DEFAULT_TOLERANCES)[0]
    assert not compare.output_errors([torch.tensor([1, 2])], [torch.tensor([1, 3])], {})[0]


def test_the_judge_element_test_is_the_shared_close():
    # With the whole-output criterion out of the way, the judge passes exactly what the shared
    # definition of "close" (`ksmith.shared.outputs`) passes.
    inf, nan = math.inf, math.nan
    unbounded = {"float32": inf, "float16": inf, "float64": inf}
    ref = torch.tensor([1.0, 100.0, inf, -inf, nan, 0.0])
    for delta in (
        [5e-5] * 6,
        [2e-4, 0, 0, 0, 0, 0],
        [0, 2e-2, 0, 0, 0, 0],
        [0, 0, -inf, 0, 0, 0],
        [0, 0, 0, 0, 0, 1.0],
    ):
        cand = ref + torch.tensor(delta)
        for c, r in ((cand, ref), (cand.half(), ref.half()), (cand.double(), ref.double())):
            tol = lambda dtype: compare.tolerance(dtype, compare.DEFAULT_TOLERANCES)  # noqa: E731
            judged = compare.output_errors([c], [r], compare.DEFAULT_TOLERANCES, unbounded)[0]
            assert judged == outputs.close([c], [r], tol), (delta, c.dtype)
    # A finite value where the reference is infinite fails (`|cand - ref| <= rtol * inf` held).
    assert not compare.output_errors(
        [torch.tensor([1e30])], [torch.tensor([inf])], compare.DEFAULT_TOLERANCES, unbounded
    )[0]
    # Complex outputs are compared whole, not by their real part.
    z = torch.tensor([1 + 1j, 2 - 1j])
    assert compare.output_errors([z], [z], compare.DEFAULT_TOLERANCES)[0]
    assert not compare.output_errors([z + 1e-2j], [z], compare.DEFAULT_TOLERANCES)[0]


def test_relative_error_fails_a_small_constant_where_the_absolute_tolerance_passes():
    ref = [torch.linspace(-2e-6, 3e-6, 1000)]
    constant = [torch.full((1000,), 1.5e-6)]
    ok, stats = compare.output_errors(constant, ref, compare.DEFAULT_TOLERANCES)
    assert stats[0]["max_abs"] < 1e-4, "the element test alone would pass it"
    assert not ok and stats[0]["rel_l2"] > 0.5
    # the same values computed honestly (a relative error of 1e-6) pass
    assert compare.output_errors([ref[0] * (1 + 1e-6)], ref, compare.DEFAULT_TOLERANCES)[0]
    # below the noise floor (exact zeros, rounding noise) the element test decides alone
    assert compare.output_errors([torch.full((1000,), 1e-9)], [torch.zeros(1000)], compare.DEFAULT_TOLERANCES)[0]
    # the limit is per dtype and configurable
    assert compare.output_errors(constant, ref, compare.DEFAULT_TOLERANCES, {"float32": 10.0})[0]
    assert compare.public(stats) == [{k: stats[0][k] for k in compare.ERROR_FIELDS}]


def test_near_judges_a_whole_output_not_its_worst_element():
    # A large output off by 0.25 on one element in 4096 (float16 rounding meeting cancellation)
    # is near its reference as a whole; one off by 10 % everywhere is not.
    ref = [torch.randn(4096)]
    one_off = ref[0].clone()
    one_off[7] += 0.25
    _, stats = compare.output_errors([one_off], ref, compare.DEFAULT_TOLERANCES)
    assert stats[0]["max_abs"] == pytest.approx(0.25) and compare.near(stats, 0.05, 1e-2)
    _, stats = compare.output_errors([ref[0] * 1.1], ref, compare.DEFAULT_TOLERANCES)
    assert not compare.near(stats, 0.05, 1e-2)
    # below the noise floor, or not floating point: within the floor everywhere
    _, stats = compare.output_errors([torch.full((100,), 5e-3)], [torch.zeros(100)], compare.DEFAULT_TOLERANCES)
    assert stats[0]["rel_l2"] is None and compare.near(stats, 0.05, 1e-2) and not compare.near(stats, 0.05, 1e-3)
    _, stats = compare.output_errors([torch.tensor([1, 2])], [torch.tensor([1, 3])], {})
    assert not compare.near(stats, 0.05, 1e-2)


def test_nan_only_matches_nan_and_stats_are_json_safe():
    ref = [torch.tensor([1.0, float("nan")])]
    ok, stats = compare.output_errors([torch.tensor([1.0, float("nan")])], ref, compare.DEFAULT_TOLERANCES)
    assert ok
    ok, stats = compare.output_errors([torch.tensor([float("nan"), 1.0])], ref, compare.DEFAULT_TOLERANCES)
    assert not ok and stats[0]["max_abs"] == 1.7976931348623157e308
    json.dumps(stats, allow_nan=False)


def test_structure_errors():
    assert "shape" in compare.structure_error([torch.ones(2, 2)], [torch.ones(4)])
    assert "dtype" in compare.structure_error([torch.ones(4, dtype=torch.float64)], [torch.ones(4)])
    assert "outputs" in compare.structure_error([torch.ones(4)] * 2, [torch.ones(4)])


def test_trimmed_stats_drops_outliers():
    s = trimmed_stats([1.0] * 50 + [1.01] * 50 + [9.0])
    assert s["samples"] == 100 and abs(s["median_ms"] - 1.005) < 1e-9 and s["cv"] < 0.01


def test_buffer_sets_fit_the_memory_budget():
    one = [torch.zeros(256, 1024), (torch.zeros(1024, dtype=torch.float16), 3)]
    assert tensor_bytes(one) == 256 * 1024 * 4 + 1024 * 2
    mib = 2**20
    assert buffer_sets({"buffer_sets": 4, "buffer_mb": 1024.0}, 64 * mib) == 4
    # Three extra copies of 400 MiB do not fit in 1 GiB; two do.
    assert buffer_sets({"buffer_sets": 4, "buffer_mb": 1024.0}, 400 * mib) == 3
    assert buffer_sets({"buffer_sets": 4, "buffer_mb": 1024.0}, 4096 * mib) == 1
    assert buffer_sets({"buffer_sets": 4, "buffer_mb": 0.0}, 1) == 1
    assert buffer_sets({"buffer_sets": 0, "buffer_mb": 1024.0}, 1) == 1
    assert buffer_sets({"buffer_sets": 3, "buffer_mb": 1024.0}, 0) == 3


def test_another_process_while_the_medians_disagree():
    cfg = {"processes": 2, "extra_processes": 1, "process_spread": 0.004}
    assert timing.another_process([], cfg, True) and timing.another_process([1.0], cfg, True)
    assert not timing.another_process([1.0, 1.003], cfg, True), "within 0.4 %: two suffice"
    assert timing.another_process([1.0, 1.02], cfg, True), "a slow process: a third decides"
    assert timing.another_process([1.02, 1.0], cfg, True)
    assert not timing.another_process([1.0, 1.02, 1.001], cfg, True), "at most extra_processes more"
    assert not timing.another_process([1.0, 1.02], cfg, False), "the CPU's rehearsal adds none"
    assert timing.another_process([1.0], cfg, False), "but rehearses the configured processes"
    assert timing.another_process([1.0, 1.02, 1.001], dict(cfg, extra_processes=2), True)
    assert not timing.another_process([1.0], dict(cfg, processes=1), True)
    assert timing.spread([1.0, 1.02, 1.001]) == pytest.approx(0.02) and timing.spread([2.0]) == 0.0


def test_combine_takes_the_median_of_the_process_medians():
    def stats(median, cv):
        return {"median_ms": median, "cv": cv, "samples": 100, "method": "cuda_graph", "set_medians_ms": [median]}

    three = timing.combine([stats(1.0, 0.01), stats(1.02, 0.02), stats(1.001, 0.03)])
    assert three["median_ms"] == 1.001 and three["process_medians_ms"] == [1.0, 1.02, 1.001]
    assert three["samples"] == 300 and three["cv"] == 0.03 and three["set_medians_ms"] == [1.001]
    two = timing.combine([stats(1.0, 0.01), stats(1.002, 0.02)])
    assert two["median_ms"] == pytest.approx(1.001) and two["cv"] == 0.01 and two["samples"] == 200
    one = timing.combine([stats(1.0, 0.01)])
    assert one == dict(stats(1.0, 0.01), process_medians_ms=[1.0], process_samples_ms=[[]])


def test_combine_keeps_every_process_samples_and_the_pairs_beside_them():
    def stats(samples, beside=None):
        out = {"median_ms": samples[0], "cv": 0.0, "samples": len(samples), "samples_ms": samples}
        if beside is not None:
            out["reference_in_process"] = {"median_ms": beside[0], "samples_ms": beside}
        return out

    paired = timing.combine([stats([1.0, 1.1], [2.0, 2.1]), stats([1.2, 1.3, 1.4], [2.2, 2.3, 2.4])])
    assert paired["process_samples_ms"] == [[1.0, 1.1], [1.2, 1.3, 1.4]]
    assert paired["process_reference_samples_ms"] == [[2.0, 2.1], [2.2, 2.3, 2.4]]
    # a process without the reference beside it: no pairs at all (the interval is unpaired)
    mixed = timing.combine([stats([1.0], [2.0]), stats([1.2])])
    assert mixed["process_samples_ms"] == [[1.0], [1.2]] and "process_reference_samples_ms" not in mixed


def test_the_timing_settings_are_stated_in_words():
    words = timing.settings(evaluate.merge_options({})["timing"])
    for part in ("L2 flushed", "warm-up >= 10 calls", "50-1000 samples in 400.0 ms", "4 buffer sets", "beside"):
        assert part in words, words


def test_the_samples_budget_is_shared_out_between_the_processes():
    cfg = {"processes": 2, "budget_ms": 400.0, "min_samples": 50, "max_samples": 1000, "warmup_ms": 50.0}
    assert timing.per_process(cfg) == dict(cfg, budget_ms=200.0, max_samples=500)
    assert timing.per_process(dict(cfg, max_samples=60))["max_samples"] == 50, "never below min_samples"
    one = dict(cfg, processes=1)
    assert timing.per_process(one) == one


class _Graph:
    def __init__(self, fn):
        self.replay = fn


def _fake_clock_timer(monkeypatch, cfg, on_sync=lambda: None):
    """A `Timer` on a fake clock in place of CUDA events (`on_sync` for each synchronize), and
    `run(k, ms)`: a callable that records `k` in `calls` and advances the clock by `ms`, so the
    samples show what ran."""
    clock = [0.0]
    calls: list = []

    class Event:
        def __init__(self, enable_timing=True):
            self.t = 0.0

        def record(self):
            self.t = clock[0]

        def elapsed_time(self, other):
            return other.t - self.t

    monkeypatch.setattr(timing.torch.cuda, "Event", Event)
    monkeypatch.setattr(timing.torch.cuda, "synchronize", on_sync)
    timer = object.__new__(timing.Timer)
    timer.cfg = cfg
    timer.cuda = True
    timer.flush = lambda: None
    timer.flush_buf = None

    def run(k, ms):
        def fn():
            calls.append(k)
            clock[0] += ms

        return fn

    return timer, run, calls


def test_timing_rotates_over_every_buffer_set(monkeypatch):
    cfg = {"warmup": 3, "warmup_ms": 0.0, "min_samples": 9, "max_samples": 9, "budget_ms": 1.0}
    timer, run, calls = _fake_clock_timer(monkeypatch, cfg)
    fns = [run(0, 1.0), run(1, 2.0), run(2, 3.0)]
    stats = timer.measure(fns, [_Graph(f) for f in fns])
    assert stats["method"] == "cuda_graph" and stats["samples"] == 9 and stats["median_ms"] == 2.0
    assert stats["set_medians_ms"] == [1.0, 2.0, 3.0] and stats["mean_ms"] == 2.0
    assert calls[-9:] == [0, 1, 2] * 3
    calls.clear()
    stats = timer.measure(fns, [])
    assert stats["method"] == "cuda_event"
    assert calls[-9:] == [0, 1, 2] * 3


def test_the_reference_beside_is_paired_with_every_sample_on_the_same_set(monkeypatch):
    # The candidate's sets take 1, 2 and 3 ms and the reference's 10, 20 and 30: each sample
    # must be followed by the reference on its own set, and every pair counts.
    import random

    cfg = {"warmup": 1, "warmup_ms": 0.0, "min_samples": 4, "max_samples": 24, "budget_ms": 1e6}
    timer, run, calls = _fake_clock_timer(monkeypatch, cfg)
    fns = [run(0, 1.0), run(1, 2.0), run(2, 3.0)]
    reference = [run("r0", 10.0), run("r1", 20.0), run("r2", 30.0)]
    stats = timer.measure(fns, [_Graph(f) for f in fns], rng=random.Random(3), companion=timing.Companion(reference))
    assert calls[-24:] == [0, "r0", 1, "r1", 2, "r2"] * 4, "each sample, then the reference on its set"
    beside = stats["reference_in_process"]
    assert stats["samples"] == 12 and beside["samples"] == 12, "24 samples' worth: 12 pairs, every one timed"
    assert stats["samples_ms"] == [1.0, 2.0, 3.0] * 4 and beside["samples_ms"] == [10.0, 20.0, 30.0] * 4
    assert beside["median_ms"] == 10.0 * stats["median_ms"]
    alone = timer.measure(fns, [_Graph(f) for f in fns])
    assert "reference_in_process" not in alone and alone["samples"] == 24


def test_every_timed_sample_is_prepared_and_observed_alike(monkeypatch):
    # Fresh values before EVERY sample and a digest after it, the five estimate samples too (not
    # recorded): nothing tells the samples that will be checked from the others, and every
    # sample's time counts.
    import random

    cfg = {"warmup": 2, "warmup_ms": 0.0, "min_samples": 20, "max_samples": 20, "budget_ms": 1.0}
    timer, run, calls = _fake_clock_timer(monkeypatch, cfg)
    fns = [run("a", 1.0), run("b", 1.0)]
    seen: list = []

    def prepare(row, s):
        calls.append(("prepare", row, s))

    def observe(row, s):
        calls.append(("observe", row, s))

    stats = timer.measure(fns, [_Graph(f) for f in fns], rng=random.Random(7), prepare=prepare, observe=observe)
    n = stats["samples"]
    assert n == 20 and len(stats["samples_ms"]) == 20, "no sample is left out of the figure"
    sampled = calls[calls.index(("prepare", None, 0)) :]
    assert len(sampled) == 3 * (5 + n), "prepare, the call, observe: for every estimate and timed sample"
    for i in range(5 + n):
        row = None if i < 5 else i - 5
        s = (i if i < 5 else i - 5) % 2
        assert sampled[3 * i : 3 * i + 3] == [("prepare", row, s), "ab"[s], ("observe", row, s)], i
    seen.append(len(calls))
    # the same seed draws the same warm-up and count; others draw other counts
    calls.clear()
    timer.cfg.update(min_samples=10, max_samples=1000, budget_ms=40.0)
    counts = {timer.measure(fns, [], rng=random.Random(seed), prepare=prepare)["samples"] for seed in range(12)}
    assert len(counts) > 3, counts


def test_the_sample_count_covers_everything_a_sample_costs(monkeypatch):
    # Each sample costs 1 ms of the call, 3 ms of fresh values and digests and 2 ms of the
    # reference beside it: a budget of 120 ms holds 20 of them (the call alone would give 120).
    cfg = {"warmup": 1, "warmup_ms": 0.0, "min_samples": 2, "max_samples": 1000, "budget_ms": 120.0}
    timer, run, calls = _fake_clock_timer(monkeypatch, cfg)
    hook = run("hook", 1.5)
    stats = timer.measure(
        [run("c", 1.0)],
        [],
        prepare=lambda r, s: hook(),
        observe=lambda r, s: hook(),
        companion=timing.Companion([run("r", 2.0)]),
    )
    assert stats["samples"] == 20 and stats["median_ms"] == 1.0
    assert stats["reference_in_process"]["median_ms"] == 2.0
    assert stats["prepare_ms"] == 1.5 and stats["observe_ms"] == 1.5, "the hooks' cost, reported"


def _traced_timer(monkeypatch, cfg):
    """A fake-clock `Timer` whose events, synchronizations and calls are traced in order."""
    trace: list = []
    timer, run, calls = _fake_clock_timer(monkeypatch, cfg, on_sync=lambda: trace.append("sync"))
    event_cls = timing.torch.cuda.Event

    class Traced(event_cls):
        def record(self):
            trace.append("event")
            super().record()

    monkeypatch.setattr(timing.torch.cuda, "Event", Traced)

    def traced(k, ms):
        fn = run(k, ms)

        def call():
            trace.append(k)
            fn()

        return call

    return timer, traced, trace


def test_a_candidate_without_a_graph_pays_its_launches_and_the_reference_keeps_its_graphs(monkeypatch):
    # The capture refusal of issue 27: a candidate whose graph cannot be captured is timed with
    # direct calls, each from an idle GPU (a sync before its start event, so its launches are in
    # the span) to a device-wide sync; the reference beside it is replayed from its graphs, with
    # no sync of its own: refusing capture buys no kinder measurement on either side.
    cfg = {"warmup": 0, "warmup_ms": 0.0, "min_samples": 3, "max_samples": 6, "budget_ms": 1e6}
    timer, run, trace = _traced_timer(monkeypatch, cfg)
    stats = timer.measure([run("cand", 1.0)], [], companion=timing.Companion([run("ref", 2.0)]))
    assert stats["method"] == "cuda_event" and stats["reference_in_process"]["method"] == "cuda_graph"
    # the last sample: its begin, sync, start, call, sync, end; the reference's start, replay, end;
    # its finish; then the measurement's final sync
    last = ["event", "sync", "event", "cand", "sync", "event", "event", "ref", "event", "event", "sync"]
    assert trace[-11:] == last, trace[-11:]
    # graphs on both sides: no sync anywhere in a sample
    trace.clear()
    cand = run("cand", 1.0)
    stats = timer.measure([cand], [_Graph(cand)], companion=timing.Companion([run("ref", 2.0)]))
    assert stats["method"] == "cuda_graph" and trace[-9:] == [x for x in last if x != "sync"] + ["sync"]
    # a reference whose own graph cannot be captured is timed beside the candidate as its own
    # timing does it: direct calls from an idle GPU to a device-wide sync
    trace.clear()
    stats = timer.measure([cand], [_Graph(cand)], companion=timing.Companion([run("ref", 2.0)], direct=True))
    assert stats["reference_in_process"]["method"] == "cuda_event"
    assert trace[-11:] == ["event", "event", "cand", "event", "sync", "event", "ref", "sync", "event", "event", "sync"]


def test_the_stream_check_compares_the_same_call_like_with_like(monkeypatch):
    # The false `side_stream` of issue 27's first H200 run: a device-wide sync that took 0.6 ms
    # longer (its host busy, another evaluator's work) made an honest direct call look like one
    # that leaves work on another stream. The check now times the same call to its end on its
    # stream and to the end of a sync after it, against a call that does nothing timed the same
    # way, interleaved: the sync's own cost cancels, whatever it is.
    import random

    def check(latency, side_ms, local_ms=0.05):
        clock = [0.0]

        class Event:
            def __init__(self, enable_timing=True):
                self.t = 0.0

            def record(self):
                self.t = clock[0]

            def elapsed_time(self, other):
                return other.t - self.t

        pending = [0.0]

        def sync():
            clock[0] += latency() + pending[0]
            pending[0] = 0.0

        monkeypatch.setattr(timing.torch.cuda, "Event", Event)
        monkeypatch.setattr(timing.torch.cuda, "synchronize", sync)
        timer = object.__new__(timing.Timer)
        timer.cfg, timer.cuda, timer.flush, timer.flush_buf = {}, True, lambda: None, None

        def call():
            clock[0] += local_ms
            pending[0] += side_ms

        return timer.stream_disagreement(call)

    rng = random.Random(5)
    for latency in (lambda: 0.005, lambda: 0.6, lambda: rng.choice([0.01, 0.6, 2.0])):
        honest = check(latency, 0.0)
        assert not honest.escapes() and abs(honest.escaped_ms) < 1e-9 and honest.local_ms == pytest.approx(0.05)
        side = check(latency, 0.05, local_ms=0.002)
        assert side.escapes() and side.escaped_ms == pytest.approx(0.05), side
    summary = check(lambda: 0.6, 0.0).summary()
    assert summary == pytest.approx([0.05, 0.65, 0.6]), "on the stream, to the end of the sync, the sync alone"


def _scripted_timer(monkeypatch, rounds, cfg=None, beside=None):
    """A fake-clock `Timer` whose `k`-th measurement's timed samples take the times `rounds[k]`
    (warm-up and estimate calls 1 ms); returns it, the call and the `prepare` and `observe`
    hooks that follow the rows (with `beside`, the times of a reference timed beside it, per round
    and row like `rounds`, as the `companion` hook)."""
    cfg = dict(
        {"warmup": 0, "warmup_ms": 0.0, "min_samples": 1, "max_samples": 1000, "budget_ms": 1.0, "max_cv": 0.05},
        **(cfg or {}),
    )
    cfg["min_samples"] = len(rounds[0])
    cfg["max_samples"] = len(rounds[0]) * (2 if beside else 1)
    timer, run, calls = _fake_clock_timer(monkeypatch, cfg)
    state = {"round": -1, "row": None, "last": None}

    def prepare(row, s):
        if row == 0:
            state["round"] += 1
        state["row"] = row

    def observe(row, s):
        state["row"], state["last"] = None, row

    def call():
        row = state["row"]
        run("x", 1.0 if row is None else rounds[state["round"]][row])()

    hooks = {"prepare": prepare, "observe": observe}
    if beside:

        def reference():
            row = state["last"]
            run("ref", 1.0 if row is None else beside[state["round"]][row])()

        hooks["companion"] = timing.Companion([reference])
    return timer, call, hooks


def test_a_noisy_measurement_is_measured_again_and_the_least_noisy_kept(monkeypatch):
    quiet = [1.0, 1.0078125, 0.9921875, 1.0] * 10  # exact in binary: the fake clock adds them up
    noisy = [1.0, 1.5] * 20
    timer, call, hooks = _scripted_timer(monkeypatch, [noisy, quiet])
    stats = timer.settle([call], [], **hooks)
    assert [r["cv"] > 0.05 for r in stats["rounds"]] == [True, False] and not stats["noisy"]
    assert stats["median_ms"] == 1.0 and stats["samples_ms"] == quiet
    worse = [1.0, 2.0] * 20
    timer, call, hooks = _scripted_timer(monkeypatch, [noisy, worse, noisy])
    stats = timer.settle([call], [], **hooks)
    assert len(stats["rounds"]) == 1 + timing.REMEASURE and stats["noisy"], "at most REMEASURE more, then marked"
    assert stats["samples_ms"] == noisy, "the least noisy of the three"
    # the CPU's rehearsal measures once: its times say nothing
    timer, call, hooks = _scripted_timer(monkeypatch, [noisy])
    timer.cuda = False
    stats = timer.settle([call], [], **hooks)
    assert len(stats["rounds"]) == 1 and not stats["noisy"]


def _replays(call):
    """`call` as the replay of a captured graph (what `Timer.capture_all` returns)."""
    return [types.SimpleNamespace(replay=call)]


def test_a_slow_minority_seen_again_is_an_anomaly(monkeypatch):
    fast = [1.0] * 90
    minority = [1.0] * 90 + [5.0] * 10  # one call in ten five times slower: trimmed away, CV small
    assert timing.trimmed_stats(minority)["cv"] < 0.01
    timer, call, hooks = _scripted_timer(monkeypatch, [minority, minority])
    stats = timer.settle([call], _replays(call), **hooks)
    assert len(stats["anomaly"]) == 2 and stats["anomaly"][0]["share"] == pytest.approx(0.1)
    assert stats["anomaly"][0]["slow_median_ms"] == 5.0 and stats["median_ms"] == 1.0
    # once, then not again: the re-measurement stands
    timer, call, hooks = _scripted_timer(monkeypatch, [minority, fast + [1.0] * 10])
    stats = timer.settle([call], _replays(call), **hooks)
    assert "anomaly" not in stats and len(stats["rounds"]) == 2 and stats["rounds"][0]["slow_share"] == 0.1
    # timed by direct calls, the host's jitter is in every call's time: not judged
    timer, call, hooks = _scripted_timer(monkeypatch, [minority] * 3)
    stats = timer.settle([call], [], **hooks)
    assert stats["method"] == "cuda_event" and "anomaly" not in stats and len(stats["rounds"]) == 1
    # a few slow calls (host jitter), or slow ones barely above the median, are no anomaly
    assert timing.slow_minority([1.0] * 97 + [5.0] * 3) is None
    assert timing.slow_minority([0.01] * 80 + [0.02] * 20) is None, "under ANOMALY_FLOOR_MS above the median"
    assert timing.slow_minority([1.0] * 80 + [1.4] * 20) is None, "under ANOMALY_FACTOR"


def test_a_slow_minority_the_reference_beside_shares_is_interference_not_an_anomaly(monkeypatch):
    # On an H200, honest 9 us kernels timed while other evaluations started beside them showed slow
    # minorities of 6-14 % twice in a row: something else on the GPU or the host. The reference
    # timed beside the candidate, its samples interleaved, is slowed alike and clears it.
    minority = [1.0] * 90 + [5.0] * 10
    alike = [1.0] * 92 + [5.0] * 8
    timer, call, hooks = _scripted_timer(monkeypatch, [minority] * 3, beside=[alike] * 3)
    stats = timer.settle([call], _replays(call), **hooks)
    assert "anomaly" not in stats and len(stats["rounds"]) == 1 + timing.REMEASURE, "measured again, as noisy"
    assert all(r["interfered"] and r["reference_slow_share"] == pytest.approx(0.08) for r in stats["rounds"])
    # once shared, then the candidate's alone: still no two unexplained rounds in a row
    fast_ref = [1.0] * 100
    timer, call, hooks = _scripted_timer(monkeypatch, [minority] * 3, beside=[alike, fast_ref, alike])
    assert "anomaly" not in timer.settle([call], _replays(call), **hooks)
    # the candidate's slow calls while the reference beside it stays fast: an anomaly, with the evidence
    barely = [1.0] * 97 + [5.0] * 3  # 3 %, under INTERFERENCE_RATIO of the candidate's 10 %
    timer, call, hooks = _scripted_timer(monkeypatch, [minority] * 2, beside=[fast_ref, barely])
    stats = timer.settle([call], _replays(call), **hooks)
    assert [a["reference_share"] for a in stats["anomaly"]] == pytest.approx([0.0, 0.03])
    assert not any(r["interfered"] for r in stats["rounds"])


def test_the_less_noisy_figure_wins_when_the_references_disagree():
    # The case: the reference's own timing disturbed (CV 21 %, 41 % slow) and the one
    # beside the candidate tight: the tight one decides.
    cfg = {"reference_drift": 0.05}
    own_noisy = {"median_ms": 3.78, "cv": 0.21, "samples": 100}
    process = {"median_ms": 3.2, "reference_in_process": {"median_ms": 2.676, "cv": 0.0005, "samples": 50}}
    got, why = timing.in_process_speedup([process], own_noisy, cfg)
    assert got == pytest.approx(2.676 / 3.2) and "less noisy" in why and "beside the candidate" in why
    own_tight = {"median_ms": 3.78, "cv": 0.0004, "samples": 500}
    noisy_beside = {"median_ms": 3.2, "reference_in_process": {"median_ms": 2.676, "cv": 0.2, "samples": 50}}
    got, why = timing.in_process_speedup([noisy_beside], own_tight, cfg)
    assert got is None and "reference's own timing" in why
    assert timing.figure_noise({"cv": 0.02, "samples": 400}) == pytest.approx(0.001)
    assert timing.figure_noise({"cv": 0.0, "samples": 0}) == float("inf")


def test_the_paired_speedup_is_used_only_near_the_references_own_timing():
    ref = {"median_ms": 2.0}
    cfg = {"reference_drift": 0.03}

    def process(cand, beside):
        return {"median_ms": cand, "reference_in_process": {"median_ms": beside}}

    got, why = timing.in_process_speedup([process(1.0, 2.02)], ref, cfg)
    assert got == pytest.approx(2.02) and why == ""
    got, _ = timing.in_process_speedup([process(1.0, 2.02), process(1.02, 2.0), process(1.0, 1.98)], ref, cfg)
    assert got == pytest.approx(1.98), "the median of the per-process ratios"
    got, why = timing.in_process_speedup([process(1.0, 2.02), process(1.0, 2.2)], ref, cfg)
    assert got is None and "timing process 2" in why and "+10.0%" in why and "reference_drift" in why
    got, why = timing.in_process_speedup([process(1.0, 1.9)], ref, dict(cfg, reference_drift=0.06))
    assert got == pytest.approx(1.9)
    got, why = timing.in_process_speedup([{"median_ms": 1.0}], ref, cfg)
    assert got is None and why == "", "no reference beside: the reference's own timing, silently"


def test_inputs_are_fresh_signed_nonzero_and_keep_domains():
    def get_inputs():
        return [torch.randn(1000), torch.rand(1000), torch.randint(0, 5, (10,)), 3]

    a = make_inputs(get_inputs, 1, 0)
    b = make_inputs(get_inputs, 2, 1)
    assert not torch.equal(a[0], b[0])
    assert (a[0] < 0).any() and (a[0] > 0).any() and (a[0] != 0).all()
    assert (b[1] >= 0).all() and (b[1] != 0).all()
    assert a[2].dtype == torch.int64 and a[3] == 3
    assert torch.equal(make_inputs(get_inputs, 1, 0)[0], a[0])


def test_protocol_rejects_other_versions_and_bad_requests():
    assert protocol.parse('{"v":1,"type":"ping"}')["type"] == "ping"
    with pytest.raises(protocol.ProtocolError, match="version"):
        protocol.parse('{"v":2,"type":"ping"}')
    with pytest.raises(protocol.ProtocolError):
        protocol.parse("not json")
    with pytest.raises(protocol.ProtocolError, match="candidate"):
        protocol.check_request({"task_id": "t", "reference": "r"})
    with pytest.raises(ValueError):
        protocol.encode({"type": "x", "value": float("nan")})


def test_the_gpu_gate_lets_timing_run_alone():
    import threading
    import time

    from ksmith.evaluator.gate import GpuGate

    gate = GpuGate(True)
    log: list[str] = []
    inside = threading.Event()

    def shared(name):
        with gate.shared():
            log.append(f"{name}+")
            inside.set()
            time.sleep(0.05)
            log.append(f"{name}-")

    def exclusive():
        with gate.exclusive():
            log.append("X+")
            time.sleep(0.05)
            log.append("X-")

    threads = [threading.Thread(target=shared, args=("a",))]
    threads[0].start()
    inside.wait()
    threads.append(threading.Thread(target=exclusive))
    threads[1].start()
    time.sleep(0.01)
    threads.append(threading.Thread(target=shared, args=("b",)))  # arrives while timing waits: after it
    threads[2].start()
    for t in threads:
        t.join()
    assert log.index("X+") > log.index("a-") and log.index("b+") > log.index("X-"), log
    assert gate.exclusive_n == 1 and 0.04 < gate.exclusive_s < 1.0  # what the bench reports
    # on the CPU the gate admits everyone at once
    open_gate = GpuGate(False)
    with open_gate.exclusive(), open_gate.exclusive(), open_gate.shared():
        pass


def test_a_timing_stops_a_held_pair_together_and_the_gate_traces_every_hold():
    # a candidate's correctness calls are one start of the gate for its harness and its judge:
    # another candidate's timing stops both and continues both; every hold is traced as it ends
    import threading

    from ksmith.evaluator.gate import GpuGate, Together

    class Drain:
        def available(self) -> bool:
            return True

        def wait(self) -> bool:
            return True

    log: list[str] = []

    class Fake:
        def __init__(self, name: str, stops: bool = True):
            self.name = name
            self.stops = stops

        def pause(self) -> None:
            log.append(f"{self.name} paused")

        def settle(self, deadline: float) -> bool:
            return self.stops

        def resume(self) -> None:
            log.append(f"{self.name} resumed")

    holds: list[dict] = []
    gate = GpuGate(True, Drain(), holds.append)
    assert gate.pausing() and not GpuGate(True).pausing() and not GpuGate(False, Drain()).pausing()
    started, release = threading.Event(), threading.Event()

    def held() -> None:
        with gate.starting(Together(Fake("harness"), Fake("judge"))):
            started.set()
            release.wait(5)

    t = threading.Thread(target=held)
    t.start()
    assert started.wait(5)
    with gate.exclusive():
        log.append("timing")
    release.set()
    t.join(5)
    with gate.shared():
        pass
    assert log == ["harness paused", "judge paused", "timing", "harness resumed", "judge resumed"], log
    assert [h["mode"] for h in holds] == ["exclusive", "starting", "shared"], holds
    timing, start, short = holds
    assert timing["paused"] == 1 and timing["stopped"] and timing["drained"], timing
    assert 0 <= timing["ready_s"] <= timing["hold_s"] and timing["wait_s"] >= 0, timing
    assert start["pausable"] and not short["pausable"], holds
    assert start["t"] <= timing["t"] <= start["t"] + start["hold_s"], "the timing ran inside the start's hold"
    # a pair is stopped only when both are
    assert not Together(Fake("a"), Fake("b", stops=False)).settle(0.0)


def test_a_child_that_does_not_stop_is_waited_for_alone():
    # On an H200 a timing whose one stopped child did not show as stopped continued all 14 it had
    # stopped and waited for their correctness holds to end: 21 s with the GPU held. A child
    # gets a second chance to stop; one that still does not is continued and its start waited
    # for, the others staying stopped until the timing ends.
    import threading
    import time

    from ksmith.evaluator.gate import GpuGate

    log: list[str] = []
    drains: list[str] = []

    class Drain:
        def available(self) -> bool:
            return True

        def wait(self) -> bool:
            drains.append("drain")
            return True

    class Fake:
        def __init__(self, name: str, stops_at: int):
            self.name = name
            self.stops_at = stops_at  # the settle call that finds it stopped (0: never)
            self.asked = 0

        def pause(self) -> None:
            log.append(f"{self.name} paused")

        def settle(self, deadline: float) -> bool:
            self.asked += 1
            return self.asked == self.stops_at

        def resume(self) -> None:
            log.append(f"{self.name} resumed")

    holds: list[dict] = []
    gate = GpuGate(True, Drain(), holds.append)
    children = [Fake("quick", 1), Fake("late", 2), Fake("stuck", 0)]
    started = [threading.Event() for _ in children]
    release = [threading.Event() for _ in children]

    def start(i: int) -> None:
        with gate.starting(children[i]):
            started[i].set()
            release[i].wait(5)
            log.append(f"{children[i].name} ended")

    threads = [threading.Thread(target=start, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for e in started:
        assert e.wait(5)
    waits: list[str] = []

    def timing() -> None:
        with gate.exclusive(lambda what, seconds: waits.append(what)):
            log.append("timing")

    x = threading.Thread(target=timing)
    x.start()
    time.sleep(0.2)
    assert log == ["quick paused", "late paused", "stuck paused", "stuck resumed"], log
    release[2].set()  # the stuck child's start ends
    x.join(5)
    assert not x.is_alive()
    assert log[4:] == ["stuck ended", "timing", "quick resumed", "late resumed"], log
    assert drains == ["drain"] and waits == ["undrained", "drain"], (drains, waits)
    assert holds[-1]["late"] == 1 and holds[-1]["stragglers"] == 1 and not holds[-1]["stopped"], holds[-1]
    for e in release:
        e.set()
    for t in threads:
        t.join(5)


def test_back_to_back_timings_keep_the_starts_stopped_between_them():
    # Timings queue behind one another when many evaluations are in flight; continuing the starts
    # a timing stopped, only for the next timing to stop them again at once, cost each timing
    # its stop and settle (a start caught inside a driver call becomes a straggler). They stay
    # stopped for a waiting timing that pauses starts, and are continued when the last ends; a
    # waiting timing that cannot pause gets them continued, as it waits for their starts to end.
    import threading
    import time

    from ksmith.evaluator.gate import GpuGate

    log: list[str] = []

    class Drain:
        def __init__(self) -> None:
            self.up = True

        def available(self) -> bool:
            return self.up

        def wait(self) -> bool:
            return True

    class Fake:
        """Idempotent, as `sandbox.Child`: only a change is logged."""

        def __init__(self, name: str):
            self.name = name
            self.stopped = False

        def pause(self) -> None:
            if not self.stopped:
                log.append(f"{self.name} paused")
            self.stopped = True

        def settle(self, deadline: float) -> bool:
            return self.stopped

        def resume(self) -> None:
            if self.stopped:
                log.append(f"{self.name} resumed")
            self.stopped = False

    drain = Drain()
    holds: list[dict] = []
    gate = GpuGate(True, drain, holds.append)
    children = [Fake("long"), Fake("short")]
    started = [threading.Event() for _ in children]
    release = [threading.Event() for _ in children]

    def start(i: int) -> None:
        with gate.starting(children[i]):
            started[i].set()
            release[i].wait(5)

    starts = [threading.Thread(target=start, args=(i,)) for i in range(2)]
    for t in starts:
        t.start()
    for e in started:
        assert e.wait(5)

    def ends(i: int):  # type: ignore[no-untyped-def]
        """What makes start `i` end (its thread released and joined)."""

        def end() -> None:
            release[i].set()
            starts[i].join(5)

        return end

    def back_to_back(second_pauses: bool, while_first=lambda: None, after_first=lambda: None) -> None:  # type: ignore[no-untyped-def]
        log.clear()
        holds.clear()
        first_holds, go_on = threading.Event(), threading.Event()

        def first() -> None:
            with gate.exclusive():
                log.append("A")
                first_holds.set()
                go_on.wait(5)

        def second() -> None:
            with gate.exclusive():
                log.append("B")

        a = threading.Thread(target=first)
        a.start()
        assert first_holds.wait(5)
        drain.up = second_pauses
        b = threading.Thread(target=second)
        b.start()
        deadline = time.monotonic() + 5
        while gate._waiting == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        while_first()
        go_on.set()
        a.join(5)
        after_first()
        b.join(5)
        assert not (a.is_alive() or b.is_alive())
        drain.up = True

    back_to_back(second_pauses=True)
    assert log == ["long paused", "short paused", "A", "B", "long resumed", "short resumed"], log
    assert [h["kept"] for h in holds] == [True, False] and holds[1]["paused"] == 2, holds

    # a start that ended while stopped (its answer came just before the stop; here the start the
    # second timing's own child made) is continued before the next timing begins: on an H200,
    # keeping it stopped left that timing waiting for its stopped child for good
    back_to_back(second_pauses=True, while_first=ends(1))
    assert log == ["long paused", "short paused", "A", "short resumed", "B", "long resumed"], log

    # a waiting timing that cannot pause starts (its drain unavailable) finds them continued,
    # and waits for their starts to end
    back_to_back(second_pauses=False, after_first=ends(0))
    assert log == ["long paused", "A", "long resumed", "B"], log
    assert [h["kept"] for h in holds if h["mode"] == "exclusive"] == [False, False], holds


def test_a_budget_does_not_count_the_time_its_child_was_stopped():
    import time

    from ksmith.evaluator.evaluate import Budget
    from ksmith.evaluator.sandbox import ChildTimeout

    stopped = [0.0]
    budget = Budget(0.3, "the correctness calls", lambda: stopped[0])
    time.sleep(0.4)
    stopped[0] = 0.35  # stopped for another candidate's timing most of that time
    assert budget.left() > 0
    time.sleep(0.3)
    with pytest.raises(ChildTimeout, match="the correctness calls: no answer within 0 s"):
        budget.left()


def test_short_gpu_calls_go_on_while_a_timing_waits_for_a_start():
    # A timing waiting for a long start (a reference build, a candidate's first call) used to
    # stop every correctness call behind it for the whole start: the GPUs of the 2-H100 bench
    # were 15-19 % busy. Short calls are admitted while a start runs; the timing still runs
    # alone, after the start and the short calls; a new start waits for the timing.
    import threading
    import time

    from ksmith.evaluator.gate import GpuGate

    gate = GpuGate(True)
    log: list[str] = []
    lock = threading.Lock()
    started = threading.Event()
    release_start = threading.Event()

    def note(s: str) -> None:
        with lock:
            log.append(s)

    def start():
        with gate.starting():
            note("S+")
            started.set()
            release_start.wait(5)
            note("S-")

    def short(name):
        with gate.shared():
            note(f"{name}+")
            time.sleep(0.02)
            note(f"{name}-")

    def second_start():
        with gate.starting():
            note("T+")
            note("T-")

    def timing():
        with gate.exclusive():
            note("X+")
            time.sleep(0.05)
            note("X-")

    s = threading.Thread(target=start)
    s.start()
    started.wait()
    x = threading.Thread(target=timing)
    x.start()
    time.sleep(0.05)  # the timing now waits for the start
    shorts = [threading.Thread(target=short, args=(f"c{i}",)) for i in range(3)]
    for t in shorts:
        t.start()
    for t in shorts:
        t.join(2)
    assert all(not t.is_alive() for t in shorts), "short calls ran during the start, not behind the timing"
    t2 = threading.Thread(target=second_start)
    t2.start()
    time.sleep(0.05)
    assert "T+" not in log, "a new start waits for the waiting timing"
    release_start.set()
    for t in (s, x, t2):
        t.join(5)
    # the timing ran alone: after the start and every short call ended, before the second start
    x_in, x_out = log.index("X+"), log.index("X-")
    assert x_in > log.index("S-") and all(log.index(f"c{i}-") < x_in for i in range(3)), log
    assert log.index("T+") > x_out, log
    # with no start running, a short call that arrives while a timing waits goes after it
    log.clear()
    held = threading.Event()

    def first():
        with gate.shared():
            held.set()
            time.sleep(0.05)
            note("a-")

    a = threading.Thread(target=first)
    a.start()
    held.wait()
    x = threading.Thread(target=timing)
    x.start()
    time.sleep(0.01)
    b = threading.Thread(target=short, args=("b",))
    b.start()
    for t in (a, x, b):
        t.join(5)
    assert log.index("X+") > log.index("a-") and log.index("b+") > log.index("X-"), log


def test_a_timing_pauses_the_starts_it_would_wait_for():
    # With 16 evaluations in flight a start (seconds of CPU work) nearly always runs, so a timing
    # that waits for starts to end waits for seconds while new starts queue behind it: the GPUs
    # were 13-31 % busy. A start registered with its child is stopped for the timing instead,
    # and continued after it; one registered without a child is still waited for.
    import threading
    import time

    from ksmith.evaluator.gate import GpuGate

    drained = [True]

    class Drain:
        def available(self) -> bool:
            return True

        def wait(self) -> bool:
            note("drain")
            return drained[0]

    gate = GpuGate(True, Drain())
    log: list[str] = []
    lock = threading.Lock()

    def note(s: str) -> None:
        with lock:
            log.append(s)

    class FakeChild:
        def __init__(self, name: str, stops: bool = True):
            self.name = name
            self.stops = stops

        def pause(self) -> None:
            note(f"{self.name} paused")

        def settle(self, deadline: float) -> bool:
            assert deadline > time.monotonic()
            return self.stops

        def resume(self) -> None:
            note(f"{self.name} resumed")

    started = threading.Event()
    release = threading.Event()

    def start(child):
        with gate.starting(child):
            started.set()
            release.wait(5)
            note("S-")

    waits: list[str] = []

    def timing(fail: bool = False):
        try:
            with gate.exclusive(lambda what, seconds: waits.append(what)):
                note("X+")
                time.sleep(0.05)
                if fail:
                    raise RuntimeError("the timing failed")
                note("X-")
        except RuntimeError:
            note("X failed")

    s = threading.Thread(target=start, args=(FakeChild("s"),))
    s.start()
    started.wait()
    x = threading.Thread(target=timing)
    x.start()
    x.join(2)
    assert not x.is_alive(), "the timing did not wait for the start to end"
    assert log == ["s paused", "drain", "X+", "X-", "s resumed"], log
    # a timing that raises continues what it stopped all the same
    log.clear()
    x = threading.Thread(target=timing, args=(True,))
    x.start()
    x.join(2)
    assert log == ["s paused", "drain", "X+", "s resumed", "X failed"], log
    # the stopped start's GPU work does not drain: it is continued and the timing waits for its end
    log.clear()
    drained[0] = False
    x = threading.Thread(target=timing)
    x.start()
    time.sleep(0.1)
    assert log == ["s paused", "drain", "s resumed"], log
    release.set()
    s.join(5)
    x.join(5)
    assert log[3:] == ["S-", "X+", "X-"], log
    assert waits == ["drain", "drain", "drain", "undrained"], "each wait is reported to the timing's profile"
    drained[0] = True

    # a start whose child does not show as stopped in time (a thread inside a driver call) may go
    # on issuing GPU work: it is continued, without asking the drain, and the timing waits for it
    log.clear()
    waits.clear()
    started.clear()
    release.clear()
    s = threading.Thread(target=start, args=(FakeChild("s", stops=False),))
    s.start()
    started.wait()
    x = threading.Thread(target=timing)
    x.start()
    time.sleep(0.1)
    assert log == ["s paused", "s resumed"], log
    release.set()
    s.join(5)
    x.join(5)
    assert log[2:] == ["S-", "X+", "X-"], log
    assert waits == ["undrained"], waits

    # a short call that arrives while a timing waits (only for other short calls: the start is
    # pausable) goes after the timing
    log.clear()
    started.clear()
    release.clear()
    s = threading.Thread(target=start, args=(FakeChild("s"),))
    s.start()
    started.wait()
    held = threading.Event()

    def short(name: str, hold: float):
        with gate.shared():
            note(f"{name}+")
            held.set()
            time.sleep(hold)
            note(f"{name}-")

    a = threading.Thread(target=short, args=("a", 0.1))
    a.start()
    held.wait()
    x = threading.Thread(target=timing)
    x.start()
    time.sleep(0.03)
    b = threading.Thread(target=short, args=("b", 0.0))
    b.start()
    for t in (a, x, b):
        t.join(5)
    assert log.index("X+") > log.index("a-") and log.index("b+") > log.index("s resumed"), log
    assert log.index("s paused") > log.index("a-"), "nothing is stopped before the short calls ended"
    release.set()
    s.join(5)

    def the_timing_waits_for_the_start() -> None:
        log.clear()
        started.clear()
        release.clear()
        s = threading.Thread(target=start, args=(FakeChild("s"),))
        s.start()
        started.wait()
        x = threading.Thread(target=timing)
        x.start()
        time.sleep(0.1)
        assert "X+" not in log and "s paused" not in log, log
        release.set()
        for t in (s, x):
            t.join(5)
        assert log == ["S-", "X+", "X-"], log

    # a drain that is not available (its probe starting or failed): the timing waits for the start
    class Unavailable(Drain):
        def available(self) -> bool:
            return False

    gate = GpuGate(True, Unavailable())
    the_timing_waits_for_the_start()
    # without pausing (the option off: no drain), the timing waits for the start
    gate = GpuGate(True)
    the_timing_waits_for_the_start()


def test_warm_up_fills_warmup_ms_once_not_call_by_call(monkeypatch):
    # A fake clock in place of CUDA events, each call 1 ms: 10 calls, then 40 more to reach
    # 50 ms (the old loop re-started its clock after each call and so ran 10,000 calls of any
    # kernel shorter than warmup_ms, e.g. 6 s of a 0.6 ms matmul under the GPU's gate).
    syncs = []
    timer, run, calls = _fake_clock_timer(monkeypatch, {"warmup": 10, "warmup_ms": 50.0}, lambda: syncs.append(1))
    call = run("call", 1.0)
    assert timer.warm_up([call], 10) == 50
    assert len(calls) == 50 and len(syncs) == 3
    # a call longer than warmup_ms: the counted calls only
    timer.cfg["warmup_ms"] = 0.5
    assert timer.warm_up([call], 10) == 10
    # a call of almost nothing stops at MAX_WARMUP
    timer.cfg["warmup_ms"] = 50.0
    assert timer.warm_up([lambda: None], 10) == timing.MAX_WARMUP


def test_waiting_for_the_gpu_gate_is_not_the_candidates_time():
    # The worker's budget for a child's correctness calls must not run out while other
    # candidates hold the GPU's gate (on the H200 bench a candidate ended `timeout` with
    # "no answer within -0 s" after waiting there), and an exhausted budget names itself.
    import threading
    import time as _time

    from ksmith.evaluator import messages
    from ksmith.evaluator.evaluate import Budget, Profile, Run
    from ksmith.evaluator.gate import GpuGate
    from ksmith.evaluator.sandbox import ChildTimeout

    class Child:
        def __init__(self):
            self.queue = [messages.Ready("trial 0"), messages.RunFailed("boom")]
            self.timeouts = []

        def receive(self, timeout_s):
            self.timeouts.append(timeout_s)
            return self.queue.pop(0)

        def command(self, line):
            pass

    class Ev:
        gate = GpuGate(True)

    run = object.__new__(Run)
    run.ev = Ev()
    run.profile = Profile()
    run.held = False  # each call takes the gate (no correctness hold: the gate does not pause)
    held = threading.Event()

    def timing():
        with Ev.gate.exclusive():
            held.set()
            _time.sleep(0.6)

    t = threading.Thread(target=timing)
    t.start()
    held.wait()
    child = Child()
    budget = Budget(0.4, "the correctness calls (run_timeout_s)")
    msg = run.next_file(child, None, "", "", budget)
    t.join()
    assert isinstance(msg, messages.RunFailed)
    assert all(0 < x <= 0.4 for x in child.timeouts), child.timeouts
    spent = Budget(0.0, "the judge's check (run_timeout_s)")
    with pytest.raises(ChildTimeout, match=r"the judge's check \(run_timeout_s\): no answer within 0 s in all"):
        spent.left()


def test_a_trusted_childs_failure_leads_with_the_exception_line():
    from ksmith.evaluator.child_common import failure_text, headline

    def deep():
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB.\nGPU 0 has 1.5 GiB free.")

    try:
        deep()
    except torch.OutOfMemoryError as e:
        text = failure_text(e)
        line = headline(e)
    assert line == "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has 1.5 GiB free."
    first, rest = text.split("\n", 1)
    assert first == line
    # the traceback follows, whole
    assert rest.startswith("Traceback (most recent call last):") and "in deep" in rest
    assert headline(ValueError("x" * 900)).endswith(" ...") and len(headline(ValueError("x" * 900))) < 520
