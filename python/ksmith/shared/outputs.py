"""Whether two runs' outputs (or a list of inputs before and after a call) agree.

- :func:`same_values`: bitwise, a NaN matching a NaN at the same place (the probe's determinism
  check, the evaluator's input-mutation checks).
- :func:`close`: within a per-dtype ``(atol, rtol)`` (:func:`within`: ``|a - b| <= atol + rtol *
  |b|``, NaN matching NaN, an infinity only its own), computed in :func:`wide` precision; integer
  and bool tensors must be equal (the evaluator's determinism checks of the reference and of a
  candidate). :func:`within` is also the element test of the evaluator's judge
  (``ksmith.evaluator.compare.output_errors``): one definition of "close".

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


def wide(dtype: Any) -> Any:
    """The precision a tensor of ``dtype`` is compared in: float64 and complex128 as they are,
    other complex dtypes in complex64, everything else in float32."""
    import torch

    if dtype in (torch.float64, torch.complex128):
        return dtype
    return torch.complex64 if dtype.is_complex else torch.float32


def within(x: Any, y: Any, atol: float, rtol: float) -> bool:
    """Every element of the tensor ``x`` within ``atol + rtol * |y|`` of the tensor ``y`` (same
    shape), in :func:`wide` precision: NaN matches NaN and an infinity only the same infinity.
    Integer and bool tensors must be equal."""
    import torch

    if not (x.is_floating_point() or x.is_complex()):
        return bool(torch.equal(x, y))
    w = wide(x.dtype)
    return bool(torch.allclose(x.to(w), y.to(w), atol=atol, rtol=rtol, equal_nan=True))


def close(a: Sequence[Any], b: Sequence[Any], tolerance: Tolerance) -> bool:
    """Values within ``tolerance(dtype)`` of each other (on their device); ``tolerance`` is asked
    only for floating and complex dtypes."""

    def tensors_close(x: Any, y: Any) -> bool:
        exact = not (x.is_floating_point() or x.is_complex())
        return within(x, y, *((0.0, 0.0) if exact else tolerance(x.dtype)))

    return _agree(a, b, tensors_close)
