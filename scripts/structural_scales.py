#!/usr/bin/env python3
"""How much the probe's sizing grew each task's constructor sizes: for every task of a work
directory, the factor from a constructor argument's value before sizing (the observed
configuration's `get_init_inputs()` for a row probed with one, else the module's program) to the
module-level constant of the same name in the sized program, with where the value came from
(`observed`, or the extractor's `call` / `default` / `guess`), largest first. The data behind
`[probe.sizing] max_structural_scale`.

Covers the constructor arguments that are knobs under their parameter's name (an input-only knob,
`dim2`, is not listed); the values are read from the programs (parsed, never run), so an argument
the repair search changed shows its original value.

    python scripts/structural_scales.py WORKDIR
"""

from __future__ import annotations

import argparse
import ast
import json
from pathlib import Path

import pyarrow.parquet as pq

#: Constructor parameters of the torch layers a program's `Model` may subclass without its own
#: `__init__` (whisper's `Linear(nn.Linear)`).
TORCH_PARAMS = {
    "nn.Linear": ["in_features", "out_features"],
    "nn.Conv1d": ["in_channels", "out_channels", "kernel_size"],
    "nn.Conv2d": ["in_channels", "out_channels", "kernel_size"],
    "nn.LayerNorm": ["normalized_shape"],
}


def init_params(program: str) -> list[str]:
    """The positional parameter names of the program's `Model.__init__`."""
    for node in ast.parse(program).body:
        if isinstance(node, ast.ClassDef) and node.name == "Model":
            for f in node.body:
                if isinstance(f, ast.FunctionDef) and f.name == "__init__":
                    return [a.arg for a in f.args.args[1:]]
            return TORCH_PARAMS.get(ast.unparse(node.bases[0]) if node.bases else "", [])
    return []


def init_values(source: str) -> list | None:
    """The literal list `get_init_inputs()` returns (its positional part), or None."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef) and node.name == "get_init_inputs":
            for ret in ast.walk(node):
                if isinstance(ret, ast.Return) and ret.value is not None:
                    try:
                        value = ast.literal_eval(ret.value)
                    except ValueError:
                        return None
                    if isinstance(value, list) and len(value) == 2 and isinstance(value[1], dict):
                        value = value[0]  # the [args, kwargs] form
                    return value if isinstance(value, list) else None
    return None


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("workdir", type=Path)
    args = ap.parse_args()
    read = lambda name: pq.read_table(args.workdir / f"{name}.parquet").to_pylist()  # noqa: E731
    modules = {m["id"]: m for m in read("modules")}
    probes = {p["module_id"]: p for p in read("probes")}
    observed: dict[str, str] = {}  # summary of an observed call -> its get_init_inputs()
    for p in probes.values():
        for sub in p["submodules"] or []:
            observed.setdefault(sub["summary"], sub["init"])
    rows = []
    for t in read("tasks"):
        p, m = probes[t["task_id"]], modules[t["task_id"]]
        sizes = json.loads(p["sizes"] or "{}")
        step = p["repair_steps"][0] if p["repair_steps"] else ""
        source = m["program"]
        if step.startswith("observed: "):
            summary = step.removeprefix("observed: ").rsplit(" in ", 1)[0].split(" (without ")[0]
            source = observed.get(summary)
        kinds = {}
        for line in m["arg_sources"] or []:
            name, _, rest = line.partition("=")
            kinds[name] = rest.partition(": ")[2].split(" ", 1)[0]
        values = init_values(source) if source else None
        names = init_params(m["program"])
        grown = []
        for i, v in enumerate(values or []):
            name = names[i] if i < len(names) else f"arg{i}"
            if type(v) is int and v >= 2 and name in sizes:
                kind = "observed" if step.startswith("observed: ") else kinds.get(name, kinds.get(f"arg{i}", "?"))
                grown.append((sizes[name] / v, name, v, sizes[name], kind))
        grown.sort(reverse=True)
        rows.append((grown[0][0] if grown else 0.0, t["repo"], t["class_name"], grown))
    rows.sort(key=lambda r: -r[0])
    for factor, repo, cls, grown in rows:
        detail = "; ".join(f"{n} {v} -> {s} ({k})" for _, n, v, s, k in grown) or "no constructor knob"
        print(f"{factor:8.2f}  {repo[:28]:28s} {cls:28s} {detail}")


if __name__ == "__main__":
    main()
