#!/usr/bin/env python3
"""GPU bench of the labels' baselines: PyTorch eager, torch.compile and speed-of-light per task.

Usage (from anywhere; paths are the script's):
    python3 scripts/labels_gpu_bench.py [--out DIR] [--deadline-s 450] [--modes default]
                                        [--compile-limit-s 120] [--tf32 torch_flags]

Tasks: the rollout bench's (data/gpu-tasks/*.py, at their sizes) and the tasks of the evaluator's
honest candidates (python/tests/candidates/tasks, at the GPU sizes of scripts/eval_gpu_bench.py).
For each task, on the current CUDA device, with the evaluator's timing method (`timing.Timer`:
buffer sets, L2 flushed before every sample, CUDA graphs where capture works, the evaluator's
default warm-up, sample counts and budget from evaluator/defaults.json):

- eager: the task's `Model`;
- compile: `torch.compile(Model, mode=...)` for each of `--modes` (`default`,
  `max-autotune-no-cudagraphs`, ...), its compile time (first call) against `--compile-limit-s`
  (a compile that fails or passes the limit gives its reason; the limit is checked after the
  call returns: a compile is not interruptible in-process);
- the honest candidate's `ModelNew` where the task has one (timing only: the evaluator's
  correctness checks are the verdict phase of eval_gpu_bench.py);
- speed-of-light (`ksmith.evaluator.speed_of_light`): FLOPs by class from
  `torch.utils.flop_counter`, bytes both compulsory (inputs, outputs, parameters and buffers,
  once) and as eager moves them (the probe's `est_bytes`), under the `--tf32` policy and, for
  comparison, `never`.

Speedups come with 95 % intervals: a percentile bootstrap (2000 resamples, seed 0) of the ratio
of medians, the two sides resampled independently (they are timed one after the other, not in
pairs). Writes DIR/labels.json and DIR/labels.md and prints the table; tasks that would run past
`--deadline-s` are skipped and say so.
"""

from __future__ import annotations

import argparse
import functools
import glob
import json
import os
import random
import statistics
import sys
import time
import traceback
import types
from collections.abc import Callable
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402
from eval_gpu_bench import CAND, candidate_source, task_source  # noqa: E402
from ksmith.evaluator import speed_of_light as sol  # noqa: E402
from ksmith.evaluator import timing  # noqa: E402
from ksmith.evaluator.child_common import load_module  # noqa: E402
from ksmith.evaluator.evaluate import merge_options  # noqa: E402
from ksmith.probe.work import measure as measure_work  # noqa: E402

RESAMPLES = 2000


def load(text: str, name: str) -> types.ModuleType:
    """The program `text` as a module, imported from a file (Triton reads a kernel's source) as
    the evaluator's children import theirs."""
    import tempfile

    path = os.path.join(tempfile.mkdtemp(prefix="ksmith-labels-"), f"{name}.py")
    with open(path, "w") as f:
        f.write(text)
    return load_module(path, name)


def tasks() -> list[tuple[str, str, str | None]]:
    """(label, program text, honest candidate text or None) of every task."""
    out: list[tuple[str, str, str | None]] = []
    for path in sorted(glob.glob(os.path.join(ROOT, "data", "gpu-tasks", "*.py"))):
        out.append(("rollout/" + os.path.basename(path)[:-3], open(path).read(), None))
    manifest = json.load(open(os.path.join(CAND, "manifest.json")))
    honest: dict[str, str] = {}
    for entry in manifest["honest"]:
        honest.setdefault(entry["task"], entry["candidate"])
    for task, cand in sorted(honest.items()):
        out.append(("honest/" + os.path.basename(task)[:-3], task_source(task, True), candidate_source(cand, True)))
    return out


def time_calls(timer: timing.Timer, cfg: dict[str, Any], fn: Any, inputs: list[Any]) -> dict[str, Any]:
    """`fn` timed as the evaluator times a program: its buffer sets, graphs where they capture."""
    sets = timing.input_sets(cfg, inputs, "cuda")
    fns: list[Callable[[], Any]] = [functools.partial(fn, *s) for s in sets]
    with torch.no_grad():
        graphs, why = timer.capture_all(fns)
        stats = timer.measure(fns, graphs)
    return {
        "median_ms": stats["median_ms"],
        "cv": stats["cv"],
        "samples": stats["samples"],
        "method": stats["method"],
        "no_graph": why or None,
        "samples_ms": stats["samples_ms"],
    }


def ratio_interval(num: list[float], den: list[float], seed: int = 0) -> tuple[float, float, float]:
    """median(num) / median(den) and its 95 % percentile-bootstrap interval (unpaired)."""
    rng = random.Random(seed)
    draws = []
    for _ in range(RESAMPLES):
        a = statistics.median(rng.choices(num, k=len(num)))
        b = statistics.median(rng.choices(den, k=len(den)))
        draws.append(a / b)
    draws.sort()
    lo, hi = draws[int(0.025 * (RESAMPLES - 1))], draws[int(0.975 * (RESAMPLES - 1))]
    return statistics.median(num) / statistics.median(den), lo, hi


def tensor_bytes(value: Any) -> int:
    from ksmith.probe.work import flatten_outputs

    return sum(t.numel() * t.element_size() for t in flatten_outputs(value, torch, []))


def speed_of_light(model: Any, inputs: list[Any], policy: str, table: list[dict[str, Any]]) -> dict[str, Any]:
    """SOL of one call under `policy` and `never`, from compulsory and from eager bytes."""
    from torch.utils.flop_counter import FlopCounterMode

    with torch.no_grad():
        counter = FlopCounterMode(display=False)
        with counter:
            out = model(*inputs)
        _, work = measure_work(model, inputs, torch)
    counts = counter.get_flop_counts().get("Global", {})
    flops = sol.flop_classes(counts)
    state = list(model.parameters()) + list(model.buffers())
    compulsory = tensor_bytes(list(inputs)) + tensor_bytes(out) + tensor_bytes(state)
    dtype = sol.dominant_dtype(list(inputs) + state)
    device = torch.cuda.get_device_name()
    flags = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    res: dict[str, Any] = {"flops": flops, "bytes_compulsory": compulsory, "bytes_eager": work.bytes, "dtype": dtype}
    for p in dict.fromkeys([policy, "never"]):
        tf32 = sol.tf32_classes(p, *flags)
        res[p] = {
            "compulsory": sol.sol(device, dtype, flops, compulsory, tf32, table),
            "eager_bytes": sol.sol(device, dtype, flops, work.bytes, tf32, table),
        }
    res["tf32_flags"] = {"matmul": flags[0], "conv": flags[1]}
    return res


def bench_task(label: str, text: str, cand: str | None, args: argparse.Namespace, timer: Any, cfg: Any) -> dict:
    row: dict[str, Any] = {"task": label}
    mod = load(text, "task_" + label.replace("/", "_"))
    torch.manual_seed(0)
    init = mod.get_init_inputs()
    model = mod.Model(*init).cuda().eval()
    inputs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in mod.get_inputs()]
    row["eager"] = time_calls(timer, cfg, model, inputs)
    row["sol"] = speed_of_light(model, inputs, args.tf32, sol.load_peaks())
    row["compile"] = {}
    for mode in args.modes.split(","):
        torch._dynamo.reset()
        entry: dict[str, Any] = {}
        t0 = time.monotonic()
        try:
            compiled = torch.compile(model, mode=None if mode == "default" else mode)
            with torch.no_grad():
                compiled(*inputs)
            torch.cuda.synchronize()
            entry["compile_s"] = time.monotonic() - t0
            if entry["compile_s"] > args.compile_limit_s:
                entry["why"] = f"compiling took {entry['compile_s']:.0f} s, over the {args.compile_limit_s:.0f} s limit"
            else:
                entry.update(time_calls(timer, cfg, compiled, inputs))
        except Exception as e:  # noqa: BLE001 - a task that cannot be compiled gets a reason
            entry["why"] = f"{type(e).__name__}: {str(e)[:300]}"
        row["compile"][mode] = entry
    if cand is not None:
        cmod = load(cand, "cand_" + label.replace("/", "_"))
        torch.manual_seed(0)
        new = cmod.ModelNew(*init).cuda().eval()
        row["honest"] = time_calls(timer, cfg, new, inputs)
    return row


def fmt_interval(v: tuple[float, float, float] | None) -> str:
    return f"{v[0]:.3f} [{v[1]:.3f}, {v[2]:.3f}]" if v else "-"


def summarize(row: dict[str, Any], policy: str) -> dict[str, Any]:
    """The table's figures of one task."""
    eager = row["eager"]
    comp: dict[str, Any] = row["compile"].get("default") or next(iter(row["compile"].values()), {})
    honest = row.get("honest")
    s: dict[str, Any] = {"task": row["task"], "eager_ms": eager["median_ms"], "eager_cv": eager["cv"]}
    s["compile_ms"] = comp.get("median_ms")
    s["compile_s"] = comp.get("compile_s")
    s["compile_why"] = comp.get("why")
    s["compile_over_eager"] = ratio_interval(eager["samples_ms"], comp["samples_ms"]) if "samples_ms" in comp else None
    if honest:
        s["honest_ms"] = honest["median_ms"]
        s["honest_over_eager"] = ratio_interval(eager["samples_ms"], honest["samples_ms"], 1)
        if "samples_ms" in comp:
            s["honest_over_compile"] = ratio_interval(comp["samples_ms"], honest["samples_ms"], 2)
    light = row["sol"][policy]["compulsory"]
    s["sol_ms"] = light.get("ms")
    s["sol_why"] = light.get("why")
    s["sol_bound"] = light.get("bound")
    s["sol_ms_never_tf32"] = row["sol"]["never"]["compulsory"].get("ms")
    s["sol_ms_eager_bytes"] = row["sol"][policy]["eager_bytes"].get("ms")
    s["sol_frac_eager"] = sol.fraction(s["sol_ms"], s["eager_ms"])
    s["sol_frac_compile"] = sol.fraction(s["sol_ms"], s["compile_ms"])
    s["sol_frac_honest"] = sol.fraction(s["sol_ms"], s.get("honest_ms"))
    return s


def table(rows: list[dict[str, Any]]) -> str:
    def f(x: Any, spec: str = ".4f") -> str:
        return "-" if x is None else format(x, spec)

    head = (
        "| task | eager ms (CV) | compile ms | compile s | eager/compile [95 %] | honest ms | honest/eager [95 %] "
        "| honest/compile [95 %] | SOL ms (bound) | SOL ms no TF32 | SOL ms eager bytes | SOL frac eager | "
        "compile | honest |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n"
    )
    lines = []
    for s in rows:
        lines.append(
            f"| {s['task']} | {f(s['eager_ms'])} ({f(s['eager_cv'], '.2%')}) | "
            f"{f(s['compile_ms']) if s['compile_ms'] is not None else s['compile_why']} | {f(s['compile_s'], '.1f')} | "
            f"{fmt_interval(s['compile_over_eager'])} | {f(s.get('honest_ms'))} | "
            f"{fmt_interval(s.get('honest_over_eager'))} | {fmt_interval(s.get('honest_over_compile'))} | "
            f"{f(s['sol_ms']) if s['sol_ms'] is not None else s['sol_why']} ({s['sol_bound'] or '-'}) | "
            f"{f(s['sol_ms_never_tf32'])} | {f(s['sol_ms_eager_bytes'])} | {f(s['sol_frac_eager'], '.2f')} | "
            f"{f(s['sol_frac_compile'], '.2f')} | {f(s['sol_frac_honest'], '.2f')} |"
        )
    return head + "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.environ.get("OUT", "/tmp/ksmith-labels-bench"))
    ap.add_argument("--deadline-s", type=float, default=450.0)
    ap.add_argument("--modes", default="default", help="torch.compile modes, comma-separated")
    ap.add_argument("--compile-limit-s", type=float, default=120.0)
    ap.add_argument("--tf32", default="torch_flags", choices=sol.TF32_POLICIES)
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("labels_gpu_bench: no CUDA device", file=sys.stderr)
        return 2
    os.makedirs(args.out, exist_ok=True)
    t0 = time.monotonic()
    cfg = timing.per_process(merge_options({})["timing"])
    timer = timing.Timer(cfg, "cuda")
    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}, CUDA {torch.version.cuda}")
    raw, rows, skipped = [], [], []
    for label, text, cand in tasks():
        if time.monotonic() - t0 > args.deadline_s:
            skipped.append(label)
            continue
        t = time.monotonic()
        try:
            row = bench_task(label, text, cand, args, timer, cfg)
        except Exception:  # noqa: BLE001 - one broken task must not lose the others' figures
            print(f"{label}: failed\n{traceback.format_exc()}", file=sys.stderr)
            skipped.append(label + " (failed)")
            continue
        raw.append(row)
        rows.append(summarize(row, args.tf32))
        print(f"{label}: {time.monotonic() - t:.1f} s", flush=True)
        with open(os.path.join(args.out, "labels.json"), "w") as fh:
            json.dump({"rows": raw, "summary": rows}, fh)
    md = table(rows)
    if skipped:
        md += f"\nskipped (deadline or failure): {', '.join(skipped)}\n"
    md += f"\nwall time {time.monotonic() - t0:.0f} s; TF32 policy {args.tf32}; modes {args.modes}\n"
    with open(os.path.join(args.out, "labels.md"), "w") as fh:
        fh.write(md)
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
