"""The torch.compile baseline as the evaluator measures it, for the adversarial suite's honest tasks.

    python scripts/compile_baseline_gpu_check.py [--device cuda] [--options JSON] [--json OUT.json]

One sandboxed evaluator worker (`ksmith.evaluator.launched`, the worker the rollout's pool runs)
evaluates each honest candidate of `python/tests/candidates/manifest.json` against its task; per
task it prints the eager reference's time, the compile baseline (mode, time, speedup over eager,
compile seconds, or why there is none), the task's speed-of-light and the shares of it that eager
and compile reach, and the honest kernel's speedups over eager and over compile (its speedup over
eager over compile's; the intervals are select's, from the same samples). Timings are
meaningful on a GPU only; on the CPU every baseline says ``cpu``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))

from ksmith.confine import Policy  # noqa: E402
from ksmith.evaluator.launched import LaunchedWorker  # noqa: E402

CAND = os.path.join(HERE, "..", "python", "tests", "candidates")


def fmt(x: float | None, spec: str = ".4f") -> str:
    return format(x, spec) if x is not None else "-"


def row(task: str, res: dict[str, Any]) -> str:
    cb = res.get("compile_baseline") or {}
    sol = (res.get("speed_of_light") or {}).get("ms")
    eager = (res.get("reference_timing") or {}).get("median_ms")
    compiled = (cb.get("timing") or {}).get("median_ms")
    speedup, over = res.get("speedup"), cb.get("speedup_over_eager")
    share = lambda ms: fmt(sol / ms, ".2f") if sol and ms else "-"  # noqa: E731
    return (
        f"| {task} | {res['status']} | {fmt(eager)} | {cb.get('mode', '-')} | {fmt(compiled)} | {fmt(over, '.3f')} | "
        f"{fmt(cb.get('compile_s'), '.1f')} | {fmt(sol)} | {share(eager)} | {share(compiled)} | "
        f"{fmt(speedup, '.3f')} | {fmt(speedup / over if speedup and over else None, '.3f')} | {cb.get('why') or ''} |"
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--options", default="{}", help="evaluator options as JSON (e.g. the compile mode)")
    ap.add_argument("--json", help="write every result here")
    a = ap.parse_args()
    manifest = json.load(open(os.path.join(CAND, "manifest.json")))
    pairs = {e["task"]: e["candidate"] for e in manifest["honest"] if "stdlib" not in e["candidate"]}
    ev = LaunchedWorker(a.device, json.loads(a.options), Policy())
    results = {}
    print(
        "| task | verdict | eager ms | compile mode | compile ms | compile / eager | compile s | SOL ms | "
        "SOL frac eager | SOL frac compile | honest / eager | honest / compile | no baseline because |\n"
        + "|---" * 13
        + "|"
    )
    try:
        for task, cand in sorted(pairs.items()):
            res = ev.evaluate(
                {
                    "task_id": task,
                    "reference": open(os.path.join(CAND, task)).read(),
                    "candidate": open(os.path.join(CAND, cand)).read(),
                    "measure": True,
                }
            )
            results[task] = res
            print(row(task, res), flush=True)
    finally:
        ev.close()
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
