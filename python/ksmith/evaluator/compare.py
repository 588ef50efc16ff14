"""Trusted comparisons, done in the worker on CPU tensors it loaded itself.

Tolerance (dtype-aware, per output): an element passes when
`|cand - ref| <= atol + rtol * |ref|` (NaN only matches NaN, an infinity only the same infinity:
`ksmith.shared.outputs.within`, the one definition of "close"), with `(atol, rtol)` from the
options (defaults in `defaults.json`: float32/float64 `1e-4`, strict, float16/bfloat16 `1e-2`;
other floating dtypes take the float32 pair); integer and bool outputs
must be equal. Next to it, the relative error of the whole output,
`||cand - ref||_2 / ||ref||_2`, must stay within the dtype's `relative_error` (float32/float64
`1e-3`, float16/bfloat16 `2e-2`): where the reference's values are far below `atol`, the
element test alone would pass any small constant. It applies when the reference's root mean
square is above `atol / 1000` (below that the outputs are rounding noise or exact zeros, and the
element test decides alone).

Error statistics per output: absolute error `|cand - ref|` and relative error
`|cand - ref| / max(|ref|, atol)` (the floor keeps near-zero references from dominating), max
and mean over elements, computed in float32 (float64 for float64 outputs, complex64 or
complex128 for complex ones: `ksmith.shared.outputs.wide`).
"""

from __future__ import annotations

import json
import math
import pathlib
from typing import Any

import torch

from ..shared.outputs import wide, within

_DEFAULTS = json.loads(pathlib.Path(__file__).with_name("defaults.json").read_text())
DEFAULT_TOLERANCES: dict[str, list[float]] = _DEFAULTS["tolerances"]
DEFAULT_RELATIVE: dict[str, float] = _DEFAULTS["relative_error"]
#: The relative criterion applies above this fraction of `atol` (root mean square of the reference).
NOISE_FLOOR = 1e-3


def finite(x: float) -> float:
    """JSON-safe float: non-finite values become the largest double."""
    if math.isnan(x) or math.isinf(x):
        return 1.7976931348623157e308
    return float(x)


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


def relative_limit(dtype: torch.dtype, relative: dict[str, float] | None) -> float:
    name = str(dtype).replace("torch.", "")
    table = relative or DEFAULT_RELATIVE
    return float(table.get(name, DEFAULT_RELATIVE.get(name, DEFAULT_RELATIVE["float32"])))


def relative_error(cand: torch.Tensor, ref: torch.Tensor, atol: float) -> float | None:
    """`||cand - ref||_2 / ||ref||_2`, or None when the reference is below the noise floor (see the
    module doc). NaN where both are NaN counts as equal."""
    both_nan = torch.isnan(cand) & torch.isnan(ref)
    r = torch.where(both_nan, torch.zeros_like(ref), ref)
    c = torch.where(both_nan, torch.zeros_like(cand), cand)
    ref_norm = float(torch.linalg.vector_norm(r.nan_to_num(0.0)))
    if ref_norm / max(r.numel(), 1) ** 0.5 <= atol * NOISE_FLOOR:
        return None
    diff = float(torch.linalg.vector_norm(c - r))
    return diff / ref_norm if diff == diff else float("inf")


def output_errors(
    cand: list[Any], ref: list[Any], tolerances: dict[str, Any], relative: dict[str, float] | None = None
) -> tuple[bool, list[dict[str, Any]]]:
    """(all outputs within tolerance, error statistics per output). Assumes equal structure.
    `relative` is the relative-error limit per dtype (default: `defaults.json`)."""
    ok = True
    stats: list[dict[str, Any]] = []
    for i, (c, r) in enumerate(zip(cand, ref)):
        rel_l2 = None
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
            good = within(c, r, atol, rtol)
            cd, rd = c.to(wide(r.dtype)), r.to(wide(r.dtype))
            diff = (cd - rd).abs()
            diff = torch.where(torch.isnan(cd) & torch.isnan(rd), torch.zeros_like(diff), diff)
            diff = torch.where(torch.isnan(diff), torch.full_like(diff, float("inf")), diff)
            rel_l2 = relative_error(cd, rd, atol)
            good = good and (rel_l2 is None or rel_l2 <= relative_limit(r.dtype, relative))
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
                "rel_l2": None if rel_l2 is None else finite(rel_l2),
            }
        )
    return ok, stats


def matches(
    cand: list[Any], ref: list[Any], tolerances: dict[str, Any], relative: dict[str, float] | None = None
) -> bool:
    """Same structure and within tolerance."""
    return structure_error(cand, ref) is None and output_errors(cand, ref, tolerances, relative)[0]


def worst_error(stats: list[dict[str, Any]]) -> float:
    """The largest max-abs error over outputs."""
    return max((s["max_abs"] for s in stats), default=0.0)


def worst_relative(stats: list[dict[str, Any]]) -> float | None:
    """The largest relative error of a whole output (`rel_l2`), where it applied."""
    values = [s["rel_l2"] for s in stats if s.get("rel_l2") is not None]
    return max(values) if values else None


#: The fields of one output's statistics in a result (the protocol's `OutputError`).
ERROR_FIELDS = ("index", "max_abs", "mean_abs", "max_rel", "mean_rel")


def public(stats: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`stats` with only the protocol's fields."""
    return [{k: s[k] for k in ERROR_FIELDS} for s in stats]


def near(stats: list[dict[str, Any]], limit: float, floor: float) -> bool:
    """Every output of `stats` (`output_errors`'s) near its reference: within `limit` relative
    error as a whole where that applies, else (an output below the noise floor, or not of floating
    point) within `floor` everywhere."""
    return all(s["rel_l2"] <= limit if s.get("rel_l2") is not None else s["max_abs"] <= floor for s in stats)


def mean_error(stats: list[dict[str, Any]]) -> float:
    """The largest mean-abs error over outputs."""
    return max((s["mean_abs"] for s in stats), default=0.0)
