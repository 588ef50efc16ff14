"""Sizing: choose input sizes so that one forward call does real work on the GPU, and write them
KernelBench-style as module-level constants with alternate valid size sets.

The repair search leaves a program that runs at the probe's small sizes (``[4, 4, 4, 4]``): too
little work for a GPU timing to mean anything. This step, run in the same sandboxed child right
after verification, works on the verified state (``init``, ``forward`` guesses):

1. **Knobs.** Every integer the program exposes is a *slot*: the constructor's integer arguments
   (not those whose name says structure: kernel, stride, heads, layers, ...), each dimension of
   each tensor input, integer forward arguments. Slots are grouped (the batch dimensions
   together, then equal values together) and each group is doubled in one trial run; a group
   that still runs is a *knob*, one that fails is split by role (spatial, sequence, the rest)
   and those parts tried. A program whose own ``get_inputs()``/``get_init_inputs()`` read
   module-level integer constants keeps them: those constants are its knobs. Each trial is
   measured (:mod:`.work`), so every knob comes with the exponent of each measure (FLOPs,
   bytes, peak memory, time) in its size. Trials run on the CPU while the program is small, on
   the ``meta`` device when it is not.
2. **Program.** The knobs become module-level constants (``batch_size = ...``, the constructor
   parameter's name, ``channels``, ``seq_len``, ``height``...) that the rewritten
   ``get_inputs()``/``get_init_inputs()`` read: the KernelBench format, which the evaluator
   changes with :func:`.constants.set_constants`.
3. **Target.** From the exponents, knobs are doubled one at a time (the one furthest below its
   role's typical size first) until the estimated eager time on the reference GPU reaches
   ``aim_ms``, staying under ``max_ms``, ``max_memory_mb`` and each role's cap; the choice is
   run on ``meta`` (nothing is computed or allocated) and corrected from what it measured.
4. **Confirmation.** The rewritten program runs for real on the CPU, twice, at a moderate size
   (under ``confirm_mflop`` and ``confirm_mb``), from scratch as the evaluator would: it must
   run and give the same outputs.
5. **Alternates.** The moderate set plus sets near the target with other values (batch minus
   one, three quarters of a dimension, half), each checked on ``meta``, for the evaluator's
   hidden-shape check.

Outcome (``size_status``): ``sized`` (work target reached, at least two alternates),
``below_target`` (as large as the program allows, below the target), ``unsizable`` (the program
stays as verified; ``size_reason`` says why, starting with a code from ``verdicts.json``).
Programs whose operators have no ``meta`` implementation are sized with the same search on the
CPU, capped at ``cpu_max_mflop``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import re
import time
from dataclasses import replace
from typing import Any

from . import constants as K
from .guesses import FLOAT_DTYPES, Arg, SeqGuess, TensorGuess, ValueGuess, literal_value
from .program import render_guess
from .work import BYTES_PER_S, FLOPS, HOST_US, LAUNCH_US, Work, flatten_outputs, make_mode, measure

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

METRICS = ("flops", "bytes", "peak", "kernels")
#: Programs whose repaired forward does at most this many FLOPs, with at most this many bytes of
#: parameters and tensors, are tried on the CPU; larger ones on meta.
CPU_TRIAL_FLOPS = 5e7
CPU_TRIAL_BYTES = 64 * 2**20
#: Trial runs the knob search may make before it stops cutting groups finer.
DISCOVERY_TRIALS = 12
#: How many times a group is cut.
MAX_SPLIT_DEPTH = 3


class SizingTimeout(BaseException):
    """The sizing step ran out of its time budget."""


class Unsizable(Exception):
    """The program cannot be sized; ``code`` is a ``size_reason`` code of ``verdicts.json``."""

    def __init__(self, code: str, message: str):
        super().__init__(f"{code}: {message}")
        self.code = code


@dataclasses.dataclass(frozen=True)
class Targets:
    """What a sized program should do (the request's ``sizing`` object)."""

    min_gflop: float = 0.2
    min_mb: float = 64.0
    aim_ms: float = 1.0
    max_ms: float = 10.0
    max_memory_mb: float = 20480.0
    confirm_mflop: float = 20.0
    confirm_mb: float = 16.0
    cpu_max_mflop: float = 2000.0
    max_trials: int = 24
    budget_s: float = 20.0

    @classmethod
    def from_request(cls, obj: dict[str, Any] | None) -> Targets:
        obj = obj or {}
        fields = {f.name: f.type for f in dataclasses.fields(cls)}
        return cls(**{k: (int(v) if fields[k] == "int" else float(v)) for k, v in obj.items() if k in fields})

    def reached(self, work: Work) -> bool:
        """The work target: enough arithmetic or enough traffic, within memory."""
        return self.reached_by({"flops": work.flops, "bytes": work.bytes, "peak": float(work.peak_bytes)})

    def reached_by(self, m: dict[str, float]) -> bool:
        """:meth:`reached` for measured or predicted totals (``flops``, ``bytes``, ``peak``)."""
        enough = m["flops"] >= self.min_gflop * 1e9 or m["bytes"] >= self.min_mb * 2**20
        return enough and m["peak"] <= self.max_memory_mb * 2**20


@dataclasses.dataclass(frozen=True)
class Slot:
    """One integer the program exposes: a constructor or forward argument (``path`` ``()``), a
    dimension of a tensor input (``(d,)``) or of a tensor in a list input (``(item, d)``); or a
    module-level constant (``side`` ``"constant"``, ``name`` the constant). ``rank``: the rank
    of the tensor a dimension belongs to."""

    side: str
    arg: int
    path: tuple
    value: int
    name: str | None
    role: str
    rank: int = 0


@dataclasses.dataclass
class Knob:
    """Slots that change together, their base value and how each measure scales with them."""

    slots: tuple[Slot, ...]
    base: int
    role: str
    exps: dict[str, float] = dataclasses.field(default_factory=dict)
    name: str = ""
    #: The largest size known to run, once a larger one failed.
    limit: int | None = None

    def typical(self) -> int:
        return ROLES[self.role][0]

    def cap(self) -> int:
        cap = max(ROLES[self.role][1], self.base)
        return cap if self.limit is None else min(cap, self.limit)


# --- slots -------------------------------------------------------------------------------------


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


def state_slots(state) -> list[Slot]:
    """The slots of a verified state."""
    out: list[Slot] = []
    for i, a in enumerate(state[0]):
        v = _int(a.guess)
        if v is not None and v >= 2 and not structural_name(a.name):
            out.append(Slot("init", i, (), v, a.name, role_of_name(a.name) if a.name else "value"))
    for j, a in enumerate(state[1]):
        g = a.guess
        if isinstance(g, TensorGuess):
            out += _tensor_slots(j, (), g)
        elif isinstance(g, SeqGuess):
            for k, item in enumerate(g.items):
                if isinstance(item, TensorGuess):
                    out += _tensor_slots(j, (k,), item)
        else:
            v = _int(g)
            if v is not None and v >= 2 and a.name and not structural_name(a.name):
                out.append(Slot("input", j, (), v, a.name, role_of_name(a.name)))
    return out


def _tensor_slots(j: int, prefix: tuple, g: TensorGuess) -> list[Slot]:
    out = []
    for d, size in enumerate(g.shape):
        role = role_of_dim(g.rank, d, g.dtype)
        if size >= 2 or (role == "batch" and size >= 1):
            out.append(Slot("input", j, prefix + (d,), size, None, role, g.rank))
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


# --- writing the sized program -----------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class NamedValue:
    """A knob's constant, written by name."""

    name: str


@dataclasses.dataclass(frozen=True)
class NamedTensor:
    """A tensor input some of whose dimensions are constants; ``make`` is how its values are
    drawn (``rand``, ``randn``, ``randint:LO:HI``, ``full:V``, ``bernoulli:P``, ``ones``)."""

    dims: tuple
    dtype: str
    make: str


def _dims_source(dims) -> str:
    return "[" + ", ".join(d.name if isinstance(d, NamedValue) else str(d) for d in dims) + "]"


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
        return guess.name, False
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


def _maker(value, torch) -> str:
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


# --- the sizer ----------------------------------------------------------------------------------


def _metrics(work: Work) -> dict[str, float]:
    m = {
        "flops": work.flops,
        "bytes": work.bytes,
        "peak": float(work.peak_bytes),
        "kernels": float(work.kernels),
    }
    # The measured time over what the aggregate formula gives, so predictions from this point
    # keep what the per-kernel sum knows.
    m["scale"] = work.eager_ms() / max(_formula_ms(m), 1e-9)
    return m


def _formula_ms(m: dict[str, float]) -> float:
    """Eager time from totals: arithmetic or traffic, whichever is longer, plus a launch per
    kernel; at least the host's time to issue them."""
    device = max(m["flops"] / FLOPS, m["bytes"] / BYTES_PER_S) * 1e3 + m["kernels"] * LAUNCH_US / 1e3
    return max(device, m["kernels"] * HOST_US / 1e3)


def _est_ms(m: dict[str, float]) -> float:
    return _formula_ms(m) * m.get("scale", 1.0)


def _exponent(a: float, b: float, ratio: float) -> float:
    if a <= 0 or b <= 0 or ratio == 1:
        return 0.0
    return math.log(b / a) / math.log(ratio)


class Sizer:
    """Sizes one repaired program (see the module doc). ``probe`` is the ``execute.Probe`` that
    repaired it (its ``last_work``: the measure of the successful attempt), ``state`` its
    working state, ``emitted`` the repaired text."""

    def __init__(self, probe, initial, state, emitted: str, targets: Targets):
        self.probe = probe
        self.torch = probe.torch
        self.initial = initial
        self.state = state
        self.emitted = emitted
        self.targets = targets
        self.trials = 0
        self.deadline = time.monotonic() + targets.budget_s
        self.mode = probe.work_mode or make_mode(self.torch)
        # Trials on the CPU while building and running the model is cheap there; on meta
        # otherwise (its cost does not grow with the sizes). Decided by the measured work, not
        # by time, so the outcome does not depend on the machine's load.
        w = probe.last_work
        small = w is not None and w.flops <= CPU_TRIAL_FLOPS and w.param_bytes + w.peak_bytes <= CPU_TRIAL_BYTES
        self.trial_device = "cpu" if small else "meta"
        self.meta_works: bool | None = None
        #: The model and inputs of the last run (what `confirm` hands to the ATen recording).
        self.last_built = None

    # --- runs --------------------------------------------------------------------------------

    def _tick(self) -> None:
        self.trials += 1
        if self.trials > self.targets.max_trials:
            raise Unsizable("trial_budget", f"more than {self.targets.max_trials} trial runs")
        if time.monotonic() > self.deadline:
            raise SizingTimeout()

    def _measured(self, build, device: str, count: bool = True):
        """Runs ``build()`` (returns model and inputs) on ``device`` and one forward, measured
        (:func:`.work.measure`) when ``count``; returns outputs, work (or None), model and the
        forward's CPU time in ms."""
        from .execute import seed_all

        torch = self.torch
        seed_all(self.probe.seed, torch)
        # Where the CPU is torch's default device already, no device context: it would route
        # every torch call of the run through a Python-level mode.
        default = device == "cpu" and torch.get_default_device().type == "cpu"
        with contextlib.nullcontext() if default else torch.device(device):
            model, inputs = build()
            self.last_built = (model, inputs)
            t0 = time.thread_time()
            if count:
                out, work = measure(model, inputs, torch, self.mode)
            else:
                with torch.no_grad():
                    out, work = model(*inputs), None
            forward_ms = (time.thread_time() - t0) * 1000.0
        tensors = flatten_outputs(out, torch, [])
        if not tensors:
            raise TypeError(f"forward returned no tensor (got {type(out).__name__})")
        return tensors, work, model, forward_ms

    def run_state(self, state, device: str):
        """Builds the model and inputs of a state (as the repair search does) and measures."""
        self._tick()
        probe = self.probe
        return self._measured(lambda: probe.build(state), device)

    def run_text(self, text: str, device: str, count: bool = True):
        """Runs a program text from scratch (exec, ``get_init_inputs``, ``Model``, ``get_inputs``)
        as the evaluator would, and its forward (measured when ``count``)."""
        from .execute import exec_program, split_init

        self._tick()

        def build():
            ns = exec_program(text, "<ksmith-sized-program>")
            model = ns["Model"](*split_init(ns["get_init_inputs"]()))
            inputs = ns["get_inputs"]()
            return model, (list(inputs) if isinstance(inputs, (list, tuple)) else [inputs])

        return self._measured(build, device, count)

    def _try(self, fn, *args) -> Work | None:
        """The work of a run; None when the run fails (``last_error`` says how)."""
        try:
            return fn(*args)[1]
        except (SizingTimeout, Unsizable):
            raise
        except BaseException as exc:  # noqa: BLE001 - a failed trial is an answer
            if type(exc).__name__ == "ProbeTimeout":
                raise
            self.last_error = f"{type(exc).__name__}: {str(exc)[:300]}"
            return None

    # --- knobs ---------------------------------------------------------------------------------

    def state_knobs(self, base: Work) -> list[Knob]:
        """Finds the knobs of the verified state by trial (see the module doc). The first
        dimension of the inputs is tried as the batch first; where it is not one (an unbatched
        input, whose first dimension is channels), it joins the other sizes of its value."""
        slots = state_slots(self.state)
        batch = _batch_group(slots)
        knobs: list[Knob] = []
        if batch:
            work = self._trial(batch, base)
            if work is not None:
                knobs.append(_knob(batch, base, work, 2))
            else:
                slots = [replace(s, role="channels") if s in batch else s for s in slots]
                batch = ()
        for group in _value_groups([s for s in slots if s not in batch]):
            knobs += self._knobs_of(group, base)
        return knobs

    def _trial(self, slots: tuple[Slot, ...], base: Work, factor: int = 2) -> Work | None:
        state = with_values(self.state, {s: s.value * factor for s in slots})
        return self._try(self.run_state, state, self.trial_device)

    def _knobs_of(self, group: tuple[Slot, ...], base: Work, work: Work | None = None, depth: int = 0) -> list[Knob]:
        """The knobs within a group of slots of one value: the group itself when it runs
        doubled and no part of it is a knob of its own; its parts otherwise (``work``: the
        group's trial, when made already)."""
        work = work or self._trial(group, base)
        if work is None:
            parts = _split(group)
            if len(parts) < 2 or depth >= MAX_SPLIT_DEPTH:
                return []
            out = []
            for part in parts:
                out += self._knobs_of(part, base, None, depth + 1)
            return out
        # Equal sizes need not be one size: the dimension a layer reads (the last one for
        # Linear and norms, the second for convolutions) with the constructor's sizes, and the
        # rest apart, when both run doubled on their own.
        if depth < MAX_SPLIT_DEPTH and self.trials < DISCOVERY_TRIALS:
            for core in _cores(group):
                rest = tuple(s for s in group if s not in core)
                if not core or not rest:
                    continue
                core_work = self._trial(core, base)
                if core_work is None:
                    continue
                rest_work = self._trial(rest, base)
                if rest_work is None:
                    continue
                return self._knobs_of(core, base, core_work, depth + 1) + self._knobs_of(
                    rest, base, rest_work, depth + 1
                )
        return [_knob(group, base, work, 2)]

    def constant_knobs(self, base: Work) -> list[Knob]:
        """Knobs of a program whose input functions read module-level integer constants."""
        consts = self.read_constants()
        knobs = []
        for name, value in consts.items():
            if value < 1 or structural_name(name, short=False) and role_of_name(name) != "batch":
                continue
            slot = Slot("constant", 0, (), value, name, role_of_name(name))
            work = self._try(self.run_text, K.set_constants(self.emitted, {name: value * 2}), self.trial_device)
            if work is not None:
                knob = _knob((slot,), base, work, 2)
                knob.name = name
                knobs.append(knob)
        return knobs

    def read_constants(self) -> dict[str, int]:
        """The module-level integer constants the program's own input functions read, when the
        verified program is the program as written."""
        if self.emitted != self.probe.text:
            return {}
        consts = K.int_constants(self.emitted)
        read: set[str] = set()
        for fn in ("get_inputs", "get_init_inputs"):
            f = self.probe.ns.get(fn)
            code = getattr(f, "__code__", None)
            stack = [code] if code is not None else []
            while stack:
                c = stack.pop()
                read.update(c.co_names)
                stack.extend(k for k in c.co_consts if hasattr(k, "co_names"))
        return {k: v for k, v in consts.items() if k in read}

    # --- the program ------------------------------------------------------------------------------

    def name_knobs(self, knobs: list[Knob]) -> None:
        taken = K.taken_names(self.emitted)
        for knob in knobs:
            want = _preferred_name(knob)
            name, n = want, 2
            while name in taken or not name.isidentifier():
                name, n = f"{want}{n}", n + 1
            taken.add(name)
            knob.name = name

    def program_of(self, knobs: list[Knob]) -> str:
        """The verified program with the knobs as module-level constants at their base values."""
        if knobs and knobs[0].slots[0].side == "constant":
            return self.emitted
        assignment: dict[Slot, Any] = {}
        for knob in knobs:
            for s in knob.slots:
                assignment[s] = NamedValue(knob.name)
        symbolic = self._symbolic(assignment)
        text = self.probe.emit(self.initial, symbolic, render_named, force=_sides(knobs))
        return insert_constants(text, {k.name: k.base for k in knobs})

    def _symbolic(self, assignment: dict[Slot, Any]):
        """The state with knob slots as names; tensor inputs holding one become ``NamedTensor``."""
        torch = self.torch
        originals = self._original_inputs()
        fwd = list(self.state[1])
        for j, a in enumerate(fwd):
            g = a.guess
            if isinstance(g, TensorGuess) and any(s.side == "input" and s.arg == j for s in assignment):
                fwd[j] = replace(a, guess=NamedTensor(g.shape, g.dtype, _make_of(g, originals, torch)))
            elif isinstance(g, SeqGuess) and any(s.side == "input" and s.arg == j for s in assignment):
                items = tuple(
                    NamedTensor(t.shape, t.dtype, _make_of(t, originals, torch)) if isinstance(t, TensorGuess) else t
                    for t in g.items
                )
                fwd[j] = replace(a, guess=SeqGuess(items, g.kind))
        return with_values((self.state[0], tuple(fwd)), assignment)

    def _original_inputs(self):
        try:
            return self.probe.original_inputs()
        except BaseException as exc:  # noqa: BLE001 - only used to draw similar values
            if type(exc).__name__ == "ProbeTimeout":
                raise
            return None

    # --- planning ---------------------------------------------------------------------------------

    def plan(self, knobs, start: dict[str, int], ref: dict[str, float], limit) -> dict[str, int]:
        """Doubles knobs from ``start`` (measured as ``ref``) while the prediction stays within
        ``limit(metrics)`` and below ``aim_ms``; halves them first while it is over the limit."""
        values = dict(start)
        predict = lambda v: _predict(knobs, values=v, start=start, ref=ref)  # noqa: E731
        for _ in range(64):
            m = predict(values)
            if limit(m):
                break
            shrinkable = [k for k in knobs if values[k.name] % 2 == 0 and values[k.name] >= 2 and _grows(k)]
            above = [k for k in shrinkable if values[k.name] > k.base]
            shrinkable = above or shrinkable
            if not shrinkable:
                break
            k = max(shrinkable, key=lambda k: (math.log(values[k.name] / k.typical()), -knobs.index(k)))
            values[k.name] //= 2
        for _ in range(128):
            m = predict(values)
            if _est_ms(m) >= self.targets.aim_ms and self.targets.reached_by(m):
                break
            options = []
            for k in knobs:
                if not _grows(k) or values[k.name] * 2 > k.cap():
                    continue
                trial = dict(values, **{k.name: values[k.name] * 2})
                if limit(predict(trial)):
                    options.append(k)
            if not options:
                break
            k = min(options, key=lambda k: (math.log(values[k.name] / k.typical()), knobs.index(k)))
            values[k.name] *= 2
        return values

    def gpu_limit(self, m: dict[str, float]) -> bool:
        return _est_ms(m) <= self.targets.max_ms and m["peak"] <= self.targets.max_memory_mb * 2**20

    def cpu_limit(self, m: dict[str, float], mflop: float, mb: float) -> bool:
        return m["flops"] <= mflop * 1e6 and m["peak"] <= mb * 2**20 and m["bytes"] <= mb * 2**20

    # --- the whole step ----------------------------------------------------------------------------

    def size(self) -> dict[str, Any]:
        """Sizes the program; returns the result fields (see ``result.empty_result``)."""
        self.last_error = ""
        # The repair search's successful attempt measured the program at the probe's sizes on
        # the CPU; trials on meta start from a measure on meta (fused CPU kernels count apart).
        base = self.probe.last_work if self.trial_device == "cpu" else None
        base = base or self._try(self.run_state, self.state, self.trial_device)
        if base is None and self.trial_device == "meta":
            # Meta cannot run it: trials (and the target search) on the CPU.
            self.meta_works = False
            self.trial_device = "cpu"
            base = self.probe.last_work or self._try(self.run_state, self.state, "cpu")
        if base is None:
            raise Unsizable("trial_failed", f"the verified program does not run again: {self.last_error}")
        if base.kernels == 0:
            raise Unsizable("no_work", "the forward runs no kernel (it returns its input or a constant)")
        knobs = self.constant_knobs(base) or self.state_knobs(base)
        knobs = [k for k in knobs if _grows(k)]
        if not knobs:
            raise Unsizable("no_size_knob", "no argument or input dimension changes the work")
        if not knobs[0].name:
            self.name_knobs(knobs)
        text = self.program_of(knobs)
        start = {k.name: k.base for k in knobs}
        ref = _metrics(base)
        target, work, device = self.target(knobs, text, start, ref)
        moderate, confirmed = self.confirm(knobs, text, start, ref)
        alternates = self.alternates(knobs, text, target, moderate)
        if len(alternates) < 2:
            raise Unsizable("few_alternates", f"only {len(alternates)} alternate size set(s) run")
        reached = self.targets.reached(work)
        size_reason = (
            None
            if reached
            else f"below_target: {work.flops / 1e9:.3g} GFLOP and {work.bytes / 2**20:.3g} MB at the largest "
            f"sizes the program allows"
        )
        out = {
            "size_status": "sized" if reached else "below_target",
            "size_reason": size_reason,
            "sized_program": K.set_constants(text, target),
            "sizes": json.dumps(target),
            "alt_sizes": json.dumps(alternates),
            "sized_on": device,
            "confirmed": confirmed,
            "confirmed_program": K.set_constants(text, moderate),
        }
        out.update(work_fields(work))
        return out

    def target(self, knobs, text, start, ref):
        """The target sizes, checked on meta (on the CPU where meta cannot run the program): the
        plan is run, and corrected from what it measured; a knob at whose size the program
        fails is halved and never grows past that again."""
        values = self.plan(knobs, start, ref, self.gpu_limit)
        best = None  # the last size set that ran within the limits, and its work
        for _ in range(5):
            work = self._try(self.run_text, K.set_constants(text, values), "meta")
            if work is None:
                if self.meta_works is None:
                    self.meta_works = self._try(self.run_text, K.set_constants(text, start), "meta") is not None
                if not self.meta_works:
                    return self.cpu_target(knobs, text, start, ref)
                grown = [k for k in knobs if values[k.name] > k.base]
                if not grown:
                    break
                k = max(grown, key=lambda k: values[k.name] / k.base)
                k.limit = max(k.base, values[k.name] // 2)
                values = dict(values, **{k.name: k.limit})
                continue
            self.meta_works = True
            m = _metrics(work)
            if self.gpu_limit(m):
                best = (dict(values), work)
                if _est_ms(m) >= self.targets.aim_ms / 2 and self.targets.reached(work):
                    break
            again = self.plan(knobs, values, m, self.gpu_limit)
            if again == values:
                break
            values = again
        if best is None:
            raise Unsizable("meta_failed", f"no size near the target runs on meta: {self.last_error}")
        return best[0], best[1], "meta"

    def cpu_target(self, knobs, text, start, ref):
        """Where meta cannot run the program: the same search on the CPU, up to the work target
        (``min_gflop``/``min_mb``) and ``cpu_max_mflop``."""
        t = self.targets
        aim = replace(t, aim_ms=float("inf"))
        mflop = min(t.cpu_max_mflop, t.min_gflop * 1e3 * 1.5)
        limit = lambda m: self.cpu_limit(m, mflop, 4 * t.min_mb) and self.gpu_limit(m)  # noqa: E731
        saved, self.targets = self.targets, aim
        try:
            values = self.plan(knobs, start, ref, limit)
        finally:
            self.targets = saved
        for _ in range(3):
            work = self._try(self.run_text, K.set_constants(text, values), "cpu")
            if work is not None:
                return values, work, "cpu"
            grown = [k for k in knobs if values[k.name] > k.base]
            if not grown:
                break
            k = max(grown, key=lambda k: values[k.name] / k.base)
            values[k.name] //= 2
        raise Unsizable("meta_unsupported", f"meta cannot run the program and the CPU search failed: {self.last_error}")

    def confirm(self, knobs, text, start, ref):
        """Runs the rewritten program for real on the CPU, twice from scratch, at a moderate
        size; returns the size set and the first run (outputs, model, forward ms)."""
        from .execute import same_outputs

        t = self.targets
        moderate = self.plan(knobs, start, ref, lambda m: self.cpu_limit(m, t.confirm_mflop, t.confirm_mb))
        candidates = [moderate] + ([start] if start != moderate else [])
        for values in candidates:
            sized = K.set_constants(text, values)
            try:
                first = self.run_text(sized, "cpu", count=False)
                built = self.last_built
                second = self.run_text(sized, "cpu", count=False)
            except (SizingTimeout, Unsizable):
                raise
            except BaseException as exc:  # noqa: BLE001
                if type(exc).__name__ == "ProbeTimeout":
                    raise
                self.last_error = f"{type(exc).__name__}: {str(exc)[:300]}"
                continue
            if not same_outputs(first[0], second[0], self.torch):
                raise Unsizable("nondeterministic", f"two CPU runs at {values} gave different outputs")
            # The operators the program dispatches are recorded on this run (execute.aten_ops).
            self.probe.fresh = built
            return values, (first[0], first[2], first[3])
        raise Unsizable("confirm_failed", f"the rewritten program does not run on the CPU: {self.last_error}")

    def alternates(self, knobs, text, target, moderate) -> list[dict[str, int]]:
        """Size sets other than the target that run: the confirmed moderate set, then sets with
        other values near it (batch minus one, three quarters, half), each run on the CPU (on
        meta where building the model on the CPU is slow: the check is that the shapes fit);
        at most three in all. Small sets keep the evaluator's hidden-shape check cheap; their
        odd values catch kernels that assume multiples of a block size."""
        out = [moderate] if moderate != target else []
        for values in _variants(knobs, moderate):
            if len(out) >= 3 or values in out or values == target:
                continue
            try:
                self.run_text(K.set_constants(text, values), self.trial_device, count=False)
            except (SizingTimeout, Unsizable):
                raise
            except BaseException as exc:  # noqa: BLE001 - a variant that fails is not an alternate
                if type(exc).__name__ == "ProbeTimeout":
                    raise
                continue
            out.append(values)
        return out


def work_fields(work: Work) -> dict[str, Any]:
    """The row's estimate fields for measured work."""
    return {
        "est_flops": work.flops,
        "est_bytes": work.bytes,
        "param_bytes": int(work.param_bytes),
        "peak_bytes": int(work.peak_bytes),
        "est_ms": work.eager_ms(),
    }


# --- helpers ----------------------------------------------------------------------------------


def _knob(slots: tuple[Slot, ...], base: Work, work: Work, factor: float) -> Knob:
    a, b = _metrics(base), _metrics(work)
    return Knob(slots, slots[0].value, _role(slots), {m: _exponent(a[m], b[m], factor) for m in METRICS})


def _grows(k: Knob) -> bool:
    """True when doubling the knob adds work (a size that changes nothing is not a knob)."""
    return max(k.exps.get("flops", 0.0), k.exps.get("bytes", 0.0)) > 0.05


def _role(slots) -> str:
    roles = [s.role for s in slots]
    if "batch" in roles:
        return "batch"
    named = [s.role for s in slots if s.side in ("init", "constant") or s.name]
    for r in ("channels", "features", "seq", "spatial", "depth"):
        if r in named:
            return r
    for r in ("spatial", "seq", "depth", "channels", "features"):
        if r in roles:
            return r
    return "value"


def _batch_group(slots: list[Slot]) -> tuple[Slot, ...]:
    """The first dimensions of the tensor inputs that have the first one's size."""
    batch = [s for s in slots if s.role == "batch"]
    return tuple(s for s in batch if s.value == batch[0].value) if batch else ()


def _value_groups(slots: list[Slot]) -> list[tuple[Slot, ...]]:
    """Slots of equal value together, the largest groups first."""
    by_value: dict[int, list[Slot]] = {}
    for s in slots:
        by_value.setdefault(s.value, []).append(s)
    return [tuple(m) for _, m in sorted(by_value.items(), key=lambda kv: (-len(kv[1]), -kv[0]))]


def _split(group: tuple[Slot, ...]) -> list[tuple[Slot, ...]]:
    """A group's parts by role: spatial, sequence, depth, then everything else (last)."""
    parts = []
    rest = list(group)
    for role in ("spatial", "seq", "depth", "batch"):
        part = tuple(s for s in rest if s.role == role and s.side == "input" and s.name is None)
        if part and len(part) < len(group):
            parts.append(part)
            rest = [s for s in rest if s not in part]
    if rest and parts:
        parts.append(tuple(rest))
    return parts


def _cores(group: tuple[Slot, ...]) -> list[tuple[Slot, ...]]:
    """Ways to cut a group that runs doubled in two, the likeliest first: the named sizes with
    the last dimension of each tensor (features), with the second (channels); the spatial, the
    sequence dimensions alone."""
    named = tuple(s for s in group if s.side != "input" or s.name is not None)
    dims = [s for s in group if s.side == "input" and s.name is None]
    if not named and len({s.role for s in dims}) == 1:
        return []  # one role (an image's height and width): one size
    # Without a named size, a last or second dimension is a size of its own only where it is
    # not one of the image's (height and width stay one size).
    last = tuple(s for s in dims if s.path[-1] == s.rank - 1 and (named or s.role != "spatial"))
    second = tuple(s for s in dims if s.path[-1] == 1 and s.rank >= 3 and (named or s.role != "spatial"))
    out = []
    spatial = tuple(s for s in dims if s.role == "spatial")
    seq = tuple(s for s in dims if s.role == "seq")
    for core in (named + last if last else (), named + second if second else (), spatial, seq):
        if core and len(core) < len(group) and core not in out:
            out.append(core)
    return out


def _sides(knobs: list[Knob]) -> set[str]:
    return {s.side for k in knobs for s in k.slots}


def _preferred_name(knob: Knob) -> str:
    named = [s.name for s in knob.slots if s.name and s.name.isidentifier() and s.name != "self"]
    if knob.role == "batch":
        return "batch_size"
    if named:
        return named[0]
    if knob.role == "spatial":
        dims = {s.path[-1] for s in knob.slots if s.side == "input"}
        ranks = {len(dims)}
        if dims == {2} and ranks:
            return "height"
        if dims == {3}:
            return "width"
        return "size"
    return {"seq": "seq_len", "channels": "channels", "features": "dim", "depth": "depth"}.get(knob.role, "size")


def _make_of(g: TensorGuess, originals, torch) -> str:
    if g.orig is not None and originals is not None:
        try:
            from .guesses import lookup

            return _maker(lookup(originals, g.orig), torch)
        except (LookupError, TypeError):
            pass
    if g.dtype in FLOAT_DTYPES:
        return "rand"
    return "ones"


def _predict(knobs, values, start, ref) -> dict[str, float]:
    out = {}
    for m, m0 in ref.items():
        x = m0
        if m in METRICS:
            for k in knobs:
                x *= (values[k.name] / start[k.name]) ** k.exps.get(m, 0.0)
        out[m] = x
    return out


def _variants(knobs, target: dict[str, int]) -> list[dict[str, int]]:
    """Size sets near ``target``: batch minus one and three quarters of each other knob; half
    of every knob; only the batch halved."""
    odd, half, batch_only = dict(target), dict(target), dict(target)
    for k in knobs:
        v = target[k.name]
        if k.role == "batch":
            odd[k.name] = v - 1 if v >= 3 else v + 1
            batch_only[k.name] = max(1, v // 2)
        elif v % 4 == 0 and v >= 8:
            odd[k.name] = v * 3 // 4
        if v % 2 == 0:
            half[k.name] = v // 2
    return [odd, half, batch_only]


def size_program(probe, initial, state, emitted: str, sizing: dict[str, Any], attempt_s: float) -> dict[str, Any]:
    """Sizes a repaired program within its time budget (``sizing["budget_s"]``, and what is left
    of the module's own limit once the time to verify it without sizing, about three times its
    last attempt ``attempt_s``, is set aside); returns the result fields, with ``confirmed``
    (outputs, model and forward ms of the confirming run) and ``confirmed_program`` (the program
    at the sizes it confirmed) when it is sized. Never raises for the
    program's sake: whatever goes wrong makes the row ``unsizable`` with the reason."""
    import signal

    targets = Targets.from_request(sizing)
    left, _ = signal.getitimer(signal.ITIMER_REAL)
    reserve = 1.0 + 3.0 * attempt_s
    budget = min(targets.budget_s, left - reserve) if left > 0 else targets.budget_s
    out: dict[str, Any] = {"size_status": "unsizable", "size_trials": 0}
    if budget < 0.5:
        out["size_reason"] = "timeout: no time left after the repair search"
        return out
    sizer = Sizer(probe, initial, state, emitted, replace(targets, budget_s=budget))
    previous = signal.getsignal(signal.SIGALRM)

    def on_alarm(signum, frame):
        raise SizingTimeout()

    started = time.monotonic()
    signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, budget)
    try:
        out.update(sizer.size())
    except Unsizable as exc:
        out["size_reason"] = str(exc)[:2000]
    except SizingTimeout:
        out["size_reason"] = f"timeout: sizing ran past its {budget:.1f} s"
    except Exception as exc:  # noqa: BLE001 - a sizing bug must not lose the probe's result
        out["size_reason"] = f"error: {type(exc).__name__}: {exc}"[:2000]
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if left > 0:
            signal.setitimer(signal.ITIMER_REAL, max(0.001, left - (time.monotonic() - started)))
    out["size_trials"] = sizer.trials
    return out
