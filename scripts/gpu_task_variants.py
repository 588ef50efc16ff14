"""Variants of the GPU bench problems by size, so a rollout bench has enough tasks to fill every
GPU of a host (data/gpu-tasks has three).

    python3 scripts/gpu_task_variants.py --from data/gpu-tasks --to OUT/tasks --per-task 16

Each `*.py` problem of `--from` (KernelBench format, with a `TASK:<name>` marker in its
docstring and GPU-sized module-level constants) gives `--per-task` programs `<name>_v<k>.py`:
the marker becomes `TASK:<name>_v<k>` (the scripted teacher answers a variant from `<name>/`,
see its `--variant-pattern`) and the first module-level integer constant (the rows, or the side
of a square input) is scaled by the k-th factor of `FACTORS` times `--scale` (default 1), rounded
to a multiple of 128. The scripted answers read every size from their inputs, so they fit each
variant.
"""

from __future__ import annotations

import argparse
import os
import re
import sys

#: Size factors of the first constant, in order (variant k takes factor k mod len).
FACTORS = (1.0, 0.75, 0.5, 0.625, 0.875, 0.375, 1.25, 0.25)
CONSTANT = re.compile(r"^([A-Z][A-Z0-9_]*) = (\d+)$", re.MULTILINE)
MARKER = re.compile(r"TASK:(\w+)")


def variant(text: str, name: str, k: int, scale: float = 1.0) -> str:
    """The k-th variant of problem `name` (see the module doc); ValueError when the program has
    no marker or no size constant."""
    if not MARKER.search(text):
        raise ValueError(f"{name}: no TASK:<name> marker in the program")
    first = CONSTANT.search(text)
    if first is None:
        raise ValueError(f"{name}: no module-level integer constant to scale")
    size = max(128, round(int(first.group(2)) * FACTORS[k % len(FACTORS)] * scale / 128) * 128)
    text = text[: first.start()] + f"{first.group(1)} = {size}" + text[first.end() :]
    return MARKER.sub(lambda m: f"TASK:{m.group(1)}_v{k}", text, count=1)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--from", dest="src", required=True, help="folder of problems (not searched below)")
    ap.add_argument("--to", required=True, help="folder to write the variants into (created)")
    ap.add_argument("--per-task", type=int, default=16)
    ap.add_argument("--scale", type=float, default=1.0, help="every size factor times this")
    a = ap.parse_args()
    if a.per_task < 1:
        print("--per-task must be at least 1", file=sys.stderr)
        return 2
    if not a.scale > 0:
        print("--scale must be positive", file=sys.stderr)
        return 2
    os.makedirs(a.to, exist_ok=True)
    problems = sorted(f for f in os.listdir(a.src) if f.endswith(".py"))
    if not problems:
        print(f"{a.src}: no *.py problem", file=sys.stderr)
        return 2
    written = 0
    for f in problems:
        name = f[:-3]
        text = open(os.path.join(a.src, f)).read()
        for k in range(a.per_task):
            try:
                out = variant(text, name, k, a.scale)
            except ValueError as e:
                print(f"{os.path.join(a.src, f)}: {e}", file=sys.stderr)
                return 1
            with open(os.path.join(a.to, f"{name}_v{k}.py"), "w") as w:
                w.write(out)
            written += 1
    print(f"{written} task variants of {len(problems)} problems in {a.to}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
