"""The probe runner's defaults are `ksmith/probe/defaults.json`, the file `ProbeConfig::default`
embeds (a Rust test checks a default request carries exactly its values): every value in it is
what the runner takes for a request that leaves it out, and the runner has no other default."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import json
import os
import pathlib
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from ksmith.probe import DEFAULTS, execute, sandbox  # noqa: E402
from ksmith.probe.sizing import Targets  # noqa: E402

PROBE = pathlib.Path(execute.__file__).parent


def test_defaults_are_the_file():
    assert json.loads((PROBE / "defaults.json").read_text()) == DEFAULTS


def test_the_sizing_targets_default_to_the_file():
    file = {k: v for k, v in DEFAULTS["sizing"].items() if k != "enabled"}
    assert dataclasses.asdict(Targets()) == file
    assert Targets.from_request({}) == Targets()


def test_the_repair_search_defaults_to_the_file():
    params = inspect.signature(execute.Probe.__init__).parameters
    assert (params["max_steps"].default, params["restarts"].default) == (DEFAULTS["max_steps"], DEFAULTS["restarts"])


def test_every_request_value_the_runner_reads_falls_back_to_the_file():
    read = set()
    for module in (execute, sandbox):
        for node in ast.walk(ast.parse(inspect.getsource(module))):
            # `request.get("key", <fallback>)`: the fallback must be the file's.
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "get"
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id == "request"
                and len(node.args) == 2
            ):
                key = node.args[0].value  # type: ignore[attr-defined]
                fallback = ast.unparse(node.args[1])
                assert fallback == f"DEFAULTS['{key}']", f"{module.__name__}: {key} falls back to {fallback}"
                read.add(key)
    assert read == {k for k in DEFAULTS if k != "sizing"}
