"""Who may use a GPU when: timing has it alone, everything else shares it.

A worker evaluates several candidates at once (compiling on the CPU overlaps with the GPU), but a
timed sample must not share the GPU with another child's kernels, or the median moves by what
ran beside it. Every GPU phase of a child is therefore started by the worker under the gate:
correctness calls and the judge's comparisons take it `shared` (many at once), timing takes it
`exclusive` (it waits for the shared holders to finish and keeps new ones out; a waiting
exclusive holder goes first). Compiling (a child's first, ungated call) and starting CUDA are
outside the gate. On the CPU the gate admits everyone (there is nothing to time).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator


class GpuGate:
    """A readers-writer lock with writer preference (see the module doc)."""

    def __init__(self, enabled: bool):
        self.enabled = enabled
        self._cond = threading.Condition()
        self._shared = 0
        self._exclusive = False
        self._waiting = 0
        #: Seconds the GPU was held alone (timing), and how many times: what serializes
        #: candidates (the bench reports it per candidate).
        self.exclusive_s = 0.0
        self.exclusive_n = 0

    @contextlib.contextmanager
    def shared(self) -> Iterator[None]:
        """Many holders at once; none while timing holds or waits for the GPU."""
        if not self.enabled:
            yield
            return
        with self._cond:
            self._cond.wait_for(lambda: not self._exclusive and self._waiting == 0)
            self._shared += 1
        try:
            yield
        finally:
            with self._cond:
                self._shared -= 1
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
