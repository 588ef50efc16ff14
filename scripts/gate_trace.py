#!/usr/bin/env python3
"""Where a GPU's time goes at the gate, from the workers' traces of a rollout bench run
(`scripts/multi_gpu_bench.sh` with TRACE=1: `KSMITH_EVAL_TRACE` lines in RUN/workers/*.log).

    scripts/gate_trace.py RUN [RUN ...]

For each run and worker (one per GPU), over the run's steady window (from the first evaluation's
start, `window_start_s` to `window_s` of the run's meta.json; the same bounds the bench's
tables use, counted from the first evaluation instead of the first step):

- the evaluations that started in the window, and their mean seconds by phase;
- the timings (the gate's exclusive holds): how many, the share of the window the GPU was held
  alone (and of it, spent before the timing began: stopping the starts beside it and draining
  their GPU work), the share in which a timing held or waited for the GPU (while it does, every
  new start and short call waits), their mean wait, and those whose stopped starts did not stop
  or drain in time;
- the short calls and the starts: how many, their mean wait and hold, and the mean number of
  starts held at once;
- inside a timing's hold, the harness's mean seconds taking its samples (from its ``go``; from
  its CUDA-graph capture in traces from before the capture left the hold) and writing their
  result file after them (the rest of the hold: stopping the starts, the messages);
- the timings that left the starts they stopped stopped for the timing waiting after them;
- the harness's own clock between its marks (`MARKS`, in order; stopped time included), over the
  candidates timed in the window: where a candidate's time goes from its start to its samples.

Prints markdown tables.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import statistics
import sys
from typing import Any

PHASES = (
    "reference",
    "compile",
    "correctness",
    "timing",
    "timing_check",
    "gate_wait",
    "paused",
    "drain",
    "undrained",
    "admission",
)


#: The harness's marks in the order it makes them (`candidate_child.Harness.mark`): its imports,
#: the worker's first ``next`` (the gate's start admitted), CUDA started, the reference's graphs
#: captured, the inputs prepared, the candidate imported and compiled, the correctness calls and
#: checks, the profile, the timing's capture, the worker's ``go`` (the GPU held alone), the
#: samples and the result file.
MARKS = (
    "imports",
    "started",
    "cuda",
    "reference graphs",
    "prepare",
    "import_candidate",
    "compile",
    "trials",
    "checks",
    "profile",
    "capture",
    "go",
    "samples",
    "timing",
)


def mark_steps(timed: list[dict[str, float]]) -> dict[str, float]:
    """The mean seconds from each mark to the next one present (keyed ``a -> b``), over the
    harnesses' marks `timed`."""
    steps: dict[tuple[int, int], list[float]] = {}
    for marks in timed:
        present = [i for i, m in enumerate(MARKS) if m in marks]
        for a, b in zip(present, present[1:]):
            steps.setdefault((a, b), []).append(marks[MARKS[b]] - marks[MARKS[a]])
    return {f"{MARKS[a]} -> {MARKS[b]}": statistics.fmean(v) for (a, b), v in sorted(steps.items())}


def read_trace(path: str) -> list[dict[str, Any]]:
    """The trace lines of one worker's log (other lines skipped)."""
    out = []
    with open(path, errors="replace") as f:
        for line in f:
            if not line.startswith('{"trace"'):
                continue
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                continue  # a line cut by the copy while the worker wrote it
    return out


def covered(intervals: list[tuple[float, float]], lo: float, hi: float) -> float:
    """Seconds of [lo, hi] inside the union of `intervals`."""
    total = 0.0
    end = lo
    for a, b in sorted(intervals):
        a, b = max(a, end), min(b, hi)
        if b > a:
            total += b - a
            end = b
    return total


def clipped(a: float, b: float, lo: float, hi: float) -> float:
    return max(0.0, min(b, hi) - max(a, lo))


def summarize(lines: list[dict[str, Any]], warmup_s: float, window_s: float) -> dict[str, Any] | None:
    evals = [x for x in lines if x["trace"] == "evaluation"]
    holds = [x for x in lines if x["trace"] == "gate"]
    if not evals:
        return None
    t0 = min(x["t"] for x in evals)
    lo, hi = t0 + warmup_s, t0 + window_s
    last = max(x["t"] + x["hold_s"] for x in holds) if holds else hi
    hi = min(hi, last)
    span = hi - lo
    if span <= 0:
        return None
    steady = [x for x in evals if lo <= x["t"] < hi]
    phases = {p: statistics.fmean(x["phases"].get(p, 0.0) for x in steady) if steady else 0.0 for p in PHASES}
    excl = [x for x in holds if x["mode"] == "exclusive" and lo <= x["t"] < hi]
    shared = [x for x in holds if x["mode"] == "shared" and lo <= x["t"] < hi]
    starts = [x for x in holds if x["mode"] == "starting"]
    all_excl = [x for x in holds if x["mode"] == "exclusive"]
    timed = [
        x["phases"]
        for x in lines
        if x["trace"] == "timing_done"
        and lo <= x.get("now", lo - 1) < hi
        and {"samples", "timing"} <= set(x.get("phases") or {})
    ]

    def mean(xs: list[dict[str, Any]], key: str) -> float:
        return statistics.fmean(x[key] for x in xs) if xs else 0.0

    return {
        "window_s": span,
        "evals": len(steady),
        "evals_per_min": 60 * len(steady) / span,
        "phases": phases,
        "timings": len(excl),
        "held_alone": sum(clipped(x["t"], x["t"] + x["hold_s"], lo, hi) for x in all_excl) / span,
        "before_timing": sum(clipped(x["t"], x["t"] + x["ready_s"], lo, hi) for x in all_excl) / span,
        "timing_pending": covered([(x["t"] - x["wait_s"], x["t"] + x["hold_s"]) for x in all_excl], lo, hi) / span,
        "timing_wait": mean(excl, "wait_s"),
        "timing_ready": mean(excl, "ready_s"),
        "timing_hold": mean(excl, "hold_s"),
        "paused_per_timing": mean(excl, "paused"),
        "not_stopped": sum(1 for x in excl if not x["stopped"]),
        "not_drained": sum(1 for x in excl if x["stopped"] and not x["drained"]),
        "kept": sum(1 for x in excl if x.get("kept")),
        "shared": len(shared),
        "shared_wait": mean(shared, "wait_s"),
        "shared_hold": mean(shared, "hold_s"),
        "starts": sum(1 for x in starts if lo <= x["t"] < hi),
        "start_wait": mean([x for x in starts if lo <= x["t"] < hi], "wait_s"),
        "starts_at_once": sum(clipped(x["t"], x["t"] + x["hold_s"], lo, hi) for x in starts) / span,
        "samples_s": statistics.fmean(p["samples"] - p.get("go", p["capture"]) for p in timed) if timed else None,
        "save_s": statistics.fmean(p["timing"] - p["samples"] for p in timed) if timed else None,
        "marks": mark_steps(timed),
    }


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", help="run folders of scripts/multi_gpu_bench.sh (with workers/)")
    args = ap.parse_args(argv)
    rows = []
    for run in args.runs:
        with open(os.path.join(run, "meta.json")) as f:
            meta = json.load(f)
        logs = sorted(glob.glob(os.path.join(run, "workers", "worker-*.log")))
        if not logs:
            print(f"gate_trace: no worker log in {run}/workers (was the bench run with TRACE=1?)", file=sys.stderr)
            return 1
        for log in logs:
            s = summarize(read_trace(log), float(meta["window_start_s"]), float(meta["window_s"]))
            name = f"{meta.get('label') or '-'} {os.path.basename(run)} {os.path.basename(log)[:-4]}"
            if s is None:
                print(f"gate_trace: {log}: no evaluation traced in the window", file=sys.stderr)
                continue
            rows.append((name, s))
    if not rows:
        return 1
    print("The GPU gate in the steady window, per worker (shares of the window):\n")
    print(
        "| run, worker | window s | evals | evals/min | timings | held alone | of it before the timing "
        "| a timing holds or waits | timing: wait s | before s | hold s | starts stopped | not stopped "
        "| not drained | kept stopped for the next | short calls | wait s | hold s | starts | wait s "
        "| starts at once |"
    )
    print("|" + "---|" * 21)
    for name, s in rows:
        print(
            f"| {name} | {s['window_s']:.0f} | {s['evals']} | {s['evals_per_min']:.1f} | {s['timings']} "
            f"| {s['held_alone']:.0%} | {s['before_timing']:.0%} | {s['timing_pending']:.0%} "
            f"| {s['timing_wait']:.2f} | {s['timing_ready']:.3f} | {s['timing_hold']:.2f} "
            f"| {s['paused_per_timing']:.1f} | {s['not_stopped']} | {s['not_drained']} | {s['kept']} | {s['shared']} "
            f"| {s['shared_wait']:.2f} | {s['shared_hold']:.3f} | {s['starts']} | {s['start_wait']:.2f} "
            f"| {s['starts_at_once']:.1f} |"
        )
    print("\nInside a timing's hold, the harness's mean seconds (the rest of the hold: stopping, messages):\n")
    print("| run, worker | timing hold s | samples s | result file s |")
    print("|---|---|---|---|")
    for name, s in rows:
        if s["samples_s"] is not None:
            print(f"| {name} | {s['timing_hold']:.3f} | {s['samples_s']:.3f} | {s['save_s']:.3f} |")
    print("\nThe harness's clock between its marks, mean seconds over the candidates timed in the window:\n")
    for name, s in rows:
        if s["marks"]:
            print(f"- {name}: " + ", ".join(f"{k} {v:.2f}" for k, v in s["marks"].items()))
    print("\nMean seconds per evaluation started in the window, by phase:\n")
    print("| run, worker | " + " | ".join(PHASES) + " |")
    print("|" + "---|" * (len(PHASES) + 1))
    for name, s in rows:
        print(f"| {name} | " + " | ".join(f"{s['phases'][p]:.2f}" for p in PHASES) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
