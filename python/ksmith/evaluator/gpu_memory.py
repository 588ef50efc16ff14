"""Whether one more evaluation fits in the GPU's free memory: the worker's admission asks before
an evaluation's children start (`capacity.Admission`), and waits while it does not.

The worker never initializes CUDA, so the GPU's memory is read from `nvidia-smi` (used and total
MiB of the worker's GPU, `DeviceMemory`, at most every `SAMPLE_S`). What one evaluation holds
(`MemoryGate.per_evaluation_mb`) is first a guess from the code: two CUDA contexts (the harness
and the judge, `CONTEXT_MB` each with PyTorch's kernels loaded) and the timing's buffer sets
(`timing.buffer_mb`, which the harness holds from its start when the reference is timed beside
the candidate); then it is observed: the memory used beyond what was used while none of the
worker's evaluations ran (other processes, the gate's idle probe), shared out over the running
evaluations, at moments when at least `SETTLED_SHARE` of them were admitted more than `GROWING_S`
ago (a starting evaluation's children are still allocating: CUDA, the task's inputs, the buffer
sets), smoothed (an exponential average, weight `SMOOTHING`). A new evaluation fits when the
memory left below `1 - RESERVE` of the total covers it and every evaluation still growing.

Nothing is ever refused for memory: when none of the worker's evaluations runs, the next one
starts whatever the GPU holds (the memory is another process's; running out then is answered as
`capacity` says). The gate only orders starts; `capacity`'s retries remain the answer to running
out, e.g. where a task needs more than the average.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

#: MiB a child holds on the GPU before a task's tensors (its CUDA context with PyTorch's kernels
#: loaded, the allocator's first blocks): the first guess's unit. Measured on an H200 with the
#: bench's tasks (docs/bench/multi-gpu.md, fifth session): judges held 1622 MiB (median),
#: harnesses 3358 MiB, so an evaluation about 5 GiB; the guess (two of these and the timing
#: buffers) stays below that, and the observed figure replaces it.
CONTEXT_MB = 1600.0
#: Seconds after its admission during which an evaluation's memory is taken to be growing.
GROWING_S = 30.0
#: The share of running evaluations that must be settled for a sample to be an observation.
SETTLED_SHARE = 0.8
#: The weight of a new observation in the estimate.
SMOOTHING = 0.2
#: The share of the GPU's memory kept free.
RESERVE = 0.05
#: Seconds a reading of `nvidia-smi` is used for.
SAMPLE_S = 0.5

Reading = tuple[float, float]


class DeviceMemory:
    """The GPU's used and total MiB from `read` (None when unknown), read at most every
    `SAMPLE_S` seconds. Thread-safe."""

    def __init__(self, read: Callable[[], Reading | None], clock: Callable[[], float] = time.monotonic):
        self._read = read
        self._clock = clock
        self._lock = threading.Lock()
        self._at = -float("inf")
        self._last: Reading | None = None

    def __call__(self) -> Reading | None:
        with self._lock:
            now = self._clock()
            if now - self._at >= SAMPLE_S:
                self._last = self._read()
                self._at = now
            return self._last


def parse_smi(row: str) -> Reading | None:
    """``used, total`` (MiB, `nvidia-smi`'s ``memory.used,memory.total``) as numbers, or None."""
    try:
        used, total = (float(x) for x in row.split(","))
    except ValueError:
        return None
    return (used, total) if total > 0 else None


class MemoryGate:
    """Whether one more evaluation fits (see the module doc). Called under the admission's lock."""

    def __init__(
        self,
        memory: Callable[[], Reading | None],
        first_guess_mb: float,
        clock: Callable[[], float] = time.monotonic,
        growing_s: float = GROWING_S,
    ):
        self.memory = memory
        self.clock = clock
        self.growing_s = growing_s
        #: What one evaluation holds on the GPU (MiB): the guess, then the observed average.
        self.per_evaluation_mb = first_guess_mb
        #: Whether `per_evaluation_mb` is observed yet.
        self.observed = False
        #: MiB used while none of the worker's evaluations ran.
        self.idle_mb: float | None = None
        #: Why the last evaluation that did not fit waited (for the notice).
        self.short = ""
        #: The reading last observed (each reading is observed once).
        self._seen: Reading | None = None

    def fits(self, admitted: list[float]) -> bool:
        """Whether one more evaluation fits beside those admitted at the times `admitted` (the
        clock's seconds); True when none runs or the memory is unknown."""
        reading = self.memory()
        if reading is None:
            return True
        used, total = reading
        if not admitted:
            self.idle_mb = used
            return True
        now = self.clock()
        growing = sum(1 for t in admitted if now - t < self.growing_s)
        settled = len(admitted) - growing >= SETTLED_SHARE * len(admitted)
        if self.idle_mb is not None and settled and reading is not self._seen:
            self._seen = reading
            per = max(0.0, used - self.idle_mb) / len(admitted)
            if self.observed:
                per = (1 - SMOOTHING) * self.per_evaluation_mb + SMOOTHING * per
            self.per_evaluation_mb = per
            self.observed = True
        left = total * (1 - RESERVE) - used
        need = self.per_evaluation_mb * (1 + growing)
        if left >= need:
            return True
        how = "observed" if self.observed else "guessed"
        self.short = (
            f"{left:.0f} MiB free below the {RESERVE:.0%} reserve of {total:.0f} MiB, one evaluation holds about "
            f"{self.per_evaluation_mb:.0f} MiB ({how}), {len(admitted)} running of which {growing} still starting"
        )
        return False
