"""Phases of scripts/eval_gpu_bench.py that check the timing's integrity (issue 27).

- `side`: the honest kernels, each `repeats` times with `concurrency` in flight, and the
  candidates that tell timed calls from checked ones, once each, through one fresh evaluator:
  verdicts, speedups, the GPU held alone per evaluation. The bench runs it in a subprocess on a
  baseline evaluator's `python/` (`--baseline`, e.g. the main branch before the change) and in
  its own process on this one: `compare` prints both side by side (honest speedups must agree
  within `HONEST_AGREEMENT`).
- `fresh`: `evaluators` fresh evaluators one after the other, each building the references of
  four tasks at once (their GPU work beside each other, under the gate) before timing the same
  honest candidates: their speedups must agree within `FRESH_AGREEMENT` across the evaluators.

Nothing here imports ksmith at module level: the bench chooses which `python/` it imports first.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

#: Honest kernels compared before and after (stdlib_imports is elementwise's kernel again).
HONEST = (
    "honest/elementwise.py",
    "honest/softmax.py",
    "honest/layernorm.py",
    "honest/matmul.py",
    "honest/fused_linear.py",
    "honest/tiny_scale.py",
)
#: The candidates of issue 27 (what they do: their headers and manifest.json), run once each.
TELLING = (
    "adversarial/capture_aware.py",
    "adversarial/observed_cache.py",
    "adversarial/slow_minority.py",
    "adversarial/capture_refusal.py",
)
#: Tasks whose references a fresh evaluator builds at once.
FRESH_TASKS = ("tasks/matmul.py", "tasks/layernorm.py", "tasks/softmax.py", "tasks/fused_linear.py")
#: Honest speedups before and after must agree within this (relative).
HONEST_AGREEMENT = 0.01
#: The same candidate's speedup across fresh evaluators: max / min - 1 within this.
FRESH_AGREEMENT = 0.02

Request = Callable[[str], dict[str, Any]]


def evaluate_all(ev: Any, request: Request, jobs: list[str], concurrency: int) -> list[tuple[str, dict[str, Any]]]:
    """Each candidate of `jobs` (a list, repeats allowed) through `ev`, `concurrency` at a time;
    an evaluation that raises is a row with status `error`."""

    def one(candidate: str) -> tuple[str, dict[str, Any]]:
        try:
            return candidate, ev.evaluate(request(candidate))
        except Exception as e:  # noqa: BLE001 - reported as a row
            return candidate, {
                "status": "error",
                "hack": None,
                "speedup": None,
                "error_log": f"{type(e).__name__}: {e}",
            }

    with ThreadPoolExecutor(concurrency) as pool:
        return list(pool.map(one, jobs))


def summary(rows: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    """Per candidate: verdicts, speedups and their median, the candidate's median and CV, the
    timing method, the first warnings."""
    out: dict[str, Any] = {}
    for candidate, r in rows:
        s = out.setdefault(candidate, {"verdicts": [], "speedups": [], "timings": [], "warnings": [], "logs": []})
        s["verdicts"].append([r["status"], r.get("hack")])
        if r.get("speedup"):
            s["speedups"].append(r["speedup"])
        t = r.get("candidate_timing") or {}
        if t:
            keys = ("median_ms", "cv", "samples", "method", "rounds", "prepare_ms", "observe_ms", "flush_ms")
            s["timings"].append({k: t.get(k) for k in keys})
        s["warnings"] += [w for w in r.get("warnings") or [] if w not in s["warnings"]][:3]
        if r["status"] not in ("correct",):
            s["logs"].append((r.get("error_log") or "")[-400:])
    for s in out.values():
        s["median"] = statistics.median(s["speedups"]) if s["speedups"] else None
    return out


def side(ev: Any, request: Request, repeats: int, concurrency: int) -> dict[str, Any]:
    """The `side` phase on `ev` (see the module doc)."""
    held0, n0 = ev.gate.exclusive_s, ev.gate.exclusive_n
    t0 = time.monotonic()
    honest = evaluate_all(ev, request, [c for c in HONEST for _ in range(repeats)], concurrency)
    wall = time.monotonic() - t0
    held, timings = ev.gate.exclusive_s - held0, ev.gate.exclusive_n - n0
    telling = evaluate_all(ev, request, list(TELLING), concurrency)
    return {
        "honest": summary(honest),
        "telling": summary(telling),
        "held_s_per_eval": held / max(len(honest), 1),
        "timings": timings,
        "wall_s": wall,
        "hardware": ev.default_hardware,
    }


def run_baseline(baseline: str, bench: str, device: str, out: str, repeats: int, concurrency: int) -> dict[str, Any]:
    """The `side` phase in a subprocess that imports the evaluator of `baseline`/python."""
    os.makedirs(out, exist_ok=True)
    cmd = [
        sys.executable,
        bench,
        "--phases",
        "side",
        "--python-root",
        os.path.join(baseline, "python"),
        "--device",
        device,
        "--out",
        out,
        "--compare-repeats",
        str(repeats),
        "--concurrency",
        str(concurrency),
    ]
    with open(os.path.join(out, "log"), "w") as log:
        proc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, timeout=600)
    path = os.path.join(out, "bench.json")
    if proc.returncode != 0 or not os.path.exists(path):
        raise RuntimeError(f"the baseline's side exited with {proc.returncode}; see {out}/log")
    return json.load(open(path))["side"]


def compare_report(say: Callable[[str], None], before: dict[str, Any] | None, after: dict[str, Any]) -> dict[str, Any]:
    """Prints the `compare` tables; returns what was checked."""
    say(
        "| kernel | before: speedup median (n) | after: speedup median (n) | after / before - 1 | within 1 % | "
        "after: call ms, CV | after per sample: fresh values ms, digests ms, L2 flush ms |"
    )
    say("|---|---|---|---|---|---|---|")
    checked = []
    for c in HONEST:
        a = after["honest"].get(c, {})
        b = (before or {}).get("honest", {}).get(c, {})
        ratio = a["median"] / b["median"] - 1 if a.get("median") and b.get("median") else None
        ok = ratio is not None and abs(ratio) <= HONEST_AGREEMENT
        checked.append({"candidate": c, "before": b.get("median"), "after": a.get("median"), "ratio": ratio, "ok": ok})
        t = (a.get("timings") or [{}])[0]
        say(
            f"| {c} | {_fmt(b.get('median'))} ({len(b.get('speedups', []))}) | {_fmt(a.get('median'))} "
            f"({len(a.get('speedups', []))}) | {'-' if ratio is None else f'{ratio:+.2%}'} | "
            f"{'yes' if ok else 'NO'} | {_fmt(t.get('median_ms'))}, {t.get('cv') or 0:.2%} | "
            f"{_fmt(t.get('prepare_ms'))}, {_fmt(t.get('observe_ms'))}, {_fmt(t.get('flush_ms'))} |"
        )
        for v in a.get("verdicts", []) + b.get("verdicts", []):
            if v[0] != "correct":
                say(f"|  | not correct: {v} {(a.get('logs') or b.get('logs') or [''])[0]!r} |")
                break
    say("")
    held_b = (before or {}).get("held_s_per_eval")
    say(
        f"GPU held alone per evaluation (timing): before {_fmt(held_b, 3)} s, after {after['held_s_per_eval']:.3f} s"
        + (f" ({after['held_s_per_eval'] / held_b - 1:+.0%})" if held_b else "")
    )
    say("")
    say("The candidates of issue 27, once each (before: what they got; after: see the verdicts table too):")
    say("")
    say("| candidate | before: verdict | before: speedup | after: verdict | after: speedup (method) |")
    say("|---|---|---|---|---|")
    for c in TELLING:
        b = (before or {}).get("telling", {}).get(c, {})
        a = after["telling"].get(c, {})
        say(
            f"| {c} | {' '.join(str(x) for x in (b.get('verdicts') or [['-']])[0] if x)} | {_fmt(b.get('median'))} | "
            f"{' '.join(str(x) for x in (a.get('verdicts') or [['-']])[0] if x)} | {_fmt(a.get('median'))} "
            f"({(a.get('timings') or [{}])[0].get('method', '-')}) |"
        )
    return {"honest": checked, "all_within": all(x["ok"] for x in checked)}


def fresh(
    make: Callable[[], Any],
    request: Request,
    source: Callable[[str], str],
    kernels: list[str],
    evaluators: int,
    repeats: int,
) -> list[dict[str, Any]]:
    """The `fresh` phase (see the module doc): per evaluator, the seconds its four references took
    (built at once), their own timings, and the summary of `kernels`' evaluations."""
    out = []
    for i in range(evaluators):
        ev = make()
        try:
            t0 = time.monotonic()
            with ThreadPoolExecutor(len(FRESH_TASKS)) as pool:
                facts = list(pool.map(ev.reference, FRESH_TASKS, [source(t) for t in FRESH_TASKS]))
            built = time.monotonic() - t0
            refs = {
                t: {
                    "median_ms": f.timing.get("median_ms"),
                    "cv": f.timing.get("cv"),
                    "rounds": len(f.timing.get("rounds") or [1]),
                    "warnings": f.warnings,
                }
                for t, f in zip(FRESH_TASKS, facts)
            }
            rows = evaluate_all(ev, request, [k for k in kernels for _ in range(repeats)], 2)
            out.append({"evaluator": i + 1, "built_s": built, "references": refs, "kernels": summary(rows)})
        finally:
            ev.close()
    return out


def fresh_report(say: Callable[[str], None], runs: list[dict[str, Any]], kernels: list[str]) -> dict[str, Any]:
    """Prints the `fresh` table; returns what was checked."""
    head = " | ".join(f"evaluator {r['evaluator']}" for r in runs)
    say(f"| kernel | {head} | max / min - 1 | within 2 % |")
    say("|---|" + "---|" * len(runs) + "---|---|")
    checked = []
    for k in kernels:
        medians = [r["kernels"].get(k, {}).get("median") for r in runs]
        spread = max(medians) / min(medians) - 1 if all(medians) else None
        ok = spread is not None and spread <= FRESH_AGREEMENT
        checked.append({"candidate": k, "medians": medians, "spread": spread, "ok": ok})
        say(
            f"| {k} | "
            + " | ".join(_fmt(m) for m in medians)
            + f" | {'-' if spread is None else f'{spread:.2%}'} | {'yes' if ok else 'NO'} |"
        )
    say("")
    for r in runs:
        refs = "; ".join(
            f"{t.split('/')[-1]} {_fmt(x['median_ms'])} ms (CV {x['cv'] or 0:.2%}, {x['rounds']} measurement(s))"
            for t, x in r["references"].items()
        )
        say(f"evaluator {r['evaluator']}: 4 references built at once in {r['built_s']:.1f} s: {refs}")
        for t, x in r["references"].items():
            for w in x["warnings"]:
                if "noisy" in w:
                    say(f"  {t}: {w}")
    return {"kernels": checked, "all_within": all(x["ok"] for x in checked)}


def _fmt(x: float | None, digits: int = 4) -> str:
    return "-" if x is None else f"{x:.{digits}f}"
