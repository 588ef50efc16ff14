"""Sizing: choose input sizes so that one forward call does real work on the GPU, and write them
KernelBench-style as module-level constants with alternate valid size sets.

The repair search leaves a program that runs at the probe's small sizes (``[4, 4, 4, 4]``): too
little work for a GPU timing to mean anything. This step, run in the same sandboxed child right
after verification, works on the verified state (``init``, ``forward`` guesses):

1. **Knobs.** Every integer the program exposes is a *slot*: the constructor's integer arguments
   (not those whose name says structure: kernel, stride, heads, layers, ...), each dimension of
   each tensor input, integer forward arguments. Slots are grouped (the batch dimensions
   together, or, where that fails, those of all inputs but one or two: an input can be one
   per batch; then equal values together; two groups that fail alone, one of twice the other's
   value, together) and each group is doubled in one trial run; a group
   that still runs is a *knob*, one that fails is split by role (spatial, sequence, the rest)
   and those parts tried. A program whose own ``get_inputs()``/``get_init_inputs()`` read
   module-level integer constants keeps them: those constants are its knobs. Each trial is
   measured (:mod:`.work`), so every knob comes with the exponent of each measure (FLOPs,
   bytes, peak memory, time) in its size. Trials run on the CPU while the program is small, on
   the ``meta`` device when it is not (a model whose constructor meta cannot run is built on
   the CPU, once per set of constructor arguments, and moved to meta).
2. **Program.** The knobs become module-level constants (``batch_size = ...``, the constructor
   parameter's name, ``channels``, ``seq_len``, ``height``...) that the rewritten
   ``get_inputs()``/``get_init_inputs()`` read: the KernelBench format, which the evaluator
   changes with :func:`ksmith.shared.constants.set_constants`.
3. **Target.** From the exponents, knobs are doubled one at a time (the one furthest below its
   role's typical size first) until the estimated eager time on the reference GPU reaches
   ``aim_ms`` and its arithmetic or traffic alone half of it (launches aside: a whole model of
   hundreds of kernels is launch-bound at small sizes), staying under ``max_ms``,
   ``max_memory_mb`` and each role's cap; the choice is run on ``meta`` (nothing is computed or
   allocated) and corrected from what it measured. A structural size (a width, channels: the
   ``channels``, ``features`` and ``value`` roles) whose value is the repository's
   (:mod:`.provenance`: a call site, a default, a model's observed configuration) grows at most
   ``max_structural_scale`` times; the batch, sequences and images grow to their role's cap.
4. **Confirmation.** The rewritten program runs for real on the CPU, twice, at a moderate size
   (under ``confirm_mflop`` and ``confirm_mb``), from scratch as the evaluator would: it must
   run and give the same outputs.
5. **Alternates.** The moderate set plus sets near the target with other values (batch minus
   one, three quarters of a dimension, half; where those break a divisibility, the same kept
   multiples of the power of two that divides the knob's base size), each checked on ``meta``,
   for the evaluator's hidden-shape check.

Outcome (``size_status``): ``sized`` (work target reached, at least two alternates),
``below_target`` (as large as the program allows, below the target), ``unsizable`` (the program
stays as verified; ``too_small`` among its reasons: the target is out of reach within
``max_structural_scale`` of the repository's sizes, so no plausible size gives the class
GPU-meaningful work); ``size_reason_code`` (a :class:`SizeReason`) and ``size_reason`` (in
words) say why.
Programs whose operators have no ``meta`` implementation are sized with the same search on the
CPU, capped at ``cpu_max_mflop``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import itertools
import json
import math
import time
from copy import deepcopy
from dataclasses import replace
from typing import Any

from ..shared import constants as K
from ..shared.outputs import same_values
from . import DEFAULTS
from . import guesses as G
from .guesses import FLOAT_DTYPES, INT_DTYPES, SeqGuess, TensorGuess
from .loading import ProbeTimeout, exec_program, seed_all, split_init
from .provenance import Provenance
from .sized_program import NamedTensor, NamedValue, insert_constants, render_named, tensor_maker
from .slots import ROLES, Slot, role_of_name, state_slots, structural_name, with_values
from .work import BYTES_PER_S, FLOPS, HOST_US, LAUNCH_US, Work, flatten_outputs, make_mode, measure

METRICS = ("flops", "bytes", "peak", "kernels")
#: Programs whose repaired forward does at most this many FLOPs, with at most this many bytes of
#: parameters and tensors, are tried on the CPU; larger ones on meta.
CPU_TRIAL_FLOPS = 5e7
CPU_TRIAL_BYTES = 64 * 2**20
#: Trial runs the knob search may make before it stops cutting groups finer.
DISCOVERY_TRIALS = 12
#: How many times a group is cut.
MAX_SPLIT_DEPTH = 3
#: The most batched inputs whose subsets are tried as the batch (`_batch_subsets`).
MAX_BATCH_INPUTS = 5
#: The roles of structural sizes, which grow at most ``max_structural_scale`` times from the
#: repository's value.
STRUCTURAL_ROLES = ("channels", "features", "value")


class SizingTimeout(BaseException):
    """The sizing step ran out of its time budget."""


class SizeReason(enum.Enum):
    """Why a program is below its target or unsizable: ``SizeReason`` of ``ksmith_core``, the
    ``size_reason`` names of ``verdicts.json`` (tests on both sides check them)."""

    BELOW_TARGET = "below_target"
    NO_WORK = "no_work"
    NO_SIZE_KNOB = "no_size_knob"
    TRIAL_FAILED = "trial_failed"
    TRIAL_BUDGET = "trial_budget"
    META_FAILED = "meta_failed"
    META_UNSUPPORTED = "meta_unsupported"
    CONFIRM_FAILED = "confirm_failed"
    NONDETERMINISTIC = "nondeterministic"
    FEW_ALTERNATES = "few_alternates"
    TOO_SMALL = "too_small"
    TIMEOUT = "timeout"
    ERROR = "error"


class Unsizable(Exception):
    """The program cannot be sized, for ``reason``; ``message`` says how, in words."""

    def __init__(self, reason: SizeReason, message: str):
        super().__init__(f"{reason.value}: {message}")
        self.reason = reason
        self.message = message


def _why(reason: SizeReason, words: str) -> dict[str, str]:
    """The result fields saying why a program is not (fully) sized."""
    return {"size_reason_code": reason.value, "size_reason": words[:2000]}


#: The sizing defaults (``defaults.json``), the defaults of ``[probe.sizing]`` too.
_TARGETS = DEFAULTS["sizing"]


@dataclasses.dataclass(frozen=True)
class Targets:
    """What a sized program should do (the request's ``sizing`` object; ``enabled`` is the Rust
    side's: a request without ``sizing`` is not sized)."""

    min_gflop: float = _TARGETS["min_gflop"]
    min_mb: float = _TARGETS["min_mb"]
    aim_ms: float = _TARGETS["aim_ms"]
    max_ms: float = _TARGETS["max_ms"]
    max_memory_mb: float = _TARGETS["max_memory_mb"]
    confirm_mflop: float = _TARGETS["confirm_mflop"]
    confirm_mb: float = _TARGETS["confirm_mb"]
    cpu_max_mflop: float = _TARGETS["cpu_max_mflop"]
    max_trials: int = _TARGETS["max_trials"]
    budget_s: float = _TARGETS["budget_s"]
    #: How many times a structural size of the repository's may grow (0: no bound).
    max_structural_scale: float = _TARGETS["max_structural_scale"]

    @classmethod
    def from_request(cls, obj: dict[str, Any] | None) -> Targets:
        obj = obj or {}
        fields = {f.name: f.type for f in dataclasses.fields(cls)}
        values: dict[str, Any] = {
            k: (int(v) if fields[k] == "int" else float(v)) for k, v in obj.items() if k in fields
        }
        return cls(**values)

    def reached(self, work: Work) -> bool:
        """The work target: enough arithmetic or enough traffic, within memory."""
        return self.reached_by({"flops": work.flops, "bytes": work.bytes, "peak": float(work.peak_bytes)})

    def reached_by(self, m: dict[str, float]) -> bool:
        """:meth:`reached` for measured or predicted totals (``flops``, ``bytes``, ``peak``)."""
        enough = m["flops"] >= self.min_gflop * 1e9 or m["bytes"] >= self.min_mb * 2**20
        return enough and m["peak"] <= self.max_memory_mb * 2**20


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
    #: The largest size it may grow to, for a structural size of the repository's
    #: (:meth:`Sizer.bound_knobs`); None: its role's cap.
    bound: int | None = None

    def typical(self) -> int:
        return ROLES[self.role][0]

    def cap_of_role(self) -> int:
        """The role's cap (at least the base), whatever the bound."""
        return max(ROLES[self.role][1], self.base)

    def cap(self) -> int:
        cap = self.cap_of_role()
        if self.bound is not None:
            cap = min(cap, self.bound)
        return cap if self.limit is None else min(cap, self.limit)


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


def _work_ms(m: dict[str, float]) -> float:
    """The arithmetic or traffic time alone, without launches and host time: what the GPU
    spends computing (a whole model of hundreds of small kernels is launch-bound at any size
    that fits a CPU, so its eager time says nothing about its work)."""
    return max(m["flops"] / FLOPS, m["bytes"] / BYTES_PER_S) * 1e3


def _aimed(m: dict[str, float], aim_ms: float) -> bool:
    """The eager time reaches ``aim_ms`` and the work alone half of it."""
    return _est_ms(m) >= aim_ms and _work_ms(m) >= aim_ms / 2


def _exponent(a: float, b: float, ratio: float) -> float:
    if a <= 0 or b <= 0 or ratio == 1:
        return 0.0
    return math.log(b / a) / math.log(ratio)


class Sizer:
    """Sizes one repaired program (see the module doc). ``probe`` is the ``execute.Probe`` that
    repaired it (its ``last_work``: the measure of the successful attempt), ``state`` its
    working state, ``emitted`` the repaired text."""

    def __init__(self, probe, initial, state, emitted: str, targets: Targets, provenance: Provenance | None = None):
        self.probe = probe
        self.provenance = provenance or Provenance()
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
        #: Models are built on the CPU and moved to meta for runs on meta (`_meta_model`).
        self.meta_via_cpu = False
        self.meta_models: dict[Any, Any] = {}
        #: The model and inputs of the last run (what `confirm` hands to the ATen recording).
        self.last_built: tuple[Any, Any] | None = None

    # --- runs --------------------------------------------------------------------------------

    def _tick(self) -> None:
        self.trials += 1
        if self.trials > self.targets.max_trials:
            raise Unsizable(SizeReason.TRIAL_BUDGET, f"more than {self.targets.max_trials} trial runs")
        if time.monotonic() > self.deadline:
            raise SizingTimeout()

    def _measured(self, build, device: str, count: bool = True):
        """Runs ``build()`` (returns model and inputs) on ``device`` and one forward, measured
        (:func:`.work.measure`) when ``count``; returns outputs, work (or None), model and the
        forward's CPU time in ms."""

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
        if device == "meta" and self.meta_via_cpu:

            def build():
                model = self._meta_model(("state", state[0]), lambda: probe.build(state)[0])
                orig = probe.original_inputs()
                return model, [G.materialize(a.guess, self.torch, probe.ns, orig) for a in state[1]]

            return self._measured(build, device)
        return self._measured(lambda: probe.build(state), device)

    def _meta_model(self, key, make):
        """A copy of the model ``make()`` builds on the CPU, moved to meta, built once per
        ``key`` (the constructor's arguments): for a constructor meta cannot run (a drop-path
        schedule read with ``.item()``, as timm's models do) whose forward it can."""
        if key not in self.meta_models:
            with self.torch.device("cpu"):
                self.meta_models[key] = make().to("meta")
        return deepcopy(self.meta_models[key])

    def _switch_to_meta_via_cpu(self, run) -> bool:
        """After a run on meta failed on a meta tensor's value: True when ``run()`` (the same
        run again) works with models built on the CPU and moved to meta, which stays on (an
        operator with no meta kernel says "Meta tensors": Whisper's ``to_sparse``)."""
        if self.meta_via_cpu or "meta tensor" not in self.last_error.lower():
            return False
        self.meta_via_cpu = True
        if run() is None:
            self.meta_via_cpu = False
        return self.meta_via_cpu

    def run_text(self, text: str, device: str, count: bool = True):
        """Runs a program text from scratch (exec, ``get_init_inputs``, ``Model``, ``get_inputs``)
        as the evaluator would, and its forward (measured when ``count``)."""

        self._tick()

        def build():
            ns = exec_program(text, "<ksmith-sized-program>")
            args = split_init(ns["get_init_inputs"]())
            if device == "meta" and self.meta_via_cpu:
                model = self._meta_model(("text", repr(args)), lambda: ns["Model"](*args))
            else:
                model = ns["Model"](*args)
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
            if isinstance(exc, ProbeTimeout):
                raise
            self.last_error = f"{type(exc).__name__}: {str(exc)[:300]}"
            return None

    # --- knobs ---------------------------------------------------------------------------------

    def state_knobs(self, base: Work) -> list[Knob]:
        """Finds the knobs of the verified state by trial (see the module doc). The first
        dimension of the inputs is tried as the batch first; where it is not one (an unbatched
        input, whose first dimension is channels), it joins the other sizes of its value."""
        slots = state_slots(self.state, self.provenance)
        knobs: list[Knob] = []
        batch: tuple[Slot, ...] = ()
        for group in _batch_groups(slots):
            work = self._trial(group, base)
            if work is not None:
                knobs.append(_knob(group, base, work, 2))
                batch = group
                break
        # the batch dimensions of inputs left out of a batch that runs: one per batch, kept as
        # they are (doubled on their own they may run, but not with the batch grown)
        kept: tuple[Slot, ...] = ()
        if not batch:
            ran = [(g, w) for g in _batch_subsets(slots) if (w := self._trial(g, base)) is not None]
            if ran:
                # the batch is what the work scales with: of the subsets that run doubled, the one
                # that grows it most (a per-batch input left in can still run by broadcasting)
                group, work = max(ran, key=lambda gw: _growth(_knob(gw[0], base, gw[1], 2)))
                knobs.append(_knob(group, base, work, 2))
                batch = group
                kept = tuple(s for s in _first_batch(slots) if s not in group)
        if not batch:
            # no batch after all: a first dimension is channels, a vector's length its features
            slots = [
                replace(s, role="channels" if s.rank > 1 else "features") if s.role == "batch" else s for s in slots
            ]
        stuck: list[tuple[Slot, ...]] = []
        for group in _value_groups([s for s in slots if s not in batch and s not in kept]):
            found = self._knobs_of(group, base)
            knobs += found
            if not found:
                stuck.append(group)
        # Sizes tied by a ratio (an input twice as long as a context a stride-2 convolution
        # halves it to: whisper's mel frames and `n_ctx`) run only doubled together.
        for group in stuck:
            twice = next((g for g in stuck if g[0].value == 2 * group[0].value), None)
            if twice is not None and self.trials < self.targets.max_trials // 2:
                knobs += self._knobs_of(group + twice, base)
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
                # a size tied to the knob's by a whole ratio is written as that multiple of it
                tied = s.value > knob.base and s.value % knob.base == 0
                assignment[s] = NamedValue(knob.name, s.value // knob.base if tied else 1)
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
            if isinstance(exc, ProbeTimeout):
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
            if _aimed(m, self.targets.aim_ms) and self.targets.reached_by(m):
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
            run = lambda: self._try(self.run_state, self.state, "meta")  # noqa: E731
            if self._switch_to_meta_via_cpu(run):
                base = run()
        if base is None and self.trial_device == "meta":
            # Meta cannot run it: trials (and the target search) on the CPU.
            self.meta_works = False
            self.trial_device = "cpu"
            base = self.probe.last_work or self._try(self.run_state, self.state, "cpu")
        if base is None:
            raise Unsizable(SizeReason.TRIAL_FAILED, f"the verified program does not run again: {self.last_error}")
        if base.kernels == 0:
            raise Unsizable(SizeReason.NO_WORK, "the forward runs no kernel (it returns its input or a constant)")
        knobs = self.constant_knobs(base) or self.state_knobs(base)
        knobs = [k for k in knobs if _grows(k)]
        if not knobs:
            raise Unsizable(SizeReason.NO_SIZE_KNOB, "no argument or input dimension changes the work")
        self.bound_knobs(knobs)
        if not knobs[0].name:
            self.name_knobs(knobs)
        text = self.program_of(knobs)
        start = {k.name: k.base for k in knobs}
        ref = _metrics(base)
        target, work, device = self.target(knobs, text, start, ref)
        if device == "meta":  # on the CPU, cpu_max_mflop holds the sizes before any bound
            self.check_bounds(knobs, target, work)
        moderate, confirmed = self.confirm(knobs, text, start, ref)
        alternates = self.alternates(knobs, text, target, moderate)
        if len(alternates) < 2:
            raise Unsizable(SizeReason.FEW_ALTERNATES, f"only {len(alternates)} alternate size set(s) run")
        reached = self.targets.reached(work)
        out: dict[str, Any] = {
            "size_status": "sized" if reached else "below_target",
            "sized_program": K.set_constants(text, target),
            "sizes": json.dumps(target),
            "alt_sizes": json.dumps(alternates),
            "sized_on": device,
            "confirmed": confirmed,
            "confirmed_program": K.set_constants(text, moderate),
        }
        if not reached:
            out.update(
                _why(
                    SizeReason.BELOW_TARGET,
                    f"{work.flops / 1e9:.3g} GFLOP and {work.bytes / 2**20:.3g} MB at the largest sizes "
                    "the program allows",
                )
            )
        out.update(work_fields(work))
        return out

    def bound_knobs(self, knobs: list[Knob]) -> None:
        """Bounds each structural knob holding a size of the repository's (a slot whose value
        is, :mod:`.provenance`) to ``max_structural_scale`` times its value."""
        factor = self.targets.max_structural_scale
        if factor <= 0:
            return
        for k in knobs:
            if k.role in STRUCTURAL_ROLES and any(s.repository for s in k.slots):
                k.bound = max(k.base, int(k.base * factor))

    def check_bounds(self, knobs: list[Knob], target: dict[str, int], work: Work) -> None:
        """Raises ``too_small`` when a bounded knob is at its bound and the target sizes miss
        the target that :meth:`target` accepts (the work target, and half of ``aim_ms`` with
        half of that in work alone): the class does GPU-meaningful work only at sizes its
        repository never uses (a 16-wide time embedding scaled a thousandfold)."""
        held = [k for k in knobs if k.bound is not None and target[k.name] * 2 > k.bound and k.bound < k.cap_of_role()]
        m = _metrics(work)
        t = self.targets
        if not held or (t.reached(work) and _aimed(m, t.aim_ms / 2)):
            return
        sizes = ", ".join(f"{k.name} {k.base} -> {target[k.name]}" for k in held)
        raise Unsizable(
            SizeReason.TOO_SMALL,
            f"reaches {_work_ms(m) * 1e3:.3g} us of work and {_est_ms(m) * 1e3:.3g} us in eager mode at most "
            f"({work.flops / 1e9:.3g} GFLOP, {work.bytes / 2**20:.3g} MB; the target is {t.min_gflop:g} GFLOP "
            f"or {t.min_mb:g} MB and {t.aim_ms / 2 * 1e3:g} us) within {t.max_structural_scale:g}x of its "
            f"repository's sizes ({sizes})",
        )

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
                    run = lambda: self._try(self.run_text, K.set_constants(text, start), "meta")  # noqa: E731
                    self.meta_works = run() is not None or self._switch_to_meta_via_cpu(run)
                    if self.meta_via_cpu:
                        continue  # the same sizes again, built on the CPU
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
                if _aimed(m, self.targets.aim_ms / 2) and self.targets.reached(work):
                    break
            again = self.plan(knobs, values, m, self.gpu_limit)
            if again == values:
                break
            values = again
        if best is None:
            raise Unsizable(SizeReason.META_FAILED, f"no size near the target runs on meta: {self.last_error}")
        return best[0], best[1], "meta"

    def cpu_target(self, knobs, text, start, ref):
        """Where meta cannot run the program: the same search on the CPU, up to the work target
        (``min_gflop``/``min_mb``) and ``cpu_max_mflop``; a size set that fails is retried with
        every size the plan halved below its verified value (the batch aside) back at that
        value, else with the most grown knob halved."""
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
            # A size the plan halved below the verified one may break the program (a side
            # four downsamplings need): back to the verified size, the batch takes the cut.
            shrunk = [k for k in knobs if k.role != "batch" and values[k.name] < k.base]
            if shrunk:
                values.update({k.name: k.base for k in shrunk})
                continue
            grown = [k for k in knobs if values[k.name] > k.base]
            if not grown:
                break
            k = max(grown, key=lambda k: values[k.name] / k.base)
            values[k.name] //= 2
        raise Unsizable(
            SizeReason.META_UNSUPPORTED, f"meta cannot run the program and the CPU search failed: {self.last_error}"
        )

    def confirm(self, knobs, text, start, ref):
        """Runs the rewritten program for real on the CPU, twice from scratch, at a moderate
        size; returns the size set and the first run (outputs, model, forward ms)."""
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
                if isinstance(exc, ProbeTimeout):
                    raise
                self.last_error = f"{type(exc).__name__}: {str(exc)[:300]}"
                continue
            if not same_values(first[0], second[0]):
                raise Unsizable(SizeReason.NONDETERMINISTIC, f"two CPU runs at {values} gave different outputs")
            # The operators the program dispatches are recorded on this run (execute.aten_ops).
            self.probe.fresh = built
            return values, (first[0], first[2], first[3])
        raise Unsizable(SizeReason.CONFIRM_FAILED, f"the rewritten program does not run on the CPU: {self.last_error}")

    def alternates(self, knobs, text, target, moderate) -> list[dict[str, int]]:
        """Size sets other than the target that run: the confirmed moderate set, then sets with
        other values near it (batch minus one, three quarters, half; then, where those fail,
        the same kept multiples of each knob's divisor), each run on the CPU (on meta where
        building the model on the CPU is slow: the check is that the shapes fit); at most three
        in all. Small sets keep the evaluator's hidden-shape check cheap; their
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
                if isinstance(exc, ProbeTimeout):
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


def _growth(k: Knob) -> float:
    """How much doubling the knob adds: its larger exponent of FLOPs and bytes."""
    return max(k.exps.get("flops", 0.0), k.exps.get("bytes", 0.0))


def _grows(k: Knob) -> bool:
    """True when doubling the knob adds work (a size that changes nothing is not a knob)."""
    return _growth(k) > 0.05


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


def _first_batch(slots: list[Slot]) -> tuple[Slot, ...]:
    """The first dimensions of the tensor inputs that have the first one's size."""
    batch = [s for s in slots if s.role == "batch"]
    return tuple(s for s in batch if s.value == batch[0].value)


def _batch_groups(slots: list[Slot]) -> list[tuple[Slot, ...]]:
    """The batch to try, likeliest first: `_first_batch`, with the length of each 1-D input of
    that size (a time step or a class label per sample, as a U-Net's ``forward(x, time,
    classes)`` takes); then without the 1-D inputs."""
    first = _first_batch(slots)
    if not first:
        return []
    per_sample = tuple(
        s for s in slots if s.side == "input" and s.rank == 1 and s.path[-1:] == (0,) and s.value == first[0].value
    )
    return [first + per_sample, first] if per_sample else [first]


def _batch_subsets(slots: list[Slot]) -> list[tuple[Slot, ...]]:
    """When the whole batch does not run doubled: the batch of all inputs but one, then but two
    (at least two inputs left). An input can be one per batch while the others are per sample:
    SAM's mask decoder repeats its one image embedding for each prompt of the batch."""
    first = _first_batch(slots)
    if not 3 <= len(first) <= MAX_BATCH_INPUTS:
        return []
    out = []
    for left_out in (1, 2):
        for drop in itertools.combinations(range(len(first)), left_out):
            rest = tuple(s for i, s in enumerate(first) if i not in drop)
            if len(rest) >= 2:
                out.append(rest)
    return out


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

            return tensor_maker(lookup(originals, g.orig), torch)
        except (LookupError, TypeError):
            pass
    if g.dtype in FLOAT_DTYPES:
        return "rand"
    if g.dtype in INT_DTYPES:
        return f"randint:0:{g.high}"  # indices over the range the probe drew them from
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
    of every knob; only the batch halved; then the first two again with each knob kept a
    multiple of its divisor (:func:`_divisor`), for programs whose sizes must stay divisible
    (a U-Net's sides by ``2 ** levels``): the nearest multiple at or below, or one divisor up
    where that is the size itself or below the divisor; last, only the batch plus two (a
    model whose image size its constructor fixes has no other knob)."""
    odd, half, batch_only = dict(target), dict(target), dict(target)
    odd_kept, half_kept, batch_more = dict(target), dict(target), dict(target)
    for k in knobs:
        v = target[k.name]
        if k.role == "batch":
            odd[k.name] = odd_kept[k.name] = v - 1 if v >= 3 else v + 1
            batch_only[k.name] = max(1, v // 2)
            batch_more[k.name] = v + 2
        else:
            if v % 4 == 0 and v >= 8:
                odd[k.name] = v * 3 // 4
            d = _divisor(k.base)
            odd_kept[k.name] = _kept_multiple(v, d, 3, 4)
            half_kept[k.name] = _kept_multiple(v, d, 1, 2)
        if v % 2 == 0:
            half[k.name] = v // 2
            if k.role == "batch":
                half_kept[k.name] = v // 2
    return [odd, half, batch_only, odd_kept, half_kept, batch_more]


def _divisor(base: int) -> int:
    """The largest power of two that divides a knob's base size: the size the program was
    written with or the repair search settled on (raised to a multiple of 8 where a U-Net
    asserted it), so every multiple of it is as divisible as the base."""
    return base & -base if base > 0 else 1


def _kept_multiple(v: int, d: int, num: int, den: int) -> int:
    """The multiple of ``d`` at or below ``v * num / den``; ``v + d`` where that is ``v``
    itself or below ``d``."""
    near = (v * num // den) // d * d
    return near if d <= near != v else v + d


def size_program(
    probe,
    initial,
    state,
    emitted: str,
    sizing: dict[str, Any],
    attempt_s: float,
    provenance: Provenance | None = None,
) -> dict[str, Any]:
    """Sizes a repaired program within its time budget (``sizing["budget_s"]``, and what is left
    of the module's own limit once the time to verify it without sizing, about three times its
    last attempt ``attempt_s``, is set aside); returns the result fields, with ``confirmed``
    (outputs, model and forward ms of the confirming run) and ``confirmed_program`` (the program
    at the sizes it confirmed) when it is sized; ``provenance`` says which sizes are the
    repository's (none: all are the probe's). Never raises for the
    program's sake: whatever goes wrong makes the row ``unsizable`` with the reason."""
    import signal

    targets = Targets.from_request(sizing)
    left, _ = signal.getitimer(signal.ITIMER_REAL)
    reserve = 1.0 + 3.0 * attempt_s
    budget = min(targets.budget_s, left - reserve) if left > 0 else targets.budget_s
    out: dict[str, Any] = {"size_status": "unsizable", "size_trials": 0}
    if budget < 0.5:
        out.update(_why(SizeReason.TIMEOUT, "no time left after the repair search"))
        return out
    sizer = Sizer(probe, initial, state, emitted, replace(targets, budget_s=budget), provenance)
    previous = signal.getsignal(signal.SIGALRM)

    def on_alarm(signum, frame):
        raise SizingTimeout()

    started = time.monotonic()
    signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, budget)
    try:
        out.update(sizer.size())
    except Unsizable as exc:
        out.update(_why(exc.reason, exc.message))
    except SizingTimeout:
        out.update(_why(SizeReason.TIMEOUT, f"sizing ran past its {budget:.1f} s"))
    except Exception as exc:  # noqa: BLE001 - a sizing bug must not lose the probe's result
        out.update(_why(SizeReason.ERROR, f"{type(exc).__name__}: {exc}"))
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if left > 0:
            signal.setitimer(signal.ITIMER_REAL, max(0.001, left - (time.monotonic() - started)))
    out["size_trials"] = sizer.trials
    return out
