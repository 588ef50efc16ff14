"""Does the GPU gate's idle probe (`ksmith.evaluator.idle`) tell an idle GPU from one still running a
stopped process's kernels, and what would a timing measure without it? On a GPU:

    python3 scripts/gpu_idle_probe_bench.py [--json OUT.json]

1. Idle: the probe's round trips (median, 99th percentile) and what a `wait` costs.
2. A stopped process with queued work: a child queues about `--queue-s` seconds of matrix
   products, is stopped (SIGSTOP) and the probe waits: its wait against the time the queue
   took to drain (the child reports it once continued).
3. A stopped process running an endless kernel: the probe must answer "busy" at its bound.
4. A timing beside such a queue: the median of a small kernel's CUDA-graph replays on an idle GPU,
   right after the stop (no wait), and after the probe's wait.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))

from ksmith.evaluator import idle  # noqa: E402

QUEUE_CHILD = """
import sys, time, torch
n, size = int(sys.argv[1]), int(sys.argv[2])
a = torch.randn(size, size, device="cuda")
torch.cuda.synchronize()
t0 = time.perf_counter()
for _ in range(n):
    a = a @ a
    a = a / a.norm()
print("queued", flush=True)
sys.stdin.readline()
torch.cuda.synchronize()
print(f"drained {time.perf_counter() - t0:.4f}", flush=True)
"""

SPIN_CHILD = """
import sys, torch, triton, triton.language as tl

@triton.jit
def spin(x_ptr, n):
    acc = tl.load(x_ptr)
    for i in range(n):
        acc = acc * 1.0000001 + 1e-7
    tl.store(x_ptr, acc)

x = torch.ones(1, device="cuda")
spin[(132,)](x, 1 << 40)
print("spinning", flush=True)
sys.stdin.readline()
"""


def child(code: str, *args: str) -> subprocess.Popen[str]:
    """`code` run from a file of its own (Triton reads a kernel's source from its file)."""
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(code)
    return subprocess.Popen(
        [sys.executable, f.name, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def replay_median_ms(torch, graph, n: int = 200) -> float:
    times = []
    for _ in range(n):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        graph.replay()
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e))
    return statistics.median(times)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    ap.add_argument("--queue-s", type=float, default=2.0)
    args = ap.parse_args()
    import torch

    out: dict[str, object] = {"device": torch.cuda.get_device_name()}
    env = dict(os.environ, PYTHONPATH=os.path.join(HERE, "..", "python"))
    probe = idle.IdleProbe(env, bound_s=10.0)

    # 1. idle
    x = torch.zeros(1, device="cuda")
    trips = sorted(idle.round_trip_us(torch, x) for _ in range(500))
    waits = []
    for _ in range(20):
        t0 = time.monotonic()
        assert probe.wait(), probe.failure
        waits.append((time.monotonic() - t0) * 1000)
    out["idle"] = {
        "round_trip_us_median": statistics.median(trips),
        "round_trip_us_p99": trips[int(0.99 * len(trips))],
        "wait_ms_median": statistics.median(waits),
    }

    # a small kernel to time: one graph replay of an elementwise op over 16 M floats
    big = torch.randn(1 << 24, device="cuda")
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        for _ in range(3):
            big.mul_(1.0)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        big.mul_(1.0)
    idle_ms = replay_median_ms(torch, graph)

    # size the queue: one product's time
    size = 8192
    a = torch.randn(size, size, device="cuda")
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(5):
        a = a @ a
        a = a / a.norm()
    torch.cuda.synchronize()
    per = (time.perf_counter() - t0) / 5
    n = max(1, int(args.queue_s / per))
    del a

    # 2. + 4. a stopped process with a queue: the probe's wait against the drain
    results = {}
    for case in ("probe", "no_wait"):
        q = child(QUEUE_CHILD, str(n), str(size))
        assert q.stdout is not None and q.stdin is not None
        assert q.stdout.readline().strip() == "queued"
        stop = time.monotonic()
        os.killpg(q.pid, signal.SIGSTOP)
        if case == "probe":
            went_idle = probe.wait()
            waited = time.monotonic() - stop
            timed = replay_median_ms(torch, graph)
        else:
            timed = replay_median_ms(torch, graph)
            went_idle, waited = None, time.monotonic() - stop
        os.killpg(q.pid, signal.SIGCONT)
        q.stdin.write("\n")
        q.stdin.flush()
        drained = float(q.stdout.readline().split()[1])
        q.wait()
        results[case] = {
            "idle": went_idle,
            "waited_s": round(waited, 3),
            "queue_drained_s": drained,
            "timed_ms": timed,
            "timed_vs_idle": timed / idle_ms,
        }
    out["queue"] = {"products": n, "product_ms": per * 1000, "idle_timed_ms": idle_ms, **results}
    print(json.dumps(out, indent=2), flush=True)

    # 3. an endless kernel of a stopped process
    s = child(SPIN_CHILD)
    assert s.stdout is not None
    assert s.stdout.readline().strip() == "spinning"
    os.killpg(s.pid, signal.SIGSTOP)
    busy_probe = idle.IdleProbe(env, bound_s=3.0)
    t0 = time.monotonic()
    went_idle = busy_probe.wait()
    out["endless"] = {"idle": went_idle, "waited_s": round(time.monotonic() - t0, 3), "failure": busy_probe.failure}
    os.killpg(s.pid, signal.SIGKILL)
    s.wait()
    busy_probe.close()
    probe.close()

    text = json.dumps(out, indent=2)
    print(text)
    if args.json:
        with open(args.json, "w") as f:
            f.write(text)
    ok = out["endless"]["idle"] is False and results["probe"]["idle"] is True  # type: ignore[index]
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
