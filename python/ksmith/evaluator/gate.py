"""Who may use a GPU when: timing has it alone, everything else shares it.

A worker evaluates several candidates at once (compiling on the CPU overlaps with the GPU), but a
timed sample must not share the GPU with another child's kernels, or the median moves by what
ran beside it. Every GPU phase of a child is therefore started by the worker under the gate, in
one of three modes:

- `exclusive`: timing. It waits for every other holder to finish and keeps new ones out; a
  waiting exclusive holder goes first.
- `shared`: one short GPU call (a correctness call, a judge's comparison). Many at once.
- `starting`: a child's start (CUDA's start, a reference built and run, the candidate's first
  call with its compilation, a `torch.compile`): seconds long and mostly CPU work, but it may touch
  the GPU at any point, so a timing waits for it like for a shared holder.

The two non-exclusive modes differ only in how they yield to a waiting timing. A new `starting`
holder always waits for it. A new `shared` holder waits for it only while no `starting` holder is
running: the timing cannot begin before that holder ends anyway, so short calls admitted
meanwhile cost it at most one call's time, and the GPU keeps computing instead of idling behind a
timing that itself waits for a start (the convoy that left GPUs 15-19 % busy, docs/bench/multi-gpu.md).
Timing still runs alone. Compiling before a child's first call and starting the child process are
outside the gate. On the CPU the gate admits everyone (there is nothing to time).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator


class GpuGate:
    """A readers-writer lock with writer preference and two kinds of readers (see the module doc)."""

    def __init__(self, enabled: bool):
        self.enabled = enabled
        self._cond = threading.Condition()
        self._shared = 0
        self._starting = 0
        self._exclusive = False
        self._waiting = 0
        #: Seconds the GPU was held alone (timing), and how many times: what serializes
        #: candidates (the bench reports it per candidate).
        self.exclusive_s = 0.0
        self.exclusive_n = 0

    @contextlib.contextmanager
    def shared(self) -> Iterator[None]:
        """One short GPU call; many holders at once. Waits while timing holds the GPU, and while a
        timing waits for it with no `starting` holder running."""
        with self._held(starting=False):
            yield

    @contextlib.contextmanager
    def starting(self) -> Iterator[None]:
        """A child's start (long, mostly CPU work); many holders at once. Waits while timing holds
        or waits for the GPU."""
        with self._held(starting=True):
            yield

    @contextlib.contextmanager
    def _held(self, starting: bool) -> Iterator[None]:
        if not self.enabled:
            yield
            return

        def admitted() -> bool:
            if self._exclusive:
                return False
            return self._waiting == 0 or (not starting and self._starting > 0)

        with self._cond:
            self._cond.wait_for(admitted)
            self._shared += 1
            self._starting += int(starting)
        try:
            yield
        finally:
            with self._cond:
                self._shared -= 1
                self._starting -= int(starting)
                self._cond.notify_all()

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[None]:
        """The only holder."""
        if not self.enabled:
            yield
            return
        with self._cond:
            self._waiting += 1
            self._cond.wait_for(lambda: not self._exclusive and self._shared == 0)
            self._waiting -= 1
            self._exclusive = True
        start = time.monotonic()
        try:
            yield
        finally:
            with self._cond:
                self.exclusive_s += time.monotonic() - start
                self.exclusive_n += 1
                self._exclusive = False
                self._cond.notify_all()
