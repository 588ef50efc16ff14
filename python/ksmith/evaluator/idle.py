"""Whether the GPU is idle of other processes' work: asked by the gate before a timing, once the
children starting beside it are stopped (`gate`).

Stopping a process (SIGSTOP) stops it issuing GPU work, not the kernels it has already queued:
those run on, and a timing started among them measures them too. So after the stop the gate
asks this probe to wait until they are done. The probe is a small trusted process of the
worker's (it never runs candidate code) with a CUDA context on the worker's GPU. It times
round trips of a one-element kernel (launch, then synchronize, on the host's clock). On an idle
GPU such a round trip takes microseconds. While another process's kernel runs, the GPU
time-slices between the two contexts, and the round trip waits for the other's time slice.

`wait` probes until `IDLE_RUN` consecutive round trips are each under `idle_us`, or until
`bound_s` passes. Past the bound the GPU is taken as still busy (a long or endless kernel of a
stopped child), and the gate falls back to waiting for those starts to end.

    python -m ksmith.evaluator.idle      (the probe process: one JSON line per request on stdin)
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from typing import Any

#: Consecutive fast round trips that make the GPU idle.
IDLE_RUN = 8
#: A round trip slower than this (microseconds) counts as the GPU being busy with other work.
IDLE_US = 200.0
#: Longest the gate waits for the GPU to go idle before a timing (seconds); past it, it waits for
#: the stopped starts to end instead.
DRAIN_BOUND_S = 2.0
#: After the probe failed, how long the gate waits for starts before the probe is tried again.
RETRY_S = 300.0
#: Longest a probe process takes to start (a fresh interpreter imports torch and starts CUDA).
START_TIMEOUT_S = 90.0


def round_trip_us(torch: Any, x: Any) -> float:
    """One launch of a one-element kernel and a synchronize, on the host's clock (microseconds)."""
    t0 = time.perf_counter()
    x.add_(1)
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) * 1e6


def wait_idle(torch: Any, x: Any, bound_s: float, idle_us: float) -> dict[str, Any]:
    """Round trips until `IDLE_RUN` in a row are under `idle_us`, or `bound_s` passed: whether
    the GPU went idle, the seconds waited, the round trips made and the slowest (us)."""
    start = time.monotonic()
    run = probes = 0
    slowest = 0.0
    while True:
        us = round_trip_us(torch, x)
        probes += 1
        slowest = max(slowest, us)
        run = run + 1 if us < idle_us else 0
        waited = time.monotonic() - start
        if run >= IDLE_RUN or waited > bound_s:
            return {"idle": run >= IDLE_RUN, "waited_s": round(waited, 4), "probes": probes, "slowest_us": slowest}


def main() -> int:
    """The probe process: answers each request line (`{"bound_s": .., "idle_us": ..}`) with one
    JSON line (`wait_idle`); the first line it writes says it is ready."""
    import torch

    x = torch.zeros(1, device="cuda")
    for _ in range(IDLE_RUN):
        round_trip_us(torch, x)  # the kernel loaded, the context warm
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        answer = wait_idle(torch, x, float(request["bound_s"]), float(request.get("idle_us", IDLE_US)))
        print(json.dumps(answer), flush=True)
    return 0


class IdleProbe:
    """The worker's handle on its probe process. `start` launches it in the background (a fresh
    interpreter imports torch and starts CUDA: seconds, which no timing should wait for); the gate
    pauses starts only while the probe is `available`. A probe that fails (does not start, dies,
    answers out of turn or garbage) is closed, and not started again for `RETRY_S`: meanwhile
    timings wait for starts as without pausing."""

    def __init__(self, env: dict[str, str], bound_s: float):
        self.env = env
        self.bound_s = bound_s
        self.lock = threading.Lock()
        self.proc: subprocess.Popen[str] | None = None
        self._ready = False
        self._starting = False
        self._failed_at: float | None = None
        #: Why the probe last failed (None while it works).
        self.failure: str | None = None

    def start(self) -> None:
        """Starts the probe process in the background unless it runs, is starting, or failed
        less than `RETRY_S` ago."""
        with self.lock:
            if self._ready or self._starting:
                return
            if self._failed_at is not None and time.monotonic() - self._failed_at < RETRY_S:
                return
            self._starting = True
        threading.Thread(target=self._start, name="ksmith-idle-probe", daemon=True).start()

    def _start(self) -> None:
        try:
            proc = subprocess.Popen(
                [sys.executable, "-s", "-m", "ksmith.evaluator.idle"],
                env=self.env,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                text=True,
            )
            self.proc = proc
            ready = self._answer(START_TIMEOUT_S)
            if ready != {"ready": True}:
                raise RuntimeError(f"the GPU idle probe did not start: {ready}")
        except Exception as e:  # noqa: BLE001 -- any failure leaves the gate waiting for starts
            with self.lock:
                self._fail(e)
                self._starting = False
            return
        with self.lock:
            self._ready = True
            self._starting = False
            self.failure = None

    def available(self) -> bool:
        """Whether the probe is running and ready (and, where it is not, it is started)."""
        if not self._ready:
            self.start()
        return self._ready

    def _answer(self, timeout_s: float) -> dict[str, Any]:
        proc = self.proc
        if proc is None or proc.stdout is None:
            raise RuntimeError("the GPU idle probe is not running")
        stdout = proc.stdout
        box: list[str] = []
        reader = threading.Thread(target=lambda: box.append(stdout.readline()), daemon=True)
        reader.start()
        reader.join(timeout_s)
        if not box or not box[0]:
            raise RuntimeError(f"the GPU idle probe gave no answer within {timeout_s:.0f} s")
        answer = json.loads(box[0])
        if not isinstance(answer, dict):
            raise ValueError(f"the GPU idle probe answered {box[0][:200]!r}")
        return answer

    def _fail(self, e: BaseException) -> None:
        """Closes the probe after `e` (the lock held); the gate waits for starts until a retry."""
        if self.failure is None:
            print(
                f"ksmith evaluator: {e}; timings wait for the starts beside them instead of pausing them "
                f"(the GPU idle probe is tried again in {RETRY_S:.0f} s)",
                file=sys.stderr,
                flush=True,
            )
        self.failure = str(e)
        self._failed_at = time.monotonic()
        self._ready = False
        self._close()

    def wait(self) -> bool:
        """Whether the GPU went idle within `bound_s` (False too when the probe is not available
        or fails: then it is closed, and its reason kept in `failure`)."""
        with self.lock:
            if not self._ready:
                return False
            try:
                proc = self.proc
                if proc is None or proc.stdin is None or proc.poll() is not None:
                    raise RuntimeError("the GPU idle probe ended")
                proc.stdin.write(json.dumps({"bound_s": self.bound_s}) + "\n")
                proc.stdin.flush()
                answer = self._answer(self.bound_s + 10.0)
                idle = answer["idle"]
                if not isinstance(idle, bool):
                    raise ValueError(f"the GPU idle probe answered {answer!r}")
            except Exception as e:  # noqa: BLE001 -- any failure: closed, the gate waits for starts
                self._fail(e)
                return False
            return idle

    def _close(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None

    def close(self) -> None:
        """Ends the probe process."""
        with self.lock:
            self._ready = False
            self._close()


if __name__ == "__main__":
    raise SystemExit(main())
