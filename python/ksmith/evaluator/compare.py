"""Trusted comparisons, done in the worker on CPU tensors it loaded itself.

Tolerance (dtype-aware, per output): an element passes when
`|cand - ref| <= atol + rtol * |ref|` (NaN only matches NaN), with `(atol, rtol)` from the
options (defaults in `defaults.json`: float32/float64 `1e-4`, strict, float16/bfloat16 `1e-2`;
other floating dtypes take the float32 pair); integer and bool outputs
must be equal. Error statistics per output: absolute error `|cand - ref|` and relative error
`|cand - ref| / max(|ref|, atol)` (the floor keeps near-zero references from dominating), max
and mean over elements, computed in float32 (float64 for float64 outputs).
"""

from __future__ import annotations

import json
import pathlib
from typing import Any

import torch

from .integrity import finite

DEFAULT_TOLERANCES = json.loads(pathlib.Path(__file__).with_name("defaults.json").read_text())["tolerances"]


def tolerance(dtype: torch.dtype, tolerances: dict[str, Any]) -> tuple[float, float]:
    name = str(dtype).replace("torch.", "")
    atol, rtol = tolerances.get(name, DEFAULT_TOLERANCES.get(name, DEFAULT_TOLERANCES["float32"]))
    return float(atol), float(rtol)


def structure_error(cand: list[Any], ref: list[Any]) -> str | None:
    """Why the outputs cannot be compared (count, type, shape, dtype), or None."""
    if len(cand) != len(ref):
        return f"{len(cand)} outputs, the reference has {len(ref)}"
    for i, (c, r) in enumerate(zip(cand, ref)):
        if isinstance(r, torch.Tensor):
            if not isinstance(c, torch.Tensor):
                return f"output {i} is {type(c).__name__}, the reference returns a tensor"
            if tuple(c.shape) != tuple(r.shape):
                return f"output {i} has shape {tuple(c.shape)}, the reference {tuple(r.shape)}"
            if c.dtype != r.dtype:
                return f"output {i} has dtype {c.dtype}, the reference {r.dtype}"
        elif isinstance(c, torch.Tensor):
            return f"output {i} is a tensor, the reference returns {type(r).__name__}"
    return None


def output_errors(cand: list[Any], ref: list[Any], tolerances: dict[str, Any]) -> tuple[bool, list[dict[str, Any]]]:
    """(all outputs within tolerance, error statistics per output). Assumes equal structure."""
    ok = True
    stats = []
    for i, (c, r) in enumerate(zip(cand, ref)):
        if not isinstance(r, torch.Tensor):
            same = c == r
            ok &= bool(same)
            stats.append(
                {
                    "index": i,
                    "max_abs": 0.0 if same else 1.0,
                    "mean_abs": 0.0 if same else 1.0,
                    "max_rel": 0.0 if same else 1.0,
                    "mean_rel": 0.0 if same else 1.0,
                }
            )
            continue
        if r.numel() == 0:
            stats.append({"index": i, "max_abs": 0.0, "mean_abs": 0.0, "max_rel": 0.0, "mean_rel": 0.0})
            continue
        if not r.is_floating_point() and not r.is_complex():
            diff = (c.to(torch.float64) - r.to(torch.float64)).abs()
            good = bool(torch.equal(c, r))
            atol = 1.0
            r = r.to(torch.float64)
        else:
            atol, rtol = tolerance(r.dtype, tolerances)
            wide = torch.float64 if r.dtype == torch.float64 else torch.float32
            cd, rd = c.to(wide), r.to(wide)
            both_nan = torch.isnan(cd) & torch.isnan(rd)
            diff = torch.where(both_nan, torch.zeros_like(cd), (cd - rd).abs())
            diff = torch.where(torch.isnan(diff), torch.full_like(diff, float("inf")), diff)
            good = bool((diff <= atol + rtol * rd.abs().nan_to_num(0.0)).all())
            r = rd
        rel = diff / r.abs().clamp_min(atol).nan_to_num(atol).to(diff.dtype)
        ok &= good
        stats.append(
            {
                "index": i,
                "max_abs": finite(float(diff.max())),
                "mean_abs": finite(float(diff.mean())),
                "max_rel": finite(float(rel.max())),
                "mean_rel": finite(float(rel.mean())),
            }
        )
    return ok, stats


def matches(cand: list[Any], ref: list[Any], tolerances: dict[str, Any]) -> bool:
    """Same structure and within tolerance."""
    return structure_error(cand, ref) is None and output_errors(cand, ref, tolerances)[0]


def worst_error(stats: list[dict[str, Any]]) -> float:
    """The largest max-abs error over outputs."""
    return max((s["max_abs"] for s in stats), default=0.0)


def mean_error(stats: list[dict[str, Any]]) -> float:
    """The largest mean-abs error over outputs."""
    return max((s["mean_abs"] for s in stats), default=0.0)
