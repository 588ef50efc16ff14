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

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from .guesses import (
    FLOAT_DTYPES,
    INT_DTYPES,
    Arg,
    SeqGuess,
    TensorGuess,
    ValueGuess,
    as_list_value,
    default_tensor,
    guess_for_name,
    literal_value,
    set_guess,
)

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


def _tensor_indices(state: State, failure: Failure, pred=None) -> list[int]:
    """Forward tensor inputs, those named in the message/traceback first."""
    fwd = state[1]
    idx = [i for i, a in enumerate(fwd) if isinstance(a.guess, TensorGuess)]
    if pred is not None:
        idx = [i for i in idx if pred(fwd[i].guess)]
    text = failure.message + "\n" + failure.context

    def named(i):
        n = fwd[i].name
        return 0 if n and re.search(rf"\b{re.escape(n)}\b", text) else 1

    return sorted(idx, key=lambda i: (named(i), i))


def _int_init_indices(state: State, failure: Failure, pred=None) -> list[int]:
    """Constructor arguments that are plain ints, those named in the traceback first."""
    init = state[0]
    idx = [
        i
        for i, a in enumerate(init)
        if isinstance(a.guess, ValueGuess)
        and isinstance(literal_value(a.guess), int)
        and not isinstance(literal_value(a.guess), bool)
    ]
    if pred is not None:
        idx = [i for i in idx if pred(literal_value(init[i].guess))]
    text = failure.message + "\n" + failure.context

    def named(i):
        n = init[i].name
        return 0 if n and re.search(rf"\b{re.escape(n)}\b", text) else 1

    return sorted(idx, key=lambda i: (named(i), i))


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
    fixes = _set_dim(s, f, -1, b, c, f"matmul {a}x{b} @ {c}x{d}")
    # The input may feed the matmul only after other ops: fix the layer size instead.
    for i in _int_init_indices(s, f, lambda v: v == c):
        fixes.append(_set_init(s, i, ValueGuess(b), f"matmul {a}x{b} @ {c}x{d}"))
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
    want = int(m.group(1))
    fixes = _rerank(s, f, [want], f"unpack {want} values", lambda g: g.rank > want)
    fixes += _set_dim(s, f, 0, None, want, f"unpack {want} values")
    return fixes


def _broadcast(m: re.Match, f: Failure, s: State) -> list[Fix]:
    a, b, dim = int(m.group(1)), int(m.group(2)), int(m.group(3))
    fixes = []
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
    return fixes


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
            fixes_for = [target]
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
    fixes = []
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


def _cat_sizes(m: re.Match, f: Failure, s: State) -> list[Fix]:
    want, got = int(m.group(2)), int(m.group(3))
    fixes = []
    for i in _tensor_indices(s, f):
        g = s[1][i].guess
        for pos, d in enumerate(g.shape):
            if d == got:
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
            r"expected scalar type \w+ but found \w+|dtype to be Long|scalar type Long|Expected tensor for argument "
            r"#\d+ '(?:indices|input)' to have (?:one of the following )?scalar types?|tensors used as indices must be"
            r"|[Ee]xpected dtype (?:int|long)|expected (?:Long|Int) but|must be Long|only integers, slices|target "
            r".*Long|not implemented for '(?:Float|Half|Double)'"
        ),
        _to_long,
    ),
    (
        re.compile(
            r"expected scalar type \w+ but found \w+|must have the same dtype|not implemented for '(?:Long|Int|Bool)'"
            r"|only Tensors of floating point|could not infer output dtype|Input type \(torch\.LongTensor\)|must have "
            r"floating point dtype|can't be cast to the desired output type Long|must be a floating point"
        ),
        _to_float,
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
    (re.compile(r"divisible by|must be a multiple of|not divisible"), _divisible),
    (re.compile(r"index (-?\d+) is out of bounds for dimension (\d+) with size (\d+)"), _index_out_of_bounds),
    (re.compile(r"index out of range in self"), _index_out_of_range_in_self),
    (re.compile(r"Expected input batch_size \((\d+)\) to match target batch_size \((\d+)\)"), _batch_mismatch),
    (re.compile(r"normalized_shape=\[([\d, ]*)\], expected input with shape \[\*, [^\]]*\]"), _normalized_shape),
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


def propose(failure: Failure, state: State) -> list[Fix]:
    """Every fix the rules propose for ``failure`` in ``state``, best first, without repeats."""
    text = failure.message
    if failure.exc_class == "MemoryError" and not text:
        text = "MemoryError"
    seen = set()
    out: list[Fix] = []
    for pattern, rule in RULES:
        m = pattern.search(text)
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
