"""Constructor parameters that take a configuration object the program defines.

``Whisper(dims: ModelDimensions)`` takes one object holding ten sizes: guessing a list for it
fails at once (``'list' object has no attribute 'n_mels'``), and no repair reaches the sizes
inside. A parameter annotated with a class of the program that is a configuration (a
``@dataclass``, a ``NamedTuple``, or a plain class whose ``__init__`` takes only simple values:
numbers, flags, strings, tuples of those) is given that class called with its fields by name,
and the search changes each field as it changes any constructor argument (:func:`expand` makes
the fields arguments, each marked :class:`.guesses.FieldOf`; :func:`collapse` builds the object
again, for the model and for ``get_init_inputs()``, which returns ``[ModelDimensions(...)]``:
KernelBench's ``Model(*get_init_inputs())``).

A field's value is the object's own where the program's ``get_init_inputs()`` already built one
(a call site of the repository), else the class's default where it has a literal one (a field
whose default is not a literal is left to the class), else a guess by name: head counts 8, layer
counts 1, a vocabulary of 1000, flags ``False``, probabilities 0, and distinct sizes. Distinct,
because the repair rules find the argument an error is about by the number it shows (``assertion
2 == 6``): ten sizes all 4 make every error point at all of them. Widths (``*_state``, ``*_dim``,
...) are multiples of 16, so the guessed head count divides them; other sizes are twice an odd
number (6, 10, 14, ...): none of those, nor the inputs' default size (their batch), nor twice
another. A field the probe cannot fill (no default, and a type that is not a simple value: a
module, a tensor) is :class:`ConfigFieldError`, naming class and field.
"""

from __future__ import annotations

import dataclasses
import inspect
import typing
from collections.abc import Iterator, Sequence
from typing import Any

from . import guesses as G

#: Annotations of simple values (``Optional`` of them too), as their names.
SIMPLE_TYPES = ("int", "float", "bool", "str", "tuple", "list", "Tuple", "List", "Sequence")
#: Words in a field's name that make it a width: a multiple of the guessed head count.
WIDTH_WORDS = ("state", "dim", "width", "hidden", "embd", "embed", "model", "channels", "features", "units")
#: The guessed head count (the extractor's too) and layer count.
HEADS = 8
LAYERS = 1
#: The guessed vocabulary: a small real one (sizing does not grow a vocabulary, and a model's
#: output projection onto it is a large part of its work: Whisper's is 51865 wide).
VOCAB = 1000


class ConfigFieldError(ValueError):
    """A field of a configuration class that the probe cannot fill."""


def _type_name(annotation) -> str:
    if isinstance(annotation, typing.ForwardRef):
        annotation = annotation.__forward_arg__
    if isinstance(annotation, str):
        return annotation.replace("typing.", "").replace(" ", "")
    if annotation is inspect.Parameter.empty or annotation is dataclasses.MISSING:
        return ""
    origin = typing.get_origin(annotation)
    if origin is typing.Union:
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        return _type_name(args[0]) if len(args) == 1 else "Union"
    if origin is not None:
        return getattr(origin, "__name__", str(origin))
    return getattr(annotation, "__name__", str(annotation))


def _simple(annotation) -> bool:
    """True for an annotation of a simple value (none counts: the name decides)."""
    name = _type_name(annotation)
    for prefix in ("Optional[", "typing.Optional["):
        if name.startswith(prefix):
            name = name[len(prefix) :].rstrip("]")
    name = name.split("[", 1)[0].split("|", 1)[0]
    return name in ("",) + SIMPLE_TYPES


@dataclasses.dataclass(frozen=True)
class Field:
    """One field of a configuration class: its name, annotation and default (``MISSING``:
    none; ``FACTORY``: one the class makes itself)."""

    name: str
    annotation: Any
    default: Any


FACTORY = object()


def config_fields(cls) -> list[Field] | None:
    """The fields of ``cls`` when it is a configuration class: a dataclass, a NamedTuple, or a
    plain class whose ``__init__`` takes only simple values by name (each annotated with a
    simple type or defaulting to a literal); None otherwise."""
    if dataclasses.is_dataclass(cls):
        out = []
        for f in dataclasses.fields(cls):
            if not f.init:
                continue
            if f.default is not dataclasses.MISSING:
                default = f.default
            elif f.default_factory is not dataclasses.MISSING:
                default = FACTORY
            else:
                default = dataclasses.MISSING
            out.append(Field(f.name, f.type, default))
        return out
    if isinstance(cls, type) and issubclass(cls, tuple) and hasattr(cls, "_fields"):
        hints = getattr(cls, "__annotations__", {})
        defaults = getattr(cls, "_field_defaults", {})
        empty, missing = inspect.Parameter.empty, dataclasses.MISSING
        return [Field(n, hints.get(n, empty), defaults.get(n, missing)) for n in cls._fields]
    if not isinstance(cls, type):
        return None
    try:
        params = list(inspect.signature(cls).parameters.values())
    except (TypeError, ValueError):
        return None
    if not params:
        return None  # (one built with no argument is a rule's: `rules._config_object`)
    out = []
    for p in params:
        if p.kind not in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY):
            return None
        default = dataclasses.MISSING if p.default is p.empty else p.default
        if not _simple(p.annotation) or (default is not dataclasses.MISSING and not G.is_literal(default)):
            return None
        if p.annotation is p.empty and default is dataclasses.MISSING:
            return None  # nothing says it is a simple value
        out.append(Field(p.name, p.annotation, default))
    return out


def config_class(annotation, namespace: dict[str, Any], torch) -> type | None:
    """The program's configuration class an annotation names (a string one is looked up), or
    None: not a class of the program, a module, or not a configuration."""
    cls = namespace.get(annotation) if isinstance(annotation, str) else annotation
    if (
        not isinstance(cls, type)
        or getattr(cls, "__module__", None) != "__ksmith_program__"
        or issubclass(cls, (torch.nn.Module, BaseException))
    ):
        return None
    return cls if config_fields(cls) is not None else None


def _sizes(taken: set[int], width: bool) -> Iterator[int]:
    """Distinct guessed sizes: multiples of 16 for widths, else 6, 10, 14, ... (twice an odd
    number: none a multiple of another's double, which sizing would take for one size tied to
    another, nor of the head count); none already ``taken``."""
    n = 16 if width else 6
    while True:
        if n not in taken:
            taken.add(n)
            yield n
        n += 16 if width else 4


def _is_width(name: str) -> bool:
    low = name.lower()
    return any(w in low for w in WIDTH_WORDS) and "head" not in low


def _guess(field: Field, taken: set[int], cls_name: str):
    """The probe's guess for a field without a value, by its name and type."""
    low = field.name.lower()
    kind = _type_name(field.annotation).removeprefix("Optional[").rstrip("]").split("[", 1)[0]
    if not _simple(field.annotation):
        raise ConfigFieldError(
            f"the configuration class {cls_name} has a field `{field.name}: {_type_name(field.annotation)}` "
            "with no default and no simple type: the probe cannot fill it"
        )
    by_name = G.guess_for_name(field.name)
    if kind == "bool":
        return G.ValueGuess(False)
    if kind == "str" or (isinstance(by_name, G.ValueGuess) and isinstance(by_name.value, str)):
        return by_name if isinstance(by_name, G.ValueGuess) else G.ValueGuess("default")
    if kind in ("tuple", "Tuple", "list", "List", "Sequence"):
        return G.as_list_value(next(_sizes(taken, False)))
    if isinstance(by_name, G.ValueGuess) and type(by_name.value) is float:
        return by_name
    if kind == "float":
        return G.ValueGuess(float(G.DEFAULT_SIZE))
    if "head" in low and not any(w in low for w in ("dim", "size")):
        return G.ValueGuess(HEADS)
    if any(w in low for w in ("layer", "depth", "block", "stage")):
        return G.ValueGuess(LAYERS)
    if "vocab" in low and VOCAB not in taken:
        taken.add(VOCAB)
        return G.ValueGuess(VOCAB)
    if isinstance(by_name, G.ValueGuess) and type(by_name.value) is int and by_name.value != G.DEFAULT_SIZE:
        return by_name  # stride, groups, padding, kernel: the usual guesses
    return G.ValueGuess(next(_sizes(taken, _is_width(field.name))))


def _field_args(cls, fields: list[Field], given, within: tuple[str, bool]) -> tuple[G.Arg, ...]:
    param, keyword = within
    out: list[tuple[Field, Any, str]] = []
    taken = {HEADS, LAYERS, G.DEFAULT_SIZE}  # (the default size is the inputs' batch)
    for f in fields:
        value = getattr(given, f.name, dataclasses.MISSING) if given is not None else dataclasses.MISSING
        if value is not dataclasses.MISSING and G.is_literal(value):
            out.append((f, G.ValueGuess(G.freeze(value)), "given"))
        elif f.default is FACTORY or (f.default is not dataclasses.MISSING and not G.is_literal(f.default)):
            continue  # the class makes its own
        elif f.default is not dataclasses.MISSING:
            out.append((f, G.ValueGuess(G.freeze(f.default)), "default"))
        else:
            out.append((f, None, "guess"))
        if out[-1][1] is not None and type(G.literal_value(out[-1][1])) is int:
            taken.add(G.literal_value(out[-1][1]))
    args = []
    for f, guess, source in out:
        guess = guess if guess is not None else _guess(f, taken, cls.__name__)
        args.append(G.Arg(guess, f.name, True, G.FieldOf(param, keyword, cls.__name__, source, guess)))
    return tuple(args)


def init_annotations(cls) -> dict[str, Any]:
    """The annotations of a class's constructor parameters, by name (none when it has no
    signature)."""
    try:
        return {p.name: p.annotation for p in inspect.signature(cls.__init__).parameters.values()}
    except (TypeError, ValueError):
        return {}


def expand(
    init: tuple[G.Arg, ...], annotations: dict[str, Any], given: list, namespace: dict[str, Any], torch
) -> tuple[G.Arg, ...]:
    """``init`` with each argument for a parameter annotated with a configuration class of the
    program replaced by that class's fields (:func:`collapse` undoes it). ``annotations``: the
    constructor's, by parameter (:func:`init_annotations`); ``given``: the values the program's
    ``get_init_inputs()`` returned, by position (an instance of the class is taken apart, unless
    a field holds a value with no literal form; anything else is replaced)."""
    out: list[G.Arg] = []
    for i, a in enumerate(init):
        cls = config_class(annotations.get(a.name or "", None), namespace, torch) if a.name else None
        if cls is None or a.within is not None:
            out.append(a)
            continue
        fields = config_fields(cls) or []
        value = given[i] if i < len(given) else None
        instance = value if isinstance(value, cls) else None
        if instance is not None and not all(G.is_literal(getattr(instance, f.name, None)) for f in fields):
            out.append(a)  # a field that has no literal form: the object stays whole, as built
            continue
        args = _field_args(cls, fields, instance, (a.name or "", a.keyword))
        # a class whose every field makes itself is called bare
        out.extend(args or (G.Arg(G.ConfigGuess(cls.__name__, ()), a.name, a.keyword),))
    return tuple(out)


def collapse(init: Sequence[G.Arg]) -> tuple[G.Arg, ...]:
    """``init`` with each run of fields of one configuration object made the one argument that
    builds it (:class:`.guesses.ConfigGuess`)."""
    out: list[G.Arg] = []
    for a in init:
        w = a.within
        if w is None:
            out.append(a)
            continue
        last = out[-1] if out else None
        if last is not None and isinstance(last.guess, G.ConfigGuess) and last.name == w.param:
            out[-1] = G.Arg(G.ConfigGuess(w.cls, last.guess.fields + (a,)), w.param, w.keyword)
        else:
            out.append(G.Arg(G.ConfigGuess(w.cls, (a,)), w.param, w.keyword))
    return tuple(out)


def provenance_step(init: tuple[G.Arg, ...]) -> list[str]:
    """Where each field of each configuration object came from, one repair step per object
    (``dims = ModelDimensions(n_mels=4 guess, n_vocab=51865 default, ...)``)."""
    steps = []
    for a in collapse(init):
        if isinstance(a.guess, G.ConfigGuess):
            fields = ", ".join(f"{f.name}={G.describe(f.guess)} {f.within.source}" for f in a.guess.fields if f.within)
            steps.append(f"{a.name} = {a.guess.cls}({fields})")
    return steps
