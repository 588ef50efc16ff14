#!/usr/bin/env python3
"""CPU bench of the evaluator (Triton's interpreter): seconds per candidate and per reference build.

    python scripts/eval_cpu_bench.py [--old DIR] [--repeats 3]

Evaluates the five honest kernels of python/tests/candidates `--repeats` times each (each a distinct
program text), references cached, 5 trials, and prints the median seconds per candidate and per
reference build (the first build, which starts the fork server, apart). With `--old DIR` (the
`python/` folder of another revision, e.g. `git archive <rev> python | tar -x -C /tmp/old`), the
same runs with that revision's evaluator first, in the same run, and the ratio. Each evaluator runs
in its own process.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CAND = os.path.join(ROOT, "python", "tests", "candidates")
PAIRS = [
    ("honest/elementwise.py", "tasks/elementwise.py"),
    ("honest/softmax.py", "tasks/softmax.py"),
    ("honest/layernorm.py", "tasks/layernorm.py"),
    ("honest/matmul.py", "tasks/matmul.py"),
    ("honest/fused_linear.py", "tasks/fused_linear.py"),
]
CHILD = r"""
import json, sys, time
sys.path.insert(0, sys.argv[1])
from ksmith.evaluator.evaluate import DeviceEvaluator
pairs, cand, repeats = json.loads(sys.argv[2]), sys.argv[3], int(sys.argv[4])
ev = DeviceEvaluator("cpu", {"trials": 5, "run_timeout_s": 60, "memory_limit_mb": 4096})
out = []
for c, t in pairs:
    ref = open(f"{cand}/{t}").read()
    t0 = time.monotonic()
    ev.reference(t, ref)
    out.append({"what": "build", "seconds": time.monotonic() - t0})
    for i in range(repeats):
        src = open(f"{cand}/{c}").read() + f"\n# program {i}\n"
        t0 = time.monotonic()
        r = ev.evaluate({"task_id": t, "reference": ref, "candidate": src, "measure": False})
        out.append({"what": c, "seconds": time.monotonic() - t0, "status": r["status"]})
ev.close()
print(json.dumps(out))
"""


def measure(python_dir: str, repeats: int) -> list[dict[str, Any]]:
    done = subprocess.run(
        [sys.executable, "-c", CHILD, python_dir, json.dumps(PAIRS), CAND, str(repeats)],
        capture_output=True,
        text=True,
        check=True,
    )
    rows: list[dict[str, Any]] = json.loads(done.stdout.strip().splitlines()[-1])
    return rows


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--old", help="the python/ folder of another revision, measured first")
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()
    runs = ([("old", a.old)] if a.old else []) + [("this", os.path.join(ROOT, "python"))]
    medians = {}
    print("| evaluator | candidates | median s per candidate | reference builds | median s per build (first) |")
    print("|---|---|---|---|---|")
    for name, folder in runs:
        rows = measure(folder, a.repeats)
        cands = [r for r in rows if r["what"] != "build"]
        builds = [r["seconds"] for r in rows if r["what"] == "build"]
        bad = [r for r in cands if r["status"] != "correct"]
        medians[name] = statistics.median(r["seconds"] for r in cands)
        print(
            f"| {name} | {len(cands)} ({len(bad)} not correct) | {medians[name]:.2f} | {len(builds)} | "
            f"{statistics.median(builds[1:]):.2f} ({builds[0]:.2f}) |"
        )
    if a.old:
        print(f"\nper candidate, old / this: {medians['old'] / medians['this']:.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
