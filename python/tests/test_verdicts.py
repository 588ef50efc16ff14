"""The verdict and status names of the Python side are one shared vocabulary,
`python/ksmith/verdicts.json`, which Rust tests check against `EvalStatus`, `HackKind` and
`ProbeStatus`: every name the evaluator, the probe runner and the reward function write or compare
is in it, and the evaluator refuses to build a verdict outside it."""

from __future__ import annotations

import ast
import json
import pathlib
import sys
import types

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parents[1] / "ksmith"
sys.path.insert(0, str(PACKAGE.parent))
VOCABULARY = json.loads((PACKAGE / "verdicts.json").read_text())


def _strings(node: ast.AST | None):
    """String constants of an expression, through tuples, lists, sets and `a if c else b`."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        yield node.value
    elif isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        for e in node.elts:
            yield from _strings(e)
    elif isinstance(node, ast.IfExp):
        yield from _strings(node.body)
        yield from _strings(node.orelse)


def _is_field(node: ast.AST, key: str) -> bool:
    """`key`, `x.key`, `x["key"]` or `x.get("key")`."""
    if isinstance(node, ast.Name):
        return node.id == key
    if isinstance(node, ast.Attribute):
        return node.attr == key
    if isinstance(node, ast.Subscript):
        return isinstance(node.slice, ast.Constant) and node.slice.value == key
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get":
        return bool(node.args) and isinstance(node.args[0], ast.Constant) and node.args[0].value == key
    return False


def _call_name(node: ast.Call) -> str | None:
    f = node.func
    return f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None


def names_given(path: pathlib.Path, key: str, positions: dict[str, int], compared_only: bool = False) -> set[str]:
    """The names a source file gives to the field `key`: compared with it and, unless
    `compared_only`, assigned to it (in `x = ...`, `x["key"] = ...` or a dict literal), passed as
    `key=...`, as a parameter's default, or as the argument at `positions[f]` of a call to `f`."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(_is_field(s, key) for s in sides):
                for s in sides:
                    found.update(_strings(s))
        elif compared_only:
            continue
        elif isinstance(node, ast.Call):
            name = _call_name(node)
            if name in positions and len(node.args) > positions[name]:
                found.update(_strings(node.args[positions[name]]))
            for kw in node.keywords:
                if kw.arg == key:
                    found.update(_strings(kw.value))
        elif isinstance(node, ast.Assign) and any(_is_field(t, key) for t in node.targets):
            found.update(_strings(node.value))
        elif isinstance(node, ast.Dict):
            for k, v in zip(node.keys, node.values):
                if isinstance(k, ast.Constant) and k.value == key:
                    found.update(_strings(v))
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            args = node.args.args[len(node.args.args) - len(node.args.defaults) :]
            for a, d in zip(args, node.args.defaults):
                if a.arg == key:
                    found.update(_strings(d))
    return found


EVALUATOR = [
    PACKAGE / "evaluator" / f
    for f in ("evaluate.py", "decide.py", "static_check.py", "candidate_child.py", "integrity.py")
]
PROBE = sorted((PACKAGE / "probe").glob("*.py"))


def test_the_evaluator_writes_only_shared_verdict_names():
    statuses: set[str] = set()
    hacks: set[str] = set()
    for path in EVALUATOR:
        statuses |= names_given(path, "status", {"_result": 0, "result": 0, "fail": 0, "_Finding": 0, "Verdict": 0})
        hacks |= names_given(
            path, "hack", {"_result": 1, "result": 1, "fail": 1, "_Finding": 1, "Violation": 0, "Verdict": 1}
        )
    assert {"correct", "incorrect", "hacked", "compile_error"} <= statuses, "the scan finds the verdicts"
    assert {"sandbox_escape", "background_thread"} <= hacks
    assert statuses <= set(VOCABULARY["eval_status"]), statuses - set(VOCABULARY["eval_status"])
    assert hacks <= set(VOCABULARY["hack"]), hacks - set(VOCABULARY["hack"])


def test_the_reward_function_compares_with_shared_verdict_names():
    # The reward function's own outcomes (`no_code`, `broken_reference`) are not verdicts.
    compared = names_given(PACKAGE / "reward.py", "status", {}, compared_only=True)
    assert {"correct", "hacked"} <= compared
    assert compared <= set(VOCABULARY["eval_status"]), compared - set(VOCABULARY["eval_status"])


def test_the_probe_runner_answers_only_shared_status_names():
    statuses: set[str] = set()
    for path in PROBE:
        statuses |= names_given(path, "status", {"empty_result": 0, "fail": 2})
    assert {"ok", "failed", "timeout", "oom", "crashed", "nondeterministic", "degenerate"} <= statuses
    assert statuses <= set(VOCABULARY["probe_status"]), statuses - set(VOCABULARY["probe_status"])


def test_a_verdict_outside_the_vocabulary_is_refused():
    from ksmith.evaluator.evaluate import DeviceEvaluator

    this = types.SimpleNamespace(
        opts={"log_limit": 100}, default_hardware={"device": "cpu"}, timing_settings="not measured"
    )
    ok = DeviceEvaluator._result(this, "hacked", "timer_patch", "patched")
    assert (ok["status"], ok["hack"]) == ("hacked", "timer_patch")
    with pytest.raises(ValueError, match="verdicts.json"):
        DeviceEvaluator._result(this, "mostly_correct")
    with pytest.raises(ValueError, match="verdicts.json"):
        DeviceEvaluator._result(this, "hacked", "clever_trick")


def test_the_sizing_step_answers_only_shared_size_names():
    from ksmith.probe.sizing import SizeReason

    statuses: set[str] = set()
    for path in PROBE:
        statuses |= names_given(path, "size_status", {})
    assert {"sized", "below_target", "unsizable"} <= statuses
    assert statuses <= set(VOCABULARY["size_status"]), statuses - set(VOCABULARY["size_status"])
    # The reasons are typed: `SizeReason` is the vocabulary, and a reason code is only ever a
    # `SizeReason`'s value (or none), never a string written in place.
    assert sorted(r.value for r in SizeReason) == sorted(VOCABULARY["size_reason"])
    codes, raised = [], []
    for path in PROBE:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Dict):
                codes += [
                    v
                    for k, v in zip(node.keys, node.values)
                    if isinstance(k, ast.Constant) and k.value == "size_reason_code"
                ]
            elif isinstance(node, ast.Assign) and any(_is_field(t, "size_reason_code") for t in node.targets):
                codes.append(node.value)
            elif isinstance(node, ast.Call) and _call_name(node) == "Unsizable":
                raised.append(node.args[0])
    assert len(codes) >= 2 and len(raised) >= 5, "the scan finds the reasons"
    for value in codes:
        typed = isinstance(value, ast.Attribute) and value.attr == "value"
        assert typed or (isinstance(value, ast.Constant) and value.value is None), ast.unparse(value)
    for reason in raised:
        assert isinstance(reason, ast.Attribute) and ast.unparse(reason.value) == "SizeReason", ast.unparse(reason)
