"""Whether two runs' outputs (or a list of inputs before and after a call) agree.

- :func:`same_values`: bitwise, a NaN matching a NaN at the same place (the probe's determinism
  check, the evaluator's input-mutation checks).
- :func:`close`: within a per-dtype ``(atol, rtol)`` (``|a - b| <= atol + rtol * |b|``, NaN
  matching NaN), computed in float32 (float64 for float64 tensors); integer and bool tensors must
  be equal (the evaluator's determinism checks of the reference and of a candidate).

Both need the same count of values, and tensors of the same shape and dtype at each place (inside
dicts, lists and tuples too); other values are compared with ``==``. The evaluator's judge
(``ksmith.evaluator.compare``) measures errors against the reference instead.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

#: `(atol, rtol)` of a dtype.
Tolerance = Callable[[Any], tuple[float, float]]


def _agree(a: Sequence[Any], b: Sequence[Any], tensors_agree: Callable[[Any, Any], bool]) -> bool:
    """The same structure (count, tensor or not, shape, dtype; dicts, lists and tuples walked),
    other values equal, and ``tensors_agree`` at each pair of tensors."""
    import torch

    def one(x: Any, y: Any) -> bool:
        if isinstance(x, torch.Tensor) or isinstance(y, torch.Tensor):
            return (
                isinstance(x, torch.Tensor)
                and isinstance(y, torch.Tensor)
                and x.shape == y.shape
                and x.dtype == y.dtype
                and tensors_agree(x, y)
            )
        if isinstance(x, dict) and isinstance(y, dict):
            return x.keys() == y.keys() and all(one(x[k], y[k]) for k in x)
        if isinstance(x, (list, tuple)) and isinstance(y, (list, tuple)):
            return type(x) is type(y) and len(x) == len(y) and all(map(one, x, y))
        try:
            return bool(x == y)
        except (RuntimeError, ValueError, TypeError):
            # An equality without one truth value (an array's) does not say they agree.
            return False

    return len(a) == len(b) and all(map(one, a, b))


def _bitwise(x: Any, y: Any) -> bool:
    import torch

    if torch.equal(x, y):
        return True
    if not (x.is_floating_point() or x.is_complex()):
        return False
    nan_x, nan_y = torch.isnan(x), torch.isnan(y)
    return torch.equal(nan_x, nan_y) and torch.equal(x[~nan_x], y[~nan_y])


def same_values(a: Sequence[Any], b: Sequence[Any]) -> bool:
    """Bitwise-equal values, NaNs at the same places counting as equal (on their device)."""
    return _agree(a, b, _bitwise)


def close(a: Sequence[Any], b: Sequence[Any], tolerance: Tolerance) -> bool:
    """Values within ``tolerance(dtype)`` of each other (on their device)."""
    import torch

    def within(x: Any, y: Any) -> bool:
        if not x.is_floating_point():
            return bool(torch.equal(x, y))
        atol, rtol = tolerance(x.dtype)
        wide = torch.float64 if x.dtype == torch.float64 else torch.float32
        return bool(torch.allclose(x.to(wide), y.to(wide), atol=atol, rtol=rtol, equal_nan=True))

    return _agree(a, b, within)
