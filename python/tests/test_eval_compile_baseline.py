"""The task's `torch.compile` baseline (CPU interpreter): kept with the task's facts and measured
once per task; on the CPU not measured, with the reason ``cpu``; the confined compile child's
own path (compile, the outputs checked against eager, the timing's rehearsal) and its reasons
where it gives no baseline (a compile past its time limit, a compiled reference that differs).
One test runs inductor's CPU backend (about a minute on a loaded machine)."""

from __future__ import annotations

import os

import pytest
from ksmith.confine import Policy
from ksmith.evaluator import compile_baseline
from ksmith.evaluator.evaluate import DEFAULT_OPTIONS, DeviceEvaluator, Profile

UNCONFINED = Policy(require=False)
HERE = os.path.dirname(os.path.abspath(__file__))
CAND = os.path.join(HERE, "candidates")
TASK = open(os.path.join(CAND, "tasks", "elementwise.py")).read()
HONEST = open(os.path.join(CAND, "honest", "elementwise.py")).read()
OPTIONS = {"trials": 2, "run_timeout_s": 60, "memory_limit_mb": 2048}
OPTIONS_TOL = DEFAULT_OPTIONS["tolerances"]
REL = DEFAULT_OPTIONS["relative_error"]


@pytest.fixture()
def ev():
    e = DeviceEvaluator("cpu", OPTIONS, policy=UNCONFINED)
    yield e
    e.close()


def test_on_the_cpu_the_baseline_is_null_with_the_reason_and_measured_once_per_task(ev, monkeypatch):
    calls = []
    original = ev._compile_baseline
    monkeypatch.setattr(ev, "_compile_baseline", lambda *a: calls.append(a[0]) or original(*a))
    request = {"task_id": "t", "reference": TASK, "candidate": HONEST, "measure": False}
    first = ev.evaluate(request)
    second = ev.evaluate(request)
    assert first["status"] == "correct", first["error_log"]
    expected = {"mode": "default", "timing": None, "speedup_over_eager": None, "compile_s": None, "why": "cpu"}
    assert first["compile_baseline"] == expected and second["compile_baseline"] == expected
    assert calls == ["t"], "measured once per task, kept with its facts"
    # another task is measured on its own
    ev.evaluate({**request, "task_id": "u"})
    assert calls == ["t", "u"]


def test_off_measures_nothing_and_says_so():
    ev = DeviceEvaluator("cpu", {**OPTIONS, "compile_baseline": "off"}, policy=UNCONFINED)
    try:
        assert ev.reference("t", TASK).compiled["why"] == 'off (compile_baseline = "off")'
    finally:
        ev.close()


def test_an_unknown_mode_is_refused():
    with pytest.raises(ValueError, match="compile_baseline must be one of off, default, max-autotune"):
        DeviceEvaluator("cpu", {**OPTIONS, "compile_baseline": "reduce-overhead"}, policy=UNCONFINED)


def test_a_compile_past_its_time_limit_gives_the_reason_not_a_failure(ev):
    ev.opts["compile_baseline_timeout_s"] = 0.01
    ev.opts["run_timeout_s"] = 1
    got = ev._measure_compiled("t", 1, TASK, "default", Profile())
    assert got["timing"] is None and got["speedup_over_eager"] is None
    assert "compile_baseline_timeout_s = 0 s" in got["why"], got["why"]
    # the task itself is still evaluated
    r = ev.evaluate({"task_id": "t", "reference": TASK, "candidate": HONEST, "measure": False})
    assert r["status"] == "correct", r["error_log"]


def test_a_compiled_reference_that_differs_from_eager_is_refused(monkeypatch):
    # the child's check, in this process, with a compiler whose model computes something else
    import torch

    class Model(torch.nn.Module):
        def forward(self, x):
            return torch.relu(x)

    sent = []

    class Channel:
        def send(self, msg):  # type: ignore[no-untyped-def]
            sent.append(msg)

    monkeypatch.setattr(torch, "compile", lambda model, mode=None: lambda *a: model(*a) + 1.0)
    x = torch.randn(64)
    cfg = {"compile_baseline": "default", "tolerances": OPTIONS_TOL, "relative_error": REL}
    with pytest.raises(RuntimeError, match="the compiled reference's outputs differ from eager"):
        compile_baseline.run(Channel(), cfg, Model(), [x], [torch.relu(x)], None)  # type: ignore[arg-type]
    assert sent == [], "nothing sent: the worker records the failure as the reason"


def test_the_compile_child_compiles_checks_and_times_a_task(ev):
    # the whole child path on the CPU (inductor's C++ backend; the timing is the CPU's rehearsal,
    # whose times say nothing: the GPU's figures come from scripts/gpu_rollout_bench.sh)
    got = ev._measure_compiled("t", 1, TASK, "default", Profile())
    assert got["why"] is None, got["why"]
    assert got["mode"] == "default" and got["compile_s"] > 0
    timing = got["timing"]
    assert len(timing["process_samples_ms"]) == 1 and len(timing["process_reference_samples_ms"]) == 1
    assert len(timing["process_samples_ms"][0]) == len(timing["process_reference_samples_ms"][0]) > 0
    assert got["speedup_over_eager"] > 0


def test_the_baseline_from_a_timing_pairs_compiled_and_eager_samples():
    stats = {
        "median_ms": 2.0,
        "iqr_ms": 0.1,
        "cv": 0.01,
        "samples": 3,
        "samples_ms": [2.0, 2.1, 1.9],
        "method": "cuda_graph",
        "l2_policy": "flushed",
        "reference_in_process": {"median_ms": 5.0, "samples_ms": [5.0, 5.2, 4.8], "cv": 0.01, "samples": 3},
    }
    got = compile_baseline.measured("default", 4.5, stats)
    assert got["speedup_over_eager"] == pytest.approx(2.5) and got["why"] is None and got["compile_s"] == 4.5
    assert got["timing"]["process_samples_ms"] == [[2.0, 2.1, 1.9]]
    assert got["timing"]["process_reference_samples_ms"] == [[5.0, 5.2, 4.8]]
    # each sample once: not again in the process's own lists
    assert "samples_ms" not in got["timing"] and "samples_ms" not in got["timing"]["reference_in_process"]
    stats["reference_in_process"]["median_ms"] = 0.0
    assert "no positive time" in compile_baseline.measured("default", 4.5, stats)["why"]
