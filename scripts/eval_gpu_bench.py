#!/usr/bin/env python3
"""GPU bench of the ksmith evaluator: verdicts, reference builds, throughput, speedup stability,
timing integrity.

Usage (from the folder holding `python/` and `scripts/`, or anywhere: paths are the script's):
    python3 scripts/eval_gpu_bench.py [--device cuda|cpu] [--out DIR] [--deadline-s 450]
                                      [--phases verdicts,compare,fresh,throughput] [--smoke]
                                      [--baseline DIR]

It drives `DeviceEvaluator` (what a worker serves) over the project's own candidates
(python/tests/candidates, listed in manifest.json) with the tasks enlarged to GPU sizes (module
constants, see GPU_SIZES), in these phases (those `--phases` names; run in this order), each
written out as soon as it is done:

1. builds: the reference of each task of data/gpu-tasks built with a fresh task id (after one
   build that starts the fork server), seconds each (target: <= 10 s);
2. verdicts: every honest, adversarial (static checks on and off: two evaluators sharing one GPU
   gate, as one worker's candidates do), and garbage candidate, `--concurrency` at a time, against
   its expected verdict (manifest), references cached. A correct adversarial candidate with
   `speedup_at_most` must not beat that honest candidate's speedup by more than `TWIN_MARGIN`,
   one with `timing_method` must be timed that way, with the reference beside it on its graphs;
3. throughput: `--throughput` distinct honest candidates (each kernel with a unique comment, so
   every one is compiled), references cached, `--concurrency` in flight, timing included:
   candidates per GPU-minute (target: >= 30);
4. compare (`eval_bench_timing`): the honest kernels' speedups (`--compare-repeats` each) through
   a fresh evaluator of this tree and, in a subprocess, of `--baseline DIR` (a copy of the tree
   before the change, with its `python/`): they must agree within 1 %; the GPU held alone per
   evaluation on each side; and what the candidates of issue 27 got from each;
5. fresh (`eval_bench_timing`): `--fresh-evaluators` fresh evaluators, each building four
   references at once, then timing `--fresh-kernels`: each kernel's speedup must agree within 2 %
   across the evaluators;
6. isolation (with `verdicts`): the isolation candidates one by one (a hang costs
   `compile_timeout_s`, 45 s here), then an honest candidate that must still be correct: last, so
   that a deadline skips them rather than a measurement;
7. stability: `--repeats` evaluations of each honest kernel, references cached, `--stability-
   concurrency` in flight: the speedup's coefficient of variation (target: <= 0.5 % for every
   kernel of >= 10 us), for each of `--timing-variants` (e.g. "processes=1;processes=2": one
   timing process against two, each variant with its own evaluator and reference timing), with
   the timing processes per evaluation and the CV the first process alone would have given.

Writes DIR/bench.json (everything, incrementally) and DIR/bench.md (the tables); prints the same;
the last lines give each phase's seconds and say whether every target of the phases run was met.
The evaluators run with the sandbox's `require` off: the bench confines every child itself and
needs no bubblewrap.
Phases that would run past `--deadline-s` are skipped and say so. On `--device cpu` (Triton's
interpreter) the tasks keep their small sizes, the data/gpu-tasks ones are shrunk 64x per
constant, nothing is timed and the stability phase is skipped: it checks the bench itself.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import eval_bench_timing  # noqa: E402

CAND = os.path.join(ROOT, "python", "tests", "candidates")
GPU_TASKS = os.path.join(ROOT, "data", "gpu-tasks")

GPU_SIZES = {
    "tasks/elementwise.py": {"N": "2**24"},
    "tasks/tiny_scale.py": {"N": "2**24"},
    "tasks/softmax.py": {"ROWS": "8192", "COLS": "2048"},
    "tasks/layernorm.py": {"ROWS": "8192", "COLS": "2048"},
    "tasks/matmul.py": {"M": "2048", "K": "2048", "N": "2048"},
    "tasks/fused_linear.py": {"BATCH": "4096", "IN": "1024", "OUT": "1024"},
}
#: Candidates specialized to a task's visible shape follow it to the GPU size.
CANDIDATE_GPU_EDITS = {"adversarial/shape_hardcoded.py": [("WIDTH = 256", "WIDTH = 2048"), ("256.0", "2048.0")]}
#: Honest kernels timed in the stability phase, in this order (the one nearest the CV target
#: first, so a deadline skips the others; stdlib_imports is elementwise's kernel again).
STABILITY = ("honest/layernorm.py", "honest/matmul.py", "honest/elementwise.py", "honest/softmax.py")
STABILITY_MORE = ("honest/fused_linear.py", "honest/tiny_scale.py")
#: A correct adversarial candidate's speedup may exceed its honest twin's by this much (noise).
TWIN_MARGIN = 0.03


def task_source(task: str, gpu: bool) -> str:
    src = open(os.path.join(CAND, task)).read()
    for name, value in (GPU_SIZES.get(task, {}) if gpu else {}).items():
        src = re.sub(rf"^{name} = .*$", f"{name} = {value}", src, flags=re.M)
    return src


def candidate_source(candidate: str, gpu: bool) -> str:
    src = open(os.path.join(CAND, candidate)).read()
    for old, new in CANDIDATE_GPU_EDITS.get(candidate, []) if gpu else []:
        src = src.replace(old, new)
    return src


class Report:
    """The bench's output: printed, and written to DIR/bench.md and DIR/bench.json as it grows."""

    def __init__(self, out: str | None):
        self.out = out
        self.lines: list[str] = []
        self.data: dict[str, Any] = {}
        if out:
            os.makedirs(out, exist_ok=True)

    def say(self, s: str = "") -> None:
        print(s, flush=True)
        self.lines.append(s)

    def put(self, key: str, value: Any) -> None:
        self.data[key] = value
        self.flush()

    def flush(self) -> None:
        if not self.out:
            return
        with open(os.path.join(self.out, "bench.md"), "w") as f:
            f.write("\n".join(self.lines) + "\n")
        with open(os.path.join(self.out, "bench.json"), "w") as f:
            json.dump(self.data, f, indent=1)


def parse_timing(spec: str) -> dict[str, Any]:
    """`key=value,...` timing overrides, e.g. `warmup_ms=500,flush=read` (empty: the defaults);
    a value is a number where it reads as one."""
    out: dict[str, Any] = {}
    for part in filter(None, (p.strip() for p in spec.split(","))):
        key, _, value = part.partition("=")
        try:
            out[key.strip()] = float(value) if "." in value else int(value)
        except ValueError:
            out[key.strip()] = value.strip()
    return out


def estimator_cvs(rs: list[dict[str, Any]]) -> dict[str, float]:
    """The speedup's CV over `rs` under other estimators than the evaluator's (median over median):
    trimmed means, the mean of the buffer sets' medians, medians scaled by each process's L2
    flush time (the memory system's speed where each side was timed), and, from the per-process
    medians of both sides, the first process's alone (what one timing process would have given,
    on its share of the samples) and the lowest process's; with `reference_in_process`, the
    nearest process's reference-beside figure over the candidate's (`reference_beside`)."""
    ways: dict[str, Callable[[dict[str, Any]], float | None]] = {
        "median": lambda t: t["median_ms"],
        "first_process": lambda t: t["process_medians_ms"][0] if t.get("process_medians_ms") else None,
        "lowest_process": lambda t: min(t["process_medians_ms"]) if t.get("process_medians_ms") else None,
        "mean": lambda t: t.get("mean_ms"),
        "set_mean": lambda t: statistics.fmean(t["set_medians_ms"]) if t.get("set_medians_ms") else None,
        "flush_scaled": lambda t: t["median_ms"] / t["flush_ms"] if t.get("flush_ms") else None,
    }
    out = {}
    for name, f in ways.items():
        vals = []
        for r in rs:
            ref, cand = r.get("reference_timing"), r.get("candidate_timing")
            a, b = (f(ref), f(cand)) if ref and cand else (None, None)
            if a and b:
                vals.append(a / b)
        if len(vals) == len(rs) and vals:
            out[name] = cv(vals)
    beside = [
        ((r.get("candidate_timing") or {}).get("reference_in_process") or {}).get("median_ms", 0)
        / r["candidate_timing"]["median_ms"]
        for r in rs
        if r.get("candidate_timing")
    ]
    if beside and all(beside) and len(beside) == len(rs):
        out["reference_beside"] = cv(beside)
    return out


def cv(x: list[float]) -> float:
    return statistics.pstdev(x) / statistics.fmean(x) if len(x) > 1 else float("nan")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--out", default=os.environ.get("OUT"))
    ap.add_argument("--deadline-s", type=float, default=450.0, help="skip phases that would end after this")
    ap.add_argument("--phases", default="verdicts,compare,fresh,throughput")
    ap.add_argument("--smoke", action="store_true", help="a few candidates per phase")
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--throughput", type=int, default=32, help="distinct candidates in the throughput phase")
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--stability-concurrency", type=int, default=2, help="the pool's inflight_per_worker default")
    ap.add_argument("--all-honest", action="store_true", help="stability of fused_linear and tiny_scale too")
    ap.add_argument("--buffer-sets", type=int, default=None, help="timing buffer sets (default: the evaluator's)")
    ap.add_argument("--stability-kernels", default=None, help="comma-separated honest candidates (default: four)")
    ap.add_argument(
        "--timing-variants",
        default=None,
        help="timing options compared side by side in the stability phase: 'warmup_ms=500,buffer_sets=8;...'",
    )
    ap.add_argument("--timing", default=None, help="timing options of the bench's evaluators: 'processes=1,...'")
    ap.add_argument("--baseline", default=None, help="a copy of the tree before the change (compare phase)")
    ap.add_argument("--python-root", default=None, help="import ksmith from here (the baseline's subprocess)")
    ap.add_argument("--compare-repeats", type=int, default=3)
    ap.add_argument("--fresh-evaluators", type=int, default=3)
    ap.add_argument("--fresh-kernels", default="honest/matmul.py")
    a = ap.parse_args()
    if a.python_root:
        sys.path.insert(0, os.path.abspath(a.python_root))
    t_start = time.monotonic()
    gpu = a.device.startswith("cuda")
    phases = a.phases.split(",")
    rep = Report(a.out)

    def left() -> float:
        return float(a.deadline_s) - (time.monotonic() - t_start)

    from ksmith.confine import Policy
    from ksmith.evaluator.evaluate import DeviceEvaluator
    from ksmith.shared.constants import int_constants, set_constants

    # compile_timeout_s covers a candidate's first call on a GPU (its kernels compiled): under 12 s for
    # every candidate here, 4 in flight; at 45 s the hanging isolation case costs 45 s, not 180
    opts: dict[str, Any] = {
        "run_timeout_s": 30,
        "timing_timeout_s": 120,
        "compile_timeout_s": 45,
        "memory_limit_mb": 8192,
    }
    if a.buffer_sets is not None:
        opts["timing"] = {"buffer_sets": a.buffer_sets}
    if a.timing:
        opts["timing"] = {**opts.get("timing", {}), **parse_timing(a.timing)}

    def evaluator(options: dict[str, Any], gate: Any = None) -> Any:
        # `gate` only where given: the baseline's evaluator (compare phase) may not take one
        shared = {"gate": gate} if gate is not None else {}
        return DeviceEvaluator(a.device, options, policy=Policy(require=False), **shared)

    manifest = json.load(open(os.path.join(CAND, "manifest.json")))

    def request(task: str, candidate: str, task_id: str | None = None, src: str | None = None) -> dict[str, Any]:
        return {
            "task_id": task_id or task,
            "reference": task_source(task, gpu),
            "candidate": src if src is not None else candidate_source(candidate, gpu),
            "measure": True,
        }

    task_of = {e["candidate"]: e["task"] for group in ("honest", "adversarial") for e in manifest[group]}

    def request_of(candidate: str) -> dict[str, Any]:
        return request(task_of[candidate], candidate)

    if phases == ["side"]:  # the baseline's subprocess of the compare phase
        side_ev = evaluator(opts)
        try:
            rep.put("side", eval_bench_timing.side(side_ev, request_of, a.compare_repeats, a.concurrency))
        finally:
            side_ev.close()
        return 0
    ev = evaluator(opts)
    # one GPU, one gate: neither evaluator's timing runs beside the other's work
    ev_rt = evaluator(dict(opts, static_checks=False), gate=ev.gate)
    phase_s: dict[str, float] = {}
    met: dict[str, bool] = {}
    rep.say(f"# ksmith evaluator bench on {a.device} ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())})")
    rep.say()
    rep.say("command: `python3 scripts/eval_gpu_bench.py " + " ".join(sys.argv[1:]) + "`")
    rep.say(f"hardware: {json.dumps(ev.default_hardware)}; sandbox: {json.dumps(ev.sandbox_info())}")
    rep.say(
        "(the bench runs the evaluator in its own process, so the worker's outer sandbox, which the pool "
        "gets from `python -m ksmith.confine`, is absent here: launcher none; every child is confined by "
        "itself as in the pool. The outer sandbox changes what the worker sees, not the work per candidate.)"
    )
    rep.say(
        f"options: trials {ev.opts['trials']}, hidden_shapes {ev.opts['hidden_shapes']}, timing {ev.opts['timing']}"
    )
    rep.put("meta", {"device": a.device, "argv": sys.argv[1:], "hardware": ev.default_hardware})

    # -- 1. reference builds ------------------------------------------------------------------
    if "builds" in phases:
        rep.say()
        rep.say("## Reference builds (data/gpu-tasks, fresh task ids, fork server already up)")
        rep.say()
        t0 = time.monotonic()
        ev.reference("warm-up", task_source("tasks/elementwise.py", False))
        rep.say(f"first build (starts the fork server: torch, triton imported once): {time.monotonic() - t0:.1f} s")
        rep.say()
        rep.say("| task | build s | trials | size sets | reference ms | input MiB |")
        rep.say("|---|---|---|---|---|---|")
        builds = []
        for name in sorted(f for f in os.listdir(GPU_TASKS) if f.endswith(".py")):
            src = open(os.path.join(GPU_TASKS, name)).read()
            if not gpu:
                src = set_constants(src, {k: max(1, v // 64) for k, v in int_constants(src).items()})
            t0 = time.monotonic()
            facts = ev.reference(f"gpu-tasks/{name}#{time.time()}", src)
            dt = time.monotonic() - t0
            ref_ms = facts.timing["median_ms"] if gpu else None  # the CPU's is a rehearsal
            sets = [s["sizes"] for s in facts.build.size_sets]
            builds.append({"task": name, "seconds": dt, "reference_ms": ref_ms, "size_sets": sets})
            rep.say(
                f"| {name} | {dt:.2f} | {len(facts.build.trials)} | {json.dumps(sets)} | "
                f"{'-' if ref_ms is None else f'{ref_ms:.4f}'} | {facts.build.input_bytes / 2**20:.0f} |"
            )
        rep.put("builds", builds)

    # -- 2. verdicts --------------------------------------------------------------------------
    jobs: list[tuple[str, dict[str, Any], str | None, list[Any]]] = []
    for e in manifest["honest"]:
        jobs.append(("honest", e, None, ["correct", None]))
    for e in manifest["adversarial"]:
        jobs.append(("adversarial", e, "static", e["expect"]))
        if "runtime" in e and (gpu or not e.get("gpu_only")):
            jobs.append(("adversarial", e, "runtime", e["runtime"]))
    for grp in ("garbage", "isolation"):
        for e in manifest[grp]:
            jobs.append((grp, e, "runtime" if e.get("static_off") else "static", e["expect"]))
    jobs.append(("isolation", manifest["honest"][0], "after-isolation", ["correct", None]))
    if a.smoke:
        keep = {"honest/elementwise.py", "honest/matmul.py", "adversarial/side_stream.py", "adversarial/call_count.py"}
        jobs = [j for j in jobs if j[1]["candidate"] in keep]

    def run(job: tuple[str, dict[str, Any], str | None, list[Any]]) -> tuple[Any, dict[str, Any], float]:
        grp, e, layer, _ = job
        evaluator = ev_rt if layer == "runtime" else ev
        t = time.monotonic()
        try:
            r = evaluator.evaluate(request(e["task"], e["candidate"]))
        except Exception as ex:  # noqa: BLE001 - reported as a row
            r = {"status": "error", "hack": None, "error_log": f"{type(ex).__name__}: {ex}", "speedup": None}
        return job, r, time.monotonic() - t

    twins: dict[str, Any] = {}
    if "verdicts" in phases and left() > 90:
        t_phase = time.monotonic()
        tasks = sorted({j[1]["task"] for j in jobs})
        t0 = time.monotonic()
        with ThreadPoolExecutor(a.concurrency) as pool:
            list(
                pool.map(
                    lambda tx: tx[0].reference(tx[1], task_source(tx[1], gpu)),
                    [(x, t) for t in tasks for x in (ev, ev_rt)],
                )
            )
        t_refs = time.monotonic() - t0
        t0 = time.monotonic()
        rest = [j for j in jobs if j[0] != "isolation"]
        with ThreadPoolExecutor(a.concurrency) as pool:
            results = list(pool.map(run, rest))
        wall_rest = time.monotonic() - t0
        rep.say()
        rep.say("## Verdicts (static checks on, and the runtime layer alone: static checks off)")
        rep.say()
        rep.say(
            f"references of {len(tasks)} tasks built for both evaluators in {t_refs:.1f} s ({a.concurrency} at a time)"
        )
        rep.say()
        twins.update({e["candidate"]: r.get("speedup") for (grp, e, _, _), r, _ in results if grp == "honest"})
        rows = verdict_rows(rep, results, twins, gpu)
        n_ok = sum(r["ok"] for r in rows)
        rep.say()
        rep.say(
            f"{n_ok}/{len(results)} verdicts as expected. {len(rest)} candidates ({a.concurrency} in flight, "
            f"references cached) in {wall_rest:.1f} s (the isolation cases come last, one by one)."
        )
        rep.say(f"Candidates per GPU-minute over the concurrent part: {len(rest) / (wall_rest / 60):.1f}")
        rep.put(
            "verdicts",
            {"ok": n_ok, "total": len(results), "concurrent_per_minute": len(rest) / (wall_rest / 60), "rows": rows},
        )
        met["verdicts"] = n_ok == len(results)
        phase_s["verdicts"] = time.monotonic() - t_phase
    elif "verdicts" in phases:
        rep.say("\n(verdicts skipped: past the deadline)")

    # -- 3. throughput ------------------------------------------------------------------------
    honest = manifest["honest"]
    if "throughput" in phases and left() > 60:
        t_phase = time.monotonic()
        n = 8 if a.smoke else a.throughput
        reqs = []
        for i in range(n):
            e = honest[i % len(honest)]
            src = candidate_source(e["candidate"], gpu) + f"\n# distinct program {i} {time.time()}\n"
            reqs.append(request(e["task"], e["candidate"], src=src))
        for task in {r["task_id"] for r in reqs}:
            ev.reference(task, task_source(task, gpu))
        held0, timings0 = ev.gate.exclusive_s, ev.gate.exclusive_n
        t0 = time.monotonic()
        with ThreadPoolExecutor(a.concurrency) as pool:
            rs = list(pool.map(ev.evaluate, reqs))
        wall = time.monotonic() - t0
        held, timings = ev.gate.exclusive_s - held0, ev.gate.exclusive_n - timings0
        statuses: dict[str, int] = {}
        for r in rs:
            statuses[r["status"]] = statuses.get(r["status"], 0) + 1
        per_min = n / (wall / 60)
        elapsed = [r["elapsed_ms"] / 1000 for r in rs]
        rep.say()
        rep.say("## Throughput (distinct honest candidates, each compiled, references cached, timed)")
        rep.say()
        rep.say(
            "What this measures: one worker (this process's evaluator, as one pool worker) on one GPU, "
            f"{n} programs that differ by a comment (so each is imported and its Triton kernels compiled "
            "afresh: no shared Triton cache entry), their task references already built, every phase "
            "of an evaluation included (static checks, correctness trials, hidden shapes, identity "
            "check, profile, timing with the GPU held alone, verified calls); candidates per "
            "GPU-minute = candidates / wall minutes from the first request to the last answer."
        )
        rep.say()
        rep.say(
            f"{n} candidates, {a.concurrency} in flight: {wall:.1f} s wall, **{per_min:.1f} candidates per "
            f"GPU-minute**; per candidate median {statistics.median(elapsed):.2f} s (max {max(elapsed):.2f} s); "
            f"verdicts {statuses}"
        )
        met["throughput"] = per_min >= 30 and statuses.get("correct", 0) == n
        rep.say(
            f"GPU held alone (timing) {held:.1f} s over {timings} timings ({held / max(timings, 1):.2f} s each, "
            f"{held / n:.2f} s per candidate, {held / wall:.0%} of the wall): the part that serializes candidates"
            + ("" if gpu else " (none on the CPU, whose gate admits everyone)")
        )
        procs = [len(r["candidate_timing"]["process_medians_ms"]) for r in rs if r.get("candidate_timing")]
        want = int(ev.opts["timing"]["processes"])
        if procs:
            rep.say(
                f"timing processes per correct candidate: mean {statistics.fmean(procs):.2f} "
                f"({sum(p > want for p in procs)} of {len(procs)} with more than timing.processes = {want})"
            )
        bad = [r for r in rs if r["status"] != "correct"]
        for r in bad[:3]:
            rep.say(f"  not correct: {r['status']} {r['hack']} {r['error_log'][-400:]!r}")
        rep.put(
            "throughput",
            {
                "candidates": n,
                "concurrency": a.concurrency,
                "wall_s": wall,
                "per_gpu_minute": per_min,
                "median_s": statistics.median(elapsed),
                "exclusive_s": held,
                "timings": timings,
                "statuses": statuses,
                "timing_processes": procs,
            },
        )
        phase_s["throughput"] = time.monotonic() - t_phase
    elif "throughput" in phases:
        rep.say("\n(throughput skipped: past the deadline)")

    # -- 4. compare: honest speedups before and after ------------------------------------------
    if "compare" in phases and left() > 120:
        t_phase = time.monotonic()
        rep.say()
        rep.say(
            f"## Honest speedups before and after ({a.compare_repeats} evaluations per kernel, {a.concurrency} in "
            "flight, a fresh evaluator on each side)"
        )
        rep.say()
        before = None
        if a.baseline:
            try:
                before = eval_bench_timing.run_baseline(
                    a.baseline,
                    os.path.abspath(__file__),
                    a.device,
                    os.path.join(a.out or "/tmp", "baseline"),
                    a.compare_repeats,
                    a.concurrency,
                )
            except Exception as e:  # noqa: BLE001 - reported, the phase goes on with this side
                rep.say(f"baseline failed: {e}")
        else:
            rep.say("(no --baseline: this tree's side only)")
        side_ev = evaluator(opts)
        try:
            after = eval_bench_timing.side(side_ev, request_of, a.compare_repeats, a.concurrency)
        finally:
            side_ev.close()
        checked = eval_bench_timing.compare_report(rep.say, before, after)
        rep.put("compare", {"before": before, "after": after, "checked": checked})
        if gpu:
            met["compare"] = checked["all_within"]
        phase_s["compare"] = time.monotonic() - t_phase
    elif "compare" in phases:
        rep.say("\n(compare skipped: past the deadline)")

    # -- 5. fresh evaluators, four references built at once -------------------------------------
    if "fresh" in phases and gpu and left() > 90:
        t_phase = time.monotonic()
        kernels = a.fresh_kernels.split(",")
        rep.say()
        rep.say(
            f"## The same honest candidates across {a.fresh_evaluators} fresh evaluators (each built 4 references "
            f"at once: {', '.join(eval_bench_timing.FRESH_TASKS)}; then each kernel {a.compare_repeats} times, 2 in "
            "flight)"
        )
        rep.say()
        runs = eval_bench_timing.fresh(
            lambda: evaluator(opts),
            request_of,
            lambda t: task_source(t, gpu),
            kernels,
            a.fresh_evaluators,
            a.compare_repeats,
        )
        checked = eval_bench_timing.fresh_report(rep.say, runs, kernels)
        rep.put("fresh", {"runs": runs, "checked": checked})
        met["fresh"] = checked["all_within"]
        phase_s["fresh"] = time.monotonic() - t_phase
    elif "fresh" in phases and gpu:
        rep.say("\n(fresh skipped: past the deadline)")

    # -- 6. isolation: one by one, last (a hang costs compile_timeout_s) -------------------------
    isolation = [j for j in jobs if j[0] == "isolation"]
    if "verdicts" in phases and isolation and left() > 75:
        t_phase = time.monotonic()
        results = [run(j) for j in isolation]
        rep.say()
        rep.say(
            f"## Isolation (one by one, compile_timeout_s {opts['compile_timeout_s']} s, run_timeout_s "
            f"{opts['run_timeout_s']} s; then an honest candidate on the same evaluator)"
        )
        rep.say()
        rows = verdict_rows(rep, results, twins, gpu)
        n_ok = sum(r["ok"] for r in rows)
        rep.say()
        rep.say(f"{n_ok}/{len(results)} as expected in {time.monotonic() - t_phase:.1f} s")
        rep.put("isolation", {"ok": n_ok, "total": len(results), "rows": rows})
        met["isolation"] = n_ok == len(results)
        phase_s["isolation"] = time.monotonic() - t_phase
    elif "verdicts" in phases and isolation:
        rep.say("\n(isolation skipped: past the deadline)")

    # -- 7. stability -------------------------------------------------------------------------
    if "stability" in phases and gpu:
        chosen = a.stability_kernels.split(",") if a.stability_kernels else list(STABILITY)
        chosen += list(STABILITY_MORE) if a.all_honest else []
        variants = [parse_timing(v) for v in a.timing_variants.split(";")] if a.timing_variants else [{}]
        rep.say()
        rep.say(
            f"## Speedup stability ({a.repeats} evaluations per kernel, {a.stability_concurrency} in flight, "
            "reference cached; each timing variant with its own evaluator, so its reference is timed the same way)"
        )
        rep.say()
        rep.say(
            "| timing | candidate | speedup median | cv | min..max | cand median ms | cand cv within run | samples "
            "| GPU alone s/eval | timing processes/eval (ref) |"
        )
        rep.say("|---|---|---|---|---|---|---|---|---|---|")
        rows = []
        by_name = {x["candidate"]: x for x in honest}
        for variant in variants:
            timing = {**opts.get("timing", {}), **variant}
            vev = evaluator(dict(opts, timing=timing), gate=ev.gate) if variant else ev
            label = json.dumps(variant) if variant else "default"
            for entry in [by_name[c] for c in chosen]:
                if left() < 25:
                    rep.say(f"| {label} | {entry['candidate']} | skipped: past the deadline |")
                    continue
                req = request(entry["task"], entry["candidate"])
                vev.reference(req["task_id"], req["reference"])
                held0 = vev.gate.exclusive_s
                with ThreadPoolExecutor(a.stability_concurrency) as pool:
                    rs = list(pool.map(vev.evaluate, [req] * (2 if a.smoke else a.repeats)))
                held = (vev.gate.exclusive_s - held0) / len(rs)  # per evaluation, over its timing processes
                sp = [r["speedup"] for r in rs if r.get("speedup")]
                ct = rs[0].get("candidate_timing") or {}
                procs = [len((r.get("candidate_timing") or {}).get("process_medians_ms") or [1]) for r in rs]
                ref_procs = len((rs[0].get("reference_timing") or {}).get("process_medians_ms") or [1])
                if sp:
                    rep.say(
                        f"| {label} | {entry['candidate']} | {statistics.median(sp):.4f} | {cv(sp):.2%} | "
                        f"{min(sp):.4f}..{max(sp):.4f} | {ct.get('median_ms', 0):.4f} | {ct.get('cv', 0):.2%} | "
                        f"{ct.get('samples')} | {held:.2f} | {statistics.fmean(procs):.1f} ({ref_procs}) |"
                    )
                else:
                    rep.say(
                        f"| {label} | {entry['candidate']} | failed: {rs[0]['status']} {rs[0]['error_log'][-300:]!r} |"
                    )
                estimators = estimator_cvs(rs)
                by_way = {k: f"{v:.2%}" for k, v in estimators.items()}
                rep.say(f"|  | speedup CV by estimator: {json.dumps(by_way)} |")
                rows.append(
                    {
                        "timing": variant,
                        "candidate": entry["candidate"],
                        "speedups": sp,
                        "cv": cv(sp) if sp else None,
                        "gpu_alone_s": held,
                        "cand_median_ms": [(r.get("candidate_timing") or {}).get("median_ms") for r in rs],
                        "cand_processes": procs,
                        "ref_median_ms": (rs[0].get("reference_timing") or {}).get("median_ms"),
                        "cand_timing": [r.get("candidate_timing") for r in rs],
                        "ref_timing": rs[0].get("reference_timing"),
                        "estimators": estimators,
                    }
                )
                rep.put("stability", rows)
            if vev is not ev:
                vev.close()
    rep.say()
    rep.say(
        f"total {time.monotonic() - t_start:.0f} s (" + ", ".join(f"{k} {v:.0f} s" for k, v in phase_s.items()) + ")"
    )
    rep.put("phase_s", phase_s)
    rep.say(
        "targets: "
        + ", ".join(f"{k} {'met' if v else 'NOT met'}" for k, v in met.items())
        + (" -- ALL MET" if met and all(met.values()) else "")
    )
    rep.put("targets", met)
    ev.close()
    ev_rt.close()
    return 0


def verdict_rows(rep: Report, results: list[Any], twins: dict[str, Any], gpu: bool) -> list[dict[str, Any]]:
    """Prints the verdicts table of `results` ((job, result, seconds) each) and returns its rows."""
    rep.say("| group | candidate | layer | expected | got | speedup | cand median ms (cv) | time s | ok |")
    rep.say("|---|---|---|---|---|---|---|---|---|")
    rows = []
    for (grp, e, layer, exp), r, dt in results:
        got = [r["status"], r["hack"]]
        ok = got == list(exp)
        why = timing_expectation(e, r, twins) if gpu and ok and got[0] == "correct" else ""
        ok = ok and not why
        ct = r.get("candidate_timing")
        tim = f"{ct['median_ms']:.4f} ({ct['cv']:.2%}, {ct['method']})" if ct else "-"
        sp = f"{r['speedup']:.3f}" if r.get("speedup") else "-"
        rep.say(
            f"| {grp} | {e['candidate']} | {layer or '-'} | {exp[0]} {exp[1] or ''} | {got[0]} {got[1] or ''} | "
            f"{sp} | {tim} | {dt:.1f} | {'yes' if ok else 'NO'} |"
        )
        if why:
            rep.say(f"|  | {why} |  |  |  |  |  |  |  |")
        elif not ok:
            rep.say(f"|  | log: {r['error_log'][-600:]!r} |  |  |  |  |  |  |  |")
        rows.append(
            {
                "group": grp,
                "candidate": e["candidate"],
                "layer": layer,
                "expected": exp,
                "got": got,
                "ok": ok,
                "speedup": r.get("speedup"),
                "timing": ct,
                "seconds": dt,
                "log": None if ok else r["error_log"][-2000:],
                "warnings": r.get("warnings"),
            }
        )
    return rows


def timing_expectation(e: dict[str, Any], r: dict[str, Any], twins: dict[str, Any]) -> str:
    """Why a correct candidate's timing breaks its manifest entry (`speedup_at_most`: its honest
    twin's speedup plus `TWIN_MARGIN`; `timing_method`: how it was timed, the reference beside it
    always by its graphs), or ""."""
    twin = e.get("speedup_at_most")
    if twin:
        mine, theirs = r.get("speedup"), twins.get(twin)
        if not mine or not theirs:
            return f"no speedup to compare with {twin}'s ({mine} vs {theirs})"
        if mine > theirs * (1 + TWIN_MARGIN):
            return f"speedup {mine:.3f} above its honest twin's {theirs:.3f} ({twin}): what it does when timed pays"
    method = e.get("timing_method")
    if method:
        t = r.get("candidate_timing") or {}
        beside = t.get("reference_in_process") or {}
        if t.get("method") != method or beside.get("method") != "cuda_graph" or not beside.get("samples"):
            return (
                f"timed by {t.get('method')}, the reference beside it by {beside.get('method')} "
                f"({beside.get('samples')} samples): expected {method}, and the reference's graphs"
            )
    return ""


if __name__ == "__main__":
    sys.exit(main())
