"""Fresh random inputs for a trial, built from the REFERENCE's `get_inputs()`.

Trial `k` seeds torch with its own seed, calls `get_inputs()` (so shapes, dtypes, integer
index tensors and non-tensor arguments are the task's), then refills every floating-point
tensor with a distribution that cycles over the trials: normal, uniform(-1, 1), Laplace
(heavy tails) and a mixed log-normal (magnitudes over several decades, random signs). Tensors
that the task built non-negative (e.g. `torch.rand`) stay non-negative (absolute values), so
tasks with `log`/`sqrt` keep a valid domain. No value is exactly zero.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

DISTRIBUTIONS = ("normal", "uniform", "laplace", "mixed")


def _sample(shape: tuple[int, ...], dist: str, gen: torch.Generator) -> torch.Tensor:
    if dist == "normal":
        x = torch.randn(shape, generator=gen, dtype=torch.float64)
    elif dist == "uniform":
        x = torch.rand(shape, generator=gen, dtype=torch.float64) * 2 - 1
    elif dist == "laplace":
        u = torch.rand(shape, generator=gen, dtype=torch.float64).clamp_min(1e-12)
        s = torch.randint(0, 2, shape, generator=gen).to(torch.float64) * 2 - 1
        x = -torch.log(u) * s / 1.4142
    else:
        mag = torch.exp(torch.randn(shape, generator=gen, dtype=torch.float64) * 0.75)
        s = torch.randint(0, 2, shape, generator=gen).to(torch.float64) * 2 - 1
        x = mag * s
    return x


def _refill(t: torch.Tensor, dist: str, gen: torch.Generator) -> torch.Tensor:
    if not t.is_floating_point() or t.numel() == 0:
        return t
    x = _sample(tuple(t.shape), dist, gen)
    if bool((t >= 0).all()):
        x = x.abs()
    tiny = torch.full_like(x, 1e-3)
    x = torch.where(x == 0, tiny, x)
    return x.to(t.dtype).contiguous()


def make_inputs(get_inputs: Callable[[], Any], seed: int, trial: int) -> list[Any]:
    """The inputs of one trial (CPU tensors and plain values)."""
    torch.manual_seed(seed)
    base = list(get_inputs())
    gen = torch.Generator().manual_seed(seed ^ 0x5EED)
    dist = DISTRIBUTIONS[trial % len(DISTRIBUTIONS)]
    return [_refill(v, dist, gen) if isinstance(v, torch.Tensor) else v for v in base]
