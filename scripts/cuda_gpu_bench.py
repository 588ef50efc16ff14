#!/usr/bin/env python3
"""GPU bench of the evaluator's CUDA backend: verdicts of the project's CUDA candidates against
their expected ones, compile times cold and cached, the build cache's hit rate, and candidates
per GPU-minute for CUDA next to Triton on the same tasks.

Usage (from the repository root, on a machine with a GPU, torch, nvcc and a C++ compiler):
    python3 scripts/cuda_gpu_bench.py [--out DIR] [--deadline-s 540] [--concurrency 6]
                                      [--throughput 6] [--wheels .whl] [--only TEXT]

`--only TEXT` runs the verdicts phase alone, for the candidates whose path contains TEXT (a
re-run of one candidate after a fix, without the compile and throughput phases).

ninja must be on PATH or in the interpreter's environment; when it is missing and `--wheels DIR`
holds a ninja wheel (`pip download --no-deps -d .whl ninja==1.13.2` on a machine with the
registry), it is installed from there first (`pip install --no-index --find-links DIR ninja`).

Phases (each printed and written to DIR/bench.json as soon as it is done; a phase that would run
past `--deadline-s` is skipped and says so):

1. toolchain: what `cudacache.find_toolchain` found (or the `backend_unavailable` message, and
   the bench stops there);
2. compile: the honest CUDA candidates' extensions built through the backend's compile step
   (`CudaBackend.prepare`: a confined build child, then adoption into the cache), all at once,
   seconds each cold; then the same again, served by the cache (seconds each, cached);
3. verdicts: every candidate of python/tests/candidates/cuda/manifest.json, `--concurrency` at a
   time, with the static checks on (`expect`) and off (`runtime`, where the manifest gives one),
   against the expected verdict; the static-off evaluator shares the first one's GPU gate and
   CUDA backend (so its build cache): a candidate is built once for both;
4. throughput: `--throughput` distinct honest candidates per backend (the honest CUDA kernels
   and the Triton answers of data/gpu-tasks/answers, each with a unique comment, so every CUDA one
   is compiled cold and every Triton one JIT-compiled), references built beforehand,
   `--concurrency` in flight, timing included: candidates per GPU-minute for each backend, CUDA
   cold, CUDA with every build cached (the same candidates again), and Triton; the cache's
   hits and misses over the whole run.

The last line says whether every verdict matched. Exit status 0 when it did, 1 otherwise, 2 when
the toolchain is missing.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))

CUDA_CANDIDATES = os.path.join(ROOT, "python", "tests", "candidates", "cuda")
ANSWERS = os.path.join(ROOT, "data", "gpu-tasks", "answers")
#: Tasks of the test suite scaled to GPU sizes (module constants).
GPU_SIZES = {"python/tests/candidates/tasks/matmul.py": {"M": "2048", "K": "2048", "N": "2048"}}


def task_source(path: str) -> str:
    src = open(os.path.join(ROOT, path)).read()
    for name, value in GPU_SIZES.get(path, {}).items():
        src = re.sub(rf"^{name} = .*$", f"{name} = {value}", src, flags=re.M)
    return src


def ensure_ninja(wheels: str | None) -> str:
    """Where ninja is, installing it from `wheels` when it is missing."""
    venv_bin = os.path.dirname(sys.executable)
    found = shutil.which("ninja") or shutil.which("ninja", path=venv_bin)
    if found or not wheels:
        return found or "missing"
    out = subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-index", "--find-links", wheels, "ninja"],
        capture_output=True,
        text=True,
    )
    found = shutil.which("ninja") or shutil.which("ninja", path=venv_bin)
    return f"{found} (installed from {wheels})" if found else f"missing (pip: {out.stderr.strip()[-300:]})"


class Report:
    def __init__(self, out: str):
        self.out = out
        os.makedirs(out, exist_ok=True)
        self.data: dict[str, Any] = {}
        self.lines: list[str] = []

    def say(self, line: str = "") -> None:
        print(line, flush=True)
        self.lines.append(line)
        with open(os.path.join(self.out, "bench.md"), "w") as f:
            f.write("\n".join(self.lines) + "\n")

    def put(self, key: str, value: Any) -> None:
        self.data[key] = value
        with open(os.path.join(self.out, "bench.json"), "w") as f:
            json.dump(self.data, f, indent=1, default=str)


def first_line(text: str) -> str:
    return (text or "").strip().splitlines()[0][:140] if (text or "").strip() else ""


def gist(text: str) -> str:
    """The line of a verdict's log that says what went wrong, for a table cell: the compiler's
    first error, a traceback's last line (the exception), else the first line."""
    lines = [ln.strip() for ln in (text or "").splitlines() if ln.strip()]
    if not lines:
        return ""
    if lines[0].startswith("Traceback"):
        line = lines[-1]
    else:
        line = next((ln for ln in lines[1:] if re.search(r"\berror\b", ln, re.I)), lines[0])
    return line[:200].replace("|", "\\|")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default="cuda-bench")
    p.add_argument("--deadline-s", type=float, default=540.0)
    p.add_argument("--concurrency", type=int, default=6)
    p.add_argument("--throughput", type=int, default=6)
    p.add_argument("--wheels", default=os.path.join(ROOT, ".whl"))
    p.add_argument("--only", default=None, help="verdicts only, of the candidates whose path contains this")
    a = p.parse_args()
    t_start = time.monotonic()
    rep = Report(a.out)

    def left() -> float:
        return a.deadline_s - (time.monotonic() - t_start)

    ninja = ensure_ninja(a.wheels if os.path.isdir(a.wheels) else None)
    from ksmith.confine import Policy
    from ksmith.evaluator.backend import BackendUnavailable, CandidateFailed
    from ksmith.evaluator.evaluate import DeviceEvaluator

    opts: dict[str, Any] = {"compile_timeout_s": 300, "run_timeout_s": 60, "timing_timeout_s": 120}
    ev = DeviceEvaluator("cuda", opts, policy=Policy(require=False))
    ev_rt = DeviceEvaluator("cuda", dict(opts, static_checks=False), policy=Policy(require=False), gate=ev.gate)
    rep.say(f"# CUDA backend bench ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())})")
    rep.say()
    rep.say("command: `python3 scripts/cuda_gpu_bench.py " + " ".join(sys.argv[1:]) + "`")
    rep.say(f"hardware: {json.dumps(ev.default_hardware)}")
    try:
        # -- 1. toolchain ----------------------------------------------------------------------
        cuda = ev.backend("cuda")
        try:
            tc = cuda.toolchain()  # type: ignore[attr-defined]
        except BackendUnavailable as missing:
            rep.say(f"ninja: {ninja}")
            rep.say(f"backend_unavailable: {missing}")
            rep.put("toolchain", {"missing": str(missing), "ninja": ninja})
            return 2
        # the static-off evaluator builds through the same backend: one cache, one build per extension
        ev_rt.backends["cuda"] = cuda
        rep.say(
            f"toolchain: nvcc {tc.nvcc} ({tc.nvcc_version.splitlines()[-1]}), ninja {ninja}, {tc.cxx_version}, "
            f"torch {tc.torch}, CUDA {tc.cuda}, arch {tc.arch}"
        )
        rep.put("toolchain", {**tc.__dict__, "ninja_found": ninja})
        manifest = json.load(open(os.path.join(CUDA_CANDIDATES, "manifest.json")))
        honest = manifest["honest"]

        def cand(rel: str) -> str:
            return open(os.path.join(CUDA_CANDIDATES, rel)).read()

        # -- 2. compile: cold, then cached ----------------------------------------------------
        rep.say()
        rep.say("## Compile step (honest candidates, all at once; cold, then from the cache)")
        rep.say()
        rep.say("| candidate | cold s | cached s | cached |")
        rep.say("|---|---|---|---|")

        def compile_step(e: dict[str, Any]) -> Any:
            try:
                return cuda.prepare(cand(e["candidate"]))
            except CandidateFailed as failed:
                return failed

        chosen = [] if a.only else honest
        with ThreadPoolExecutor(max(1, len(chosen))) as pool:
            cold = list(pool.map(compile_step, chosen))
        warm = [compile_step(e) for e in chosen]
        rows = []
        if a.only:
            rep.say(f"(skipped: --only {a.only})")
        for e, c, w in zip(chosen, cold, warm):
            if isinstance(c, CandidateFailed) or isinstance(w, CandidateFailed):
                why = first_line(c.message if isinstance(c, CandidateFailed) else w.message)
                rows.append({"candidate": e["candidate"], "failed": why})
                rep.say(f"| {e['candidate']} | failed: {why} | - | - |")
                continue
            rows.append({"candidate": e["candidate"], "cold_s": c.compile_s, "cached_s": w.compile_s, "hit": w.cached})
            rep.say(f"| {e['candidate']} | {c.compile_s:.1f} | {w.compile_s:.3f} | {w.cached} |")
        rep.say(f"build child seconds: {cuda.stats()['builds_s']}")  # type: ignore[attr-defined]
        rep.put("compile", rows)

        # -- 3. verdicts ----------------------------------------------------------------------
        rep.say()
        rep.say("## Verdicts (static checks on: expect; off: runtime)")
        rep.say()
        jobs = []
        for e in manifest["honest"] + manifest["adversarial"]:
            if a.only and a.only not in e["candidate"]:
                continue
            jobs.append((e, "static", e["expect"]))
            if e.get("runtime"):
                jobs.append((e, "runtime", e["runtime"]))
        for task in sorted({e["task"] for e, _, _ in jobs}):
            for each in (ev, ev_rt):
                try:
                    each.reference(task, task_source(task))
                except Exception as err:  # noqa: BLE001 - each evaluation then says so
                    rep.say(f"reference {task}: {type(err).__name__}: {first_line(str(err))}")

        def run(job: tuple[dict[str, Any], str, list[Any]]) -> tuple[dict[str, Any], float]:
            e, layer, _ = job
            req = {
                "task_id": e["task"],
                "reference": task_source(e["task"]),
                "candidate": cand(e["candidate"]),
                "measure": True,
                "backend": "cuda",
            }
            t = time.monotonic()
            try:
                res = (ev_rt if layer == "runtime" else ev).evaluate(req)
            except Exception as err:  # noqa: BLE001 - a bench row, not a crash
                res = {"status": "error", "hack": None, "error_log": f"{type(err).__name__}: {err}"}
            return res, time.monotonic() - t

        rep.say("| candidate | layer | expected | got | ok | s | speedup | note |")
        rep.say("|---|---|---|---|---|---|---|---|")
        verdicts = []
        all_ok = True
        if left() < 120:
            rep.say("(skipped: deadline)")
            all_ok = False
        else:
            with ThreadPoolExecutor(a.concurrency) as pool:
                results = list(pool.map(run, jobs))
            for (e, layer, want), (res, dt) in zip(jobs, results):
                got = [res.get("status"), res.get("hack")]
                ok = got == list(want)
                if ok and e.get("feedback"):
                    ok = e["feedback"] in res.get("error_log", "")
                all_ok &= ok
                speed = res.get("speedup")
                note = gist(res.get("error_log", "")) if not ok or got[0] != "correct" else ""
                rep.say(
                    f"| {e['candidate']} | {layer} | {want[0]} {want[1] or ''} | {got[0]} {got[1] or ''} | "
                    f"{'yes' if ok else 'NO'} | {dt:.1f} | {'-' if speed is None else f'{speed:.3f}'} | {note} |"
                )
                verdicts.append({"candidate": e["candidate"], "layer": layer, "want": want, "result": res, "s": dt})
            rep.put("verdicts", verdicts)

        # -- 4. throughput --------------------------------------------------------------------
        rep.say()
        rep.say(f"## Throughput ({a.throughput} distinct candidates per backend, {a.concurrency} in flight)")
        rep.say()
        rep.say("| backend | candidates | correct | wall s | candidates per GPU-minute | median s each |")
        rep.say("|---|---|---|---|---|---|")
        stamp = f"{time.time():.0f}"
        tasks = [e["task"] for e in honest]

        def distinct(backend: str, i: int) -> tuple[str, str]:
            task = tasks[i % len(tasks)]
            if backend == "cuda":
                src = cand(honest[i % len(honest)]["candidate"])
                src = src.replace('cuda_source = r"""', f'cuda_source = r"""\n// bench {stamp} #{i}', 1)
            else:
                name = os.path.splitext(os.path.basename(task))[0]
                src = open(os.path.join(ANSWERS, name, "0.py")).read() + f"\n# bench {stamp} #{i}\n"
            return task, src

        throughput = []
        rounds = (
            ("cuda (cold builds)", "cuda"),
            ("cuda (cached builds: the same candidates again)", "cuda"),
            ("triton", "triton"),
        )
        for label, backend in rounds:
            if a.only:
                rep.say(f"| {label} | skipped: --only {a.only} |")
                continue
            if left() < 90:
                rep.say(f"| {label} | skipped: deadline |")
                continue
            reqs = []
            for i in range(a.throughput):
                task, src = distinct(backend, i)
                reqs.append(
                    {
                        "task_id": task,
                        "reference": task_source(task),
                        "candidate": src,
                        "measure": True,
                        "backend": backend,
                    }
                )
            t0 = time.monotonic()

            def one(req: dict[str, Any]) -> tuple[str, float]:
                t = time.monotonic()
                try:
                    return ev.evaluate(req)["status"], time.monotonic() - t
                except Exception as err:  # noqa: BLE001
                    return f"error: {err}", time.monotonic() - t

            with ThreadPoolExecutor(a.concurrency) as pool:
                done = list(pool.map(one, reqs))
            wall = time.monotonic() - t0
            correct = sum(1 for s, _ in done if s == "correct")
            per_min = len(done) / (wall / 60.0)
            med = statistics.median(t for _, t in done)
            rep.say(f"| {label} | {len(done)} | {correct} | {wall:.1f} | {per_min:.1f} | {med:.1f} |")
            throughput.append(
                {
                    "backend": label,
                    "n": len(done),
                    "correct": correct,
                    "wall_s": wall,
                    "per_gpu_minute": per_min,
                    "statuses": [s for s, _ in done],
                }
            )
        rep.put("throughput", throughput)
        stats = cuda.stats()  # type: ignore[attr-defined]
        rep.say()
        rate = "-" if stats["hit_rate"] is None else f"{stats['hit_rate']:.0%}"
        rep.say(
            f"build cache over the run: {stats['hits']} hits, {stats['misses']} misses, hit rate {rate}; builds (s): "
            f"median {statistics.median(stats['builds_s']) if stats['builds_s'] else 0:.1f}, "
            f"max {max(stats['builds_s'], default=0):.1f}"
        )
        rep.put("cache", stats)
        rep.say(f"total {time.monotonic() - t_start:.0f} s; every verdict as expected: {'yes' if all_ok else 'NO'}")
        return 0 if all_ok else 1
    finally:
        ev_rt.backends.pop("cuda", None)
        ev_rt.close()
        ev.close()


if __name__ == "__main__":
    sys.exit(main())
