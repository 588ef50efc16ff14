#!/usr/bin/env python3
"""GPU bench of the ksmith evaluator (issue 5): verdicts, speedup stability, throughput.

Usage (on a machine with a GPU, from the repository root):
    python3 scripts/eval_gpu_bench.py [--smoke] [--repeats 10] [--concurrency 4] [--out FILE]

It evaluates the project's own candidates (python/tests/candidates, listed in manifest.json)
with GPU-sized tasks (module constants enlarged, see GPU_SIZES):
1. every honest, adversarial, garbage and isolation candidate, `--concurrency` at a time through
   one DeviceEvaluator (as a worker serves them), prints each verdict against the expected one
   (adversarial candidates both with the static checks on and with the runtime layer alone),
   and candidates evaluated per GPU-minute including spawn, compile and timing;
2. `--repeats` evaluations of each honest candidate, and reports the spread of the speedup: with
   the reference cached (what the pipeline sees) and with the reference re-timed each time (a
   fresh task id per repeat), as coefficient of variation and min/max.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))
CAND = os.path.join(ROOT, "python", "tests", "candidates")

GPU_SIZES = {
    "tasks/elementwise.py": {"N": "2**24"},
    "tasks/softmax.py": {"ROWS": "8192", "COLS": "2048"},
    "tasks/layernorm.py": {"ROWS": "8192", "COLS": "2048"},
    "tasks/matmul.py": {"M": "2048", "K": "2048", "N": "2048"},
    "tasks/fused_linear.py": {"BATCH": "4096", "IN": "1024", "OUT": "1024"},
}


def task_source(task: str) -> str:
    src = open(os.path.join(CAND, task)).read()
    for name, value in GPU_SIZES.get(task, {}).items():
        src = re.sub(rf"^{name} = .*$", f"{name} = {value}", src, flags=re.M)
    return src


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument(
        "--stability-concurrency",
        type=int,
        default=2,
        help="evaluations in flight in the stability part (the pool's default inflight_per_worker is 2)",
    )
    ap.add_argument("--out", default=None)
    ap.add_argument("--skip-verdicts", action="store_true")
    ap.add_argument("--skip-stability", action="store_true")
    ap.add_argument("--stability", default="", help="comma-separated honest candidates (default: all)")
    ap.add_argument(
        "--buffer-sets", type=int, default=None, help="timing buffer sets to rotate over (default: the evaluator's)"
    )
    ap.add_argument(
        "--fresh-ref", default="", help="comma-separated honest candidates whose reference is also re-timed each repeat"
    )
    a = ap.parse_args()

    from ksmith.evaluator.evaluate import DeviceEvaluator

    opts = {"run_timeout_s": 30, "timing_timeout_s": 120, "memory_limit_mb": 8192}
    if a.buffer_sets is not None:
        opts["timing"] = {"buffer_sets": a.buffer_sets}
    ev = DeviceEvaluator("cuda", opts)
    ev_rt = DeviceEvaluator("cuda", dict(opts, static_checks=False))
    manifest = json.load(open(os.path.join(CAND, "manifest.json")))
    lines: list[str] = []

    def say(s: str = "") -> None:
        print(s, flush=True)
        lines.append(s)

    say(f"# ksmith evaluator on GPU ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())})")
    say()
    say("command: `python3 scripts/eval_gpu_bench.py " + " ".join(sys.argv[1:]) + "`")
    say(
        f"children confined (private mount namespace, read-only, no capabilities): {ev.confine}; timing buffer sets: "
        f"{ev.opts['timing']['buffer_sets']}"
    )
    jobs = []
    for e in manifest["honest"]:
        jobs.append(("honest", e, None, ["correct", None]))
    for e in manifest["adversarial"]:
        jobs.append(("adversarial", e, "static", e["expect"]))
        if "runtime" in e:
            jobs.append(("adversarial", e, "runtime", e["runtime"]))
    for grp in ("garbage", "isolation"):
        for e in manifest[grp]:
            jobs.append((grp, e, "runtime" if e.get("static_off") else "static", e["expect"]))
    jobs.append(("isolation", manifest["honest"][0], "after-isolation", ["correct", None]))
    if a.smoke:
        keep = {
            "honest/elementwise.py",
            "honest/matmul.py",
            "adversarial/side_stream.py",
            "adversarial/decoy_matmul.py",
            "isolation/illegal_address.py",
        }
        jobs = [j for j in jobs if j[1]["candidate"] in keep]

    def run(job):
        grp, e, layer, exp = job
        evaluator = ev_rt if layer == "runtime" else ev
        t = time.time()
        r = evaluator.evaluate(
            {
                "task_id": e["task"],
                "reference": task_source(e["task"]),
                "candidate": open(os.path.join(CAND, e["candidate"])).read(),
                "measure": True,
            }
        )
        return job, r, time.time() - t

    hw = None
    if not a.skip_verdicts:
        # warm the reference cache first so the throughput counts candidates only
        for task in sorted({j[1]["task"] for j in jobs}):
            for x in (ev, ev_rt):
                x.reference(task, task_source(task))
        t0 = time.time()
        isolation = [j for j in jobs if j[0] == "isolation"]
        rest = [j for j in jobs if j[0] != "isolation"]
        with ThreadPoolExecutor(a.concurrency) as pool:
            results = list(pool.map(run, rest))
        results += [run(j) for j in isolation]  # in order: the honest run comes after the crashes
        wall = time.time() - t0
        say()
        say("## Verdicts")
        say()
        say("| group | candidate | layer | expected | got | speedup | cand median ms (cv) | time s | ok |")
        say("|---|---|---|---|---|---|---|---|---|")
        n_ok = 0
        for (grp, e, layer, exp), r, dt in results:
            hw = hw or r["hardware"]
            got = [r["status"], r["hack"]]
            ok = got == list(exp)
            n_ok += ok
            ct = r.get("candidate_timing")
            tim = f"{ct['median_ms']:.4f} ({ct['cv']:.2%}, {ct['method']})" if ct else "-"
            sp = f"{r['speedup']:.3f}" if r.get("speedup") else "-"
            say(
                f"| {grp} | {e['candidate']} | {layer or '-'} | {exp[0]} {exp[1] or ''} | {got[0]} {got[1] or ''} | "
                f"{sp} | {tim} | {dt:.1f} | {'yes' if ok else 'NO'} |"
            )
            if not ok:
                say(f"|  | log: {r['error_log'][-600:]!r} |  |  |  |  |  |  |  |")
        say()
        say(
            f"{n_ok}/{len(results)} verdicts as expected. {len(rest)} candidates (concurrency {a.concurrency}, "
            f"references cached) in {wall:.1f} s wall in total with the isolation runs; throughput of the concurrent "
            "part: see below."
        )
        say(
            f"Candidates evaluated per GPU-minute (all {len(results)} runs incl. spawn, compile, correctness, timing, "
            f"crashes and the hang timeout): {len(results) / (wall / 60):.1f}"
        )
    if not a.skip_stability:
        say()
        say("## Speedup stability (repeated evaluations of the same candidate)")
        say()
        say(
            f"{a.repeats} evaluations per candidate, {a.stability_concurrency} in flight (timing serialized on the "
            "GPU, other candidates compile and run correctness meanwhile). 'ref cached': the reference timed once "
            "per task (what the pipeline sees); 'ref re-timed': a fresh task id per repeat, so the reference is "
            "rebuilt and re-timed each time."
        )
        say()
        say(
            "| candidate | ref cached: speedup median | cv | min..max | ref re-timed: speedup median | cv | min..max "
            "| cand median ms | cand cv within run | samples | method |"
        )
        say("|---|---|---|---|---|---|---|---|---|---|---|")
        honest = manifest["honest"] if not a.smoke else manifest["honest"][:1]
        if a.stability:
            honest = [e for e in honest if e["candidate"] in a.stability.split(",")]
        for e in honest:
            src = task_source(e["task"])
            cand = open(os.path.join(CAND, e["candidate"])).read()
            t0 = time.time()
            ev.reference(e["task"], src)
            reqs = [
                {"task_id": e["task"], "reference": src, "candidate": cand, "measure": True} for _ in range(a.repeats)
            ]
            if e["candidate"] in a.fresh_ref.split(","):
                reqs += [
                    {"task_id": f"{e['task']}#{i}", "reference": src, "candidate": cand, "measure": True}
                    for i in range(a.repeats)
                ]
            with ThreadPoolExecutor(a.stability_concurrency) as pool:
                rs = list(pool.map(ev.evaluate, reqs))
            cached = [r["speedup"] for r in rs[: a.repeats] if r["speedup"]]
            fresh = [r["speedup"] for r in rs[a.repeats :] if r["speedup"]]
            last = rs[0]
            hw = hw or (last or {}).get("hardware")

            def cv(x):
                return statistics.pstdev(x) / statistics.fmean(x) if len(x) > 1 else float("nan")

            ct = (last or {}).get("candidate_timing") or {}
            if cached:
                fr = (
                    f"{statistics.median(fresh):.4f} | {cv(fresh):.2%} | {min(fresh):.4f}..{max(fresh):.4f}"
                    if fresh
                    else "- | - | -"
                )
                say(
                    f"| {e['candidate']} | {statistics.median(cached):.4f} | {cv(cached):.2%} | "
                    f"{min(cached):.4f}..{max(cached):.4f} | {fr} | {ct.get('median_ms', 0):.4f} | "
                    f"{ct.get('cv', 0):.2%} | {ct.get('samples')} | {ct.get('method')} |"
                )
            else:
                say(
                    f"| {e['candidate']} | failed: {last['status'] if last else '?'} "
                    f"{last['error_log'][-300:] if last else ''!r} |"
                )
            print(f"  ({e['candidate']}: {len(reqs)} evaluations in {time.time() - t0:.0f} s)", flush=True)
    say()
    say(f"hardware: {json.dumps(hw)}")
    if a.out:
        with open(a.out, "w") as f:
            f.write("\n".join(lines) + "\n")
    ev.close()
    ev_rt.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
