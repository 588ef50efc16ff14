"""Times sized programs in PyTorch eager, to check the probe's sizing on a GPU.

    python scripts/sized_gpu_check.py --programs DIR [--device cuda] [--runs 30] [--out DIR]

``DIR`` holds KernelBench-format programs (``*.py``: ``Model``, ``get_inputs()``,
``get_init_inputs()``, sizes as module-level constants) and a ``manifest.json`` mapping each file
name to what the probe recorded (``est_ms``, ``est_flops``, ``est_bytes``, ``sizes``,
``alt_sizes``). For each program: build ``Model(*get_init_inputs())`` on the device, move the
inputs there, warm up, then time ``--runs`` eager forward calls without gradients (CUDA events on
a GPU, ``perf_counter`` on the CPU) and take the median. With ``--alternates`` each alternate
size set also runs once (the hidden-shape sets the evaluator will use). Prints a table and
writes ``sized_gpu_check.json`` to ``--out`` (default ``$OUT``, else the current folder).

The check passes when every program runs and its median is within ``--min-ms``..``--max-ms``
(0.05..50 ms: enough work for a GPU timing to mean something, not so much that evaluation
crawls); the exit code is 1 otherwise. ``--device cpu --alternate 0`` runs the same code on the
CPU at each program's first alternate size set (the moderate one the probe confirmed on the CPU),
to check the script itself.

The programs come from public repositories and run here unconfined: run this on a machine
meant for it.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time
import traceback
import types

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "python"))
from ksmith.shared.constants import set_constants  # noqa: E402 - the probe's definition of a constant


def load(text: str, name: str) -> dict:
    module = types.ModuleType("__ksmith_program__")
    module.__file__ = name
    sys.modules["__ksmith_program__"] = module
    exec(compile(text, name, "exec"), module.__dict__)  # noqa: S102 - the point of the script
    return module.__dict__


def to_device(value, device, torch):
    if isinstance(value, torch.Tensor):
        return value.to(device)
    if isinstance(value, (list, tuple)):
        return type(value)(to_device(v, device, torch) for v in value)
    if isinstance(value, dict):
        return {k: to_device(v, device, torch) for k, v in value.items()}
    return value


def build(text: str, name: str, device: str, torch):
    ns = load(text, name)
    torch.manual_seed(42)
    raw = ns["get_init_inputs"]()
    if (
        isinstance(raw, (list, tuple))
        and len(raw) == 2
        and isinstance(raw[0], (list, tuple))
        and isinstance(raw[1], dict)
    ):
        args, kwargs = list(raw[0]), dict(raw[1])
    else:
        args, kwargs = list(raw), {}
    model = ns["Model"](*args, **kwargs).to(device)
    inputs = ns["get_inputs"]()
    inputs = list(inputs) if isinstance(inputs, (list, tuple)) else [inputs]
    return model, to_device(inputs, device, torch)


def time_forward(model, inputs, device: str, runs: int, warmup: int, torch) -> list[float]:
    times = []
    with torch.no_grad():
        for _ in range(warmup):
            model(*inputs)
        if device.startswith("cuda"):
            torch.cuda.synchronize()
            for _ in range(runs):
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                model(*inputs)
                end.record()
                end.synchronize()
                times.append(start.elapsed_time(end))
        else:
            for _ in range(runs):
                t0 = time.perf_counter()
                model(*inputs)
                times.append((time.perf_counter() - t0) * 1000.0)
    return times


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--programs", required=True, help="folder of sized programs with manifest.json")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--min-ms", type=float, default=0.05)
    ap.add_argument("--max-ms", type=float, default=50.0)
    ap.add_argument("--alternate", type=int, default=None, help="time alternate size set N instead (CPU smoke runs)")
    ap.add_argument("--alternates", action="store_true", help="also run each alternate size set once")
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    a = ap.parse_args()

    import torch

    manifest = json.load(open(os.path.join(a.programs, "manifest.json")))
    hardware = torch.cuda.get_device_name(0) if a.device.startswith("cuda") else "cpu"
    print(
        f"sized GPU check: {len(manifest)} programs on {hardware}, torch {torch.__version__}, "
        f"median of {a.runs} runs after {a.warmup} warm-up"
    )
    header = f"{'program':<58} {'est ms':>9} {'median ms':>10} {'ratio':>7} {'GFLOP':>9} {'alts':>5}  status"
    print(header)
    rows = []
    for name in sorted(manifest):
        info = manifest[name]
        text = open(os.path.join(a.programs, name)).read()
        sizes = json.loads(info.get("sizes") or "{}")
        if a.alternate is not None:
            sizes = json.loads(info.get("alt_sizes") or "[]")[a.alternate]
            text = set_constants(text, sizes)
        row = {"program": name, "est_ms": info.get("est_ms"), "est_flops": info.get("est_flops"), "sizes": sizes}
        try:
            model, inputs = build(text, name, a.device, torch)
            times = time_forward(model, inputs, a.device, a.runs, a.warmup, torch)
            row["median_ms"] = statistics.median(times)
            row["min_ms"] = min(times)
            row["status"] = "ok" if a.min_ms <= row["median_ms"] <= a.max_ms else "out_of_range"
            del model, inputs
        except Exception as exc:  # noqa: BLE001 - a program that fails is a row
            row["status"] = "error"
            row["error"] = f"{type(exc).__name__}: {exc}"[:500]
            traceback.print_exc(limit=2)
        alts_ok = 0
        if a.alternates:
            for alt in json.loads(info.get("alt_sizes") or "[]"):
                try:
                    model, inputs = build(set_constants(text, alt), name, a.device, torch)
                    time_forward(model, inputs, a.device, 1, 0, torch)
                    alts_ok += 1
                    del model, inputs
                except Exception as exc:  # noqa: BLE001
                    row.setdefault("alt_errors", []).append(f"{alt}: {type(exc).__name__}: {exc}"[:300])
            row["alternates_ok"] = alts_ok
        if a.device.startswith("cuda"):
            torch.cuda.empty_cache()
        rows.append(row)
        med = row.get("median_ms")
        est = row.get("est_ms")
        ratio = f"{med / est:.2f}" if med and est else "-"
        gflop = f"{(row['est_flops'] or 0) / 1e9:.2f}"
        print(
            f"{name[:58]:<58} {est or 0:>9.3f} {med if med is not None else math.nan:>10.3f} {ratio:>7} {gflop:>9} "
            f"{alts_ok if a.alternates else '-':>5}  {row['status']} {row.get('error', '')[:80]}",
            flush=True,
        )
    ok = [r for r in rows if r["status"] == "ok"]
    meds = sorted(r["median_ms"] for r in rows if "median_ms" in r)
    summary = {
        "device": hardware,
        "torch": torch.__version__,
        "programs": len(rows),
        "in_range": len(ok),
        "range_ms": [a.min_ms, a.max_ms],
        "median_of_medians_ms": statistics.median(meds) if meds else None,
        "rows": rows,
    }
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "sized_gpu_check.json"), "w") as f:
        json.dump(summary, f, indent=1)
    print(
        f"{len(ok)}/{len(rows)} programs within {a.min_ms}..{a.max_ms} ms; "
        f"median of medians {summary['median_of_medians_ms']} ms; JSON in {a.out}/sized_gpu_check.json"
    )
    return 0 if len(ok) == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
