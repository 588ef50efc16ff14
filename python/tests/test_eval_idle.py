"""The GPU gate's idle probe (`ksmith.evaluator.idle`): when it calls the GPU idle, when busy, and
what the worker gets when the probe cannot run (the gate then waits for starts instead)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from ksmith.evaluator import idle  # noqa: E402
from ksmith.evaluator.sandbox import server_env  # noqa: E402


class FakeCuda:
    """A GPU whose round trips take `busy_s` while `busy` more calls remain, then nothing."""

    def __init__(self, busy: int, busy_s: float = 0.002):
        self.busy = busy
        self.busy_s = busy_s
        self.cuda = self

    def synchronize(self) -> None:
        if self.busy != 0:
            self.busy -= 1
            time.sleep(self.busy_s)


class One:
    def add_(self, _: int) -> None:
        pass


def test_idle_after_a_run_of_fast_round_trips():
    fake = FakeCuda(busy=5)
    answer = idle.wait_idle(fake, One(), bound_s=5.0, idle_us=1000.0)
    assert answer["idle"] is True
    assert answer["probes"] == 5 + idle.IDLE_RUN
    assert answer["slowest_us"] >= 2000 and answer["waited_s"] >= 0.01


def test_a_slow_round_trip_restarts_the_run():
    # fast, slow, fast...: the run of fast ones must be unbroken
    class Alternating(FakeCuda):
        def synchronize(self) -> None:
            self.busy += 1
            if self.busy % 3 == 0 and self.busy < 30:
                time.sleep(self.busy_s)

    answer = idle.wait_idle(Alternating(busy=0), One(), bound_s=5.0, idle_us=1000.0)
    assert answer["idle"] is True and answer["probes"] >= 30


def test_busy_past_the_bound():
    fake = FakeCuda(busy=-1)  # never idle
    t0 = time.monotonic()
    answer = idle.wait_idle(fake, One(), bound_s=0.2, idle_us=1000.0)
    assert answer["idle"] is False
    assert 0.2 <= time.monotonic() - t0 < 2.0


def test_a_probe_that_cannot_start_says_why_and_is_not_retried_at_once(monkeypatch):
    # no GPU here: the probe process fails to start CUDA; the gate must then wait for starts
    # (not available) and not start a new interpreter for every timing
    env = server_env("cuda:0")
    env["CUDA_VISIBLE_DEVICES"] = ""
    probe = idle.IdleProbe(env, bound_s=1.0)
    try:
        assert probe.available() is False, "starting in the background"
        assert probe.wait() is False, "not ready: no wait"
        deadline = time.monotonic() + 60
        while probe.failure is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert probe.failure is not None and "idle probe" in probe.failure
        assert probe.proc is None
        started = threading.Event()
        monkeypatch.setattr(probe, "_start", started.set)
        assert probe.available() is False
        assert not started.wait(0.5), "no retry before RETRY_S"
        monkeypatch.setattr(idle, "RETRY_S", 0.0)
        probe.available()
        assert started.wait(5), "retried after RETRY_S"
    finally:
        probe.close()


def test_a_probe_answering_out_of_turn_is_closed():
    # an answer that is not the probe's reply (a stray line, garbage) must not be taken for one:
    # the probe is closed and the gate waits for starts
    probe = idle.IdleProbe({}, bound_s=1.0)
    probe.proc = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdin.readline(); print('[1, 2]', flush=True); sys.stdin.readline()"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    probe._ready = True
    assert probe.wait() is False
    assert probe.proc is None and probe.failure is not None and "answered" in probe.failure
    assert probe.available() is False, "not restarted before RETRY_S"
