"""Repair rules: read an exception and propose changed argument guesses.

A rule gets the failure (:class:`Failure`: where it happened, the exception class, the message
and the source lines of the traceback) and the current state ``(init, forward)`` and returns a
list of :class:`Fix` (a new state and a description such as ``input0: rank 2 -> 4``), best
first. :func:`propose` runs every rule and returns all fixes, deduplicated, in rule order; the
search tries them depth-first.

The rules follow pytorch-jit-paritybench's ``deduce_parameters``: missing/unexpected arguments,
matmul shape mismatches, conv channel mismatches, wrong rank, broadcast mismatches, view sizes,
kernels larger than the input, Long indices, unpacking, ints that must be lists, divisibility,
out-of-range indices and allocation failures. Tensors whose parameter name appears in the
message or traceback are tried first.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from .guesses import (
    FLOAT_DTYPES,
    INT_DTYPES,
    Arg,
    ExprGuess,
    SeqGuess,
    TensorGuess,
    ValueGuess,
    as_list_value,
    default_tensor,
    guess_for_name,
    literal_value,
    set_guess,
)
from .slots import role_of_name

State = tuple[tuple[Arg, ...], tuple[Arg, ...]]

MAX_DIM = 512  # grown dimensions stop here
MAX_NUMEL = 1 << 24  # no guess asks for more elements than this


@dataclass(frozen=True)
class Failure:
    """One failed attempt."""

    phase: str  # "init" (Model(...)) or "forward"
    exc_class: str
    message: str
    context: str = ""  # traceback source lines, for ranking arguments by name
    #: Classes of the program that build with no argument and are not modules (config objects:
    #: a dataclass or a class whose parameters all have defaults), with their attribute names.
    configs: tuple[tuple[str, frozenset[str]], ...] = ()


@dataclass(frozen=True)
class Fix:
    """A proposed new state and what changed."""

    state: State
    step: str


Rule = Callable[[re.Match, Failure, State], list[Fix]]


# --- helpers -----------------------------------------------------------------------------------


def _ints(text: str) -> list[int]:
    return [int(t) for t in re.findall(r"-?\d+", text)]


def _label(args: Sequence[Arg], index: int, forward: bool) -> str:
    name = args[index].name
    base = f"input{index}" if forward else f"init{index}"
    return f"{base}({name})" if name else base


def _named_first(args: Sequence[Arg], idx: list[int], failure: Failure) -> list[int]:
    """``idx`` with the arguments whose name appears in the message or traceback first."""
    text = failure.message + "\n" + failure.context

    def named(i):
        n = args[i].name
        return 0 if n and re.search(rf"\b{re.escape(n)}\b", text) else 1

    return sorted(idx, key=lambda i: (named(i), i))


def _tensor_indices(state: State, failure: Failure, pred=None) -> list[int]:
    """Forward tensor inputs, those named in the message/traceback first."""
    fwd = state[1]
    idx = [i for i, a in enumerate(fwd) if isinstance(a.guess, TensorGuess)]
    if pred is not None:
        idx = [i for i in idx if pred(fwd[i].guess)]
    return _named_first(fwd, idx, failure)


def _int_init_indices(state: State, failure: Failure, pred=None) -> list[int]:
    """Constructor arguments that are plain ints, those named in the traceback first."""
    return _literal_init_indices(state, failure, lambda v: type(v) is int and (pred is None or pred(v)))


def _literal_init_indices(state: State, failure: Failure, pred) -> list[int]:
    """Constructor arguments that are literals satisfying ``pred``, named in the traceback first."""
    init = state[0]
    idx = [i for i, a in enumerate(init) if isinstance(a.guess, ValueGuess) and pred(literal_value(a.guess))]
    return _named_first(init, idx, failure)


def _reshape(state: State, i: int, shape, why: str) -> Fix | None:
    fwd = state[1]
    g = fwd[i].guess
    shape = tuple(max(1, min(int(s), MAX_DIM)) for s in shape)
    if shape == g.shape:
        return None
    n = 1
    for s in shape:
        n *= s
    if n > MAX_NUMEL:
        return None
    new = g.with_shape(shape)
    return Fix(
        (state[0], set_guess(fwd, i, new)),
        f"{_label(fwd, i, True)}: shape {list(g.shape)} -> {list(shape)} ({why})",
    )


def _with_rank(shape: tuple[int, ...], rank: int) -> tuple[int, ...]:
    if rank <= 0:
        return ()
    if len(shape) >= rank:
        return shape[:rank]
    return shape + (4,) * (rank - len(shape))


def _rerank(state: State, failure: Failure, ranks: Sequence[int], why: str, pred=None) -> list[Fix]:
    fixes = []
    for rank in ranks:
        for i in _tensor_indices(state, failure, pred):
            g = state[1][i].guess
            if g.rank != rank:
                fix = _reshape(state, i, _with_rank(g.shape, rank), why)
                if fix:
                    fixes.append(replace(fix, step=fix.step.replace("shape", f"rank {g.rank} -> {rank}, shape", 1)))
    return fixes


def _set_dim(state: State, failure: Failure, dim: int, old: int | None, new: int, why: str) -> list[Fix]:
    """Sets dimension ``dim`` (negative counts from the end) of tensors whose size there is ``old``."""
    fixes = []
    for i in _tensor_indices(state, failure):
        g = state[1][i].guess
        if not -g.rank <= dim < g.rank:
            continue
        if old is not None and g.shape[dim] != old:
            continue
        shape = list(g.shape)
        shape[dim] = new
        fix = _reshape(state, i, shape, why)
        if fix:
            fixes.append(fix)
    return fixes


def _set_init(state: State, i: int, guess, why: str) -> Fix:
    init = state[0]
    old = init[i].guess
    from .guesses import describe

    return Fix(
        (set_guess(init, i, guess), state[1]),
        f"{_label(init, i, False)}: {describe(old)} -> {describe(guess)} ({why})",
    )


def _retype(state: State, failure: Failure, src: Sequence[str], dst: str, why: str) -> list[Fix]:
    fixes = []
    for i in _tensor_indices(state, failure, lambda g: g.dtype in src):
        g = state[1][i].guess
        fixes.append(
            Fix(
                (state[0], set_guess(state[1], i, g.with_dtype(dst))),
                f"{_label(state[1], i, True)}: dtype {g.dtype} -> {dst} ({why})",
            )
        )
    return fixes


# --- the rules ---------------------------------------------------------------------------------


def _missing_args(m: re.Match, f: Failure, s: State) -> list[Fix]:
    names = re.findall(r"'(\w+)'", m.group("names"))
    if not names:
        return []
    if f.phase == "init" or m.group("func") == "__init__":
        init = s[0]
        added = tuple(Arg(guess_for_name(n), n, True) for n in names if all(a.name != n for a in init))
        if not added:
            return []
        return [Fix((init + added, s[1]), f"init: add {', '.join(names)} (missing)")]
    fwd = s[1] + tuple(Arg(default_tensor(), n, False) for n in names)
    return [Fix((s[0], fwd), f"forward: add input {', '.join(names)} (missing)")]


def _unexpected_kwarg(m: re.Match, f: Failure, s: State) -> list[Fix]:
    name = m.group(1)
    init = s[0]
    kept = tuple(a for a in init if not (a.keyword and a.name == name))
    if len(kept) == len(init):
        return []
    return [Fix((kept, s[1]), f"init: drop {name} (unexpected)")]


def _too_many_positional(m: re.Match, f: Failure, s: State) -> list[Fix]:
    allowed = int(m.group("max")) - 1  # self
    given = int(m.group("given")) - 1
    if allowed < 0 or given <= allowed:
        return []
    if f.phase == "init":
        init = s[0]
        pos = [a for a in init if not a.keyword]
        kw = [a for a in init if a.keyword]
        return [Fix((tuple(pos[:allowed] + kw), s[1]), f"init: keep {allowed} positional arguments (too many)")]
    return [Fix((s[0], s[1][:allowed]), f"forward: keep {allowed} inputs (too many)")]


def _matmul(m: re.Match, f: Failure, s: State) -> list[Fix]:
    a, b, c, d = (int(x) for x in m.groups())
    why = f"matmul {a}x{b} @ {c}x{d}"
    fixes = _channels_first(s, f, a, b, c, why) + _set_dim(s, f, -1, b, c, why) + _parts(s, f, b, c, why)
    # The input may feed the matmul only after other ops: fix the layer size instead.
    for i in _int_init_indices(s, f, lambda v: v == c):
        fixes.append(_set_init(s, i, ValueGuess(b), why))
    return fixes


def _parts(s: State, f: Failure, got: int, want: int, why: str) -> list[Fix]:
    """Inputs whose last dimension reaches an op ``r`` times over (Swin's PatchMerging
    concatenates four neighbours before ``norm(4 * dim)`` and ``Linear(4 * dim, ...)``): the op
    got ``got``, ``r`` times the input's size, and wants ``want``, so the input takes
    ``want / r``."""
    fixes = []
    for i in _tensor_indices(s, f, lambda g: g.rank > 0 and g.shape[-1] not in (0, got)):
        g = s[1][i].guess
        r, rest = divmod(got, g.shape[-1])
        if r > 1 and rest == 0 and want % r == 0:
            fix = _reshape(s, i, g.shape[:-1] + (want // r,), f"{why}, over {r} parts")
            if fix:
                fixes.append(fix)
    return fixes


def _channels_first(s: State, f: Failure, rows: int, cols: int, want: int, why: str) -> list[Fix]:
    """Images (4-D and up, channels first) that reach a matmul as ``x.flatten(2).transpose(1,
    2)`` (read as a sequence of pixels): ``rows`` is their batch times their pixels and ``cols``
    their channels, so the channels (dimension 1) take ``want``. A 3-D input is left to the
    last-dimension fix: ``[batch, channels, length]`` and ``[batch, length, features]`` look alike."""
    fixes = []
    for i in _tensor_indices(s, f, lambda g: g.rank >= 4 and g.shape[1] == cols):
        g = s[1][i].guess
        if g.shape[0] * math.prod(g.shape[2:]) == rows:
            fix = _reshape(s, i, (g.shape[0], want) + g.shape[2:], f"{why}, channels first")
            if fix:
                fixes.append(fix)
    return fixes


def _conv_channels(m: re.Match, f: Failure, s: State) -> list[Fix]:
    want, got = int(m.group("want")), int(m.group("got"))
    fixes = _set_dim(s, f, 1, got, want, f"conv expects {want} channels")
    for i in _int_init_indices(s, f, lambda v: v == want):
        fixes.append(_set_init(s, i, ValueGuess(got), f"conv got {got} channels"))
    return fixes


def _rank_list(m: re.Match, f: Failure, s: State) -> list[Fix]:
    ranks = sorted({int(g) for g in m.groups() if g and g.isdigit()}, reverse=True)
    return _rerank(s, f, ranks, "expected rank " + " or ".join(str(r) for r in ranks))


def _rank_with_weight(m: re.Match, f: Failure, s: State) -> list[Fix]:
    rank = int(m.group("rank"))
    weight = _ints(m.group("weight"))
    fixes = _rerank(s, f, [rank], f"expected {rank}-D input")
    if len(weight) >= 2:
        out = []
        for fix in fixes:
            # Also give the new tensor the weight's input channels.
            for i, a in enumerate(fix.state[1]):
                g = a.guess
                if isinstance(g, TensorGuess) and g.rank == rank and g != s[1][i].guess:
                    shape = list(g.shape)
                    shape[1] = weight[1]
                    better = _reshape(fix.state, i, shape, f"weight {weight}")
                    if better:
                        out.append(Fix(better.state, fix.step + "; " + better.step))
        fixes = out + fixes
    return fixes


def _dim_out_of_range(m: re.Match, f: Failure, s: State) -> list[Fix]:
    rank = int(m.group(2)) + 1
    got = int(m.group(3))
    need = got + 1 if got >= 0 else -got
    if need <= rank:
        return []
    return _rerank(s, f, [need], f"dimension {got} out of range", lambda g: g.rank == rank)


def _too_many_indices(m: re.Match, f: Failure, s: State) -> list[Fix]:
    rank = int(m.group(1))
    return _rerank(s, f, [rank + 1, rank + 2], "too many indices", lambda g: g.rank == rank)


def _not_enough_to_unpack(m: re.Match, f: Failure, s: State) -> list[Fix]:
    want, got = int(m.group(1)), int(m.group(2))
    fixes = _rerank(s, f, [want], f"unpack {want} values", lambda g: g.rank == got)
    fixes += _set_dim(s, f, 0, got, want, f"unpack {want} values")
    fixes += _rerank(s, f, [want], f"unpack {want} values")
    return fixes


def _too_many_to_unpack(m: re.Match, f: Failure, s: State) -> list[Fix]:
    """Too many values to unpack from a shape: an input of a higher rank gets the rank wanted,
    integer indices one less first (an embedding adds the feature dimension: Whisper's decoder
    unpacks ``[batch, tokens, width]`` from 2-D tokens beside a 3-D float input)."""
    want = int(m.group(1))
    why = f"unpack {want} values"
    fixes = _rerank(s, f, [want - 1], f"{why}, an index embedded", lambda g: g.dtype in INT_DTYPES and g.rank >= want)
    fixes += _rerank(s, f, [want], why, lambda g: g.rank > want)
    fixes += _set_dim(s, f, 0, None, want, why)
    return fixes


def _broadcast(m: re.Match, f: Failure, s: State) -> list[Fix]:
    a, b, dim = int(m.group(1)), int(m.group(2)), int(m.group(3))
    fixes = _like_a_sibling(s, f, a, b, dim)
    for i in _tensor_indices(s, f):
        g = s[1][i].guess
        # The dimension is counted in the broadcast result; try it from the left and the right.
        for pos in dict.fromkeys([dim, dim - max(g.rank, dim + 1)]):
            if -g.rank <= pos < g.rank:
                for old, new in ((a, b), (b, a)):
                    if g.shape[pos] == old:
                        shape = list(g.shape)
                        shape[pos] = new
                        fix = _reshape(s, i, shape, f"size {a} vs {b} at dimension {dim}")
                        if fix:
                            fixes.append(fix)
    for i in _int_init_indices(s, f, lambda v: v in (a, b)):
        v = literal_value(s[0][i].guess)
        fixes.append(_set_init(s, i, ValueGuess(b if v == a else a), f"size {a} vs {b}"))
    return _repeated_batch(s, f, a, b, dim) + fixes


def _like_a_sibling(s: State, f: Failure, a: int, b: int, dim: int) -> list[Fix]:
    """An input takes the shape of another input of its rank that differs from it in one
    dimension only, where the sibling has one of the mismatched sizes and it the other (an
    image and its positional encoding, read after a ``flatten``/``transpose`` that hides
    which dimension of the input the broadcast dimension was). An input whose shape fewer
    inputs share goes first: the odd one out is more likely the one left behind."""
    fixes: list[Fix] = []
    fwd = s[1]
    idx = _tensor_indices(s, f)
    shared = Counter(fwd[i].guess.shape for i in idx)
    idx = sorted(idx, key=lambda i: shared[fwd[i].guess.shape])
    for i in idx:
        g = fwd[i].guess
        for j in idx:
            h = fwd[j].guess
            if j == i or h.rank != g.rank:
                continue
            diff = [p for p in range(g.rank) if g.shape[p] != h.shape[p]]
            if len(diff) == 1 and {g.shape[diff[0]], h.shape[diff[0]]} == {a, b}:
                fix = _reshape(s, i, h.shape, f"size {a} vs {b} at dimension {dim}, like {_label(fwd, j, True)}")
                if fix and fix.state not in (x.state for x in fixes):
                    fixes.append(fix)
    return fixes


def _repeated_batch(s: State, f: Failure, a: int, b: int, dim: int) -> list[Fix]:
    """A batch mismatch where one size is a multiple of the other: the larger side is an input
    repeated once per item of another (``repeat_interleave(image, tokens.shape[0])``: its batch
    times another input's batch). Such inputs with the least batch (other than the smaller size,
    unless all have it) take batch 1, all together."""
    big, small = max(a, b), min(a, b)
    if dim != 0 or small < 1 or big == small or big % small:
        return []
    batches = [s[1][i].guess.shape[0] for i in _tensor_indices(s, f, lambda g: g.rank >= 1)]

    def repeated(g) -> bool:
        n = g.shape[0] if g.rank >= 1 else 1
        return n > 1 and big % n == 0 and batches.count(big // n) > (big // n == n)

    candidates = _tensor_indices(s, f, repeated)
    # An input whose batch is the smaller side is more likely that operand itself than repeated.
    candidates = [i for i in candidates if s[1][i].guess.shape[0] != small] or candidates
    if not candidates:
        return []
    least = min(s[1][i].guess.shape[0] for i in candidates)
    chosen = [i for i in candidates if s[1][i].guess.shape[0] == least]
    fwd = s[1]
    for i in chosen:
        fwd = set_guess(fwd, i, fwd[i].guess.with_shape((1,) + fwd[i].guess.shape[1:]))
    names = ", ".join(_label(s[1], i, True) for i in chosen)
    return [Fix((s[0], fwd), f"{names}: batch {least} -> 1 (size {a} vs {b} at dimension 0: a repeated batch)")]


def _view_size(m: re.Match, f: Failure, s: State) -> list[Fix]:
    target = _ints(m.group(1))
    size = int(m.group(2))
    known = 1
    for t in target:
        if t != -1:
            known *= max(t, 1)
    fixes = []
    for i in _tensor_indices(s, f):
        g = s[1][i].guess
        if g.numel() != size:
            continue
        if -1 in target:
            shape = [t if t != -1 else 4 for t in target]
            fixes_for = [shape]
            # Keep the rank, make the element count a multiple of the known sizes.
            if g.rank >= 1 and known > 0:
                grown = list(g.shape)
                grown[-1] = known
                fixes_for.append(grown)
        else:
            # Keep the rank and grow one dimension to the element count (sizes such as H and W
            # given apart: `x.reshape(B, C, H, W)` of a [B, N, C] input wants N = H * W).
            fixes_for = []
            if known % size == 0:
                for d in range(1, g.rank):
                    grown = list(g.shape)
                    grown[d] *= known // size
                    fixes_for.append(grown)
            fixes_for.append(target)
        for shape in fixes_for:
            fix = _reshape(s, i, shape, f"view {target} of {size} elements")
            if fix:
                fixes.append(fix)
    for i in _int_init_indices(s, f, lambda v: v in target and v > 0):
        v = literal_value(s[0][i].guess)
        other = known // v
        if other > 0 and size % other == 0 and -1 not in target:
            fixes.append(_set_init(s, i, ValueGuess(size // other), f"view {target} of {size} elements"))
    return fixes


def _kernel_too_big(m: re.Match, f: Failure, s: State) -> list[Fix]:
    fixes = []
    for i in _tensor_indices(s, f, lambda g: g.rank >= 2):
        g = s[1][i].guess
        start = 2 if g.rank >= 3 else 1
        shape = list(g.shape[:start]) + [min(MAX_DIM, max(2 * d, 32)) for d in g.shape[start:]]
        fix = _reshape(s, i, shape, "kernel larger than input")
        if fix:
            fixes.append(fix)
    return fixes


def _to_long(m: re.Match, f: Failure, s: State) -> list[Fix]:
    return _retype(s, f, FLOAT_DTYPES + ("bool",), "int64", "needs integer indices")


def _to_float(m: re.Match, f: Failure, s: State) -> list[Fix]:
    return _retype(s, f, INT_DTYPES + ("bool",), "float32", "needs floating point")


def _to_bool(m: re.Match, f: Failure, s: State) -> list[Fix]:
    return _retype(s, f, FLOAT_DTYPES + INT_DTYPES, "bool", "needs a boolean mask")


def _int_to_list(m: re.Match, f: Failure, s: State) -> list[Fix]:
    fixes = []
    for i in _int_init_indices(s, f):
        v = literal_value(s[0][i].guess)
        fixes.append(_set_init(s, i, as_list_value(v), "int used as a sequence"))
    return fixes


def _float_to_int(m: re.Match, f: Failure, s: State) -> list[Fix]:
    fixes = []
    for i, a in enumerate(s[0]):
        if isinstance(a.guess, ValueGuess) and isinstance(literal_value(a.guess), float):
            v = literal_value(a.guess)
            fixes.append(_set_init(s, i, ValueGuess(max(1, int(round(v))) if v >= 1 else 4), "float used as an int"))
    return fixes


def _divisible(m: re.Match, f: Failure, s: State) -> list[Fix]:
    fixes = []
    for new in (1, 64, 16):
        for i in _int_init_indices(s, f, lambda v, new=new: v != new):
            fixes.append(_set_init(s, i, ValueGuess(new), "divisibility"))
    fixes += _set_dim(s, f, -1, None, 64, "divisibility")
    return fixes


def _index_out_of_bounds(m: re.Match, f: Failure, s: State) -> list[Fix]:
    index, dim, size = int(m.group(1)), int(m.group(2)), int(m.group(3))
    new = min(MAX_DIM, max(index + 1, 2 * size))
    fixes = _set_dim(s, f, dim, size, new, f"index {index} out of bounds")
    for i in _int_init_indices(s, f, lambda v: v == size):
        fixes.append(_set_init(s, i, ValueGuess(new), f"index {index} out of bounds"))
    return fixes


def _index_out_of_range_in_self(m: re.Match, f: Failure, s: State) -> list[Fix]:
    # Embedding indices beyond the table: make indices integer ones, or grow the table.
    fixes = _retype(s, f, FLOAT_DTYPES + ("bool",), "int64", "embedding indices")
    for i in _int_init_indices(s, f):
        v = literal_value(s[0][i].guess)
        fixes.append(_set_init(s, i, ValueGuess(max(64, 2 * v)), "index out of range"))
    return fixes


def _batch_mismatch(m: re.Match, f: Failure, s: State) -> list[Fix]:
    a, b = int(m.group(1)), int(m.group(2))
    return _set_dim(s, f, 0, b, a, "batch sizes differ") + _set_dim(s, f, 0, a, b, "batch sizes differ")


def _normalized_shape(m: re.Match, f: Failure, s: State) -> list[Fix]:
    want = _ints(m.group(1))
    got = _ints(m.group(2)) if m.group(2) else []
    fixes = _parts(s, f, got[-1], want[0], f"normalized shape {want}") if len(want) == 1 and got else []
    for i in _tensor_indices(s, f):
        g = s[1][i].guess
        base = list(g.shape[: max(g.rank - len(want), 0)]) or [4]
        fix = _reshape(s, i, base + want, f"normalized shape {want}")
        if fix:
            fixes.append(fix)
    return fixes


def _running_mean(m: re.Match, f: Failure, s: State) -> list[Fix]:
    # "running_mean should contain <input channels> elements not <num_features>"
    return _channels(s, f, want=int(m.group(2)), got=int(m.group(1)))


def _channel_count(m: re.Match, f: Failure, s: State) -> list[Fix]:
    return _channels(s, f, want=int(m.group(1)), got=int(m.group(2)))


def _channels(s: State, f: Failure, want: int, got: int) -> list[Fix]:
    return _set_dim(s, f, 1, got, want, f"{want} channels") + _rerank(
        s, f, [2], f"{want} channels", lambda g: g.rank == 1
    )


def _weight_vector(m: re.Match, f: Failure, s: State) -> list[Fix]:
    want = int(m.group(1))
    shape = _ints(m.group(2))
    fixes = []
    if len(shape) >= 2:
        fixes += _set_dim(s, f, 1, shape[1], want, f"weight of {want} channels")
    fixes += _set_dim(s, f, 0, None, want, f"weight of {want} channels")
    return fixes


def _dim_matches_features(m: re.Match, f: Failure, s: State) -> list[Fix]:
    dim, want, got = int(m.group(1)), int(m.group(2)), int(m.group(3))
    return _set_dim(s, f, dim, got, want, f"{want} features at dimension {dim}") + _set_dim(
        s, f, dim + 1, got, want, f"{want} features"
    )


def _last_dim(m: re.Match, f: Failure, s: State) -> list[Fix]:
    want, got = int(m.group(1)), int(m.group(2))
    return _set_dim(s, f, -1, got, want, f"last dimension {want}")


def _cat_ranks(m: re.Match, f: Failure, s: State) -> list[Fix]:
    """``torch.cat`` of tensors of two ranks: an input of either rank takes the other (the
    inputs the traceback names first)."""
    a, b = int(m.group(1)), int(m.group(2))
    why = f"concatenated ranks {a} vs {b}"
    return _rerank(s, f, [a], why, lambda g: g.rank == b) + _rerank(s, f, [b], why, lambda g: g.rank == a)


def _cat_sizes(m: re.Match, f: Failure, s: State) -> list[Fix]:
    """``torch.cat`` of tensors whose sizes differ outside the concatenated dimension: an input
    takes the expected size, at its last mismatching dimension first (features sit last, the
    batch first; the concatenated dimension itself may differ and is left alone)."""
    cat_dim, want, got = int(m.group(1)), int(m.group(2)), int(m.group(3))
    fixes = []
    for i in _tensor_indices(s, f):
        g = s[1][i].guess
        for pos in reversed(range(g.rank)):
            if g.shape[pos] == got and pos != cat_dim:
                shape = list(g.shape)
                shape[pos] = want
                fix = _reshape(s, i, shape, f"concatenated sizes {want} vs {got}")
                if fix:
                    fixes.append(fix)
    return fixes


def _alloc(m: re.Match, f: Failure, s: State) -> list[Fix]:
    fixes = []
    for i in _tensor_indices(s, f, lambda g: max(g.shape, default=1) > 4):
        g = s[1][i].guess
        fix = _reshape(s, i, [max(1, d // 2) for d in g.shape], "allocation failed")
        if fix:
            fixes.append(fix)
    return fixes


def _batch_one(m: re.Match, f: Failure, s: State) -> list[Fix]:
    fixes = _set_dim(s, f, 0, 1, 4, "more than one value per channel")
    for i in _tensor_indices(s, f, lambda g: g.rank >= 3):
        g = s[1][i].guess
        fix = _reshape(s, i, list(g.shape[:2]) + [max(d, 8) for d in g.shape[2:]], "more than one value per channel")
        if fix:
            fixes.append(fix)
    return fixes


def _sequence_input(m: re.Match, f: Failure, s: State) -> list[Fix]:
    # forward indexes or iterates an input that is expected to be a list of tensors.
    fixes = []
    for i in _tensor_indices(s, f):
        g = s[1][i].guess
        seq = SeqGuess((g.with_shape(g.shape), g.with_shape(g.shape)), "list")
        fixes.append(Fix((s[0], set_guess(s[1], i, seq)), f"{_label(s[1], i, True)}: tensor -> list of 2 tensors"))
    return fixes


def _scalar(v) -> bool:
    return v is None or isinstance(v, (int, float, str))


def _config_object(m: re.Match, f: Failure, s: State) -> list[Fix]:
    # A config object passed as a number: an instance of the program's config class with that
    # attribute, built from its defaults.
    attr = m.group(2)
    fixes = []
    for name, attrs in f.configs:
        if attr in attrs:
            for i in _literal_init_indices(s, f, _scalar):
                fixes.append(_set_init(s, i, ExprGuess(f"{name}()"), f"a {name} has .{attr}"))
    return fixes


def _module_argument(m: re.Match, f: Failure, s: State) -> list[Fix]:
    # A module passed as a number (Residual(fn), Parallel(*fns)): a shape-keeping module.
    return [
        _set_init(s, i, ExprGuess("torch.nn.Identity()"), "a module is called")
        for i in _literal_init_indices(s, f, lambda v: _scalar(v) and not isinstance(v, str))
    ]


def _names_in(m: re.Match) -> tuple[str, str]:
    return m.group("a").split(".")[-1], m.group("b").split(".")[-1]


def _divisible_names(m: re.Match, f: Failure, s: State) -> list[Fix]:
    """``a % b == 0`` or ``a // b`` on two constructor arguments: make ``a`` a multiple of ``b``,
    or ``b`` a divisor of ``a``."""
    a_name, b_name = _names_in(m)
    init = s[0]
    found_a = next(((i, v) for i, x in enumerate(init) if x.name == a_name and (v := _int(x.guess)) is not None), None)
    found_b = next(((i, v) for i, x in enumerate(init) if x.name == b_name and (v := _int(x.guess)) is not None), None)
    if found_a is None:
        return []
    ia, a = found_a
    if found_b is None:
        return [] if a % 64 == 0 else [_set_init(s, ia, ValueGuess(64), f"{a_name} divisible by {b_name}")]
    ib, b = found_b[0], max(1, found_b[1])
    fixes = []
    multiple = b * max(2, -(-a // b))
    if multiple != a:
        fixes.append(_set_init(s, ia, ValueGuess(multiple), f"{a_name} a multiple of {b_name}"))
    divisor = max(d for d in range(1, min(a, b) + 1) if a % d == 0)
    if divisor != b:
        fixes.append(_set_init(s, ib, ValueGuess(divisor), f"{b_name} divides {a_name}"))
    return fixes


def _int(g) -> int | None:
    if isinstance(g, ValueGuess):
        v = literal_value(g)
        if type(v) is int:
            return v
    return None


def _str_to_int(m: re.Match, f: Failure, s: State) -> list[Fix]:
    # A string option guessed for what is a number (an SE block's `reduction` ratio).
    fixes = []
    for value in (4, 16):
        for i in _literal_init_indices(s, f, lambda v: isinstance(v, str)):
            fixes.append(_set_init(s, i, ValueGuess(value), "a number, not a string"))
    return fixes


def _list_to_int(m: re.Match, f: Failure, s: State) -> list[Fix]:
    # A list guessed for an int (or a list of lists for a list of ints).
    fixes = []
    for i in _literal_init_indices(s, f, lambda v: isinstance(v, list) and v):
        v = literal_value(s[0][i].guess)
        flat = v[0] if isinstance(v[0], list) else None
        new = as_list_value(flat[0]) if flat and not isinstance(flat[0], list) and len(flat) == 2 else None
        first = v[0] if not isinstance(v[0], list) else (v[0][0] if v[0] else 4)
        if new is not None and flat:
            fixes.append(_set_init(s, i, ValueGuess(("__list__", *flat)), "a list of ints, not of lists"))
        if isinstance(first, int):
            fixes.append(_set_init(s, i, ValueGuess(first), "an int, not a list"))
    return fixes


#: Names of forward arguments that are sizes (`H`, `W`, `size`, `seq_len`, `num_frames`...).
SIZE_NAME = re.compile(
    r"^(?:[A-Z]|[hwtdn]|height|width|size|hw|length|seq_len|seqlen|len|num_\w+|n_\w+|\w+_size|\w+_len|\w+_length)$"
)


def _tensor_to_int(m: re.Match, f: Failure, s: State) -> list[Fix]:
    # A forward argument used as a size (`x.view(B, C, H, W)`) guessed as a tensor.
    fwd = s[1]
    fixes = []
    named = [i for i in _tensor_indices(s, f) if fwd[i].name]
    sizes = [i for i in named if SIZE_NAME.match(fwd[i].name or "")]
    for i in sizes or named:
        fixes.append(
            Fix((s[0], set_guess(fwd, i, ValueGuess(4))), f"{_label(fwd, i, True)}: tensor -> 4 (used as a size)")
        )
    return fixes


def _hidden_size(m: re.Match, f: Failure, s: State) -> list[Fix]:
    want, got = _ints(m.group(1)), _ints(m.group(2))
    fixes = []
    for i in _tensor_indices(s, f, lambda g: list(g.shape) == got):
        fix = _reshape(s, i, want, f"hidden state {want}")
        if fix:
            fixes.append(fix)
    return fixes


def _shape_pattern(m: re.Match | _First, f: Failure, s: State) -> list[Fix]:
    """``(*, 3, H, W)``, ``BxCxHxW``: the rank, and the channels where the message gives them."""
    spec = m.group(1)
    parts = [p for p in re.split(r"\s*[x,]\s*", spec.strip()) if p]
    rank = len(parts)
    channels = next((int(p) for p in parts if p.isdigit()), None)
    fixes = []
    for i in _tensor_indices(s, f):
        g = s[1][i].guess
        shape = list(_with_rank(g.shape, max(rank, 1)) if "*" not in parts else _with_rank(g.shape, max(rank, 4)))
        if channels is not None:
            pos = [j for j, p in enumerate(parts) if p.isdigit()][0] - len(parts)
            shape[pos] = channels
        fix = _reshape(s, i, shape, f"expected shape ({spec})")
        if fix:
            fixes.append(fix)
    return fixes


def _probability(m: re.Match, f: Failure, s: State) -> list[Fix]:
    got = float(m.group(1))
    return [
        _set_init(s, i, ValueGuess(0.0), "a probability (0: no training noise)")
        for i in _literal_init_indices(
            s, f, lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and v == got
        )
    ]


def _output_padding(m: re.Match, f: Failure, s: State) -> list[Fix]:
    return [
        _set_init(s, i, ValueGuess(0), "output padding below the stride")
        for i, a in enumerate(s[0])
        if a.name and "padding" in a.name and _int(a.guess) not in (None, 0)
    ]


def _size_mismatch(m: re.Match, f: Failure, s: State) -> list[Fix]:
    """ "Input height (4) doesn't match model (224)", "4 != 224": the input's size is the first
    number, the one wanted the second. The dimension is the one the message names (height: the
    second last, width: the last, size: both), else each dimension that has the size, from the
    last, one at a time."""
    which = (m.groupdict().get("which") or "").lower()
    nums = [int(x) for x in m.groups() if x is not None and x.isdigit()]
    half = len(nums) // 2
    got, want = nums[:half], nums[half:]
    if not got:
        return []
    dims = {"height": [-2], "width": [-1], "size": [-2, -1], "image size": [-2, -1]}.get(which)
    fixes = []
    for i in _tensor_indices(s, f):
        g = s[1][i].guess
        if dims is not None:
            shape = list(g.shape)
            if len(shape) < 3:
                continue
            for d, a, b in zip(dims, got * len(dims), want * len(dims)):
                if shape[d] == a:
                    shape[d] = b
            fix = _reshape(s, i, shape, f"the model expects {want}, the input has {got}")
            if fix:
                fixes.append(fix)
            continue
        for d in range(g.rank - 1, 0, -1):
            if g.shape[d] == got[0]:
                shape = list(g.shape)
                shape[d] = want[0]
                fix = _reshape(s, i, shape, f"the model expects {want[0]}, the input has {got[0]}")
                if fix:
                    fixes.append(fix)
    for i in _int_init_indices(s, f, lambda v: v in want):
        v = literal_value(s[0][i].guess)
        fixes.append(_set_init(s, i, ValueGuess(got[want.index(v)]), f"the input has {got}"))
    return fixes


def _tensors_of_shape(s: State, f: Failure, shape: Sequence[int]) -> list[int]:
    """Forward tensors whose shape is ``shape`` (the one an error message names), else all of
    them, named ones first."""
    exact = _tensor_indices(s, f, lambda g: list(g.shape) == list(shape))
    return exact or _tensor_indices(s, f)


def _einops_rank(m: re.Match, f: Failure, s: State) -> list[Fix]:
    """einops names the input's shape and the rank its pattern wants (1 included: a time
    embedding's ``b -> b 1``)."""
    shape = _ints(m.group("shape"))
    want = int(m.group("want"))
    at_least = bool(m.group("ge"))
    fixes = []
    for i in _tensors_of_shape(s, f, shape):
        g = s[1][i].guess
        if g.rank == want or (at_least and g.rank >= want):
            continue
        fix = _reshape(s, i, _with_rank(g.shape, want), f"einops pattern {m.group('pattern')!r} wants {want} dims")
        if fix:
            fixes.append(replace(fix, step=fix.step.replace("shape", f"rank {g.rank} -> {want}, shape", 1)))
    return fixes


def _einops_chunks(m: re.Match, f: Failure, s: State) -> list[Fix]:
    """``can't divide axis of length L in chunks of C``: the axis becomes a multiple of C, or a
    constructor argument C (a head count) a divisor of L."""
    shape = _ints(m.group("shape"))
    length, chunk = int(m.group("length")), int(m.group("chunk"))
    if chunk <= 0:
        return []
    why = f"einops splits an axis of {length} in chunks of {chunk}"
    fixes = []
    for i in _int_init_indices(s, f, lambda v: v == chunk):
        divisor = max(d for d in range(1, min(length, chunk) + 1) if length % d == 0)
        fixes.append(_set_init(s, i, ValueGuess(divisor), why))
    multiple = chunk * max(1, -(-length // chunk))
    for i in _tensors_of_shape(s, f, shape):
        g = s[1][i].guess
        for d in range(g.rank - 1, -1, -1):
            if g.shape[d] == length:
                shape_new = list(g.shape)
                shape_new[d] = multiple
                fix = _reshape(s, i, shape_new, why)
                if fix:
                    fixes.append(fix)
    return fixes


def _derived_chunks(m: re.Match, f: Failure, s: State) -> list[Fix]:
    """``can't divide axis of length L in chunks of C`` from an einops layer, whose message
    does not name the tensor (``Rearrange('b c (h p1) (w p2) -> ...')`` after a U-Net's
    downsamplings shrank an image side to L): where no input has a dimension of L, the sides
    of each float image input (its dimensions after the second, rank 3 or more) are multiplied
    by C, the side the next downsampling needs; repeated while the search lasts."""
    length, chunk = int(m.group("length")), int(m.group("chunk"))
    if chunk <= 1 or "Input tensor shape" in f.message:
        return []
    fwd = s[1]
    if any(isinstance(a.guess, TensorGuess) and length in a.guess.shape for a in fwd):
        return []
    why = f"an einops layer splits a derived axis of {length} in chunks of {chunk}: image sides x {chunk}"
    fixes = []
    for i in _tensor_indices(s, f, lambda g: g.rank >= 3 and g.dtype in FLOAT_DTYPES):
        g = fwd[i].guess
        fix = _reshape(s, i, list(g.shape[:2]) + [d * chunk for d in g.shape[2:]], why)
        if fix:
            fixes.append(fix)
    return fixes


def _einops_axis(m: re.Match, f: Failure, s: State) -> list[Fix]:
    """``Shape mismatch, 4 != 3``: an axis the pattern names with a given length."""
    shape = _ints(m.group("shape"))
    got, want = int(m.group("got")), int(m.group("want"))
    fixes = []
    for i in _tensors_of_shape(s, f, shape):
        g = s[1][i].guess
        for d in range(g.rank - 1, -1, -1):
            if g.shape[d] == got:
                new = list(g.shape)
                new[d] = want
                fix = _reshape(s, i, new, f"einops wants an axis of {want}")
                if fix:
                    fixes.append(fix)
    for i in _int_init_indices(s, f, lambda v: v == want):
        fixes.append(_set_init(s, i, ValueGuess(got), f"einops axis of {got}"))
    return fixes


def _assert_sizes(m: re.Match, f: Failure, s: State) -> list[Fix]:
    """A failed ``assert a == b`` on sizes, both sides evaluated (:func:`.execute.failure_of`):
    an input whose trailing dimensions are one side gets the other side's, all at once (a
    U-Net's ``x.shape[1:] == (channels, image_size, image_size)``); where the sides differ, a
    constructor argument equal to one side becomes the other, or an input dimension is set
    to, or scaled by, the ratio of the two (a length halved by a strided convolution before it
    is compared with a context size). A constructor argument that declares the input's size
    (``image_size``, ``seq_len``: :func:`.slots.role_of_name` spatial or sequence) is what the
    input must match: the input fixes come before its change."""
    left, right = _ints(m.group("left")), _ints(m.group("right"))
    if len(left) != len(right):
        return []
    why = f"assertion {tuple(left)} == {tuple(right)}"
    whole: list[Fix] = []
    for old_t, new_t in ((left, right), (right, left)):
        if min(new_t, default=0) <= 0:
            continue
        for i in _tensor_indices(s, f):
            g = s[1][i].guess
            if g.rank >= len(old_t) and list(g.shape[g.rank - len(old_t) :]) == old_t:
                fix = _reshape(s, i, list(g.shape[: g.rank - len(old_t)]) + new_t, why)
                if fix:
                    whole.append(fix)
    declared: list[Fix] = []
    inits: list[Fix] = []
    inputs: list[Fix] = []
    for a, b in zip(left, right):
        if a == b or a <= 0 or b <= 0:
            continue
        why = f"assertion {a} == {b}"
        for old, new in ((b, a), (a, b)):
            for i in _int_init_indices(s, f, lambda v, old=old: v == old):
                fix = _set_init(s, i, ValueGuess(new), why)
                (declared if role_of_name(s[0][i].name) in ("spatial", "seq") else inits).append(fix)
        for old, new in ((a, b), (b, a)):
            inputs += _set_dim_any(s, f, old, new, why)
            if new % old == 0:
                for i in _tensor_indices(s, f):
                    g = s[1][i].guess
                    for d in range(g.rank - 1, 0, -1):
                        shape = list(g.shape)
                        shape[d] = g.shape[d] * (new // old)
                        fix = _reshape(s, i, shape, f"{why}: scaled by {new // old}")
                        if fix:
                            inputs.append(fix)
    return whole + inits + inputs + declared


def _set_dim_any(s: State, f: Failure, old: int, new: int, why: str) -> list[Fix]:
    """Every input dimension of size ``old`` set to ``new``, one at a time, from the last."""
    fixes = []
    for i in _tensor_indices(s, f):
        g = s[1][i].guess
        for d in range(g.rank - 1, -1, -1):
            if g.shape[d] == old:
                shape = list(g.shape)
                shape[d] = new
                fix = _reshape(s, i, shape, why)
                if fix:
                    fixes.append(fix)
    return fixes


def _sizes_divisible(m: re.Match, f: Failure, s: State) -> list[Fix]:
    """A message that shows sizes (``torch.Size([4, 64])``) that must be divisible by ``n`` (a
    U-Net's ``your input dimensions torch.Size([4, 64]) need to be divisible by 8``): the inputs
    whose trailing dimensions are those sizes get each one that is not a multiple of ``n`` raised
    to the next multiple, all at once (one fix per input)."""
    sizes = [int(d) for d in m.group("dims").split(",") if d.strip()]
    n = int(m.group("n"))
    if not sizes or n <= 0:
        return []
    why = f"sizes {sizes} divisible by {n}"
    fixes = []
    for i in _tensor_indices(s, f):
        g = s[1][i].guess
        if g.rank < len(sizes) or list(g.shape[g.rank - len(sizes) :]) != sizes:
            continue
        shape = list(g.shape[: g.rank - len(sizes)]) + [n * max(1, -(-d // n)) for d in sizes]
        fix = _reshape(s, i, shape, why)
        if fix:
            fixes.append(fix)
    return fixes


def _assert_divisible(m: re.Match, f: Failure, s: State) -> list[Fix]:
    """A failed ``assert a % b == 0`` with both operands evaluated: a constructor argument equal
    to ``a`` becomes a multiple of ``b`` (tried first: the divisor is the structural choice, a
    head count from the repository's call site, and lowering it gives the tiny head counts and
    widths no model uses), else one equal to ``b`` a divisor of ``a`` (the names of the two need
    not be the constructor's: ``self.inner_dim % self.heads``)."""
    a, b = int(m.group("a")), int(m.group("b"))
    if a <= 0 or b <= 0:
        return []
    why = f"{a} divisible by {b}"
    fixes = []
    multiple = b * max(1, -(-a // b))
    for i in _int_init_indices(s, f, lambda v: v == a):
        fixes.append(_set_init(s, i, ValueGuess(multiple), why))
    fixes += _set_dim(s, f, -1, a, multiple, why)
    divisor = max(d for d in range(1, min(a, b) + 1) if a % d == 0)
    for i in _int_init_indices(s, f, lambda v: v == b):
        fixes.append(_set_init(s, i, ValueGuess(divisor), why))
    return fixes


RULES: list[tuple[re.Pattern, Rule]] = [
    (
        re.compile(r"(?P<func>\w+)\(\) missing \d+ required (?:positional|keyword-only) arguments?: (?P<names>.*)"),
        _missing_args,
    ),
    (re.compile(r"got an unexpected keyword argument '(\w+)'"), _unexpected_kwarg),
    (
        re.compile(r"takes (?:from \d+ to )?(?P<max>\d+) positional arguments? but (?P<given>\d+) (?:were|was) given"),
        _too_many_positional,
    ),
    (re.compile(r"mat1 and mat2 shapes cannot be multiplied \((\d+)x(\d+) and (\d+)x(\d+)\)"), _matmul),
    (re.compile(r"size mismatch, m1: \[(\d+) x (\d+)\], m2: \[(\d+) x (\d+)\]"), _matmul),
    (
        re.compile(r"expected input\[[^\]]*\] to have (?P<want>\d+) channels, but got (?P<got>\d+) channels"),
        _conv_channels,
    ),
    (
        re.compile(r"Expected (?P<rank>\d+)-dimensional input for \d+-dimensional weight \[(?P<weight>[^\]]*)\]"),
        _rank_with_weight,
    ),
    (re.compile(r"Expected (\d+)D \(unbatched\) or (\d+)D \(batched\) input"), _rank_list),
    (re.compile(r"[Ee]xpected (\d+)D (?:or (\d+)D )?(?:\(batch mode\) )?(?:input|tensor)"), _rank_list),
    (re.compile(r"non-empty (\d+)D or (\d+)D \(batch mode\) tensor expected"), _rank_list),
    (
        re.compile(r"input must have (\d+) dimensions, got (\d+)"),
        lambda m, f, s: _rerank(s, f, [int(m.group(1))], "rnn input rank"),
    ),
    (
        re.compile(r"Dimension out of range \(expected to be in range of \[(-?\d+), (\d+)\], but got (-?\d+)\)"),
        _dim_out_of_range,
    ),
    (re.compile(r"too many indices for tensor of dimension (\d+)"), _too_many_indices),
    (re.compile(r"Tensors must have same number of dimensions: got (\d+) and (\d+)"), _cat_ranks),
    (re.compile(r"not enough values to unpack \(expected (\d+), got (\d+)\)"), _not_enough_to_unpack),
    (re.compile(r"too many values to unpack \(expected (\d+)"), _too_many_to_unpack),
    (
        re.compile(
            r"size of tensor a \((\d+)\) must match the size of tensor b \((\d+)\) at non-singleton dimension (\d+)"
        ),
        _broadcast,
    ),
    (re.compile(r"shape '\[([-\d, ]*)\]' is invalid for input of size (\d+)"), _view_size),
    (
        re.compile(
            r"Kernel size can't be greater than actual input size|Output size is too small|smaller than kernel size"
            r"|[Pp]adding size should be less than|should be at most half of (?:effective )?kernel size|Input "
            r"dimension should be at least|input size .* too small"
        ),
        _kernel_too_big,
    ),
    (
        re.compile(
            "|".join(
                (
                    r"expected scalar type (?:Long|Int) but found \w+",
                    r"dtype to be Long",
                    r"scalar type Long",
                    r"Expected tensor for argument #\d+ '(?:indices|input)' to have (?:one of the following )?"
                    r"scalar types?",
                    r"tensors used as indices must be",
                    r"[Ee]xpected dtype (?:int|long)",
                    r"expected (?:Long|Int) but",
                    r"must be Long",
                    r"only integers, slices",
                    r"target .*Long",
                    r"not implemented for '(?:Float|Half|Double)'",
                )
            )
        ),
        _to_long,
    ),
    (
        re.compile(
            "|".join(
                (
                    r"expected scalar type (?:Float|Double|Half|BFloat16) but found \w+",
                    r"must have the same dtype",
                    r"not implemented for '(?:Long|Int|Bool)'",
                    r"only Tensors of floating point",
                    r"could not infer output dtype",
                    r"Input type \((?:torch\.LongTensor|torch\.IntTensor|long int|int|bool)\)",
                    r"must have floating point dtype",
                    r"can't be cast to the desired output type Long",
                    r"must be a floating point",
                    r"mixed dtype \(CPU\): all inputs must share same datatype",
                    r"expected both vectors to have same dtype",
                    r"Found dtype Long but expected Float",
                    r"to have the same dtype",
                )
            )
        ),
        _to_float,
    ),
    (
        re.compile(
            "|".join(
                (
                    r"only supports boolean masks",
                    r"[Ee]xpected (?:a )?(?:mask|condition) (?:tensor )?(?:to have|of) (?:dtype|scalar type) [Bb]ool",
                    r"expected BoolTensor",
                    r"must be a bool tensor",
                    r"where expected condition to be a boolean",
                )
            )
        ),
        _to_bool,
    ),
    (
        re.compile(
            r"'int' object is not (?:subscriptable|iterable)|object of type 'int' has no len\(\)|argument of type "
            r"'int' is not iterable|cannot unpack non-iterable int"
        ),
        _int_to_list,
    ),
    (
        re.compile(
            r"'float' object cannot be interpreted as an integer|must be tuple of ints, but found element of type "
            r"float|expected (?:int|integer) but got float|received an invalid combination of arguments.*float"
        ),
        _float_to_int,
    ),
    (
        re.compile(
            r"(?P<a>[\w.]+) (?:must|should|has to|needs to) be (?:divisible by|a multiple of) (?:the )?(?P<b>[\w.]+)"
        ),
        _divisible_names,
    ),
    (
        re.compile(r"torch\.Size\(\[(?P<dims>[\d, ]+)\]\)[^\n]*?(?:divisible by|a multiple of) (?P<n>\d+)"),
        _sizes_divisible,
    ),
    (re.compile(r"divisible by|must be a multiple of|not divisible"), _divisible),
    (re.compile(r"'(int|float|NoneType|str|bool)' object has no attribute '(\w+)'"), _config_object),
    (
        re.compile(
            r"'(?:int|float|NoneType)' object is not callable|is not a Module subclass|'int' object has no attribute "
            r"'(?:forward|weight|parameters|apply|modules|children|in_features|out_features)'"
        ),
        _module_argument,
    ),
    (
        re.compile(
            "|".join(
                (
                    r"unsupported operand type\(s\) for [^:]+: '(?:int|float)' and 'str'",
                    r"unsupported operand type\(s\) for [^:]+: 'str' and '(?:int|float)'",
                    r"can't multiply sequence by non-int of type 'float'",
                    r"not supported between instances of 'str' and '(?:int|float)'",
                    r"not supported between instances of '(?:int|float)' and 'str'",
                )
            )
        ),
        _str_to_int,
    ),
    (
        re.compile(
            r"must be tuple of ints, but found element of type list|'list' object cannot be interpreted as an integer"
            r"|unsupported operand type\(s\) for [^:]+: 'list' and '(?:int|float)'|unsupported operand type\(s\) "
            r"for [^:]+: '(?:int|float)' and 'list'|must be int, not list|not supported between instances of 'list' "
            r"and 'int'|can only concatenate list \(not \"int\"\) to list|type must be tuple of ints,but got list"
            r"|'normalized_shape' \(position \d+\) must be tuple of ints, but got list"
        ),
        _list_to_int,
    ),
    (
        re.compile(
            r"type must be tuple of ints,\s?but got Tensor|shall be a positive integer\. Got tensor|'Tensor' object "
            r"cannot be interpreted as an integer|must be int, not Tensor|only integer tensors of a single element can "
            r"be converted to an index"
        ),
        _tensor_to_int,
    ),
    (re.compile(r"Expected hidden(?:\[\d\])? size \(([\d, ]+)\), got \[([\d, ]+)\]"), _hidden_size),
    (
        re.compile(
            r"(?:shape of|[Ee]xpected(?: input)?(?: shape)?) \(((?:\*, )?\d+, H, W)\)|expected ((?:B)?x?CxD?xHxW)"
        ),
        lambda m, f, s: _shape_pattern(_First(m), f, s),
    ),
    (re.compile(r"dropout probability has to be between 0 and 1, but got (-?[\d.]+)"), _probability),
    (re.compile(r"output padding must be smaller than either stride or dilation"), _output_padding),
    (
        re.compile(
            r"Input (?P<which>image size|height|width|size) \((\d+)(?:\*(\d+))?\) doesn't match model "
            r"\((\d+)(?:\*(\d+))?\)"
        ),
        _size_mismatch,
    ),
    (re.compile(r"^(\d+) != (\d+)$"), _size_mismatch),
    (
        re.compile(
            r"pattern \"(?P<pattern>[^\"]*)\".*?Input tensor shape: torch\.Size\(\[(?P<shape>[\d, ]*)\]\).*?"
            r"Wrong shape: expected (?P<ge>>=)?(?P<want>\d+) dims",
            re.S,
        ),
        _einops_rank,
    ),
    (
        re.compile(
            r"Input tensor shape: torch\.Size\(\[(?P<shape>[\d, ]*)\]\).*?can't divide axis of length (?P<length>\d+) "
            r"in chunks of (?P<chunk>\d+)",
            re.S,
        ),
        _einops_chunks,
    ),
    (re.compile(r"can't divide axis of length (?P<length>\d+) in chunks of (?P<chunk>\d+)"), _derived_chunks),
    (
        re.compile(
            r"Input tensor shape: torch\.Size\(\[(?P<shape>[\d, ]*)\]\).*?"
            r"Shape mismatch, (?P<got>\d+) != (?P<want>\d+)",
            re.S,
        ),
        _einops_axis,
    ),
    (re.compile(r"\[assert sizes \((?P<left>[\d, ]*)\) == \((?P<right>[\d, ]*)\)\]"), _assert_sizes),
    (re.compile(r"\[assert divisible (?P<a>\d+) % (?P<b>\d+)\]"), _assert_divisible),
    (re.compile(r"index (-?\d+) is out of bounds for dimension (\d+) with size (\d+)"), _index_out_of_bounds),
    (re.compile(r"index out of range in self"), _index_out_of_range_in_self),
    (re.compile(r"Expected input batch_size \((\d+)\) to match target batch_size \((\d+)\)"), _batch_mismatch),
    (
        re.compile(
            r"normalized_shape=\[([\d, ]*)\], expected input with shape \[\*, [^\]]*\]"
            r"(?:, but got input of size\s*\[([\d, ]*)\])?"
        ),
        _normalized_shape,
    ),
    (re.compile(r"running_mean should contain (\d+) elements not (\d+)"), _running_mean),
    (re.compile(r"[Ee]xpected (?:input|weight) .*?(\d+) channels.*?got (\d+)"), _channel_count),
    (re.compile(r"input\.size\(-1\) must be equal to input_size\. Expected (\d+), got (\d+)"), _last_dim),
    (re.compile(r"was expecting embedding dimension of (\d+), but got (\d+)"), _last_dim),
    (
        re.compile(
            r"weight to be a vector of size equal to the number of channels in input, but got weight of shape "
            r"\[(\d+)\] and input of shape \[([\d, ]*)\]"
        ),
        _weight_vector,
    ),
    (
        re.compile(r"expected input's size at dim=(\d+) to match num_features \((\d+)\), but got: (\d+)"),
        _dim_matches_features,
    ),
    (
        re.compile(r"Sizes of tensors must match except in dimension (\d+)\. Expected size (\d+) but got size (\d+)"),
        _cat_sizes,
    ),
    (re.compile(r"can't allocate memory|out of memory|MemoryError"), _alloc),
    (re.compile(r"Expected more than 1 value per channel when training"), _batch_one),
    (
        re.compile(
            r"'Tensor' object is not callable|expected Tensor as element \d+ in argument \d+, but got Tensor|zip "
            r"argument #\d+ must support iteration"
        ),
        _sequence_input,
    ),
]


#: Rules read from the traceback's source lines (an ``assert`` without a message says nothing).
CONTEXT_RULES: list[tuple[re.Pattern, Rule]] = [
    (re.compile(r"assert\s*\(?\s*(?P<a>[\w.]+)\s*%\s*(?P<b>[\w.]+)\s*==\s*0"), _divisible_names),
    (re.compile(r"(?P<a>[\w.]+)\s*//\s*(?P<b>[\w.]+)"), _divisible_names),
]


class _First:
    """A match whose ``group(1)`` is the first group that matched (for alternations)."""

    def __init__(self, m: re.Match):
        self._m = m

    def group(self, i: int = 0):
        return next(g for g in self._m.groups() if g is not None) if i == 1 else self._m.group(i)


def propose(failure: Failure, state: State) -> list[Fix]:
    """Every fix the rules propose for ``failure`` in ``state``, best first, without repeats."""
    text = failure.message
    if failure.exc_class == "MemoryError" and not text:
        text = "MemoryError"
    seen = set()
    out: list[Fix] = []
    checks = [(p, r, text) for p, r in RULES] + [(p, r, failure.context) for p, r in CONTEXT_RULES]
    for pattern, rule, where in checks:
        m = pattern.search(where)
        if not m:
            continue
        try:
            fixes = rule(m, failure, state)
        except (ValueError, IndexError, ZeroDivisionError):
            continue
        for fix in fixes:
            if fix.state != state and fix.state not in seen:
                seen.add(fix.state)
                out.append(fix)
    return out
