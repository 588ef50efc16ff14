"""The integers a repaired program exposes and the size role each plays: constructor and forward
arguments, dimensions of tensor inputs (:func:`state_slots`), and setting them to new values
(:func:`with_values`). The sizing step groups them into knobs.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import replace
from typing import Any

from .guesses import FLOAT_DTYPES, SeqGuess, TensorGuess, ValueGuess, literal_value
from .provenance import Provenance
from .sized_program import NamedTensor, NamedValue

#: Per role: (typical size, largest size). Growth brings the knob furthest below its typical
#: size up first, so shapes stay plausible (batch 16, 512 channels, 128x128 images...).
ROLES = {
    "batch": (16, 4096),
    "channels": (256, 8192),
    "features": (1024, 262144),
    "seq": (512, 16384),
    "spatial": (128, 4096),
    "depth": (16, 256),
    "value": (256, 16384),
}

#: Words in a constructor parameter's name that say it is structure, not size.
STRUCTURE_WORDS = (
    "kernel",
    "stride",
    "pad",
    "dilation",
    "group",
    "head",
    "layer",
    "depth",
    "block",
    "stage",
    "level",
    "class",
    "label",
    "ratio",
    "reduction",
    "expan",
    "mult",
    "mem_kv",
    "factor",
    "scale",
    "patch",
    "window",
    "pool",
    "order",
    "degree",
    "iter",
    "step",
    "seed",
    "idx",
    "index",
    "axis",
    "repeat",
    "vocab",
    "token",
    "embeddings",
    "max_len",
    "max_seq",
    "position",
    "topk",
    "top_k",
    "bins",
    "bucket",
)
#: Whole names that are structure.
STRUCTURE_NAMES = ("k", "n", "p", "dim_index", "num")


@dataclasses.dataclass(frozen=True)
class Slot:
    """One integer the program exposes: a constructor or forward argument (``path`` ``()``), a
    dimension of a tensor input (``(d,)``) or of a tensor in a list input (``(item, d)``); or a
    module-level constant (``side`` ``"constant"``, ``name`` the constant). ``rank``: the rank
    of the tensor a dimension belongs to; ``repository``: its value is the repository's
    (:mod:`.provenance`), not the probe's."""

    side: str
    arg: int
    path: tuple
    value: int
    name: str | None
    role: str
    rank: int = 0
    repository: bool = False


def _tokens(name: str) -> list[str]:
    return [t for t in re.split(r"[_\W]+", name.lower()) if t]


def structural_name(name: str | None, short: bool = True) -> bool:
    """True when a parameter's name says it is structure (kernel size, heads, layers...);
    ``short``: the one-letter names of ``STRUCTURE_NAMES`` too (a constructor's ``k`` is a top-k,
    a KernelBench constant ``K`` a matrix size)."""
    if not name:
        return False
    low = name.lower()
    if short and low in STRUCTURE_NAMES:
        return True
    return any(w in low for w in STRUCTURE_WORDS)


def role_of_name(name: str | None) -> str:
    """The role a named size plays."""
    low = (name or "").lower()
    toks = _tokens(low)
    if "batch" in low or low in ("b", "bs", "bsz", "n_batch"):
        return "batch"
    if any(t in ("seq", "len", "length", "seqlen", "time", "steps", "tokens", "ctx", "context") for t in toks):
        return "seq"
    if low in ("h", "w", "height", "width", "size", "img_size", "image_size", "resolution", "res") or any(
        t in ("height", "width", "img", "image", "resolution", "spatial") for t in toks
    ):
        return "spatial"
    if any(t.startswith(("chan", "plane", "filter")) or t in ("c", "ch", "inp", "oup") for t in toks):
        return "channels"
    return "features"


def role_of_dim(rank: int, d: int, dtype: str) -> str:
    """The role of dimension ``d`` of a tensor input of ``rank`` dimensions."""
    if rank >= 2 and d == 0:
        return "batch"
    if rank == 1 or (rank == 2 and dtype in FLOAT_DTYPES):
        return "features"
    if rank == 2:
        return "seq"  # integer [batch, tokens]
    if rank == 3:
        return "seq" if d == 1 else "features"
    if d == 1:
        return "channels"
    if rank == 5 and d == 2:
        return "depth"
    return "spatial" if rank in (4, 5) else "value"


def _int(guess) -> int | None:
    if isinstance(guess, ValueGuess):
        v = literal_value(guess)
        if type(v) is int:
            return v
    return None


def state_slots(state, provenance: Provenance | None = None) -> list[Slot]:
    """The slots of a verified state, each marked with whether its value is the repository's
    (``provenance``; none: every value is the probe's). Where every tensor input is a vector,
    their lengths play the batch: one value per sample (a time embedding's time steps)."""
    prov = provenance or Provenance()
    out: list[Slot] = []
    for i, a in enumerate(state[0]):
        v = _int(a.guess)
        if v is not None and v >= 2 and not structural_name(a.name):
            role = role_of_name(a.name) if a.name else "value"
            out.append(Slot("init", i, (), v, a.name, role, repository=prov.init_is_repository(i, a)))
    for j, a in enumerate(state[1]):
        g = a.guess
        if isinstance(g, TensorGuess):
            out += _tensor_slots(j, (), g, prov)
        elif isinstance(g, SeqGuess):
            for k, item in enumerate(g.items):
                if isinstance(item, TensorGuess):
                    out += _tensor_slots(j, (k,), item, prov)
        else:
            v = _int(g)
            if v is not None and v >= 2 and a.name and not structural_name(a.name):
                out.append(Slot("input", j, (), v, a.name, role_of_name(a.name)))
    dims = [s for s in out if s.side == "input" and s.path]
    if dims and all(s.rank == 1 for s in dims):
        out = [replace(s, role="batch") if s in dims else s for s in out]
    return out


def _tensor_slots(j: int, prefix: tuple, g: TensorGuess, prov: Provenance) -> list[Slot]:
    out = []
    for d, size in enumerate(g.shape):
        role = role_of_dim(g.rank, d, g.dtype)
        if size >= 2 or (role == "batch" and size >= 1):
            out.append(Slot("input", j, prefix + (d,), size, None, role, g.rank, prov.dim_is_repository(g, d)))
    return out


def _set(guess, path: tuple, value):
    if not path:
        return ValueGuess(value) if not isinstance(value, NamedValue) else value
    if isinstance(guess, TensorGuess):
        shape = list(guess.shape)
        shape[path[0]] = value
        return TensorGuess(tuple(shape), guess.dtype, None)
    if isinstance(guess, NamedTensor):
        dims = list(guess.dims)
        dims[path[0]] = value
        return replace(guess, dims=tuple(dims))
    if isinstance(guess, SeqGuess):
        items = list(guess.items)
        items[path[0]] = _set(items[path[0]], path[1:], value)
        return SeqGuess(tuple(items), guess.kind)
    raise TypeError(f"no slot at {path} of {guess!r}")


def with_values(state, assignment: dict[Slot, Any]):
    """``state`` with each slot set to its value (an int, or a :class:`NamedValue` for source)."""
    init, fwd = list(state[0]), list(state[1])
    for slot, value in assignment.items():
        args = init if slot.side == "init" else fwd
        args[slot.arg] = replace(args[slot.arg], guess=_set(args[slot.arg].guess, slot.path, value))
    return tuple(init), tuple(fwd)
