"""Argument guesses: what the repair search changes, and how a guess becomes a value or source.

A probe state is a pair ``(init, forward)``:

- ``init`` is a tuple of :class:`Arg` (constructor arguments, positional ones first, then
  keywords), each with the parameter name when it is known from ``Model.__init__``'s signature;
- ``forward`` is a tuple of :class:`Arg` (forward inputs, positional).

Guesses are frozen dataclasses so states are hashable: the search keeps a set of tried states.
A guess that still stands for an untouched value of the program's own ``get_inputs()`` /
``get_init_inputs()`` carries its ``orig`` path (indices into what that function returned), so
the emitted program keeps the original expression for it.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace
from typing import Any

FLOAT_DTYPES = ("float32", "float64", "float16", "bfloat16")
INT_DTYPES = ("int64", "int32", "int16", "int8", "uint8")

# A path into the value an original function returned, e.g. (0, 2) or (1, "bias").
Path = tuple[Any, ...]


@dataclass(frozen=True)
class TensorGuess:
    """A tensor input: its shape and dtype (a torch dtype name without ``torch.``)."""

    shape: tuple[int, ...]
    dtype: str = "float32"
    orig: Path | None = None
    #: Integer tensors are drawn from ``[0, high)`` (indices: the vocabulary they index).
    high: int = 2

    @property
    def rank(self) -> int:
        return len(self.shape)

    def numel(self) -> int:
        return math.prod(self.shape)

    def with_shape(self, shape) -> TensorGuess:
        return TensorGuess(tuple(int(s) for s in shape), self.dtype, None, self.high)

    def with_dtype(self, dtype: str) -> TensorGuess:
        return TensorGuess(self.shape, dtype, None, self.high)

    def with_high(self, high: int) -> TensorGuess:
        return TensorGuess(self.shape, self.dtype, None, high)


@dataclass(frozen=True)
class ValueGuess:
    """A literal value (int, float, bool, str, None, or a tuple/list of those)."""

    value: Any
    orig: Path | None = None


@dataclass(frozen=True)
class ExprGuess:
    """A Python expression evaluated in the program's namespace (``torch.nn.Identity``)."""

    expr: str


@dataclass(frozen=True)
class SeqGuess:
    """A list or tuple of guesses (an input that is a list of tensors)."""

    items: tuple[Any, ...]
    kind: str = "list"


@dataclass(frozen=True)
class OrigGuess:
    """An original value that cannot be written as a literal (a module instance, a dict, ...)."""

    orig: Path
    type_name: str = "object"


@dataclass(frozen=True)
class FieldOf:
    """What makes a constructor argument a field of a configuration object (:mod:`.config_args`):
    the constructor parameter the object is passed for, whether by name, the class the program
    defines for it, where the field's value came from (``default``: the class's; ``given``: the
    object the program's ``get_init_inputs()`` built; ``guess``: the probe's, by name) and that
    first value (the field is the repository's while it holds it)."""

    param: str
    keyword: bool
    cls: str
    source: str
    first: Any


@dataclass(frozen=True)
class Arg:
    """One argument: its guess, its parameter name (or None) and whether it is passed by name;
    ``within``: it is a field of the configuration object passed for a constructor parameter
    (the search changes fields as arguments; :func:`.config_args.collapse` builds the object)."""

    guess: Any
    name: str | None = None
    keyword: bool = False
    within: FieldOf | None = None


@dataclass(frozen=True)
class ConfigGuess:
    """A configuration object: the program's class ``cls`` called with its fields by name."""

    cls: str
    fields: tuple[Arg, ...]


def set_guess(args: tuple[Arg, ...], index: int, guess) -> tuple[Arg, ...]:
    """``args`` with the guess at ``index`` replaced."""
    return args[:index] + (replace(args[index], guess=guess),) + args[index + 1 :]


# --- name-based guesses for constructor arguments (paritybench's initial_arg_init) ------------

_BY_NAME = (
    # (substrings, guess); the first match wins, so specific names come first.
    (("norm_layer", "act_layer", "block_cls", "layer_cls", "block_fn", "norm_fn"), ExprGuess("torch.nn.Identity")),
    (("activation", "act_fn"), ExprGuess("torch.nn.ReLU()")),
    (("module", "submodule", "backbone"), ExprGuess("torch.nn.Identity()")),
    (("dtype",), ExprGuess("torch.float32")),
    (("device",), ValueGuess("cpu")),
    (("stride", "dilation", "groups", "depth", "layer", "num_layers", "n_layers"), ValueGuess(1)),
    (("scale",), ValueGuess(1.0)),
    # Training noise is off: a forward drawing random numbers is no task (0 draws none).
    (("dropout", "drop_rate", "drop_prob", "p_drop", "attn_drop", "proj_drop", "drop_path"), ValueGuess(0.0)),
    (("eps", "epsilon"), ValueGuess(1e-05)),
    (("momentum",), ValueGuess(0.1)),
    (("gpu", "train", "cuda", "requires_grad", "inplace", "verbose"), ValueGuess(False)),
    (("bias", "affine", "batch_first", "bidirectional"), ValueGuess(True)),
    (("padding",), ValueGuess(0)),
    (("kernel",), ValueGuess(3)),
    (("name", "mode", "type"), ValueGuess("default")),
    (("ratio", "rate", "alpha", "beta", "gamma", "temperature", "margin", "weight"), ValueGuess(0.5)),
)

DEFAULT_SIZE = 4


def guess_for_name(name: str | None):
    """A first guess for a constructor argument from its name; the literal 4 otherwise."""
    if name:
        low = name.lower()
        for keys, guess in _BY_NAME:
            if any(k in low for k in keys):
                return guess
    return ValueGuess(DEFAULT_SIZE)


#: Forward inputs that are one value per batch element (a diffusion time step, a noise level):
#: 1-D, and kept 1-D when the repair search restarts with every other tensor 2-D or 3-D.
TIME_NAME = re.compile(r"^(?:t|ts|time|times|timestep|timesteps|time_steps?|noise_levels?|sigmas?|log_snr)$")


#: Forward inputs holding one class label per sample (extract's ``is_label_name``).
LABEL_NAME = re.compile(r"^(?:classes|class_labels?|labels?|class_ids|y_class)$")


def is_time_input(arg: Arg) -> bool:
    """True for a 1-D tensor input whose name says it holds one value per sample: a time step
    or noise level, or integer class labels."""
    if not isinstance(arg.guess, TensorGuess) or arg.guess.rank != 1:
        return False
    name = (arg.name or "").lower()
    return bool(TIME_NAME.match(name) or (arg.guess.dtype in INT_DTYPES and LABEL_NAME.match(name)))


def default_tensor(rank: int = 4) -> TensorGuess:
    """The default forward input: a float tensor of ``rank`` dimensions of size 4."""
    return TensorGuess((DEFAULT_SIZE,) * rank)


# --- from values to guesses --------------------------------------------------------------------

_LITERAL_TYPES = (int, float, bool, str, type(None))


def is_literal(value) -> bool:
    """True for values that ``repr`` writes back as the same value."""
    if isinstance(value, _LITERAL_TYPES):
        if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
            return False
        return True
    if isinstance(value, (tuple, list)):
        return all(is_literal(v) for v in value)
    return False


def guess_of_value(value, path: Path, torch):
    """The guess that stands for an original value found at ``path``."""
    if isinstance(value, torch.Tensor):
        dtype = str(value.dtype).replace("torch.", "")
        shape = tuple(int(s) for s in value.shape)
        if dtype in INT_DTYPES and value.numel() > 1 and bool((value == value.reshape(-1)[0]).all()):
            # Constant indices (`torch.ones(..., dtype=torch.long)`) make an embedding's output
            # constant: drawn afresh instead, over the vocabulary once it is known.
            return TensorGuess(shape, dtype, None)
        return TensorGuess(shape, dtype, path)
    if is_literal(value):
        return ValueGuess(freeze(value), path)
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, torch.Tensor) for v in value):
        items = tuple(guess_of_value(v, path + (i,), torch) for i, v in enumerate(value))
        return SeqGuess(items, "tuple" if isinstance(value, tuple) else "list")
    return OrigGuess(path, type(value).__name__)


def freeze(value):
    """A literal value in the hashable form a :class:`ValueGuess` holds (lists marked)."""
    if isinstance(value, list):
        return ("__list__",) + tuple(freeze(v) for v in value)
    if isinstance(value, tuple):
        return tuple(freeze(v) for v in value)
    return value


def _thaw(value):
    if isinstance(value, tuple):
        if value and value[0] == "__list__":
            return [_thaw(v) for v in value[1:]]
        return tuple(_thaw(v) for v in value)
    return value


def literal_value(guess: ValueGuess):
    """The Python value of a literal guess (lists come back as lists)."""
    return _thaw(guess.value)


def as_list_value(value) -> ValueGuess:
    """A literal guess holding ``[value, value]`` (for an int that must be a list)."""
    return ValueGuess(("__list__", value, value))


# --- from guesses to values --------------------------------------------------------------------


def lookup(original, path: Path):
    """The element at ``path`` of what an original function returned."""
    value = original
    for key in path:
        value = value[key]
    return value


def materialize(guess, torch, namespace, original):
    """The value of a guess. ``original`` is a fresh result of the original function."""
    if isinstance(guess, TensorGuess):
        if guess.orig is not None and original is not None:
            value = lookup(original, guess.orig)
            if isinstance(value, torch.Tensor):
                return value
        return make_tensor(guess, torch)
    if isinstance(guess, ValueGuess):
        if guess.orig is not None and original is not None:
            return lookup(original, guess.orig)
        return literal_value(guess)
    if isinstance(guess, ExprGuess):
        return eval(guess.expr, namespace)  # noqa: S307 - the program runs in the sandbox anyway
    if isinstance(guess, SeqGuess):
        items = [materialize(g, torch, namespace, original) for g in guess.items]
        return tuple(items) if guess.kind == "tuple" else items
    if isinstance(guess, OrigGuess):
        return lookup(original, guess.orig)
    if isinstance(guess, ConfigGuess):
        fields = {str(f.name): materialize(f.guess, torch, namespace, original) for f in guess.fields}
        return namespace[guess.cls](**fields)
    raise TypeError(f"unknown guess {guess!r}")


def make_tensor(guess: TensorGuess, torch):
    """A fresh tensor for a guess: uniform floats, integers drawn from ``[0, high)``, ones for
    booleans (a mask that keeps everything)."""
    dtype = getattr(torch, guess.dtype)
    if guess.dtype in FLOAT_DTYPES:
        return torch.rand(list(guess.shape), dtype=dtype)
    if guess.dtype in INT_DTYPES:
        return torch.randint(0, guess.high, list(guess.shape), dtype=dtype)
    return torch.ones(list(guess.shape), dtype=dtype)


# --- from guesses to source --------------------------------------------------------------------


def source_of(guess, original_name: str) -> str:
    """Python source for a guess; original values are read from ``original_name``."""
    if isinstance(guess, TensorGuess):
        if guess.orig is not None:
            return original_name + "".join(f"[{k!r}]" for k in guess.orig)
        shape = "[" + ", ".join(str(s) for s in guess.shape) + "]"
        if guess.dtype in FLOAT_DTYPES:
            if guess.dtype == "float32":
                return f"torch.rand({shape})"
            return f"torch.rand({shape}, dtype=torch.{guess.dtype})"
        if guess.dtype in INT_DTYPES:
            return f"torch.randint(0, {guess.high}, {shape}, dtype=torch.{guess.dtype})"
        return f"torch.ones({shape}, dtype=torch.{guess.dtype})"
    if isinstance(guess, ValueGuess):
        return repr(literal_value(guess))
    if isinstance(guess, ExprGuess):
        return guess.expr
    if isinstance(guess, SeqGuess):
        inner = ", ".join(source_of(g, original_name) for g in guess.items)
        if guess.kind == "tuple":
            return f"({inner},)" if len(guess.items) == 1 else f"({inner})"
        return f"[{inner}]"
    if isinstance(guess, OrigGuess):
        return original_name + "".join(f"[{k!r}]" for k in guess.orig)
    if isinstance(guess, ConfigGuess):
        return config_source(guess, lambda f: source_of(f.guess, original_name))
    raise TypeError(f"unknown guess {guess!r}")


def config_source(guess: ConfigGuess, field_source) -> str:
    """``Cls(name=value, ...)``, each field's value written by ``field_source`` (an Arg -> str)."""
    return f"{guess.cls}(" + ", ".join(f"{f.name}={field_source(f)}" for f in guess.fields) + ")"


def uses_original(guess) -> bool:
    """True when the source of a guess reads the original function's result."""
    if isinstance(guess, TensorGuess):
        return guess.orig is not None
    if isinstance(guess, OrigGuess):
        return True
    if isinstance(guess, SeqGuess):
        return any(uses_original(g) for g in guess.items)
    if isinstance(guess, ConfigGuess):
        return any(uses_original(f.guess) for f in guess.fields)
    return False


def describe(guess) -> str:
    """A short human description (`tensor[4, 4] float32`, `4`, ...) for repair step logs."""
    if isinstance(guess, TensorGuess):
        return f"tensor{list(guess.shape)} {guess.dtype}"
    if isinstance(guess, ValueGuess):
        return repr(literal_value(guess))
    if isinstance(guess, ExprGuess):
        return guess.expr
    if isinstance(guess, SeqGuess):
        return guess.kind + "(" + ", ".join(describe(g) for g in guess.items) + ")"
    if isinstance(guess, OrigGuess):
        return f"<original {guess.type_name}>"
    if isinstance(guess, ConfigGuess):
        return config_source(guess, lambda f: describe(f.guess))
    return repr(guess)
