"""Every candidate of tests/candidates/manifest.json through the evaluator in Triton's CPU
interpreter: honest kernels are correct, each adversarial candidate gets its own hack class (with
the static checks on, and from the runtime layer alone where it has a check), garbage and
isolation cases end as their status, and an honest candidate still passes after the crashes."""

from __future__ import annotations

import os as _os
import sys as _sys

_sys.path.insert(0, _os.path.join(_os.path.dirname(_os.path.abspath(__file__)), ".."))

import json  # noqa: E402
import os  # noqa: E402
from concurrent.futures import ThreadPoolExecutor  # noqa: E402

import pytest  # noqa: E402
from ksmith.confine import Policy  # noqa: E402
from ksmith.evaluator.evaluate import DeviceEvaluator  # noqa: E402

#: An evaluator made in this process, outside the sandbox launcher: only the per-child
#: confinement, by the explicit opt-out (the default refuses without the whole sandbox).
UNCONFINED = Policy(require=False)

HERE = os.path.dirname(os.path.abspath(__file__))
CAND = os.path.join(HERE, "candidates")
MANIFEST = json.load(open(os.path.join(CAND, "manifest.json")))
OPTIONS = {"trials": 3, "run_timeout_s": 15, "memory_limit_mb": 1536}


def _cases():
    cases = []
    for e in MANIFEST["honest"]:
        cases.append((e["candidate"], "static", e["task"], ["correct", None]))
    for e in MANIFEST["adversarial"]:
        # `cpu`: the verdict here where the check that decides it needs a GPU
        cases.append((e["candidate"], "static", e["task"], e.get("cpu", e["expect"])))
        if "runtime" in e and not e.get("gpu_only"):
            cases.append((e["candidate"], "runtime", e["task"], e.get("cpu", e["runtime"])))
    for group in ("garbage", "isolation"):
        for e in MANIFEST[group]:
            cases.append((e["candidate"], "runtime" if e.get("static_off") else "static", e["task"], e["expect"]))
    return cases


CASES = _cases()


def _request(task: str, candidate: str) -> dict:
    return {
        "task_id": task,
        "reference": open(os.path.join(CAND, task)).read(),
        "candidate": open(os.path.join(CAND, candidate)).read(),
        "measure": False,
    }


@pytest.fixture(scope="module")
def results():
    evs = {
        "static": DeviceEvaluator("cpu", OPTIONS, policy=UNCONFINED),
        "runtime": DeviceEvaluator("cpu", dict(OPTIONS, static_checks=False), policy=UNCONFINED),
    }
    try:
        with ThreadPoolExecutor(3) as pool:
            futures = {(c, layer): pool.submit(evs[layer].evaluate, _request(t, c)) for c, layer, t, _ in CASES}
            out = {k: f.result() for k, f in futures.items()}
        # after every crash, hang and memory bomb, the same evaluator still serves honest work
        out["after"] = evs["static"].evaluate(_request("tasks/elementwise.py", "honest/elementwise.py"))
        yield out
    finally:
        for ev in evs.values():
            ev.close()


@pytest.mark.parametrize("candidate,layer,task,expect", CASES, ids=[f"{c}:{layer}" for c, layer, _, _ in CASES])
def test_verdict(results, candidate, layer, task, expect):
    r = results[(candidate, layer)]
    assert [r["status"], r["hack"]] == list(expect), r["error_log"]
    assert r["candidate_timing"] is None and r["speedup"] is None  # no GPU: not measured
    assert r["hardware"]["device"] == "cpu (triton interpreter)"
    assert r["hardware"]["cuda"] is None and r["hardware"]["timing"] == "not measured (CPU rehearsal)"


def test_honest_results_carry_errors_and_trials(results):
    r = results[("honest/matmul.py", "static")]
    assert r["trials"] == OPTIONS["trials"] and r["trials_passed"] == OPTIONS["trials"]
    assert len(r["errors"]) == 1 and r["errors"][0]["max_abs"] < 1e-3
    # the task's speed-of-light: its FLOPs and compulsory bytes are counted; on the CPU no time
    light = r["speed_of_light"]
    assert light["flops"] == 2 * 64 * 96 * 64 and light["dtype"] == "float32"
    assert light["bytes"] == 4 * (64 * 96 + 96 * 64 + 64 * 64)
    assert light["ms"] is None and "no GPU" in light["why"] and light["tf32_policy"] == "torch_flags"


def test_incorrect_reports_error_statistics(results):
    r = results[("garbage/wrong_values.py", "static")]
    assert r["trials_passed"] < r["trials"]
    assert r["errors"][0]["max_abs"] > 1e-2 and r["errors"][0]["mean_abs"] > 0


def test_isolation_messages_name_the_cause(results):
    assert "no answer within" in results[("isolation/hang.py", "static")]["error_log"]
    assert "memory limit exceeded" in results[("isolation/memory_bomb.py", "static")]["error_log"]
    assert "exited with code 7" in results[("isolation/crash_exit.py", "runtime")]["error_log"]


def test_worker_survives_isolation_cases(results):
    assert results["after"]["status"] == "correct"
