"""Who may use a GPU when: timing has it alone, everything else shares it.

A worker evaluates several candidates at once (compiling on the CPU overlaps with the GPU), but a
timed sample must not share the GPU with another child's kernels, or the median moves by what
ran beside it. Every GPU phase of a child is therefore started by the worker under the gate, in
one of three modes:

- `exclusive`: timing. It waits for the other holders (see below) and keeps new ones out; a
  waiting exclusive holder goes first.
- `shared`: one short GPU call (a correctness call, a judge's comparison). Many at once. A timing
  waits for them to end.
- `starting`: a child's start (CUDA's start, a reference built and run, the candidate's first
  call with its compilation, a `torch.compile`): seconds long and mostly CPU work, but it may touch
  the GPU at any point. Many at once. A candidate's correctness calls (its harness and its judge,
  `Together`) are held the same way when `pause_correctness_for_timing` is on, instead of one
  `shared` hold per call: each such hold waited behind the timings queued before it.

A timing and the starts. Waiting for every start to end (seconds each, and with 16 evaluations
in flight there is nearly always one) made a convoy: the timing waited, new starts waited for the
timing, and the GPU idled through the drain (GPUs 13-31 % busy, docs/bench/multi-gpu.md). So a
start whose child can be stopped (`Pausable`: the worker's `sandbox.Child`) is *paused* instead:
when the timing's turn comes, every such child is stopped (SIGSTOP to every process of its
tree), the timing runs, and they are continued (SIGCONT) when it ends, unless another timing
that pauses starts waits: those still starting stay stopped for it (continued for a moment, they
would be stopped again at once, and one caught inside a driver call would hold the next timing
up as a straggler), and are continued when the last of such a run of timings ends. One whose
start ended while it was stopped (its answer came just before the stop) is continued when the
next timing takes the GPU, before that timing begins: it may be the very child that timing times
(on an H200, keeping it stopped left a timing waiting for its stopped child for good). A stopped
process issues no GPU work, but the kernels it had queued run on: before the timing begins,
`drain` (the worker's `idle.IdleProbe`) waits until the GPU is idle of them. A child that does
not show as stopped within `STOP_WAIT_S` (a thread inside a driver call stops when the call
returns) is given `STRAGGLER_WAIT_S` more; one that still does not is continued and the timing
waits for its start to end, the others staying stopped. When their work does not go idle within
the probe's bound (a long or endless kernel of a stopped child), the stopped starts are continued
and the timing waits for them to end, as without pausing. A stopped child's time limits do not
run while it is stopped (`sandbox.Child.receive`). With `pause_starts_for_timing` off (no
`drain`), while the probe is not available (starting, or failed a while ago), or for a start
registered without a child, the timing waits for the start to end, and short calls are admitted
meanwhile: the timing cannot begin before that start ends anyway, so they cost it at most one call's time.

New holders of either mode wait while a timing holds or waits for the GPU (except those short
calls). Compiling before a child's first call and starting the child process are outside the
gate. On the CPU the gate admits everyone (there is nothing to time).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, Protocol

#: Longest a timing waits for the children it stopped to show as stopped (a thread inside a
#: driver call stops only when the call returns) ...
STOP_WAIT_S = 0.5
#: ... and then for those that did not, before it continues them and waits for their starts to
#: end (a correctness hold lasts seconds: on an H200 one such wait held the GPU for 21 s while
#: every start it had stopped was continued and waited for).
STRAGGLER_WAIT_S = 1.5


class Pausable(Protocol):
    """What a start's child offers the gate: stop it, wait until it is stopped, continue it (each
    idempotent)."""

    def pause(self) -> None: ...

    def settle(self, deadline: float) -> bool: ...

    def resume(self) -> None: ...


class Together:
    """Several children paused as one (a candidate's harness and its judge during the correctness
    calls): each is stopped, waited for and continued in turn."""

    def __init__(self, *children: Pausable):
        self.children = children

    def pause(self) -> None:
        for child in self.children:
            child.pause()

    def settle(self, deadline: float) -> bool:
        return all([child.settle(deadline) for child in self.children])

    def resume(self) -> None:
        for child in self.children:
            child.resume()


#: Hears every hold of the gate once it ends (`GpuGate.trace`): a dict with ``mode`` (shared,
#: starting, exclusive), ``t`` (monotonic seconds when it was admitted), ``wait_s`` and ``hold_s``;
#: a start says whether it was ``pausable``; an exclusive hold also has ``ready_s`` (of its hold,
#: the time before the timing began: the starts stopped, their GPU work drained), ``paused`` (the
#: starts it stopped), ``stopped`` (whether they all showed as stopped in time), ``late`` (those
#: that stopped only in the second chance), ``stragglers`` (those that did not: continued and
#: waited for), ``drained`` (whether their GPU work drained) and ``kept`` (whether it left them
#: stopped for the timing waiting after it).
Trace = Callable[[dict[str, Any]], None]


class Drain(Protocol):
    """Waits until the GPU is idle of stopped children's queued work (`idle.IdleProbe`)."""

    def available(self) -> bool: ...

    def wait(self) -> bool: ...


class GpuGate:
    """A readers-writer lock with writer preference and two kinds of readers (see the module doc)."""

    def __init__(self, enabled: bool, drain: Drain | None = None, trace: Trace | None = None):
        """`drain`: waits until the GPU is idle of stopped children's queued work, and says
        whether it went idle; without it (or while it is not available), starts are waited for,
        never paused. `trace` hears every hold as it ends (`Trace`)."""
        self.enabled = enabled
        self.drain = drain
        self.trace = trace
        #: Whether the waiting timing pauses starts (the drain was available when it came).
        self._pausing = False
        self._cond = threading.Condition()
        self._shared = 0
        self._starting = 0
        #: The running starts that a timing pauses instead of waiting for them (by holder token).
        self._pausable: dict[int, Pausable] = {}
        self._exclusive = False
        self._waiting = 0
        #: Of the waiting timings, those that pause starts (`exclusive`'s `pausing`).
        self._waiting_pausing = 0
        #: The children a timing that ended left stopped for the next (by holder token). One whose
        #: start has ended meanwhile (its answer came just before the stop) is continued when the
        #: next timing takes the GPU: it may be that timing's own child.
        self._kept: dict[int, Pausable] = {}
        #: Seconds the GPU was held alone (timing), and how many times: what serializes
        #: candidates (the bench reports it per candidate).
        self.exclusive_s = 0.0
        self.exclusive_n = 0

    def pausing(self) -> bool:
        """Whether a timing stops the starts registered with a child instead of waiting for them."""
        return self.enabled and self.drain is not None

    @contextlib.contextmanager
    def shared(self) -> Iterator[None]:
        """One short GPU call; many holders at once. Waits while timing holds the GPU, and while a
        timing waits for it, except for a start it cannot pause."""
        with self._held(starting=False, child=None):
            yield

    @contextlib.contextmanager
    def starting(self, child: Pausable | None = None) -> Iterator[None]:
        """A child's start (long, mostly CPU work); many holders at once. Waits while timing holds
        or waits for the GPU. With `child` (and a `drain`), a timing stops `child` for its duration
        instead of waiting for the start to end."""
        with self._held(starting=True, child=child if self.drain is not None else None):
            yield

    def _blocking_starts(self) -> int:
        """Running starts a timing must wait for (it cannot pause them)."""
        return self._starting - (len(self._pausable) if self._pausing else 0)

    @contextlib.contextmanager
    def _held(self, starting: bool, child: Pausable | None) -> Iterator[None]:
        if not self.enabled:
            yield
            return

        def admitted() -> bool:
            if self._exclusive:
                return False
            return self._waiting == 0 or (not starting and self._blocking_starts() > 0)

        token = object()
        asked = time.monotonic()
        with self._cond:
            self._cond.wait_for(admitted)
            self._shared += 1
            self._starting += int(starting)
            if child is not None:
                self._pausable[id(token)] = child
        admitted_at = time.monotonic()
        try:
            yield
        finally:
            with self._cond:
                self._shared -= 1
                self._starting -= int(starting)
                self._pausable.pop(id(token), None)
                self._cond.notify_all()
            if self.trace is not None:
                self.trace(
                    {
                        "mode": "starting" if starting else "shared",
                        "pausable": child is not None,
                        "t": round(admitted_at, 4),
                        "wait_s": round(admitted_at - asked, 4),
                        "hold_s": round(time.monotonic() - admitted_at, 4),
                    }
                )

    def _continue_until_ended(self, children: dict[int, Pausable]) -> float:
        """Continues `children` (stopped starts, by their holders' tokens) and waits until each
        of their starts has ended; the seconds waited."""
        for child in children.values():
            child.resume()
        t0 = time.monotonic()
        with self._cond:
            self._cond.wait_for(lambda: not (children.keys() & self._pausable.keys()))
        return time.monotonic() - t0

    @contextlib.contextmanager
    def exclusive(self, waited: Callable[[str, float], None] | None = None) -> Iterator[None]:
        """The only holder: the running starts it can pause are stopped while it holds the GPU.
        `waited(what, seconds)` hears how long it waited, once it held the gate, for their queued
        GPU work (`drain`) and, where that did not drain, for their starts to end (`undrained`)."""
        if not self.enabled:
            yield
            return
        pausing = self.drain is not None and self.drain.available()
        asked = time.monotonic()
        drained = True
        with self._cond:
            self._waiting += 1
            self._waiting_pausing += int(pausing)
            self._pausing = pausing
            # every short call ended, and every start that cannot be paused
            self._cond.wait_for(
                lambda: not self._exclusive and self._shared - (len(self._pausable) if pausing else 0) == 0
            )
            self._waiting -= 1
            self._waiting_pausing -= int(pausing)
            self._exclusive = True
            paused = dict(self._pausable) if pausing else {}
            ended = [child for key, child in self._kept.items() if key not in paused]
            self._kept = {}
        for child in ended:
            child.resume()
        counted = len(paused)
        start = ready = time.monotonic()
        late = stragglers = 0
        #: seconds waited for the starts of children that did not stop
        undrained = 0.0
        try:
            for child in paused.values():
                child.pause()
            # every child is asked (each waits until the same deadline), not only up to the first
            # that did not stop in time; one that did not (a thread inside a driver call stops when
            # the call returns) is given a second, longer chance
            settled = start + STOP_WAIT_S
            slow = [key for key, child in paused.items() if not child.settle(settled)]
            if slow:
                again = time.monotonic() + STRAGGLER_WAIT_S
                still = [key for key in slow if not paused[key].settle(again)]
                late, stragglers = len(slow) - len(still), len(still)
                if still:
                    # it may go on issuing GPU work: it is continued and the timing waits for its
                    # start to end, the others staying stopped
                    undrained = self._continue_until_ended({key: paused.pop(key) for key in still})
                    if waited is not None:
                        waited("undrained", undrained)
            if paused and self.drain is not None:
                drained = self.drain.wait()
                if waited is not None:
                    # stopping the children and draining their GPU work
                    waited("drain", time.monotonic() - start - undrained)
                if not drained:
                    # their GPU work did not drain in time (a long kernel): the timing waits for
                    # their starts to end
                    seconds = self._continue_until_ended(paused)
                    paused = {}
                    if waited is not None:
                        waited("undrained", seconds)
            ready = time.monotonic()
            yield
        finally:
            end = time.monotonic()
            with self._cond:
                # a timing that waits and pauses starts too would stop these children again at
                # once: those still starting stay stopped for it (it finds them stopped and drained)
                kept = bool(paused) and self._waiting > 0 and self._waiting_pausing == self._waiting
                if kept:
                    self._kept = {key: child for key, child in paused.items() if key in self._pausable}
                    paused = {key: child for key, child in paused.items() if key not in self._kept}
                self.exclusive_s += end - start
                self.exclusive_n += 1
                self._exclusive = False
                self._cond.notify_all()
            for child in paused.values():
                child.resume()
            if self.trace is not None:
                self.trace(
                    {
                        "mode": "exclusive",
                        "t": round(start, 4),
                        "wait_s": round(start - asked, 4),
                        "hold_s": round(end - start, 4),
                        "ready_s": round(ready - start, 4),
                        "paused": counted,
                        "stopped": not stragglers,
                        "late": late,
                        "stragglers": stragglers,
                        "drained": drained,
                        "kept": kept,
                    }
                )
