"""Writing a sized program: the knobs as module-level constants (``batch_size = ...``) that the
rewritten ``get_inputs()`` / ``get_init_inputs()`` read by name, and tensor inputs drawn at those
sizes the way the original inputs were (:func:`insert_constants`, :func:`render_named`).
"""

from __future__ import annotations

import dataclasses

from .guesses import Arg, SeqGuess
from .program import render_guess


@dataclasses.dataclass(frozen=True)
class NamedValue:
    """A knob's constant, written by name; `times` it where the size is a multiple of the knob's
    (an input twice as long as the context the knob names: ``2 * n_ctx``)."""

    name: str
    times: int = 1

    def source(self) -> str:
        return self.name if self.times == 1 else f"{self.times} * {self.name}"


@dataclasses.dataclass(frozen=True)
class NamedTensor:
    """A tensor input some of whose dimensions are constants; ``make`` is how its values are
    drawn (``rand``, ``randn``, ``randint:LO:HI``, ``full:V``, ``bernoulli:P``, ``ones``)."""

    dims: tuple
    dtype: str
    make: str


def _dims_source(dims) -> str:
    return "[" + ", ".join(d.source() if isinstance(d, NamedValue) else str(d) for d in dims) + "]"


def _tensor_source(t: NamedTensor) -> str:
    shape = _dims_source(t.dims)
    dtype = "" if t.dtype == "float32" else f", dtype=torch.{t.dtype}"
    kind, _, rest = t.make.partition(":")
    if kind in ("rand", "randn"):
        return f"torch.{kind}({shape}{dtype})"
    if kind == "randint":
        lo, hi = rest.split(":")
        return f"torch.randint({lo}, {hi}, {shape}{dtype})"
    if kind == "full":
        return f"torch.full({shape}, {rest}{dtype})"
    if kind == "bernoulli":
        return f"(torch.rand({shape}) < {rest})"
    return f"torch.ones({shape}{dtype})"


def _named_source(guess) -> tuple[str, bool] | None:
    if isinstance(guess, NamedValue):
        return guess.source(), False
    if isinstance(guess, NamedTensor):
        return _tensor_source(guess), False
    if isinstance(guess, SeqGuess) and any(isinstance(g, NamedTensor) for g in guess.items):
        parts = [_named_source(g) or render_guess(Arg(g)) for g in guess.items]
        inner = ", ".join(p[0] for p in parts)
        reads = any(p[1] for p in parts)
        if guess.kind == "tuple":
            return (f"({inner},)" if len(parts) == 1 else f"({inner})"), reads
        return f"[{inner}]", reads
    return None


def render_named(arg: Arg) -> tuple[str, bool]:
    """Writes an argument whose guess may hold knob constants (a ``program.Render``)."""
    return _named_source(arg.guess) or render_guess(arg)


def tensor_maker(value, torch) -> str:
    """How to draw a tensor like ``value`` (an original input) at another shape."""
    if not isinstance(value, torch.Tensor) or value.numel() == 0:
        return "rand"
    if value.dtype == torch.bool:
        frac = float(value.float().mean())
        return "ones" if frac == 1.0 else ("full:False" if frac == 0.0 else f"bernoulli:{round(frac, 3)}")
    if value.is_floating_point():
        return "randn" if float(value.min()) < 0 else "rand"
    lo, hi = int(value.min()), int(value.max())
    return f"full:{lo}" if lo == hi else f"randint:{lo}:{hi + 1}"


def insert_constants(text: str, values: dict[str, int]) -> str:
    """Puts ``NAME = value`` lines before the first top-level definition of ``get_inputs``,
    ``get_init_inputs`` or their kept originals."""
    import ast

    tree = ast.parse(text)
    line = None
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name.lstrip("_").endswith(("get_inputs", "get_init_inputs")):
            start = min([node.lineno] + [d.lineno for d in node.decorator_list])
            line = start if line is None else min(line, start)
    lines = text.splitlines(keepends=True)
    block = [f"{k} = {v}\n" for k, v in values.items()] + ["\n\n"]
    at = len(lines) if line is None else line - 1
    return "".join(lines[:at] + block + lines[at:])
