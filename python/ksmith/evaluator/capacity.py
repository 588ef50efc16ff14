"""How many evaluations a worker runs at once, and a GPU that runs out of memory while they share
it: capacity, not a failing device.

Every evaluation on a GPU holds its harness and its judge (two CUDA contexts, the task's inputs,
the timing's buffer sets) and, while a task's facts are built, the reference's children. With
many evaluations at once (`inflight_per_worker`) the GPU's memory can run out, and then any of
those children fails with CUDA's out-of-memory error: a judge (which the worker used to answer
as its own failure, an internal error, so the pool took the GPU out of service), a reference
(which made the task broken) or a candidate's harness (a `runtime_error` the candidate did not
earn).

So a child's failure whose text is a GPU out-of-memory error (`out_of_memory`), in an attempt
that shared the worker with other evaluations at any time (`Attempt.crowd` > 1), raises
`DeviceBusy` instead (`Admission.check`), unless the allocation that failed is as large as the
whole GPU (`larger_than_the_gpu`: a size computed wrong, which no wait makes fit): the evaluation
is not answered, the worker runs it again. Its attempts (`Admission.slot`):

1. the first, admitted while fewer than the worker's limit run (no limit at first: the pool
   bounds it by `inflight_per_worker`) and, on a GPU, while one more fits in its free memory
   (`gpu_memory`: an estimate of what one evaluation holds, first guessed, then observed);
2. after running out, once more under the lowered limit and the memory check, before any new
   evaluation;
3. then alone: once no other evaluation runs, with none admitted beside it. Alone, running out
   is no longer capacity: the failure is answered as any other (the candidate's verdict, a
   broken task, the judge's error).

Each `DeviceBusy` lowers the limit to 3/4 of the evaluations that ran beside the attempt
(`Admission.ran_out`); after every `RECOVER_AFTER` evaluations that end without running out,
the limit rises by one, and goes once it reaches the most the worker ever ran at once. The first
time, a notice (one line) says so, and the first time an evaluation waits for memory another
does; the worker passes each to the pool with an answer, and the pool prints it (`worker`).

A candidate can fake the error (its harness's text is its own) or exhaust the GPU's memory on
purpose. Either costs throughput, never the device and never another evaluation's verdict: its
own evaluation is retried at most twice and the last time alone, where its failure is its
verdict, and the other evaluations it starved are run again. Two workers on one GPU do not see
each other's evaluations: each admits its own.
"""

from __future__ import annotations

import contextlib
import re
import threading
from collections.abc import Callable, Iterator

from .gpu_memory import SAMPLE_S, MemoryGate

#: CUDA's out-of-memory errors as PyTorch, Triton and the driver word them.
OUT_OF_MEMORY = re.compile(
    r"OutOfMemoryError|CUDA out of memory|CUDA error: out of memory|CUDA_ERROR_OUT_OF_MEMORY|cudaErrorMemoryAllocation"
)
#: PyTorch's words for the allocation that failed and the GPU's size, in GiB or MiB.
TRIED = re.compile(r"Tried to allocate ([0-9.]+) (GiB|MiB)")
TOTAL = re.compile(r"total capacity of ([0-9.]+) (GiB|MiB)")
#: The attempts of an evaluation: the first, one retry, then one alone.
ATTEMPTS = 3
#: Evaluations ending without running out after which the lowered limit rises by one.
RECOVER_AFTER = 8
#: The limit after running out with `n` evaluations at once (at least 1).
LOWERED = 0.75


def out_of_memory(text: str) -> bool:
    """Whether a child's failure `text` is CUDA's out-of-memory error."""
    return bool(OUT_OF_MEMORY.search(text))


def _mib(match: re.Match[str] | None) -> float | None:
    if match is None:
        return None
    try:
        return float(match.group(1)) * (1024.0 if match.group(2) == "GiB" else 1.0)
    except ValueError:
        return None


def larger_than_the_gpu(text: str) -> bool:
    """Whether the allocation that failed (PyTorch's message) is as large as the whole GPU: no
    wait makes it fit, so it is the program's failure, not capacity (a size computed wrong)."""
    tried, total = _mib(TRIED.search(text)), _mib(TOTAL.search(text))
    return tried is not None and total is not None and tried >= total


class DeviceBusy(Exception):
    """A child ran out of GPU memory while other evaluations shared the worker: the evaluation
    is run again (`Admission`), never answered with this."""

    def __init__(self, what: str, crowd: int, message: str):
        super().__init__(f"{what} ran out of GPU memory with {crowd} evaluations at once: {message}")
        self.what = what
        self.crowd = crowd


class Attempt:
    """One attempt of an evaluation, admitted by `Admission.slot`."""

    def __init__(self, number: int, alone: bool, running: int, admitted_at: float):
        self.number = number
        self.alone = alone
        #: When it was admitted (the memory gate's clock).
        self.admitted_at = admitted_at
        #: The most evaluations that ran at once (this one included) while it ran.
        self.crowd = running


class Admission:
    """The worker's admission of evaluations (see the module doc). Thread-safe."""

    def __init__(
        self,
        notice: Callable[[str], None] | None = None,
        recover_after: int = RECOVER_AFTER,
        memory: MemoryGate | None = None,
    ):
        """`notice`: hears each lowering of the limit and each notice, one line (the worker's
        log); `memory`: whether one more evaluation fits in the GPU's memory (none: no check)."""
        self._cond = threading.Condition()
        self._active: set[Attempt] = set()
        self._retrying = 0
        self._alone_waiting = 0
        self._alone = False
        self._recover_after = recover_after
        self._since = 0
        self._notice = notice
        self._memory = memory
        #: Notices the pool has not been given yet, and the kinds given so far (each once).
        self._notices: list[str] = []
        self._noticed: set[str] = set()
        #: Evaluations admitted at once at most (None: no limit of its own).
        self.limit: int | None = None
        #: The most evaluations that ever ran at once.
        self.peak = 0
        #: Evaluations run again after running out.
        self.retries = 0

    @contextlib.contextmanager
    def slot(self, number: int) -> Iterator[Attempt]:
        """Admits attempt `number` (0: the first, see the module doc) once there is room, and
        holds its place until it ends."""
        alone = number >= ATTEMPTS - 1
        with self._cond:
            if alone:
                self._alone_waiting += 1
                self._cond.wait_for(lambda: not self._active and not self._alone)
                self._alone_waiting -= 1
                self._alone = True
            else:
                retry = number > 0
                self._retrying += int(retry)
                # memory frees without a notification: looked at again every reading
                while not self._cond.wait_for(lambda: self._room(retry), timeout=SAMPLE_S):
                    pass
                self._retrying -= int(retry)
            now = self._memory.clock() if self._memory is not None else 0.0
            attempt = Attempt(number, alone, len(self._active) + 1, now)
            self._active.add(attempt)
            running = len(self._active)
            self.peak = max(self.peak, running)
            for other in self._active:
                other.crowd = max(other.crowd, running)
        try:
            yield attempt
        finally:
            with self._cond:
                self._active.discard(attempt)
                if alone:
                    self._alone = False
                self._cond.notify_all()

    def _room(self, retry: bool) -> bool:
        if self._alone or self._alone_waiting:
            return False
        if not retry and self._retrying:
            return False
        if self.limit is not None and len(self._active) >= self.limit:
            return False
        if self._memory is None or self._memory.fits([a.admitted_at for a in self._active]):
            return True
        self._say("memory", f"an evaluation waits for the GPU's memory: {self._memory.short} (gpu_memory)")
        return False

    def _say(self, kind: str, text: str) -> None:
        """Keeps `text` for the pool, the first time of its `kind` (under the lock)."""
        if kind not in self._noticed:
            self._noticed.add(kind)
            self._notices.append(text)
            if self._notice is not None:
                self._notice(text)

    def check(self, attempt: Attempt | None, what: str, text: str) -> None:
        """Raises `DeviceBusy` when `text`, the failure of `what` (a child of `attempt`), is CUDA's
        out-of-memory error and the attempt shared the worker (see the module doc)."""
        if attempt is None or attempt.alone or attempt.crowd <= 1 or not out_of_memory(text):
            return
        if larger_than_the_gpu(text):
            return
        line = next((ln.strip() for ln in text.splitlines() if OUT_OF_MEMORY.search(ln)), "")
        raise DeviceBusy(what, attempt.crowd, line[:300])

    def ran_out(self, busy: DeviceBusy) -> None:
        """Lowers the limit after `busy` (see the module doc)."""
        with self._cond:
            self.retries += 1
            self._since = 0
            lowered = max(1, int(busy.crowd * LOWERED))
            if self.limit is not None and self.limit <= lowered:
                return
            self.limit = lowered
            text = (
                f"{busy}; this worker now runs at most {lowered} evaluations at once (one more after every "
                f"{self._recover_after} that do not run out), and runs the ones that ran out again (first before new "
                "ones, the last time alone): the GPU's memory, not a failure of the device"
            )
            if "lowered" in self._noticed and self._notice is not None:
                self._notice(text)  # the worker's log hears every lowering, the pool the first
            self._say("lowered", text)

    def ended(self) -> None:
        """An evaluation ended without running out: the lowered limit recovers (module doc)."""
        with self._cond:
            if self.limit is None:
                return
            self._since += 1
            if self._since >= self._recover_after:
                self._since = 0
                self.limit += 1
                if self.limit >= self.peak:
                    self.limit = None
                self._cond.notify_all()

    def take_notice(self) -> str | None:
        """The next notice the pool has not been given (each kind once), or None."""
        with self._cond:
            return self._notices.pop(0) if self._notices else None
