"""What other processes on the GPU do to a timing: the evaluator's `Timer` times a ~9 us kernel
(the candidate, CUDA graphs, flushed, fresh inputs before every sample, a digest after) paired with
a companion (the reference beside it, as in an evaluation), over and over, while other processes
do one thing at a time to the same GPU:

- `quiet`: nothing;
- `cpu`: every core busy with pure-Python loops (host preemption of the timing thread);
- `churn`: processes that start, create a CUDA context, fill 3 GiB, and exit, four at a time
  (context creation and teardown: what a child's start and `finish` do beside a timing);
- `create`: the same processes, kept alive once started (creation without teardown);
- `teardown`: 24 such processes started before the window, then killed one every 0.3 s in it;
- `stopped`: 8 processes with a context and 3 GiB each, stopped (SIGSTOP) before the window;
- `smi`: `nvidia-smi --query-gpu=...` run every 0.1 s (what admission and samplers spawn);
- `busy_small`, `busy_large`: a process that keeps launching kernels the whole window (small ones
  of a few microseconds, or large ones of about a millisecond): a child that escaped the gate's
  stop. The candidate's speedup over the reference beside it (`ratio`, the two medians of one
  measurement) shows what that does to a figure.

With `--direct` the candidate is timed by direct calls (a candidate whose graph cannot be
captured). For every measurement it reports whether the candidate's samples show a slow minority
(`timing.slow_minority`, what makes `timing_anomaly`), whether the companion's do, and the share
of slow samples of each, so what an interferer does to an honest kernel, and whether the
reference beside it sees the same, can be read side by side:

    PYTHONPATH=python python3 scripts/timing_interference.py --seconds 20 --out $OUT/interference.json
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import torch
from ksmith.evaluator import timing

ALLOC = (
    "import torch,time,sys\n"
    "x=torch.empty(3*2**30//4,dtype=torch.int32,device='cuda');x.zero_();torch.cuda.synchronize()\n"
    "print('ready',flush=True)\n"
    "time.sleep(float(sys.argv[1]))\n"
)
SPIN = "while True: pass\n"
#: A process that keeps the GPU busy the whole window (what a child that escaped the gate's stop
#: could do): kernels of about `argv[1]` elements, back to back.
BUSY = (
    "import torch,sys\n"
    "x=torch.empty(int(sys.argv[1]),device='cuda');print('ready',flush=True)\n"
    "while True:\n"
    "    for _ in range(100): x.mul_(1.0000001)\n"
    "    torch.cuda.synchronize()\n"
)


def spawn(code: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", code, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )


def ready(procs: list[subprocess.Popen[str]]) -> None:
    for p in procs:
        assert p.stdout is not None
        p.stdout.readline()


def kill(procs: list[subprocess.Popen[str]]) -> None:
    for p in procs:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(p.pid, signal.SIGCONT)
            os.killpg(p.pid, signal.SIGKILL)
    for p in procs:
        p.wait()


class Background:
    """Starts a condition's interferers, keeps them at it while `tick` is called, stops them."""

    def __init__(self, name: str):
        self.name = name
        self.procs: list[subprocess.Popen[str]] = []
        self.pending: list[subprocess.Popen[str]] = []
        self.last = 0.0

    def start(self) -> None:
        n = self.name
        if n == "cpu":
            self.procs = [spawn(SPIN) for _ in range(os.cpu_count() or 4)]
        elif n == "stopped":
            self.procs = [spawn(ALLOC, "3600") for _ in range(8)]
            ready(self.procs)
            for p in self.procs:
                os.killpg(p.pid, signal.SIGSTOP)
        elif n == "teardown":
            self.procs = [spawn(ALLOC, "3600") for _ in range(24)]
            ready(self.procs)
        elif n in ("busy_small", "busy_large"):
            self.procs = [spawn(BUSY, str(2**16 if n == "busy_small" else 2**28))]
            ready(self.procs)
        elif n in ("churn", "create"):
            self.pending = [spawn(ALLOC, "0" if n == "churn" else "3600") for _ in range(4)]
        time.sleep(1.0)

    def tick(self) -> None:
        now = time.monotonic()
        n = self.name
        if n == "churn":
            for i, p in enumerate(self.pending):
                if p.poll() is not None:
                    self.pending[i] = spawn(ALLOC, "0")
        elif n == "create":
            if len(self.pending) < 40 and now - self.last > 0.5:
                self.pending.append(spawn(ALLOC, "3600"))
                self.last = now
        elif n == "teardown" and self.procs and now - self.last > 0.3:
            kill([self.procs.pop()])
            self.last = now
        elif n == "smi" and now - self.last > 0.1:
            subprocess.Popen(
                ["nvidia-smi", "--query-gpu=memory.used,memory.total,utilization.gpu", "--format=csv,noheader"],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            self.last = now

    def stop(self) -> None:
        kill(self.procs + self.pending)


def slow_share(samples: list[float]) -> float:
    return len(timing.slow_calls(samples)) / len(samples)


@contextlib.contextmanager
def condition(name: str) -> Iterator[Background]:
    bg = Background(name)
    bg.start()
    try:
        yield bg
    finally:
        bg.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=20.0, help="measuring time per condition")
    ap.add_argument("--conditions", default="quiet,cpu,churn,create,teardown,stopped,smi,busy_small,busy_large,quiet")
    ap.add_argument("--elements", type=int, default=4 * 2**20, help="elements of each fp16 input")
    ap.add_argument("--direct", action="store_true", help="time the candidate with direct calls, not graphs")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()

    cfg = json.load(open(os.path.join(os.path.dirname(timing.__file__), "defaults.json")))["timing"]
    timer = timing.Timer(cfg)
    sets = []
    for _ in range(int(cfg["buffer_sets"])):
        x = torch.randn(args.elements, device="cuda", dtype=torch.float16)
        y = torch.randn_like(x)
        sets.append((x, y))

    def cand(s: tuple[torch.Tensor, torch.Tensor]) -> Any:
        return lambda: torch.relu(s[0] + s[1])

    def ref(s: tuple[torch.Tensor, torch.Tensor]) -> Any:
        return lambda: torch.nn.functional.relu(torch.add(s[0], s[1]))

    graphs, err = timer.capture_all([cand(s) for s in sets])
    ref_graphs, err2 = timer.capture_all([ref(s) for s in sets])
    assert graphs and ref_graphs, (err, err2)
    companion = timing.Companion([g.replay for g in ref_graphs])
    timed = [] if args.direct else graphs

    def prepare(row: Any, s: int) -> None:
        sets[s][0].normal_()
        sets[s][1].normal_()

    def observe(row: Any, s: int) -> None:
        sets[s][0].sum()

    report: list[dict[str, Any]] = []
    for name in args.conditions.split(","):
        rows = []
        with condition(name) as bg:
            end = time.monotonic() + args.seconds
            while time.monotonic() < end:
                bg.tick()
                st = timer.measure([cand(x) for x in sets], timed, None, prepare, observe, companion)
                c = st["samples_ms"]
                r = st["reference_in_process"]["samples_ms"]
                rows.append(
                    {
                        "n": len(c),
                        "median_ms": st["median_ms"],
                        "ref_median_ms": st["reference_in_process"]["median_ms"],
                        "cand_minority": bool(timing.slow_minority(c)),
                        "ref_minority": bool(timing.slow_minority(r)),
                        "cand_slow": slow_share(c),
                        "ref_slow": slow_share(r),
                        "cand_max_ms": max(c),
                        "ratio": st["reference_in_process"]["median_ms"] / st["median_ms"],
                    }
                )
        agg = {
            "condition": name,
            "measurements": len(rows),
            "cand_minority": sum(r["cand_minority"] for r in rows),
            "ref_minority": sum(r["ref_minority"] for r in rows),
            "both": sum(r["cand_minority"] and r["ref_minority"] for r in rows),
            "cand_slow_mean": statistics.fmean(r["cand_slow"] for r in rows),
            "ref_slow_mean": statistics.fmean(r["ref_slow"] for r in rows),
            "median_ms": statistics.median(r["median_ms"] for r in rows),
            "cand_max_ms": max(r["cand_max_ms"] for r in rows),
            "ratio": statistics.median(r["ratio"] for r in rows),
            "ratio_spread": max(r["ratio"] for r in rows) / min(r["ratio"] for r in rows) - 1,
            "rows": rows,
        }
        report.append(agg)
        print(
            f"{name:9} meas {agg['measurements']:4}  cand minority {agg['cand_minority']:3}  ref minority "
            f"{agg['ref_minority']:3}  both {agg['both']:3}  slow share cand {agg['cand_slow_mean']:.3%} ref "
            f"{agg['ref_slow_mean']:.3%}  median {agg['median_ms']:.4f} ms  max {agg['cand_max_ms']:.3f} ms  "
            f"ref/cand {agg['ratio']:.4f} (spread {agg['ratio_spread']:.2%})",
            flush=True,
        )
    with open(args.out, "w") as f:
        json.dump(report, f)


if __name__ == "__main__":
    main()
