"""A failing GPU is reported as `device_failed` (the pool takes the device out and evaluates the
request on another one), and every answered evaluation says where its time went (its profile).
The device check itself needs a GPU; here a fake evaluator stands for the worker's."""

from __future__ import annotations

import os as _os
import sys as _sys

_sys.path.insert(0, _os.path.join(_os.path.dirname(_os.path.abspath(__file__)), ".."))

import os  # noqa: E402
from typing import Any  # noqa: E402

import pytest  # noqa: E402
from ksmith.confine import Policy  # noqa: E402
from ksmith.evaluator import health  # noqa: E402
from ksmith.evaluator.evaluate import PHASES, BrokenReference, DeviceEvaluator  # noqa: E402
from ksmith.evaluator.worker import answer  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
CAND = os.path.join(HERE, "candidates")


def read(rel: str) -> str:
    return open(os.path.join(CAND, rel)).read()


class FakeGpuEvaluator:
    """Answers with `outcome` (a result, or an exception raised); its device check answers
    `failure` and is counted."""

    cuda = True

    def __init__(self, outcome: dict[str, Any] | BaseException, failure: str | None):
        self.outcome = outcome
        self.failure = failure
        self.checks = 0

    def evaluate_profiled(self, req: dict[str, Any]) -> tuple[dict[str, Any], dict[str, float]]:
        if isinstance(self.outcome, BaseException):
            raise self.outcome
        return self.outcome, {"compile": 1.5}

    def preflight_profiled(self, req: dict[str, Any]) -> tuple[dict[str, Any], dict[str, float]]:
        if isinstance(self.outcome, BaseException):
            raise self.outcome
        return {"task_id": req["task_id"], "reference_ms": 1.0, "warnings": []}, {"reference": 0.5}

    def device_failure(self) -> str | None:
        self.checks += 1
        return self.failure


def msg() -> dict[str, Any]:
    return {"id": "7", "request": {"task_id": "t", "reference": "x = 1\n", "candidate": "y = 2\n"}}


def test_an_internal_error_on_a_failing_gpu_is_device_failed():
    ev = FakeGpuEvaluator(RuntimeError("the judge did not start: CUDA error: unknown error"), "check failed: Xid 79")
    out = answer(ev, msg())
    assert out["type"] == "error" and out["error"]["kind"] == "device_failed"
    assert "Xid 79" in out["error"]["message"] and "the judge did not start" in out["error"]["message"]
    assert out["error"]["task_id"] == "t" and ev.checks == 1


def test_a_broken_reference_on_a_failing_gpu_does_not_call_the_task_broken():
    ev = FakeGpuEvaluator(BrokenReference("t", "CUDA error: an illegal memory access"), "the check hung")
    out = answer(ev, msg())
    assert out["error"]["kind"] == "device_failed"


def test_on_a_working_gpu_errors_stay_what_they_are():
    ev = FakeGpuEvaluator(BrokenReference("t", "no inputs today"), None)
    out = answer(ev, msg())
    assert out["error"]["kind"] == "broken_reference" and ev.checks == 1
    ev = FakeGpuEvaluator(RuntimeError("boom"), None)
    assert answer(ev, msg())["error"]["kind"] == "internal"


def test_a_timeout_is_checked_and_other_verdicts_are_not():
    hung = FakeGpuEvaluator({"status": "timeout"}, "the check did not finish within 90 s")
    out = answer(hung, msg())
    assert out["error"]["kind"] == "device_failed" and "timeout" in out["error"]["message"]
    ok = FakeGpuEvaluator({"status": "timeout"}, None)
    expected = {"type": "result", "id": "7", "result": {"status": "timeout"}, "profile": {"compile": 1.5}}
    assert answer(ok, msg()) == expected
    wrong = FakeGpuEvaluator({"status": "incorrect"}, "never asked")
    assert answer(wrong, msg())["type"] == "result" and wrong.checks == 0


def preflight() -> dict[str, Any]:
    return {"type": "preflight", "id": "9", "request": {"task_id": "t", "reference": "x = 1\n"}}


def test_a_reference_that_fails_its_preflight_on_a_sound_gpu_is_the_tasks_and_on_a_failing_one_the_devices():
    cpu_tensor = "RuntimeError: Expected all tensors to be on the same device, but found at least two devices"
    sound = FakeGpuEvaluator(BrokenReference("t", cpu_tensor), None)
    out = answer(sound, preflight())
    assert out["error"]["kind"] == "broken_reference" and out["error"]["message"] == cpu_tensor and sound.checks == 1
    failing = FakeGpuEvaluator(BrokenReference("t", "CUDA error: an illegal memory access"), "Xid 79")
    out = answer(failing, preflight())
    assert out["error"]["kind"] == "device_failed" and "Xid 79" in out["error"]["message"]
    built = FakeGpuEvaluator({"status": "never read"}, "never asked")
    out = answer(built, preflight())
    assert out == {
        "type": "preflighted",
        "id": "9",
        "reference": {"task_id": "t", "reference_ms": 1.0, "warnings": []},
        "profile": {"reference": 0.5},
    }
    assert built.checks == 0


def test_a_bad_request_is_not_a_device_failure():
    ev = FakeGpuEvaluator({"status": "correct"}, "never asked")
    out = answer(ev, {"id": "8", "request": {"task_id": "t"}})
    assert out["error"]["kind"] == "bad_request" and ev.checks == 0


def test_the_cpu_has_no_device_to_check():
    class Cpu:
        cuda = False

    assert health.after(Cpu(), None) is None


def test_the_check_reports_a_process_that_fails():
    failed = health.device_failure({"PATH": os.environ.get("PATH", ""), "CUDA_VISIBLE_DEVICES": ""}, 60)
    assert failed is not None and "device check failed" in failed


@pytest.fixture(scope="module")
def cpu_evaluator():
    ev = DeviceEvaluator("cpu", {"trials": 2, "run_timeout_s": 60}, policy=Policy(require=False))
    yield ev
    ev.close()


def test_an_evaluation_says_where_its_time_went(cpu_evaluator):
    req = {
        "task_id": "elementwise",
        "reference": read("tasks/elementwise.py"),
        "candidate": read("honest/elementwise.py"),
        "measure": True,
    }
    result, profile = cpu_evaluator.evaluate_profiled(req)
    assert result["status"] == "correct", result["error_log"]
    assert set(profile) <= set(PHASES)
    for phase in ("static_check", "reference", "spawn", "start", "compile", "correctness", "finish"):
        assert profile.get(phase, -1) >= 0, (phase, profile)
    assert profile["reference"] > 0 and profile["compile"] > 0 and profile["correctness"] > 0
    spent = sum(v for k, v in profile.items() if k != "gate_wait")
    assert spent <= result["elapsed_ms"] / 1000 + 0.05, (profile, result["elapsed_ms"])
    # The task's facts are built once: the second evaluation finds them at once.
    _, again = cpu_evaluator.evaluate_profiled(req)
    assert again["reference"] < profile["reference"] / 5, (again, profile)
