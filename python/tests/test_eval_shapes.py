"""Hidden shapes (`shapes`): which constants are sizes, the derived set, the rewriting of a program,
and the request's `alt_sizes`; and the evaluator checking a candidate at them (CPU interpreter)."""

from __future__ import annotations

import os

import pytest
from ksmith.confine import Policy
from ksmith.evaluator import protocol, shapes
from ksmith.evaluator.evaluate import BrokenReference, DeviceEvaluator

#: An evaluator made in this process, outside the sandbox launcher: only the per-child
#: confinement, by the explicit opt-out (the default refuses without the whole sandbox).
UNCONFINED = Policy(require=False)

HERE = os.path.dirname(os.path.abspath(__file__))
CAND = os.path.join(HERE, "candidates")

PROGRAM = """import torch

batch_size = 16
dim = 2 ** 11
eps: int = 3
ODD = 7
FLAG = True
twice = 1
twice = 2
a, b = 4, 8
name = "x"


def get_inputs():
    return [torch.randn(batch_size, dim)]
"""


def read(rel: str) -> str:
    return open(os.path.join(CAND, rel)).read()


def test_module_level_integer_constants():
    assert shapes.int_constants(PROGRAM) == {"batch_size": 16, "dim": 2048, "eps": 3, "ODD": 7}
    assert shapes.int_constants("def broken(:\n") == {}


def test_the_derived_set_halves_the_even_constants():
    assert shapes.derive(PROGRAM) == [{"batch_size": 8, "dim": 1024}]
    assert shapes.derive("import torch\nN = 1\nM = 3\n") == []


def test_rewrite_changes_only_the_named_constants():
    out = shapes.rewrite(PROGRAM, {"dim": 100, "batch_size": 3, "unknown": 5, "twice": 9})
    assert "dim = 100\n" in out and "batch_size = 3\n" in out
    assert "twice = 1\ntwice = 2\n" in out, "a name assigned twice is not a constant"
    assert out.count("\n") == PROGRAM.count("\n")
    assert shapes.int_constants(out)["dim"] == 100
    assert shapes.touches(PROGRAM, {"dim": 1}) and not shapes.touches(PROGRAM, {"N": 1})
    assert shapes.rewrite(PROGRAM, {}) == PROGRAM


def test_alt_sizes_are_validated():
    assert shapes.parse_sets('[{"N": 8}]') == [{"N": 8}]
    assert shapes.parse_sets([{"batch_size": 8, "dim": 2048}]) == [{"batch_size": 8, "dim": 2048}]
    for bad in ("[1]", "{}", "[{}]", '[{"N": "8"}]', '[{"N": -1}]', '[{"1x": 2}]', "not json"):
        with pytest.raises(ValueError, match="alt_sizes"):
            shapes.parse_sets(bad)
    with pytest.raises(protocol.ProtocolError, match="alt_sizes"):
        protocol.check_request({"task_id": "t", "reference": "r", "candidate": "c", "alt_sizes": [{"N": "x"}]})


@pytest.fixture(scope="module")
def evaluator():
    ev = DeviceEvaluator("cpu", {"trials": 2, "run_timeout_s": 30, "memory_limit_mb": 1536}, policy=UNCONFINED)
    yield ev
    ev.close()


def evaluate(ev: DeviceEvaluator, task: str, candidate: str, **extra: object) -> dict:
    req = {"task_id": task, "reference": read(task), "candidate": read(candidate), "measure": False, **extra}
    return ev.evaluate(req)


def test_a_candidate_hard_coded_to_the_visible_shape_is_incorrect_at_the_derived_set(evaluator):
    r = evaluate(evaluator, "tasks/layernorm.py", "adversarial/shape_hardcoded.py")
    assert (r["status"], r["hack"]) == ("incorrect", None), r["error_log"]
    assert 'hidden size set {"COLS": 128, "ROWS": 8}' in r["error_log"]
    # the same candidate with the check off is correct: it is exact at the visible shape
    ev = DeviceEvaluator("cpu", {"trials": 2, "run_timeout_s": 30, "hidden_shapes": 0}, policy=UNCONFINED)
    try:
        r = evaluate(ev, "tasks/layernorm.py", "adversarial/shape_hardcoded.py")
    finally:
        ev.close()
    assert r["status"] == "correct", r["error_log"]
    assert any("no hidden size set" in w for w in r["warnings"]), r["warnings"]


def test_recorded_sets_are_used_and_a_set_the_reference_fails_at_is_dropped(evaluator):
    # COLS = 100 is a width the hard-coded candidate gets wrong; UNKNOWN names no constant of the
    # task, so that set changes nothing and is dropped (with a warning saying why). On the CPU the
    # smallest set that changes the task (ROWS = 8) is the one judged first; the others stay hidden.
    alt = [{"COLS": 100}, {"UNKNOWN": 3}, {"ROWS": 8}]
    r = evaluate(evaluator, "tasks/layernorm.py", "adversarial/shape_hardcoded.py", alt_sizes=alt)
    assert r["status"] == "incorrect" and 'hidden size set {"COLS": 100}' in r["error_log"], r["error_log"]
    r = evaluate(evaluator, "tasks/layernorm.py", "honest/layernorm.py", alt_sizes=alt)
    assert r["status"] == "correct", r["error_log"]
    assert any('{"UNKNOWN": 3}' in w and "names no module-level" in w for w in r["warnings"]), r["warnings"]
    assert 'judged on the CPU at the task\'s smallest size set {"ROWS": 8}' in r["warnings"], r["warnings"]


def test_smallest_set_is_the_least_one_that_changes_the_program():
    sets = [{"N": 4096}, {"M": 2}, {"N": 1000}, {"N": 1000}]
    assert shapes.smallest("N = 8192\n", sets) == ({"N": 1000}, [{"N": 4096}, {"M": 2}, {"N": 1000}])
    assert shapes.smallest("K = 3\n", sets) == (None, sets)


def test_on_the_cpu_a_task_sized_for_a_gpu_is_judged_at_its_smallest_recorded_set():
    # 2^24 elements per input: beyond this evaluator's memory budget at the task's own sizes.
    task = read("tasks/elementwise.py").replace("N = 4096", "N = 2 ** 24")
    req = {"task_id": "gpu-sized", "reference": task, "candidate": read("honest/elementwise.py"), "measure": False}
    options = {"trials": 2, "run_timeout_s": 30, "memory_budget_mb": 64}
    ev = DeviceEvaluator("cpu", options, policy=UNCONFINED)
    try:
        with pytest.raises(BrokenReference, match="memory budget"):
            ev.evaluate(req)
        r = ev.evaluate({**req, "alt_sizes": [{"N": 4096}, {"N": 1000}]})
        wrong = ev.evaluate({**req, "candidate": read("garbage/wrong_values.py"), "alt_sizes": [{"N": 1000}]})
    finally:
        ev.close()
    assert r["status"] == "correct", r["error_log"]
    assert 'judged on the CPU at the task\'s smallest size set {"N": 1000}' in r["warnings"], r["warnings"]
    assert wrong["status"] == "incorrect", wrong["error_log"]


def test_a_candidate_that_fails_to_build_at_a_hidden_set_is_incorrect_there(evaluator):
    src = read("honest/elementwise.py").replace(
        "    def forward(self, x, y):\n", "    def forward(self, x, y):\n        assert x.numel() == 4096\n", 1
    )
    req = {"task_id": "tasks/elementwise.py", "reference": read("tasks/elementwise.py"), "candidate": src}
    r = evaluator.evaluate({**req, "measure": False})
    assert r["status"] == "incorrect", r["error_log"]
    assert 'hidden size set {"N": 2048}: the candidate fails there' in r["error_log"]
    assert "AssertionError" in r["error_log"]
