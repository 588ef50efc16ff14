"""The evaluator's backends: what differs between kernel languages, behind one interface.

Everything else (the task's facts, the correctness calls and hidden shapes, the judge, timing,
the digests of timed calls, the dispatch log, the sandbox) is the same for every backend. A
backend says:

- whether it can run on this worker (`Backend.check_available`: raises `BackendUnavailable`
  naming what is missing, answered as the protocol's ``backend_unavailable`` error, never as a
  verdict on the candidate);
- its static rules (`Backend.static_check`, see `static_check` and, for CUDA, `cuda_source`);
- its compile step on the worker's side (`Backend.prepare`: nothing for Triton, which compiles
  at the first call in the harness; the confined build and its cache for CUDA), which may end the
  evaluation with a verdict (`CandidateFailed`, e.g. `compile_error` with the compiler's first
  errors), and what the harness's child gets (`Prepared`: config and environment) and what the
  worker does after it (`Backend.after_child`);
- on the harness's side (`harness_for`): what it installs before the candidate is imported
  (`HarnessSide.before_import`: CUDA hands the candidate's ``load_inline`` the verified modules
  built for it) and which kernels of the profile are the candidate's (`HarnessSide.kernels`,
  `HarnessSide.owns`): Triton counts launches through its launch hook; CUDA counts the
  candidate's own `__global__` kernels in the profile of one call.

The prompts a rollout gives the teacher per backend are on the Rust side
(`configs/prompts/<backend>/`). A new backend is one module here (a `Backend` and a
`HarnessSide`, registered in `backends`), its prompt folder, its name in
`ksmith_core::evaluation::Backend`, and its tests.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from typing import Any, ClassVar

from .static_check import StaticVerdict
from .static_check import check as static_check


class BackendUnavailable(Exception):
    """The backend cannot evaluate on this worker (its toolchain or device is missing)."""


class CandidateFailed(Exception):
    """The compile step decided the candidate's verdict (`status`, `hack`, `message`)."""

    def __init__(self, status: str, hack: str | None, message: str):
        super().__init__(message)
        self.status = status
        self.hack = hack
        self.message = message


@dataclasses.dataclass
class Prepared:
    """What the compile step hands the harness: keys added to its `config.json`, variables added
    to its environment, and what the step cost (`compile_s`; `cached`: every part came from a
    cache)."""

    config: dict[str, Any] = dataclasses.field(default_factory=dict)
    env: dict[str, str] = dataclasses.field(default_factory=dict)
    compile_s: float = 0.0
    cached: bool = True


class Backend:
    """One kernel language on the worker's side (see the module doc). One instance per
    `DeviceEvaluator`, so a backend may keep per-worker state (a cache)."""

    #: The name requests use (`request.backend`).
    NAME: ClassVar[str] = ""
    #: How verdicts name its kernels ("Triton", "CUDA").
    LABEL: ClassVar[str] = ""

    def __init__(self, ev: Any):
        """`ev`: the `evaluate.DeviceEvaluator` this backend serves."""
        self.ev = ev

    def check_available(self) -> None:
        """Raises `BackendUnavailable` when this worker cannot evaluate this backend."""

    def static_check(self, source: str) -> StaticVerdict:
        """The static rules (see `static_check`)."""
        return static_check(source, self.NAME)

    def prepare(self, candidate: str) -> Prepared:
        """The compile step before the harness starts; `CandidateFailed` ends the evaluation."""
        return Prepared()

    def after_child(self, candidate: str, workspace: str, prepared: Prepared) -> None:
        """What the worker does once a harness child on `workspace` ended."""

    def close(self) -> None:
        """Removes what the backend keeps on disk."""


class HarnessSide:
    """One kernel language on the harness's side (in the candidate's process)."""

    LABEL: ClassVar[str] = ""
    #: Whether launches are counted from the profile (else from a launch hook).
    LAUNCHES_FROM_PROFILE: ClassVar[bool] = False

    def __init__(self, cfg: dict[str, Any]):
        self.cfg = cfg

    def before_import(self) -> None:
        """Installs what the candidate needs before it is imported."""

    def kernels(self, launched: dict[str, int]) -> set[str]:
        """The names of the candidate's kernels to look for in a profile (`launched`: what the
        launch hook counted)."""
        return set(launched)

    @staticmethod
    def owns(event: str, kernels: set[str]) -> bool:
        """Whether a profiled kernel named `event` is one of `kernels`."""
        return any(event == k or event.startswith(k + "_") or event.startswith(k + "(") for k in kernels)


def kernel_share(
    events: Iterable[tuple[str, float]], kernels: set[str], owns: Callable[[str, set[str]], bool]
) -> tuple[float, dict[str, int]]:
    """Share of GPU time in the candidate's `kernels` among the profiled GPU `events` (kernel
    name, time) of one call, and how many times each of `kernels` was launched. A kernel is the
    candidate's when `owns` (the backend's `HarnessSide.owns`) says so: every other kernel (ATen's,
    a library's such as cuBLAS's or CUTLASS's) counts against the candidate. 1.0 when the call ran
    no GPU time at all."""
    total = 0.0
    mine = 0.0
    seen: dict[str, int] = {}
    for name, t in events:
        if t <= 0:
            continue
        total += t
        if owns(name, kernels):
            mine += t
            for k in kernels:
                if owns(name, {k}):
                    seen[k] = seen.get(k, 0) + 1
    return (mine / total if total > 0 else 1.0), seen
