"""Timing in several processes (`timing.processes`), through the evaluator in Triton's CPU
interpreter: the reference and each candidate are timed in the configured number of processes,
one more while their medians disagree, the figure used is the median of the per-process medians,
and a candidate that misbehaves only in a later process gets the verdict that process finds."""

from __future__ import annotations

import json
import os

import pytest
from ksmith.confine import Policy
from ksmith.evaluator.evaluate import DeviceEvaluator

#: An evaluator made in this process, outside the sandbox launcher: only the per-child
#: confinement, by the explicit opt-out (the default refuses without the whole sandbox).
UNCONFINED = Policy(require=False)

HERE = os.path.dirname(os.path.abspath(__file__))
TASK = open(os.path.join(HERE, "candidates", "tasks", "elementwise.py")).read()
HONEST = open(os.path.join(HERE, "candidates", "honest", "elementwise.py")).read()
OPTIONS = {"trials": 2, "run_timeout_s": 30, "memory_limit_mb": 1536}


def spy_spawns(ev: DeviceEvaluator) -> list[tuple[str, str | None]]:
    """Records each child the evaluator forks: (module, its mode or its correctness calls)."""
    spawns: list[tuple[str, str | None]] = []
    spawn = ev._spawn

    def spy(module, d, extra_env=None):
        cfg = json.load(open(os.path.join(d, "config.json")))
        spawns.append((module.rsplit(".", 1)[1], cfg.get("mode") or cfg.get("correctness")))
        return spawn(module, d, extra_env)

    ev._spawn = spy
    return spawns


def request(candidate: str, task_id: str = "processes") -> dict:
    return {"task_id": task_id, "reference": TASK, "candidate": candidate, "measure": True}


@pytest.mark.parametrize("processes", [1, 2, 3])
def test_reference_and_candidate_are_timed_in_the_configured_processes(processes):
    ev = DeviceEvaluator("cpu", dict(OPTIONS, timing={"processes": processes}), policy=UNCONFINED)
    spawns = spy_spawns(ev)
    try:
        r = ev.evaluate(request(HONEST))
        facts = next(iter(ev.tasks.values()))
    finally:
        ev.close()
    assert r["status"] == "correct", r["error_log"]
    # the reference: its build child times first, then a child of its own per further process
    refs = [mode for module, mode in spawns if module == "reference_child" and mode != "judge"]
    assert refs == ["build"] + ["time"] * (processes - 1)
    assert len(facts.timing["process_medians_ms"]) == processes
    # the candidate: a harness and a judge per process; the first makes every correctness call
    harnesses = [mode for module, mode in spawns if module == "candidate_child"]
    assert harnesses == ["full"] + ["timing"] * (processes - 1)
    assert [m for _, m in spawns].count("judge") == processes
    # the first process's correctness figures are the result's (every trial)
    assert r["trials"] == r["trials_passed"] == OPTIONS["trials"]
    assert r["candidate_timing"] is None and r["speedup"] is None  # the CPU's times are not reported


# Misbehaves only in its second process: the first creates MARK, a later one finds it (the
# evaluator is unconfined and without the audit hook here, so the file can be written; a confined
# candidate could leave a trace in its Triton cache instead, which the next child of the same
# program reads).
SECOND = """
import os

MARK = {mark!r}
LATER = os.path.exists(MARK)
if not LATER:
    open(MARK, "w").close()
"""

# in the later process, every call after the first two (trial 0's) returns the second's outputs
CACHING = """
    def forward(self, x, y):
        self.calls = getattr(self, "calls", 0) + 1
        if LATER and self.calls > 2:
            return self.kept
        out = torch.empty_like(x)
        relu_mul_add_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, out, x.numel(), BLOCK=1024)
        self.kept = out
        return out
"""

# in the later process, PyTorch computes everything
FALLBACK = """
    def forward(self, x, y):
        if LATER:
            return torch.relu(x) * y + x
        out = torch.empty_like(x)
        relu_mul_add_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, out, x.numel(), BLOCK=1024)
        return out
"""


def two_faced(forward: str, mark: str) -> str:
    head, _, _ = HONEST.partition("    def forward(self, x, y):")
    return head.replace("import torch\n", SECOND.format(mark=mark) + "import torch\n", 1) + forward


@pytest.mark.parametrize(
    "forward,hack", [(CACHING, "output_caching"), (FALLBACK, "torch_fallback")], ids=["caching", "fallback"]
)
def test_a_candidate_that_misbehaves_only_in_its_second_process_is_caught(tmp_path, forward, hack):
    options = dict(OPTIONS, static_checks=False, audit=False, confine=False)
    ev = DeviceEvaluator("cpu", dict(options, timing={"processes": 2}), policy=UNCONFINED)
    try:
        r = ev.evaluate(request(two_faced(forward, str(tmp_path / "second"))))
    finally:
        ev.close()
    assert [r["status"], r["hack"]] == ["hacked", hack], r["error_log"]
    # with one process the same candidate passes: the second process is what caught it
    ev = DeviceEvaluator("cpu", dict(options, timing={"processes": 1}), policy=UNCONFINED)
    try:
        r = ev.evaluate(request(two_faced(forward, str(tmp_path / "only"))))
    finally:
        ev.close()
    assert r["status"] == "correct", r["error_log"]


def injected_medians(ev: DeviceEvaluator) -> dict[str, list[float]]:
    """Makes `ev` decide as on a GPU, with each process's median replaced by the next of the lists
    it returns, "reference" and "candidate", which the test fills (the children still run their
    CPU rehearsal): the processes' medians, so their disagreement, are then the test's."""
    medians: dict[str, list[float]] = {"reference": [], "candidate": []}
    ev.cuda = True
    ref_timing, cand_process = ev._reference_timing, ev._candidate_process

    def reference_timing(child, task_id, process, profile, start=False, attempt=None):
        timing = ref_timing(child, task_id, process, profile, start, attempt)
        return dict(timing, median_ms=medians["reference"][process - 1])

    def candidate_process(run, ref, cand):
        verdict = cand_process(run, ref, cand)
        if verdict is None:
            run.stats[-1]["median_ms"] = medians["candidate"][run.processes - 1]
        return verdict

    ev._reference_timing = reference_timing
    ev._candidate_process = candidate_process
    return medians


def test_a_third_process_is_timed_when_the_first_two_disagree():
    ev = DeviceEvaluator("cpu", dict(OPTIONS, timing={"processes": 2}), policy=UNCONFINED)
    spawns = spy_spawns(ev)
    medians = injected_medians(ev)
    try:
        # the reference's second process is 2 % slower, a third settles it; the candidate's two agree
        medians.update(reference=[1.0, 1.02, 1.001], candidate=[0.5, 0.501, 9.0])
        r = ev.evaluate(request(HONEST))
        assert r["status"] == "correct", r["error_log"]
        assert r["reference_timing"]["process_medians_ms"] == [1.0, 1.02, 1.001]
        assert r["reference_timing"]["median_ms"] == 1.001
        assert [m for _, m in spawns if m in ("build", "time")] == ["build", "time", "time"]
        assert r["candidate_timing"]["process_medians_ms"] == [0.5, 0.501]
        assert r["candidate_timing"]["median_ms"] == pytest.approx(0.5005)
        assert r["speedup"] == pytest.approx(1.001 / 0.5005)
        assert [m for _, m in spawns if m in ("full", "timing")] == ["full", "timing"]
        # now the candidate's first process is the slow one: a third, and the median of three
        spawns.clear()
        medians["candidate"] = [0.51, 0.5, 0.502, 9.0]
        r = ev.evaluate(request(HONEST))
        assert r["candidate_timing"]["process_medians_ms"] == [0.51, 0.5, 0.502]
        assert r["candidate_timing"]["median_ms"] == 0.502
        assert [m for _, m in spawns if m in ("full", "timing")] == ["full", "timing", "timing"]
    finally:
        ev.close()
