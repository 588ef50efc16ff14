"""The registry of the evaluator's backends (see `backend` for the interface): the names a
request may use, the worker's side of each, and the harness's."""

from __future__ import annotations

from typing import Any

from .backend import Backend, HarnessSide
from .backend_cuda import CudaBackend, CudaHarness
from .backend_triton import TritonBackend, TritonHarness

#: The backend a request names when it names none.
DEFAULT = "triton"


def names() -> list[str]:
    """The backends a request may name (`verdicts.json`'s `backend`, which Rust's `Backend`
    equals; tests on both sides check them)."""
    return sorted(_classes())


def _classes() -> dict[str, type[Backend]]:
    return {c.NAME: c for c in (TritonBackend, CudaBackend)}


def create(name: str, ev: Any) -> Backend:
    """The backend `name` for the evaluator `ev`; `ValueError` for an unknown name."""
    classes = _classes()
    if name not in classes:
        raise ValueError(f"unknown backend `{name}` (known: {', '.join(sorted(classes))})")
    return classes[name](ev)


def harness_for(cfg: dict[str, Any]) -> HarnessSide:
    """The harness side of the backend the harness's config names."""
    name = cfg.get("backend", DEFAULT)
    sides: dict[str, type[HarnessSide]] = {"triton": TritonHarness, "cuda": CudaHarness}
    if name not in sides:
        raise ValueError(f"unknown backend `{name}`")
    return sides[name](cfg)
