"""A GPU that runs out of memory while evaluations share it is capacity, not a failing device
(`capacity`): the worker's admission (limits, retries before new evaluations, the last attempt
alone, the wait for memory of `gpu_memory` against a fake reading), the evaluator's retry of an
attempt that ran out, and a candidate that fakes CUDA's out-of-memory error while another
evaluation shares the worker (its own verdict, once alone)."""

from __future__ import annotations

import os
import threading
import time

import pytest
from ksmith.confine import Policy
from ksmith.evaluator.capacity import ATTEMPTS, Admission, Attempt, DeviceBusy, out_of_memory
from ksmith.evaluator.evaluate import DeviceEvaluator
from ksmith.evaluator.gpu_memory import DeviceMemory, MemoryGate, parse_smi
from ksmith.evaluator.worker import with_notice

UNCONFINED = Policy(require=False)
HERE = os.path.dirname(os.path.abspath(__file__))
CAND = os.path.join(HERE, "candidates")
OOM = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has 1.2 GiB free"

FAKES_OOM = """
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def copy_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


class ModelNew(nn.Module):
    def forward(self, x, y):
        out = torch.empty_like(x)
        copy_kernel[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), BLOCK=1024)
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 80.00 GiB")
"""


@pytest.mark.parametrize(
    "text,oom",
    [
        (OOM, True),
        ("RuntimeError: CUDA error: out of memory\nCUDA kernel errors might be asynchronously reported", True),
        ("CUDA driver error: CUDA_ERROR_OUT_OF_MEMORY", True),
        ("memory limit exceeded: resident memory 3000 MiB > 2048 MiB (process killed)", False),
        ("MemoryError", False),
        ("RuntimeError: CUDA error: an illegal memory access was encountered", False),
        ("triton.runtime.errors.OutOfResources: out of resource: shared memory", False),
    ],
)
def test_cuda_out_of_memory_is_told_from_other_failures(text, oom):
    assert out_of_memory(text) is oom


def test_running_out_is_capacity_only_beside_other_evaluations():
    adm = Admission()
    adm.check(None, "the judge", OOM)  # outside an admitted evaluation: the old path
    adm.check(Attempt(0, False, 1, 0.0), "the judge", OOM)  # alone all along
    adm.check(Attempt(2, True, 5, 0.0), "the judge", OOM)  # the last attempt, alone
    adm.check(Attempt(0, False, 5, 0.0), "the judge", "KeyError: 'runs'")  # not memory
    # an allocation as large as the GPU: a size computed wrong, which no wait makes fit
    huge = (
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2048.00 GiB. GPU 0 has a total capacity "
        "of 139.80 GiB of which 120.00 GiB is free."
    )
    adm.check(Attempt(0, False, 5, 0.0), "the candidate's harness", huge)
    with pytest.raises(DeviceBusy):
        adm.check(Attempt(0, False, 5, 0.0), "the candidate's harness", huge.replace("2048.00 GiB", "512.00 MiB"))
    with pytest.raises(DeviceBusy) as busy:
        adm.check(Attempt(0, False, 5, 0.0), "the judge", "the judge failed: " + OOM + "\nTraceback ...\n" + OOM)
    assert busy.value.crowd == 5
    assert str(busy.value).startswith("the judge ran out of GPU memory with 5 evaluations at once: ")
    assert "Tried to allocate 2.00 GiB" in str(busy.value)


def test_a_slot_sees_every_evaluation_that_ran_beside_it():
    adm = Admission()
    with adm.slot(0) as a:
        assert a.crowd == 1
        with adm.slot(0) as b, adm.slot(0):
            assert b.crowd == 3
        # the others ended: it still shared the GPU with them during its attempt
        assert a.crowd == 3
    assert adm.peak == 3


def _admitted_after(adm: Admission, number: int, order: list[str], name: str) -> threading.Thread:
    def run() -> None:
        with adm.slot(number):
            order.append(name)
            time.sleep(0.05)

    t = threading.Thread(target=run)
    t.start()
    return t


def test_running_out_lowers_the_limit_retries_go_first_and_the_last_attempt_runs_alone():
    notices: list[str] = []
    adm = Admission(notices.append, recover_after=2)
    adm.ran_out(DeviceBusy("the judge", 4, OOM))
    assert adm.limit == 3 and adm.retries == 1
    assert len(notices) == 1 and "at most 3 evaluations at once" in notices[0]
    adm.ran_out(DeviceBusy("the judge", 8, OOM))  # a crowd larger than the limit: no rise
    assert adm.limit == 3 and len(notices) == 1
    order: list[str] = []
    held = [adm.slot(0) for _ in range(3)]
    for slot in held:
        slot.__enter__()
    new = _admitted_after(adm, 0, order, "new")
    time.sleep(0.1)
    retry = _admitted_after(adm, 1, order, "retry")
    time.sleep(0.1)
    assert order == []  # the limit (3) is reached
    held.pop().__exit__(None, None, None)
    retry.join(5)
    new.join(5)
    assert order == ["retry", "new"]  # the retry went before the evaluation that waited longer
    # the last attempt waits for every running evaluation and runs with none beside it
    alone = _admitted_after(adm, ATTEMPTS - 1, order, "alone")
    time.sleep(0.1)
    late = _admitted_after(adm, 0, order, "late")
    time.sleep(0.1)
    assert order == ["retry", "new"]
    for slot in held:
        slot.__exit__(None, None, None)
    alone.join(5)
    late.join(5)
    assert order == ["retry", "new", "alone", "late"]
    # the limit recovers by one every `recover_after` evaluations that did not run out, and goes
    # once it reaches the most ever run at once (3 here)
    adm.ended()
    assert adm.limit == 3
    adm.ran_out(DeviceBusy("the judge", 2, OOM))
    assert adm.limit == 1
    for _ in range(2):
        adm.ended()
    assert adm.limit == 2
    for _ in range(2):
        adm.ended()
    assert adm.limit is None


def test_the_notice_is_given_once_with_an_answer():
    class Ev:
        admission = Admission()

    reply = {"type": "result", "id": "1"}
    assert with_notice(Ev(), reply) == reply
    Ev.admission.ran_out(DeviceBusy("the task's reference", 10, OOM))
    first = with_notice(Ev(), reply)
    assert first["notice"].startswith("the task's reference ran out of GPU memory with 10 evaluations at once")
    assert "not a failure of the device" in first["notice"]
    Ev.admission.ran_out(DeviceBusy("the judge", 4, OOM))
    assert with_notice(Ev(), reply) == reply


def test_an_attempt_that_ran_out_is_evaluated_again_not_answered():
    ev = DeviceEvaluator("cpu", {}, policy=UNCONFINED)
    seen: list[tuple[int, bool]] = []

    def fake(req, profile, attempt):
        seen.append((attempt.number, attempt.alone))
        if len(seen) < ATTEMPTS:
            raise DeviceBusy("the judge", 6, OOM)
        return ev._result("correct")

    ev._evaluate = fake
    try:
        result, profile = ev.evaluate_profiled({"task_id": "t"})
    finally:
        ev.close()
    assert result["status"] == "correct"
    assert seen == [(0, False), (1, False), (2, True)]
    assert ev.admission.retries == 2 and ev.admission.limit == 4
    assert "admission" in profile


def test_a_candidate_that_fakes_running_out_beside_another_gets_its_own_verdict_alone():
    ev = DeviceEvaluator("cpu", {"trials": 2, "run_timeout_s": 30, "memory_limit_mb": 1536}, policy=UNCONFINED)
    request = {
        "task_id": "elementwise",
        "reference": open(os.path.join(CAND, "tasks", "elementwise.py")).read(),
        "candidate": FAKES_OOM,
        "measure": False,
    }
    other = ev.admission.slot(0)
    other.__enter__()  # another evaluation on the worker, for the first attempt
    release = threading.Timer(1.0, other.__exit__, (None, None, None))
    try:
        release.start()
        result, _ = ev.evaluate_profiled(request)
    finally:
        release.join()
        ev.close()
    assert result["status"] == "runtime_error", result["error_log"]
    assert "CUDA out of memory" in result["error_log"]
    assert ev.admission.retries == 1 and ev.admission.limit == 1
    notice = ev.admission.take_notice()
    assert notice is not None and notice.startswith("the candidate's harness ran out of GPU memory with 2 evaluations")


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_one_more_fits_by_the_guess_then_by_what_evaluations_were_seen_to_hold():
    clock = Clock()
    reading = {"v": (10_000.0, 100_000.0)}
    gate = MemoryGate(lambda: reading["v"], 2048.0, clock, growing_s=30.0)
    assert gate.fits([]) and gate.idle_mb == 10_000.0  # none runs: what others hold
    # one starting (growing): the guess counts for it and for the new one; 95 % of the total is usable
    clock.now = 1.0
    reading["v"] = (90_000.0, 100_000.0)
    assert gate.fits([0.0])  # 5000 MiB left >= 2 x 2048
    reading["v"] = (93_000.0, 100_000.0)
    assert not gate.fits([0.0]) and not gate.observed
    assert "2000 MiB free" in gate.short and "about 2048 MiB (guessed)" in gate.short
    # four settled evaluations hold 3000 MiB each above the idle 10000: observed
    clock.now = 100.0
    reading["v"] = (22_000.0, 100_000.0)
    assert gate.fits([0.0, 1.0, 2.0, 3.0])
    assert gate.observed and gate.per_evaluation_mb == pytest.approx(3000.0)
    # later readings are smoothed in, each once
    reading["v"] = (30_000.0, 100_000.0)
    gate.fits([10.0, 11.0, 12.0, 13.0])
    gate.fits([10.0, 11.0, 12.0, 13.0])
    assert gate.per_evaluation_mb == pytest.approx(0.8 * 3000 + 0.2 * 5000)
    # while more than a fifth are still starting, a sample says nothing of one evaluation
    before = gate.per_evaluation_mb
    reading["v"] = (90_000.0, 100_000.0)
    assert not gate.fits([10.0, 11.0, 12.0, 99.0])  # 5000 left < 3400 x 2
    assert gate.per_evaluation_mb == before
    # unknown memory: no check
    assert MemoryGate(lambda: None, 2048.0, clock).fits([0.0])


def test_memory_is_read_at_most_every_half_second_and_parsed():
    clock = Clock()
    reads = []
    memory = DeviceMemory(lambda: reads.append(1) or (1.0, 2.0), clock)
    memory()
    clock.now = 0.4
    memory()
    assert len(reads) == 1
    clock.now = 0.6
    assert memory() == (1.0, 2.0) and len(reads) == 2
    assert parse_smi("70000, 143771") == (70000.0, 143771.0)
    assert parse_smi("") is None and parse_smi("[N/A], 143771") is None and parse_smi("1, 0") is None


def test_an_evaluation_waits_for_memory_and_starts_when_it_frees():
    reading = {"v": (10_000.0, 100_000.0)}
    adm = Admission(memory=MemoryGate(lambda: reading["v"], 2048.0))
    first = adm.slot(0)
    reading["v"] = (99_000.0, 100_000.0)  # full: the first still starts (nothing of ours runs)
    first.__enter__()
    order: list[str] = []
    second = _admitted_after(adm, 0, order, "second")
    time.sleep(0.8)
    assert order == []  # no room for another in memory
    notice = adm.take_notice()
    assert notice is not None and notice.startswith("an evaluation waits for the GPU's memory: ")
    reading["v"] = (20_000.0, 100_000.0)  # freed (by another process): no notification needed
    second.join(5)
    assert order == ["second"]
    first.__exit__(None, None, None)
    assert adm.take_notice() is None  # said once
