"""The tables of `scripts/multi_gpu_bench.sh`: per run (GPUs, teacher latency) the rollout's
rate in a fixed window, each GPU's busy share, and where the time of a step went.

    python3 scripts/rollout_scaling_table.py RUN_DIR [RUN_DIR ...]

A run folder holds `meta.json` (gpus, first_gpu, latency, window_start_s, window_s: the window of steps
counted, from the first step's start), `work/` (the rollout's work directory: `steps.parquet`,
`reports/rollout.json`) and `smi.log` (lines `<epoch seconds> <index>, <utilization %> ...`
sampled from nvidia-smi while the rollout ran). Rates count the steps (and candidates: steps
the evaluator judged) that finished inside the window, so the pool's start and the drain after
the time budget are left out; "x 1 GPU" divides by the rate of the 1-GPU run at the same latency.

A task's first evaluation also builds its reference and its `torch.compile` baseline; in a run of
40 iterations a task pays that once, but a short bench window is full of first evaluations. So
each run is also measured in its steady window: from the moment every task that started before
the window's end had finished its first step, to the window's end ("steady" columns; `-` when
that window is shorter than `STEADY_MIN_S`).

Timing quality, per run: what a busy GPU gate does to the figures (a start stopped beside a
timing, `gate`): the timed candidates' coefficient of variation, the share measured again
(noisy or a slow minority) and left noisy, the timed candidates with a measurement whose slow
calls the reference beside them showed alike (`timing.interfered`), `timing_anomaly` verdicts,
and, between builds (labels) that timed the same program of the same task, how far their speedups differ.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import pyarrow.parquet as pq

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))

from ksmith.evaluator.evaluate import PHASES as EVAL_PHASES  # noqa: E402

#: The pool's queue, then the evaluator's phases in the order of an evaluation.
PHASES = ("queue", *EVAL_PHASES)

#: The shortest steady window (seconds) whose rate is reported.
STEADY_MIN_S = 30.0


def load(run: str) -> dict[str, Any]:
    meta = json.load(open(os.path.join(run, "meta.json")))
    work = os.path.join(run, "work")
    table = pq.read_table(os.path.join(work, "steps.parquet"))
    names = ["task_id", "started_at_ms", "finished_at_ms", "eval_status"]
    names += [c for c in ("program", "speedup", "eval_json") if c in table.column_names]
    steps = table.select(names).to_pylist()
    report = json.load(open(os.path.join(work, "reports", "rollout.json")))
    counters: dict[str, int] = report.get("counters", {})
    out: dict[str, Any] = {"meta": meta, "counters": counters, "steps_total": len(steps)}
    out["timing"] = timing_quality(steps)
    out["speedups"] = {(s["task_id"], s["program"]): s["speedup"] for s in steps if s.get("speedup")}
    if not steps:
        return out
    t0 = min(s["started_at_ms"] for s in steps) / 1000
    w0, w1 = t0 + meta["window_start_s"], t0 + meta["window_s"]
    out["steps_per_min"], out["candidates_per_min"] = rates(steps, w0, w1)
    out["window"] = (w0, w1)
    first = int(meta.get("first_gpu", 0))
    gpus = range(first, first + int(meta["gpus"]))
    out["smi"] = smi_shares(os.path.join(run, "smi.log"), w0, w1, gpus)
    out["cpu"] = cpu_busy(os.path.join(run, "cpu.log"), w0, w1)
    s0 = max(w0, steady_start(steps, w1))
    out["steady_s"] = w1 - s0
    if w1 - s0 >= STEADY_MIN_S:
        out["steady_steps_per_min"], out["steady_candidates_per_min"] = rates(steps, s0, w1)
        out["steady_smi"] = smi_shares(os.path.join(run, "smi.log"), s0, w1, gpus)
    return out


def rates(steps: list[dict[str, Any]], t0: float, t1: float) -> tuple[float, float]:
    """Steps, and candidates (steps the evaluator judged), finishing in [t0, t1], per minute."""
    inside = [s for s in steps if t0 <= s["finished_at_ms"] / 1000 <= t1]
    minutes = (t1 - t0) / 60
    return len(inside) / minutes, sum(1 for s in inside if s["eval_status"] is not None) / minutes


def steady_start(steps: list[dict[str, Any]], w1: float) -> float:
    """When every task that started a step before `w1` had finished its first step (epoch
    seconds; `w1` when one had not)."""
    first_done: dict[str, float] = {}
    for s in steps:
        if s["started_at_ms"] / 1000 > w1:
            continue
        t = s["finished_at_ms"] / 1000
        first_done[s["task_id"]] = min(t, first_done.get(s["task_id"], t))
    return min(w1, max(first_done.values(), default=w1))


def smi_shares(path: str, w0: float, w1: float, gpus: range) -> list[tuple[float, float]]:
    """Per GPU used (its nvidia-smi indices `gpus`): the mean utilization in the window (the
    share of time a kernel ran, as nvidia-smi samples it) and the share of samples with any."""
    samples: dict[int, list[float]] = {i: [] for i in gpus}
    if os.path.exists(path):
        for line in open(path):
            head, _, rest = line.strip().partition(" ")
            try:
                t = float(head)
            except ValueError:
                continue
            if not (w0 <= t <= w1):
                continue
            for pair in rest.split(";"):
                idx, _, util = pair.partition(",")
                try:
                    i, u = int(idx), float(util)
                except ValueError:
                    continue
                if i in samples:
                    samples[i].append(u)
    return [
        (sum(v) / len(v) / 100, sum(1 for u in v if u > 0) / len(v)) if v else (float("nan"), float("nan"))
        for _, v in sorted(samples.items())
    ]


def cpu_busy(path: str, w0: float, w1: float) -> float:
    """The host's CPU busy share in the window: from `cpu.log` (lines `<epoch seconds> cpu <user>
    <nice> <system> <idle> <iowait> ...`, /proc/stat's first line), the time not idle or waiting
    on I/O over all time between the first and the last sample inside the window (NaN with fewer
    than two)."""
    inside: list[list[int]] = []
    if os.path.exists(path):
        for line in open(path):
            parts = line.split()
            try:
                t, ticks = float(parts[0]), [int(x) for x in parts[2:]]
            except (ValueError, IndexError):
                continue
            if w0 <= t <= w1 and len(ticks) >= 5:
                inside.append(ticks)
    if len(inside) < 2:
        return float("nan")
    delta = [b - a for a, b in zip(inside[0], inside[-1], strict=False)]
    total = sum(delta)
    return (total - delta[3] - delta[4]) / total if total > 0 else float("nan")


def quantile(xs: list[float], q: float) -> float:
    """The `q` quantile of `xs` (nearest rank; NaN when empty)."""
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def timing_quality(steps: list[dict[str, Any]]) -> dict[str, float]:
    """Over the steps whose evaluation was timed: how many, their candidates' median and 90th
    percentile CV, the shares measured more than once, left noisy, and with a measurement whose slow
    calls the reference beside it showed alike (`interfered`), and the `timing_anomaly` verdicts
    among all judged steps."""
    cvs, again, noisy, shared, anomalies = [], 0, 0, 0, 0
    for s in steps:
        result = json.loads(s["eval_json"]) if s.get("eval_json") else {}
        anomalies += result.get("hack") == "timing_anomaly"
        t = result.get("candidate_timing")
        if not t:
            continue
        cvs.append(float(t.get("cv", float("nan"))))
        again += len(t.get("rounds", [])) > 1
        noisy += bool(t.get("noisy"))
        shared += any(r.get("interfered") for r in t.get("rounds", []))
    n = len(cvs)
    return {
        "timed": n,
        "cv_median": quantile(cvs, 0.5),
        "cv_p90": quantile(cvs, 0.9),
        "remeasured": again / n if n else float("nan"),
        "noisy": noisy / n if n else float("nan"),
        "interfered": shared,
        "anomalies": anomalies,
    }


def speedup_gaps(data: list[dict[str, Any]]) -> list[tuple[str, str, int, float, float]]:
    """For each two builds (labels) at one latency: the programs of the same task both timed,
    and the median and 90th percentile of |speedup a / speedup b - 1| over them."""
    by: dict[tuple[str, str], dict[tuple[str, str], float]] = {}
    for d in data:
        key = (d["meta"].get("label", ""), d["meta"]["latency"])
        by.setdefault(key, {}).update(d.get("speedups", {}))
    out = []
    keys = sorted(by)
    for i, (la, lat) in enumerate(keys):
        for lb, lat_b in keys[i + 1 :]:
            if lat_b != lat:
                continue
            a, b = by[(la, lat)], by[(lb, lat)]
            gaps = [abs(a[k] / b[k] - 1) for k in a.keys() & b.keys()]
            out.append((f"{la or '-'} / {lb or '-'}", lat, len(gaps), quantile(gaps, 0.5), quantile(gaps, 0.9)))
    return out


def fmt(x: float, spec: str = ".1f") -> str:
    return "-" if x != x else format(x, spec)


def fmt_smi(shares: list[tuple[float, float]]) -> str:
    """Each GPU's mean utilization and share of samples with a kernel, as `21% (63%); ...`."""
    return "; ".join(f"{fmt(u * 100, '.0f')}% ({fmt(s * 100, '.0f')}%)" for u, s in shares)


def one_gpu_rates(data: list[dict[str, Any]], key: str) -> dict[tuple[str, str], float | None]:
    """The rate `key` of each (label, latency)'s 1-GPU run: what "x 1 GPU" divides by."""
    return {(d["meta"].get("label", ""), d["meta"]["latency"]): d.get(key) for d in data if int(d["meta"]["gpus"]) == 1}


def main(runs: list[str]) -> int:
    data = [load(r) for r in runs]
    base = one_gpu_rates(data, "steps_per_min")
    steady_base = one_gpu_rates(data, "steady_steps_per_min")
    print(
        "| build | GPUs | teacher latency s | tasks in flight | evals at once per GPU | steps/min | candidates/min |"
        " x 1 GPU (steps) | GPU busy (nvidia-smi mean util; share of samples > 0) |"
        " pool: busy share per device | pool: idle without work s per device | devices failed |"
        " steady window s | steady steps/min | steady candidates/min | steady x 1 GPU | steady GPU busy |"
        " host CPU busy |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for d in data:
        m, c = d["meta"], d["counters"]
        gpus = int(m["gpus"])
        first = int(m.get("first_gpu", 0))
        labels = [f"cuda:{i}" for i in range(first, first + gpus)]
        smi = fmt_smi(d.get("smi", []))
        busy = ", ".join(fmt(c.get(f"eval_device/{lb}/busy_permille", 0) / 10, ".0f") + "%" for lb in labels)
        idle = ", ".join(fmt(c.get(f"eval_device/{lb}/idle_no_work_ms", 0) / 1000, ".0f") for lb in labels)
        rate = d.get("steps_per_min", float("nan"))
        one = base.get((m.get("label", ""), m["latency"]))
        ratio = rate / one if one else float("nan")
        nan = float("nan")
        steady = d.get("steady_steps_per_min", nan)
        steady_one = steady_base.get((m.get("label", ""), m["latency"]))
        steady_ratio = steady / steady_one if steady_one and steady == steady else nan
        steady_smi = fmt_smi(d.get("steady_smi", []))
        print(
            f"| {m.get('label', '') or '-'} | {gpus} | {m['latency']} | {c.get('rollout_in_flight', '-')} |"
            f" {m['inflight']} | {fmt(rate)} |"
            f" {fmt(d.get('candidates_per_min', float('nan')))} | {fmt(ratio, '.2f')} | {smi} | {busy} | {idle} |"
            f" {c.get('eval_devices_failed', '-')} | {fmt(d.get('steady_s', nan), '.0f')} | {fmt(steady)} |"
            f" {fmt(d.get('steady_candidates_per_min', nan))} | {fmt(steady_ratio, '.2f')} | {steady_smi or '-'} |"
            f" {fmt(d.get('cpu', nan) * 100, '.0f')}% |"
        )
    print()
    print("Where the time went, mean seconds per evaluation (the evaluator's phases; gate_wait is also")
    print("inside reference, compile, correctness and timing_check) and per step (teacher wait, evaluation")
    print("as the rollout saw it):")
    print()
    print("| build | GPUs | latency | evals | " + " | ".join(PHASES) + " | step: teacher wait | step: evaluation |")
    print("|---|---|---|---|" + "---|" * (len(PHASES) + 2))
    for d in data:
        m, c = d["meta"], d["counters"]
        n = max(1, c.get("eval_profiled", 0))
        phases = " | ".join(fmt(c.get(f"eval_phase_ms/{p}", 0) / 1000 / n, ".2f") for p in PHASES)
        tw = c.get("step_phase_ms/teacher_wait", 0) / 1000 / max(1, c.get("step_phase_calls/teacher_wait", 0))
        ev = c.get("step_phase_ms/evaluation", 0) / 1000 / max(1, c.get("step_phase_calls/evaluation", 0))
        print(
            f"| {m.get('label', '') or '-'} | {m['gpus']} | {m['latency']} | {c.get('eval_profiled', 0)} | {phases} |"
            f" {fmt(tw, '.2f')} | {fmt(ev, '.2f')} |"
        )
    print()
    print("Timing quality (timed candidates' CV; shares measured again and left noisy; timing_anomaly verdicts):")
    print()
    print("| build | GPUs | latency | timed | CV median | CV p90 | re-measured | noisy | interfered | timing_anomaly |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for d in data:
        m, t = d["meta"], d["timing"]
        print(
            f"| {m.get('label', '') or '-'} | {m['gpus']} | {m['latency']} | {t['timed']} |"
            f" {fmt(t['cv_median'] * 100, '.2f')}% | {fmt(t['cv_p90'] * 100, '.2f')}% |"
            f" {fmt(t['remeasured'] * 100, '.0f')}% | {fmt(t['noisy'] * 100, '.0f')}% | {t['interfered']} |"
            f" {t['anomalies']} |"
        )
    gaps = speedup_gaps(data)
    if gaps:
        print()
        print("The same program of the same task timed by two builds: |speedup a / speedup b - 1|")
        print()
        print("| builds | latency | programs | median | p90 |")
        print("|---|---|---|---|---|")
        for pair, lat, n, med, p90 in gaps:
            print(f"| {pair} | {lat} | {n} | {fmt(med * 100, '.2f')}% | {fmt(p90 * 100, '.2f')}% |")
    return 0


if __name__ == "__main__":
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        raise SystemExit(2)
    raise SystemExit(main(sys.argv[1:]))
