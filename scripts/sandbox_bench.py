"""Per-child cost of the sandbox, this checkout's against the previous one's, side by side.

    python scripts/sandbox_bench.py [--children 40] [--base 57ce60e]

Each variant is a warm probe worker (torch imported) that runs children the way the worker does
(`ksmith.probe.sandbox.Sandbox.run`); the variants take turns child by child, so both see the
same machine load. Prints the median and 90th percentile of the wall time per child:

- ``empty``: a runner that returns at once: what setting up and tearing down one sandboxed
  child costs (fork, namespaces, mounts, limits, seccomp, workspace, cgroup, result pipes);
- ``module``: the real runner on a small module (build it, guess, run, rewrite, verify twice).

Variants: ``base`` is the probe sandbox of commit `--base` (taken from git, default the last
commit before the shared sandbox), run as it ran (its worker alone); ``this`` is this
checkout's, its worker inside the launcher (bubblewrap). A last row measures the design that was
not chosen: a fresh bubblewrap sandbox with a fresh interpreter importing torch per module.
Needs git history for the base (else only this checkout is measured) and prints a table.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PYTHON_DIR = os.path.join(ROOT, "python")
BASE = "57ce60e"
#: The workers' scratch folder: a tmpfs at this path inside the sandbox, nothing on this machine.
SCRATCH = os.path.join(tempfile.gettempdir(), f"ksmith-bench-scratch-{os.getpid()}")

PROGRAM = """import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.fc = nn.Linear(n, 8)

    def forward(self, x):
        return torch.relu(self.fc(x))


def get_inputs():
    return [torch.rand(4, 16)]


def get_init_inputs():
    return [16]
"""

# Runs inside the variant's worker process: one child per request line ("empty" or "module"),
# answering with the wall time of that child; the variants take turns, so both see the same load.
DRIVER = """
import json, os, sys, tempfile, time
import torch
torch.set_num_threads(1)
from ksmith.probe import sandbox as S
from ksmith.probe.execute import run_request
program, variant = sys.argv[1], sys.argv[2]
if variant == "this":
    from ksmith.confine import Policy
    box = S.Sandbox(Policy.take_from_env())
else:
    root = tempfile.mkdtemp(prefix="ksmith-bench-")
    box = S.Sandbox(root)
request = {"program": program, "timeout_s": 30, "memory_mb": 2048, "output_cap_bytes": 1 << 20}
runners = {"empty": lambda r: {"status": "ok"}, "module": lambda r: run_request(r, torch)}
print(json.dumps({"info": box.info}), flush=True)
for line in sys.stdin:
    t0 = time.perf_counter()
    res = box.run(request, [], runners[line.strip()])
    assert res["status"] == "ok", res
    print(json.dumps(time.perf_counter() - t0), flush=True)
box.close()
if variant != "this":
    os.rmdir(root)
"""


class Variant:
    """A variant's warm worker, answering one child per request."""

    def __init__(self, variant: str, pythonpath: str):
        env = {**os.environ, "PYTHONPATH": pythonpath, "PYTHONDONTWRITEBYTECODE": "1"}
        args = ["-c", DRIVER, PROGRAM, variant]
        if variant == "this":
            policy = {"scratch": SCRATCH, "require": True}
            command = [sys.executable, "-s", "-m", "ksmith.confine", "--policy", json.dumps(policy), "--", *args]
        else:
            command = [sys.executable, *args]
        self.name = variant
        self.proc = subprocess.Popen(command, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.info = json.loads(self._line())["info"]
        self.times: dict[str, list[float]] = {"empty": [], "module": []}

    def _line(self) -> str:
        line = self.proc.stdout.readline()  # type: ignore[union-attr]
        if not line:
            raise SystemExit(f"{self.name}: the worker ended (exit {self.proc.wait()})")
        return line

    def child(self, kind: str) -> None:
        self.proc.stdin.write(kind + "\n")  # type: ignore[union-attr]
        self.proc.stdin.flush()  # type: ignore[union-attr]
        self.times[kind].append(json.loads(self._line()))

    def close(self) -> None:
        self.proc.stdin.close()  # type: ignore[union-attr]
        self.proc.wait()


def base_package(commit: str, folder: str) -> str | None:
    """The `python/` folder of `commit`, unpacked into `folder` (None without git)."""
    try:
        archive = subprocess.run(
            ["git", "-C", ROOT, "archive", commit, "python/ksmith"], capture_output=True, check=True
        ).stdout
        subprocess.run(["tar", "-x", "-C", folder], input=archive, check=True)
    except (OSError, subprocess.CalledProcessError):
        return None
    return os.path.join(folder, "python")


def fresh_interpreter_per_module(runs: int) -> list[float]:
    """A new bubblewrap sandbox and interpreter importing torch, per module (not chosen)."""
    policy = {"scratch": SCRATCH, "require": True}
    env = {**os.environ, "PYTHONPATH": PYTHON_DIR, "PYTHONDONTWRITEBYTECODE": "1"}
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run(
            [sys.executable, "-s", "-m", "ksmith.confine", "--policy", json.dumps(policy), "--", "-c", "import torch"],
            env=env,
            check=True,
            capture_output=True,
        )
        times.append(time.perf_counter() - t0)
    return times


def row(name: str, times: list[float], base: list[float] | None) -> str:
    ms = sorted(t * 1000 for t in times)
    med = statistics.median(ms)
    p90 = ms[min(len(ms) - 1, int(0.9 * len(ms)))]
    ratio = f"{med / (statistics.median(base) * 1000):.2f}x" if base else "-"
    return f"{name:<44} {len(ms):>5} {med:>10.1f} {p90:>10.1f} {ratio:>9}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--children", type=int, default=40, help="children per kind and variant")
    ap.add_argument("--base", default=os.environ.get("KSMITH_BENCH_BASE", BASE), help="commit of the base sandbox")
    a = ap.parse_args()
    unpacked = tempfile.TemporaryDirectory(prefix="ksmith-bench-base-")
    base_dir = base_package(a.base, unpacked.name)
    variants = ([Variant("base", base_dir)] if base_dir else []) + [Variant("this", PYTHON_DIR)]
    for kind in ("empty", "module"):
        for _ in range(a.children):
            for v in variants:
                v.child(kind)
    for v in variants:
        v.close()
    results = {v.name: {**v.times, "info": v.info} for v in variants}
    unpacked.cleanup()
    fresh = fresh_interpreter_per_module(max(3, a.children // 10))
    print(
        f"sandbox bench: {os.cpu_count()} cores, uid {os.geteuid()}, {a.children} children per kind and variant; "
        f"this checkout's sandbox: {results['this']['info'].get('launcher')}, "
        f"processes by {results['this']['info'].get('process_limit')}, missing {results['this']['info'].get('missing')}"
    )
    print(f"{'per child (ms)':<44} {'n':>5} {'median':>10} {'p90':>10} {'vs base':>9}")
    for kind in ("empty", "module"):
        base = results["base"][kind] if "base" in results else None
        if base:
            print(row(f"{kind}: base ({a.base}, its worker alone)", base, None))
        print(row(f"{kind}: this (worker inside the launcher)", results["this"][kind], base))
    if "base" not in results:
        print(f"(no base: commit {a.base} is not in this clone's history)")
    print(row("not chosen: bwrap + fresh python + import torch", fresh, results.get("base", {}).get("module")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
