#!/usr/bin/env python3
"""Whether every task of a work directory can be built by the evaluator and means something: the
closing-note check of issue 29 ("0 tasks the evaluator cannot build; 0 degenerate tasks").

For each row of WORKDIR/tasks.parquet, on the CPU at the task's smallest recorded size set (as
the CPU evaluator judges it):

- `evaluator`: one sandboxed evaluator worker (`ksmith.evaluator.launched`, static checks on)
  judges a candidate whose Triton kernel copies the first input. `broken` is a reference the
  evaluator refuses to build (its error); `correct` means the copy passes, so the task's output
  is (within tolerance) its first input: degenerate. Anything else (`incorrect`, a shape
  mismatch) is the expected verdict for a real task.
- `probe`: in a child process per task (killed after --timeout seconds), the task is built as
  the evaluator builds it (`TaskProgram`: `Model(*get_init_inputs())`, seeded weights, trial
  inputs from `make_inputs`) and flagged when its output is nondeterministic (two calls on the
  same inputs differ), input-independent (inputs of two trial seeds give equal outputs),
  constant (every element equal), not finite, or close to one of its inputs (rtol = atol = 1e-2).

    python scripts/task_buildcheck.py WORKDIR [--timeout S] [--json OUT.jsonl]

Prints one line per flagged task and a summary table; needs bubblewrap (the evaluator's sandbox).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

PYTHON_ROOT = Path(__file__).resolve().parent.parent / "python"

# A candidate that passes the static checks and launches one Triton kernel: a copy of input 0.
COPY_CANDIDATE = """import torch
import triton
import triton.language as tl


@triton.jit
def copy_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask), mask=mask)


class ModelNew(torch.nn.Module):
    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, x, *rest):
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        copy_kernel[(triton.cdiv(n, 1024),)](x, y, n, BLOCK=1024)
        return y
"""

FLAGS = ("nondeterministic", "input_independent", "constant", "not_finite", "equals_input")


def size_sets(row: dict[str, Any]) -> list[dict[str, int]]:
    """The task's recorded size sets (none when it has none)."""
    return json.loads(row["alt_sizes"]) if row.get("alt_sizes") else []


def probe_one(tasks: Path, index: int) -> dict[str, Any]:
    """Builds task `index` the evaluator's way at its smallest size set and reports its flags."""
    import torch
    from ksmith.evaluator import shapes
    from ksmith.evaluator.task import TaskProgram

    row = pq.read_table(tasks).to_pylist()[index]
    sets = size_sets(row)
    primary = shapes.smallest(row["program"], sets)[0] if sets else None
    source = shapes.rewritten(row["program"], primary) if primary else row["program"]

    def flat(value: Any) -> list[torch.Tensor]:
        if isinstance(value, torch.Tensor):
            return [value]
        if isinstance(value, (list, tuple)):
            return [t for v in value for t in flat(v)]
        return []

    with tempfile.TemporaryDirectory() as d:
        program = TaskProgram(source, d, 1234, "cpu")
        model = program.build_model()
        with torch.no_grad():
            x0, x1 = program.inputs(0), program.inputs(1)
            y0, y0_again, y1 = flat(model(*x0)), flat(model(*x0)), flat(model(*x1))
    inputs = flat(x0)
    return {
        "sizes": primary,
        "nondeterministic": any(not torch.equal(a, b) for a, b in zip(y0, y0_again)),
        "input_independent": all(a.shape == b.shape and torch.equal(a, b) for a, b in zip(y0, y1)),
        "constant": all(t.numel() <= 1 or bool((t == t.flatten()[0]).all()) for t in y0),
        "not_finite": any(t.is_floating_point() and not bool(torch.isfinite(t).all()) for t in y0),
        "equals_input": any(
            a.shape == b.shape
            and a.dtype == b.dtype
            and a.is_floating_point()
            and torch.allclose(a, b, rtol=1e-2, atol=1e-2)
            for a in y0
            for b in inputs
        ),
    }


def probe_all(tasks: Path, n: int, timeout: float) -> list[dict[str, Any]]:
    """`probe_one` for every task, each in its own process."""
    out = []
    for i in range(n):
        cmd = [sys.executable, __file__, "--probe-one", str(tasks), str(i)]
        env = {**os.environ, "PYTHONPATH": str(PYTHON_ROOT)}
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
        except subprocess.TimeoutExpired:
            out.append({"error": f"timed out after {timeout:.0f} s"})
            continue
        last = done.stdout.strip().splitlines()[-1:] if done.stdout.strip() else []
        if done.returncode != 0 or not last:
            out.append({"error": (done.stderr.strip().splitlines() or ["no output"])[-1][:300]})
            continue
        out.append(json.loads(last[0]))
    return out


def evaluate_all(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The evaluator's verdict on the copy candidate for every task (one sandboxed worker)."""
    sys.path.insert(0, str(PYTHON_ROOT))
    from ksmith.evaluator.evaluate import BrokenReference
    from ksmith.evaluator.launched import LaunchedWorker

    worker = LaunchedWorker("cpu", {"seed": 1}, request_timeout_s=900)
    out = []
    try:
        for row in rows:
            request = {"task_id": row["task_id"], "reference": row["program"], "candidate": COPY_CANDIDATE}
            request.update(measure=False, alt_sizes=size_sets(row))
            try:
                res = worker.evaluate(request)
            except BrokenReference as e:
                last = [line for line in str(e).splitlines() if line.strip()][-1:] or ["(no message)"]
                out.append({"verdict": "broken", "message": last[0].strip()[:300]})
                continue
            out.append({"verdict": res["status"], "message": (res.get("error_log") or "")[:200]})
    finally:
        worker.close()
    return out


def main() -> None:
    if len(sys.argv) == 4 and sys.argv[1] == "--probe-one":
        print(json.dumps(probe_one(Path(sys.argv[2]), int(sys.argv[3]))))
        return
    ap = argparse.ArgumentParser()
    ap.add_argument("workdir", type=Path)
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per task for the probe check")
    ap.add_argument("--json", type=Path, help="also write one JSON line per task here")
    args = ap.parse_args()
    tasks = args.workdir / "tasks.parquet"
    if not tasks.exists():
        sys.exit(f"{tasks}: no such file (run the pipeline through `cluster` first)")
    rows = pq.read_table(tasks).to_pylist()
    verdicts = evaluate_all(rows)
    probes = probe_all(tasks, len(rows), args.timeout)
    count: Counter[str] = Counter()
    lines = []
    for row, v, p in zip(rows, verdicts, probes):
        flags = [f for f in FLAGS if p.get(f)]
        if v["verdict"] == "correct":
            flags.append("copy_of_input_passes")
        count[f"evaluator:{v['verdict']}"] += 1
        count["probe_error"] += "error" in p
        count["degenerate"] += bool(flags)
        for f in flags:
            count[f] += 1
        if flags or v["verdict"] == "broken" or "error" in p:
            what = ", ".join(flags) or v.get("message") or p.get("error")
            print(f"{row['task_id'][:12]} {row['repo']} {row['class_name']}: {v['verdict']}; {what}")
        lines.append({"task_id": row["task_id"], "repo": row["repo"], "class_name": row["class_name"], **v, **p})
    if args.json:
        args.json.write_text("".join(json.dumps(line) + "\n" for line in lines))
    print(f"\n| tasks | evaluator cannot build | probe check failed | degenerate | {' | '.join(FLAGS)} |")
    print("|" + "---|" * (4 + len(FLAGS)))
    cells = [len(rows), count["evaluator:broken"], count["probe_error"], count["degenerate"]]
    cells += [count[f] for f in FLAGS]
    print("| " + " | ".join(str(c) for c in cells) + " |")
    verdict_counts = [
        f"{k.removeprefix('evaluator:')} {v}" for k, v in sorted(count.items()) if k.startswith("evaluator:")
    ]
    print("evaluator verdicts on the copy candidate: " + ", ".join(verdict_counts))


if __name__ == "__main__":
    main()
