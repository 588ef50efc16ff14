#!/usr/bin/env python3
"""The funnel of a work directory, per repository: classes -> programs -> runnable -> sized ->
tasks, the classes that are no task by policy (`too_small`: the probe's sizing reaches the work
target only past `max_structural_scale` of the repository's sizes; `single_op`: the forward runs
one compute operator, `[cluster] single_op_tasks`), each listed with its reason, whole-model
classes and how many of them become tasks, the share of constructor
arguments that come from the repository's own call sites, and the share that come from the
repository either way: a call site, or a model of the repository that built the class when it ran
(a probe row whose first repair step is `observed: ...`).

A whole-model class is an `nn.Module` class that no other class of its repository instantiates
(its name is not called in the body of another class, wherever that class is defined: classes of
the same name in different files are told apart by their file) and that builds at least two
submodules in `__init__` (`self.x = Something(...)`, capitalized callee other than a parameter or
a tensor: `nn.Parameter(...)` is no submodule). Read from the snapshots
with `ast` (parsed, never run). Each whole-model class is listed with where it stops (`task`, or
the stage and reason that lost it).

    python scripts/task_funnel.py WORKDIR [--programs N] [--seed S]

With `--programs N`, also prints N tasks drawn at random (seeded) for reading.
"""

from __future__ import annotations

import argparse
import ast
import json
import random
from collections import defaultdict
from pathlib import Path

import pyarrow.parquet as pq


def table(workdir: Path, name: str) -> list[dict]:
    path = workdir / f"{name}.parquet"
    return pq.read_table(path).to_pylist() if path.exists() else []


#: Capitalized callees that build a parameter or a tensor, not a submodule.
NOT_SUBMODULES = frozenset({"Parameter", "Buffer", "Tensor", "FloatTensor", "LongTensor", "BoolTensor", "Size"})


def class_facts(source: str) -> dict[str, tuple[set[str], int]]:
    """Per class: the capitalized names its body calls, and how many submodules `__init__`
    assigns."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return {}
    out = {}
    for node in ast.walk(tree):
        if not isinstance(node, ast.ClassDef):
            continue
        calls = set()
        for n in ast.walk(node):
            if isinstance(n, ast.Call):
                f = n.func
                name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None
                if name and name[:1].isupper():
                    calls.add(name)
        subs = 0
        for item in node.body:
            if isinstance(item, ast.FunctionDef) and item.name == "__init__":
                for n in ast.walk(item):
                    if isinstance(n, ast.Assign) and any(
                        isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self"
                        for t in n.targets
                    ):
                        v = n.value
                        if isinstance(v, ast.Call):
                            f = v.func
                            callee = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
                            if callee[:1].isupper() and callee not in NOT_SUBMODULES:
                                subs += 1
        out[node.name] = (calls, subs)
    return out


def str_starts(items, prefix: str) -> bool:
    """Whether the first of ``items`` (a list of strings, possibly empty) starts with ``prefix``."""
    return len(items) > 0 and str(items[0]).startswith(prefix)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("workdir", type=Path)
    ap.add_argument("--programs", type=int, default=0)
    ap.add_argument("--seed", type=int, default=29)
    args = ap.parse_args()
    repos = {r["repo"]: r for r in table(args.workdir, "repos")}
    modules = [m for m in table(args.workdir, "modules") if m["class_name"]]
    probes = {p["module_id"]: p for p in table(args.workdir, "probes")}
    tasks = {t["task_id"]: t for t in table(args.workdir, "tasks")}
    clusters = {c["module_id"]: c for c in table(args.workdir, "clusters")}
    policy: list[str] = []
    # Per repository: (file, class) -> (capitalized names it calls, submodules in __init__).
    facts: dict[str, dict[tuple[str, str], tuple[set[str], int]]] = defaultdict(dict)
    for name, repo in repos.items():
        root = args.workdir / (repo.get("snapshot") or "")
        for path in repo.get("files") or []:
            try:
                source = (root / path).read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                continue
            for cls, fact in class_facts(source).items():
                facts[name][(path, cls)] = fact
    rows: defaultdict[str, defaultdict[str, int]] = defaultdict(lambda: defaultdict(int))
    whole_lists = defaultdict(list)
    reasons: defaultdict[str, defaultdict[str, int]] = defaultdict(lambda: defaultdict(int))
    for m in modules:
        r = rows[m["repo"]]
        r["classes"] += 1
        repo_facts = facts[m["repo"]]
        called_elsewhere = any(
            m["class_name"] in calls
            for (path, cls), (calls, _) in repo_facts.items()
            if (path, cls) != (m["path"], m["class_name"])
        )
        subs = repo_facts.get((m["path"], m["class_name"]), (set(), 0))[1]
        whole = not called_elsewhere and subs >= 2
        r["whole"] += whole
        p = probes.get(m["id"])
        fate = ""
        if m["status"] != "ok":
            reasons[m["repo"]][f"extract:{m['reason_code']}"] += 1
            fate = f"extract:{m['reason_code']}"
        else:
            r["programs"] += 1
            observed = p is not None and p["status"] == "ok" and str_starts(p["repair_steps"], "observed: ")
            for src in m.get("arg_sources") or []:
                r["args"] += 1
                r["args_call"] += ": call " in src
                r["args_repo"] += observed or ": call " in src
            r["observed"] += observed and m["id"] in tasks
            if p is None:
                fate = "not probed"
            elif p["status"] != "ok":
                reasons[m["repo"]][f"probe:{p['status']}:{p['error_class']}"] += 1
                fate = f"probe:{p['status']}:{p['error_class']}"
            else:
                r["runnable"] += 1
                sized = p["size_status"] in ("sized", "below_target")
                r["sized"] += sized
                if p["size_reason_code"] == "too_small":
                    r["too_small"] += 1
                    policy.append(f"too_small: {m['repo']} {m['class_name']} ({m['path']}): {p['size_reason']}")
                trivial = (clusters.get(m["id"]) or {}).get("trivial") or ""
                if trivial.startswith("single_op:") and m["id"] not in tasks:
                    r["single_op"] += 1
                    policy.append(f"single_op: {m['repo']} {m['class_name']} ({m['path']}): {trivial}")
                r["whole_runnable_sized"] += whole and sized
                in_task = m["id"] in tasks
                r["tasks"] += in_task
                r["whole_tasks"] += whole and in_task
                fate = "task" if in_task else "sized, not a task" if sized else f"size:{p['size_status']}"
        if whole:
            whole_lists[m["repo"]].append(f"{m['class_name']} ({m['path']}: {fate})")
    cols = [
        "classes",
        "programs",
        "runnable",
        "sized",
        "tasks",
        "too_small",
        "single_op",
        "whole",
        "whole_runnable_sized",
        "whole_tasks",
        "observed",
    ]
    print("| repository | " + " | ".join(cols) + " | args from call sites | args from call sites or observed |")
    print("|" + "---|" * (len(cols) + 3))
    total: defaultdict[str, int] = defaultdict(int)
    for repo_name in sorted(rows):
        r = rows[repo_name]
        for c in cols + ["args", "args_call", "args_repo"]:
            total[c] += r[c]
    for repo_name, r in [*sorted(rows.items()), ("total", total)]:
        shares = f"{r['args_call']}/{r['args']} | {r['args_repo']}/{r['args']}"
        print(f"| {repo_name} | " + " | ".join(str(r[c]) for c in cols) + f" | {shares} |")
    print()
    for repo_name in sorted(whole_lists):
        print(f"whole models of {repo_name}: {', '.join(sorted(whole_lists[repo_name]))}")
    print()
    for line in sorted(policy):
        print(f"no task by policy, {line}")
    print()
    for repo_name in sorted(reasons):
        top = sorted(reasons[repo_name].items(), key=lambda kv: -kv[1])[:8]
        print(f"not passing in {repo_name}: " + ", ".join(f"{k} {v}" for k, v in top))
    if args.programs:
        rng = random.Random(args.seed)
        chosen = rng.sample(sorted(tasks), min(args.programs, len(tasks)))
        for tid in chosen:
            t = tasks[tid]
            p = probes.get(tid, {})
            print("=" * 100)
            print(json.dumps({k: t[k] for k in ("repo", "class_name", "family", "level")}), p.get("sizes"))
            print(t["program"])


if __name__ == "__main__":
    main()
