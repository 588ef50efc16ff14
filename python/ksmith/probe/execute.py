"""What the sandboxed child does with one program: run, repair, rewrite, verify.

1. ``exec`` the program text in a fresh namespace.
2. Build the first guesses from its own ``get_init_inputs()`` / ``get_inputs()`` (or from the
   signatures of ``Model.__init__`` / ``Model.forward`` when those fail); a parameter annotated
   with a configuration class of the program becomes that class's fields (:mod:`.config_args`).
3. Search: instantiate ``Model`` and call ``forward`` under ``torch.no_grad()``; on failure ask
   :mod:`.rules` for fixes and try them depth-first, never the same state twice, at most
   ``max_steps`` runs per generation; generation 1 and 2 restart with every tensor input 2-D
   and 3-D (paritybench's restarts). A path whose failure only grows is left (:func:`diverging`),
   and no attempt starts once the search has used its CPU budget (``repair_budget_s``: models
   with huge default configurations take seconds per attempt), scaled up for a model whose
   first attempt alone takes a large part of it (:func:`repair_budget`).
4. Write the guesses that worked back into the program text (:mod:`.program`); parameters the
   constructor leaves uninitialized are drawn instead (:mod:`.uninitialized`).
5. Verify: run the emitted program from scratch (a fresh ``exec`` of the new text), twice with
   the same seed; different outputs mean ``nondeterministic``.
6. Judge whether it can be a task (:mod:`.degenerate`): a forward that draws random numbers is
   ``nondeterministic``; one that writes its own parameters, a constant output, one that does
   not depend on the inputs or equals one of them is ``degenerate``. A forward that writes or
   draws only in training mode becomes a task built in eval mode (:mod:`.eval_mode`). One that
   runs here but that a GPU refuses (CPU tensors beside the device's, :mod:`.host_tensors`,
   checked at the probe's sizes) is ``degenerate`` too (``HostTensor``).
7. Record the ATen operators one more forward call dispatches (``aten_ops`` with counts,
   ``aten_trace`` in order, ``aten_calls`` the same calls with the attributes that decide their
   kernel, :mod:`.aten_calls`): what the module computes, for labels and dedup. ``aten_ops`` is
   ``None`` when that call failed, and ``{}`` when it dispatched nothing (an identity).

``get_init_inputs()`` returns the constructor's positional arguments (KernelBench's
``Model(*get_init_inputs())``, the evaluator's too); a repair that only runs with an argument
passed by name that cannot be put in position fails as ``InitContract``.
"""

from __future__ import annotations

import ast
import inspect
import json
import linecache
import re
import time
import traceback
from collections.abc import Collection
from copy import deepcopy
from dataclasses import dataclass, replace
from typing import Any

from ..shared.outputs import same_values
from . import DEFAULTS
from . import guesses as G
from .config_args import ConfigFieldError, collapse, expand, init_annotations, provenance_step
from .loading import ProbeTimeout, exec_program, rng_state, seed_all, set_rng_state, split_init
from .program import (
    InitContractError,
    Render,
    empty_marker,
    find_function,
    init_source,
    inputs_source,
    render_guess,
    replace_functions,
)
from .provenance import OBSERVE_BATCH, Provenance
from .result import empty_result
from .rules import Failure, propose
from .work import flatten_outputs

MESSAGE_LIMIT = 2000
OOM_RE = re.compile(r"can't allocate memory|out of memory|Cannot allocate memory|MemoryError|std::bad_alloc")


def failure_of(exc: BaseException, phase: str) -> Failure:
    """A :class:`Failure` from an exception, with the traceback's source lines as context.

    A failed ``assert`` says little by itself (``incorrect audio shape``, or nothing): its
    comparison is evaluated again in the frame that failed (:func:`assertion_values`) and what
    the two sides are is added to the message, for the rules to solve."""
    frames = traceback.extract_tb(exc.__traceback__)
    context = "\n".join(f.line or "" for f in frames[-6:])
    message = str(exc)
    if isinstance(exc, MemoryError) and not message:
        message = "MemoryError: cannot allocate memory"
    if isinstance(exc, AssertionError):
        values = assertion_values(exc)
        if values:
            message = f"{message[: MESSAGE_LIMIT - len(values) - 1]} {values}".strip()
    return Failure(phase, type(exc).__name__, message[:MESSAGE_LIMIT], context)


def _sizes(value) -> tuple[int, ...] | None:
    """An int or a sequence of ints (``torch.Size`` included) as a tuple, else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return (value,)
    if isinstance(value, (tuple, list)) and all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        return tuple(value)
    return None


def assertion_values(exc: AssertionError) -> str | None:
    """What the comparison of a failed one-line ``assert`` evaluates to, in the frame that raised
    it: ``[assert sizes (2, 4) == (4, 4)]`` for ``assert x.shape[1:] == self.pos.shape``,
    ``[assert divisible 4 % 8]`` for ``assert dim % heads == 0``; None when it is not such an
    assert or its sides cannot be evaluated again (the program runs in the sandbox: evaluating
    its own expressions again is running its own code)."""
    tb = exc.__traceback__
    if tb is None:
        return None
    while tb.tb_next is not None:
        tb = tb.tb_next
    frame = tb.tb_frame
    line = linecache.getline(frame.f_code.co_filename, tb.tb_lineno).strip()
    if not line.startswith("assert"):
        return None
    try:
        node = ast.parse(line).body[0]
    except SyntaxError:
        return None
    test = node.test if isinstance(node, ast.Assert) else None
    if not isinstance(test, ast.Compare) or len(test.ops) != 1 or not isinstance(test.ops[0], ast.Eq):
        return None

    def value(expr: ast.expr):
        code = compile(ast.Expression(expr), "<assert>", "eval")
        return eval(code, frame.f_globals, dict(frame.f_locals))  # noqa: S307 - the program's own code

    left, right = test.left, test.comparators[0]
    try:
        if (
            isinstance(left, ast.BinOp)
            and isinstance(left.op, ast.Mod)
            and isinstance(right, ast.Constant)
            and right.value == 0
        ):
            a, b = _sizes(value(left.left)), _sizes(value(left.right))
            if a and b and len(a) == len(b) == 1:
                return f"[assert divisible {a[0]} % {b[0]}]"
            return None
        a, b = _sizes(value(left)), _sizes(value(right))
    except Exception:  # noqa: BLE001 - a side that cannot be evaluated again says nothing
        return None
    if a is None or b is None:
        return None
    return f"[assert sizes ({', '.join(map(str, a))}) == ({', '.join(map(str, b))})]"


def _params(fn) -> list[tuple[str, str, Any]] | None:
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    out = []
    for i, p in enumerate(sig.parameters.values()):
        if i == 0 and p.name in ("self", "cls"):
            continue
        default = empty_marker() if p.default is inspect.Parameter.empty else p.default
        out.append((p.name, p.kind.name, default))
    return out


def _required(params) -> list[str]:
    return [
        name
        for name, kind, default in params or []
        if default is empty_marker() and kind in ("POSITIONAL_ONLY", "POSITIONAL_OR_KEYWORD", "KEYWORD_ONLY")
    ]


HISTORY_LIMIT = 64
#: A model whose constructor takes at least this much CPU time (s) is built once per set of
#: constructor guesses in the repair search and copied after (`Probe._construct`).
REUSE_MODEL_S = 0.02
#: ... and whose parameters and buffers take at most this many bytes (the copy stays in memory).
REUSE_MODEL_BYTES = 512 << 20
#: Constructor arguments that declare an image input's sides (`Probe.declared_sides`) ...
DECLARED_SIDE_NAMES = ("img_size", "image_size")
#: ... and the largest side the probe starts from.
MAX_DECLARED_SIDE = 256
#: The repair search's CPU budget allows at least this many attempts of the first one's cost ...
BUDGET_ATTEMPTS = 4
#: ... within this multiple of ``repair_budget_s``.
BUDGET_CAP = 4.0


def repair_budget(budget_s: float, first_attempt_s: float) -> float:
    """The repair search's CPU budget once its first attempt took ``first_attempt_s`` of CPU:
    ``budget_s``, or room for ``BUDGET_ATTEMPTS`` attempts like the first where that is more
    (a whole model built at its repository's configuration takes seconds to construct), at most
    ``BUDGET_CAP`` times ``budget_s``."""
    return min(BUDGET_CAP * budget_s, max(budget_s, BUDGET_ATTEMPTS * first_attempt_s))


@dataclass(frozen=True)
class Attempt:
    """One failed attempt of the repair search."""

    generation: int  # 0: the program's own inputs; 1, 2: the 2-D and 3-D restarts
    steps: list[str]  # the repairs that led to it
    failure: Failure
    dead_end: bool  # no rule proposed anything for it

    def line(self) -> str:
        after = f" (after {self.steps[-1]})" if self.steps else ""
        message = " ".join(self.failure.message.split())[:240]
        return f"g{self.generation} {self.failure.phase} {self.failure.exc_class}: {message}{after}"


def root_cause(history: list[Attempt]) -> Attempt | None:
    """The failure that explains why a program does not run.

    The restarts guess every tensor input anew (2-D, then 3-D), so their errors mostly say what
    the guess broke ("not enough values to unpack"), not what the program needs; the search with
    the program's own inputs says that. So: the first dead end (a failure no rule could do
    anything about) reached with the program's own inputs; else the deepest failure reached with
    them (the most repairs applied, the first of those); else the first dead end of a restart;
    else the last failure.
    """
    if not history:
        return None
    own = [a for a in history if a.generation == 0]
    for a in own:
        if a.dead_end:
            return a
    if own:
        return max(own, key=lambda a: (len(a.steps), -own.index(a)))
    for a in history:
        if a.dead_end:
            return a
    return history[-1]


#: Repairs in a row answered by the same form of failure with growing numbers, after which the
#: path is not followed further (see :func:`diverging`).
DIVERGENCE_REPEATS = 2


def failure_form(failure: Failure) -> tuple[str, int]:
    """A failure with its numbers left out (``shape '[#, #]' is invalid for input of size #``),
    and the largest of those numbers."""
    numbers = [int(n) for n in re.findall(r"\d+", failure.message)]
    return f"{failure.phase} {failure.exc_class}: " + re.sub(r"\d+", "#", failure.message), max(numbers, default=0)


def diverging(trail: tuple[tuple[str, int], ...]) -> bool:
    """Whether a repair path has stopped converging: its last ``DIVERGENCE_REPEATS`` repairs were
    each answered by a failure of the same form as the one they were made for, with its largest
    number growing every time. ``trail`` holds the form of every failure along the path, the
    newest last.

    A size argument that the failing tensor is computed from (``q.view(b, n, n_head, d_k)`` of a
    layer sized by ``n_head * d_k``) moves both sides of a mismatch: each change of it gives the
    same failure with the numbers scaled, and following the rules would grow the arguments until
    memory runs out (seen on real code: ``n_head`` 2 -> 8 -> ... -> 8388608 and ``d_k`` along with
    it, 20 s of CPU for one module). A repair that converges changes the failure, or shrinks it.
    """
    last = trail[-(DIVERGENCE_REPEATS + 1) :]
    if len(last) <= DIVERGENCE_REPEATS or len({form for form, _ in last}) != 1:
        return False
    return all(a[1] < b[1] for a, b in zip(last, last[1:]))


class Probe:
    """One program in the sandboxed child."""

    def __init__(
        self,
        text: str,
        seed: int,
        torch,
        max_steps: int = DEFAULTS["max_steps"],
        restarts: int = DEFAULTS["restarts"],
        budget_s: float | None = None,
    ):
        self.text = text
        self.seed = seed
        self.torch = torch
        self.max_steps = max_steps
        self.restarts = restarts
        #: CPU seconds of the repair search after which no new attempt starts (None: no limit).
        self.budget_s = budget_s
        #: Set when the search stopped on its budget: what to say about it.
        self.stopped: str | None = None
        self.attempts = 0
        self.ns: dict[str, Any] = {}
        self.init_params: list[tuple[str, str, Any]] | None = None
        self.forward_params: list[tuple[str, str, Any]] | None = None
        self.init_original_ok = False
        #: `get_init_inputs()` is written anew even when no repair changes it (a configuration
        #: object the program did not build, :meth:`with_configs`).
        self.init_rewrite = False
        #: Where each field of a configuration object came from (first repair steps).
        self.config_steps: list[str] = []
        self.init_form = "list"
        self.inputs_original_ok = False
        self.inputs_form = "list"
        #: Why the program's own `get_init_inputs()` / `get_inputs()` failed, by name.
        self.original_errors: dict[str, str] = {}
        self.last_success: tuple[list[Any], Any] | None = None
        #: The model and inputs of the last verification run (`aten_ops` runs them once more).
        self.fresh: tuple[Any, Any] | None = None
        self.history: list[Attempt] = []
        self._configs: tuple[tuple[str, frozenset[str]], ...] | None = None
        #: Init guesses -> an untouched model built from them and the random generators' state
        #: after building it (None: not to be copied); see `_construct`.
        self._pristine: dict[tuple, tuple[Any, tuple] | None] = {}
        self.last_attempt_s = 0.0  # wall time of the successful attempt
        #: A `work.WorkMode` class: attempts measure their forward (`last_work`) for sizing.
        self.work_mode = None
        self.last_work = None

    # --- setting up -------------------------------------------------------------------------

    def initial_state(self):
        torch = self.torch
        ns = self.ns
        model_cls = ns.get("Model")
        if not isinstance(model_cls, type) or not issubclass(model_cls, torch.nn.Module):
            raise LookupError("the program defines no class Model(nn.Module)")
        model: Any = model_cls  # any Module subclass: its own __init__ and forward
        self.init_params = _params(model.__init__)
        self.forward_params = _params(model.forward)
        seed_all(self.seed, torch)
        init: tuple[G.Arg, ...] = ()
        given: list[Any] = []
        try:
            raw = ns["get_init_inputs"]()
            args = given = split_init(raw)
            slots = [p[0] for p in self.init_params or [] if p[1] in ("POSITIONAL_ONLY", "POSITIONAL_OR_KEYWORD")]
            init = tuple(
                G.Arg(G.guess_of_value(v, (i,), torch), slots[i] if i < len(slots) else None, False)
                for i, v in enumerate(args)
            )
            self.init_original_ok = True
        except ProbeTimeout:
            raise
        except Exception as exc:  # noqa: BLE001 - a broken get_init_inputs is guessed from the signature
            self.original_errors["get_init_inputs"] = f"{type(exc).__name__}: {exc}"
            init = tuple(G.Arg(G.guess_for_name(n), n, True) for n in _required(self.init_params))
        init = self.with_configs(init, given)
        forward: tuple[G.Arg, ...] = ()
        names = [p[0] for p in self.forward_params or [] if p[1] in ("POSITIONAL_ONLY", "POSITIONAL_OR_KEYWORD")]
        try:
            raw = ns["get_inputs"]()
            if isinstance(raw, (list, tuple)):
                values, paths = list(raw), [(i,) for i in range(len(raw))]
            else:
                self.inputs_form = "single"
                values, paths = [raw], [(0,)]
            forward = tuple(
                G.Arg(G.guess_of_value(v, p, torch), names[i] if i < len(names) else None)
                for i, (v, p) in enumerate(zip(values, paths))
            )
            self.inputs_original_ok = True
        except ProbeTimeout:
            raise
        except Exception as exc:  # noqa: BLE001
            self.original_errors["get_inputs"] = f"{type(exc).__name__}: {exc}"
            req = [n for n in _required(self.forward_params)]
            forward = tuple(G.Arg(G.default_tensor(), n) for n in req)
        return (init, forward)

    def with_configs(self, init: tuple[G.Arg, ...], given: list[Any]) -> tuple[G.Arg, ...]:
        """``init`` with each configuration object a parameter is annotated with as its fields
        (:mod:`.config_args`; raises :class:`.config_args.ConfigFieldError` for a field the probe
        cannot fill); where the program did not build that object, ``get_init_inputs()`` is
        written anew, and every field's source is a first step."""
        expanded = expand(init, init_annotations(self.ns["Model"]), given, self.ns, self.torch)
        if expanded != init:
            self.config_steps = provenance_step(expanded)
            built = [a for a in collapse(expanded) if isinstance(a.guess, G.ConfigGuess)]
            self.init_rewrite = any(f.within and f.within.source != "given" for a in built for f in a.guess.fields)
        return expanded

    def declared_sides(self, state):
        """``state`` with each image input the extractor guessed (4-D, every dimension the
        default size) given the sides its constructor declares (``img_size``/``image_size``,
        a positional embedding's grid is built from it), that size halved first while it is
        over ``MAX_DECLARED_SIDE`` (a 1024-pixel ViT does not run on the probe's CPU; sizing
        grows the two together); ``(state, step)``, step None when unchanged."""
        init, forward = state
        at = next(
            (
                i
                for i, a in enumerate(init)
                if (a.name or "").lower() in DECLARED_SIDE_NAMES
                and isinstance(a.guess, G.ValueGuess)
                and type(G.literal_value(a.guess)) is int
                and G.literal_value(a.guess) >= 8
            ),
            None,
        )
        images = [
            j
            for j, a in enumerate(forward)
            if isinstance(a.guess, G.TensorGuess)
            and a.guess.rank == 4
            and a.guess.dtype in G.FLOAT_DTYPES
            and set(a.guess.shape) == {G.DEFAULT_SIZE}
        ]
        if at is None or not images:
            return state, None
        declared = side = G.literal_value(init[at].guess)
        while side > MAX_DECLARED_SIDE and side % 2 == 0:
            side //= 2
        for j in images:
            g = forward[j].guess
            forward = G.set_guess(forward, j, G.TensorGuess(g.shape[:2] + (side, side), g.dtype))
        step = f"image inputs {side} x {side}: the {init[at].name} the constructor declares"
        if side != declared:
            init = G.set_guess(init, at, G.ValueGuess(side))
            step += f" ({declared} -> {side} for the probe; sizing grows it)"
        return (init, forward), step

    def documented_shapes(self, state):
        """``state`` with each tensor input the extractor guessed (every dimension the
        default size) shaped as the forward's docstring states (:mod:`.doc_shapes`), the
        constructor's integer arguments at their guessed values."""
        from .doc_shapes import doc_shapes

        init, forward = state
        guessed = [
            a.name
            for a in forward
            if a.name and isinstance(a.guess, G.TensorGuess) and set(a.guess.shape) == {G.DEFAULT_SIZE}
        ]
        if not guessed:
            return state
        sizes = {}
        for a in init:
            value = G.literal_value(a.guess) if isinstance(a.guess, G.ValueGuess) else None
            if a.name and type(value) is int:
                sizes[a.name] = value
        doc = inspect.getdoc(self.ns["Model"].forward)
        shapes = doc_shapes(doc, guessed, sizes, G.DEFAULT_SIZE)
        return init, tuple(
            G.Arg(G.TensorGuess(shapes[a.name], a.guess.dtype), a.name, a.keyword) if a.name in shapes else a
            for a in forward
        )

    # --- one attempt ------------------------------------------------------------------------

    def _original(self, name: str, ok: bool, form: str = "list"):
        if not ok:
            return None
        raw = self.ns[name]()
        return [raw] if form == "single" else raw

    def original_inputs(self):
        """What the program's own ``get_inputs()`` returns (seeded), as a list; None when it fails."""
        seed_all(self.seed, self.torch)
        return self._original("get_inputs", self.inputs_original_ok, self.inputs_form)

    def build(self, state, phases: list[str] | None = None, reuse: bool = False):
        """The model and inputs of a state (seeded); ``phases`` gets each phase as it starts.
        ``reuse``: the model may be a copy of one built before from the same arguments
        (:meth:`_construct`)."""
        torch = self.torch
        init, forward = state
        phases = phases if phases is not None else []
        phases.append("init_inputs")
        seed_all(self.seed, torch)
        # The original functions are always called (when they work), so an attempt
        # consumes the random generator exactly like the program run as it stands.
        orig = self._original("get_init_inputs", self.init_original_ok)
        init = collapse(init)
        args = [G.materialize(a.guess, torch, self.ns, orig) for a in init if not a.keyword]
        kwargs = {str(a.name): G.materialize(a.guess, torch, self.ns, orig) for a in init if a.keyword}
        phases.append("init")
        model = self._construct(init, args, kwargs) if reuse else self.ns["Model"](*args, **kwargs)
        phases.append("inputs")
        orig = self._original("get_inputs", self.inputs_original_ok, self.inputs_form)
        inputs = [G.materialize(a.guess, torch, self.ns, orig) for a in forward]
        return model, inputs

    def _construct(self, init, args: list, kwargs: dict):
        """``Model(*args, **kwargs)``, or a copy of the model built before from the same guesses
        ``init``, with the random generators where that construction left them.

        The repair search tries many states that change only the forward inputs; a constructor
        that takes long (mostly drawing initial weights) is run once for them and its model
        kept untouched (copied before it runs forward; copying took a fifth to two fifths of the
        time of drawing the weights on real modules). Building is seeded, so the copy equals
        what the constructor would build again; which models are kept (by the constructor's CPU
        time) changes only how long the search takes.
        """
        kept = self._pristine.get(init)
        if kept is not None:
            model, rng = kept
            try:
                copy = deepcopy(model)
            except Exception:  # noqa: BLE001 - out of memory: built as the first time
                self._pristine[init] = None
            else:
                set_rng_state(rng, self.torch)
                return copy
        started = time.thread_time()
        model = self.ns["Model"](*args, **kwargs)
        if init not in self._pristine and time.thread_time() - started >= REUSE_MODEL_S:
            self._pristine[init] = None
            try:
                tensors = list(model.parameters()) + list(model.buffers())
                if sum(t.numel() * t.element_size() for t in tensors) <= REUSE_MODEL_BYTES:
                    self._pristine[init] = (deepcopy(model), rng_state(self.torch))
            except Exception:  # noqa: BLE001 - a model that cannot be copied is built every time
                pass
        return model

    def attempt(self, state):
        """Runs one state: returns ``(True, outputs)`` or ``(False, Failure)``."""
        torch = self.torch
        self.attempts += 1
        started = time.monotonic()
        phases: list[str] = []
        phase = "init_inputs"
        try:
            model, inputs = self.build(state, phases, reuse=True)
            phase = "forward"
            if self.work_mode is not None:
                from .work import measure

                out, self.last_work = measure(model, inputs, torch, self.work_mode)
            else:
                with torch.no_grad():
                    out = model(*inputs)
        except ProbeTimeout:
            raise
        except BaseException as exc:  # noqa: BLE001 - every module error is data, SystemExit too
            failure = failure_of(exc, phase if phase == "forward" else phases[-1])
            if "object has no attribute" in failure.message:
                failure = replace(failure, configs=self.config_classes())
            return False, failure
        tensors = flatten_outputs(out, torch, [])
        if not tensors:
            return False, Failure("output", "NoTensorOutput", f"forward returned no tensor (got {type(out).__name__})")
        self.last_success = (tensors, model)
        self.last_attempt_s = time.monotonic() - started
        return True, tensors

    def config_classes(self) -> tuple[tuple[str, frozenset[str]], ...]:
        """The program's classes that build with no argument and are not modules (config objects),
        with the attributes of an instance; computed once."""
        if self._configs is None:
            found = []
            module = self.torch.nn.Module
            for name, obj in list(self.ns.items()):
                if (
                    not isinstance(obj, type)
                    or getattr(obj, "__module__", None) != "__ksmith_program__"
                    or issubclass(obj, (module, BaseException))
                ):
                    continue
                try:
                    instance = obj()
                except ProbeTimeout:
                    raise
                except BaseException:  # noqa: BLE001 - not a config object
                    continue
                attrs = set(getattr(instance, "__dict__", {})) | {a for a in dir(obj) if not a.startswith("_")}
                found.append((name, frozenset(attrs)))
            self._configs = tuple(found)
        return self._configs

    # --- the search ---------------------------------------------------------------------------

    def restart_state(self, state, generation: int):
        """The state with every tensor input ``2-D`` (generation 1) or ``3-D`` (generation 2),
        except time inputs, which stay 1-D (:func:`.guesses.is_time_input`)."""
        rank = {1: 2, 2: 3}.get(generation, 4)
        forward = tuple(
            G.Arg(G.TensorGuess((G.DEFAULT_SIZE,) * rank, a.guess.dtype), a.name, a.keyword)
            if isinstance(a.guess, G.TensorGuess) and not G.is_time_input(a)
            else a
            for a in state[1]
        )
        return (state[0], forward)

    def search(self, initial):
        """Runs the repair search. Returns ``(state, steps, None)`` on success or ``(None, steps,
        root)`` with the root cause (:func:`root_cause`) and the steps that led to it; every
        failed attempt is in ``self.history`` (:meth:`history_lines`)."""
        tried = set()
        self.history = []
        self.stopped = None
        started = time.process_time()
        budget_s = self.budget_s
        for generation in range(max(1, self.restarts)):
            if generation == 0:
                start = self.documented_shapes(initial)
                first = self.config_steps + (
                    ["inputs shaped as the forward's docstring states"] if start != initial else []
                )
                start, declared = self.declared_sides(start)
                first += [declared] if declared else []
            else:
                start = self.restart_state(initial, generation)
                first = self.config_steps + [f"restart {generation}: tensor inputs {2 + generation - 1}-D"]
            frontier: list[list[tuple[Any, list[str], tuple[tuple[str, int], ...]]]] = [[(start, first, ())]]
            budget = self.max_steps
            while frontier and budget > 0:
                if not frontier[-1]:
                    frontier.pop()
                    continue
                state, steps, trail = frontier[-1].pop(0)
                if state in tried:
                    continue
                used = time.process_time() - started
                if budget_s is not None and self.history and used >= budget_s:
                    plural = "s" * (self.attempts != 1)
                    self.stopped = (
                        f"the repair search stopped after {self.attempts} attempt{plural}: its budget of "
                        f"{budget_s:.3g} s of CPU was used ({used:.1f} s)"
                    )
                    return self.give_up()
                tried.add(state)
                budget -= 1
                ok, result = self.attempt(state)
                if ok:
                    return state, steps, None
                if budget_s is not None and len(self.history) == 0:
                    budget_s = repair_budget(budget_s, time.process_time() - started)
                proposed = propose(result, state)
                self.history.append(Attempt(generation, steps, result, not proposed))
                trail = trail + (failure_form(result),)
                if proposed and not diverging(trail):
                    frontier.append([(f.state, steps + [f.step], trail) for f in proposed])
        return self.give_up()

    def draw_uninitialized(self, state):
        """``state`` run on the program rewritten so that parameters its constructor leaves
        uninitialized (:mod:`.uninitialized`: a checkpoint fills them in the repository) are
        drawn, when there are such and the rewritten program still runs with none left;
        ``(state, step)``, step None when the program stays as it is."""
        from .uninitialized import drawn, uninitialized

        torch = self.torch
        try:
            names = uninitialized(lambda: self.build(state)[0], torch)
        except ProbeTimeout:
            raise
        except Exception:  # noqa: BLE001 - module code: verification says what fails
            return state, None
        text = drawn(self.text) if names else None
        if text is None:
            return state, None
        kept = (self.text, self.ns)
        self.text, self.ns = text, exec_program(text)
        self._pristine.clear()
        ok, _ = self.attempt(state)
        try:
            left = uninitialized(lambda: self.build(state)[0], torch) if ok else names
        except ProbeTimeout:
            raise
        except Exception:  # noqa: BLE001
            left = names
        if left:
            self.text, self.ns = kept
            self._pristine.clear()
            self.attempt(state)  # put the successful attempt back (emission and sizing read it)
            return state, None
        shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
        return state, f"uninitialized parameters drawn with torch.randn ({shown}: a checkpoint fills them in)"

    def widen_indices(self, state):
        """``state`` with its drawn integer inputs ranging over the vocabulary of the model's
        smallest embedding table, when that still runs (an embedding fed two distinct indices
        computes little; fed one, a constant); ``(state, step)``, step None when unchanged."""
        torch = self.torch
        if self.last_success is None:
            return state, None
        model = self.last_success[1]
        tables = [
            m.num_embeddings for m in model.modules() if isinstance(m, (torch.nn.Embedding, torch.nn.EmbeddingBag))
        ]
        if not tables or min(tables) <= 2:
            return state, None
        vocab = min(tables)
        forward = tuple(
            G.Arg(a.guess.with_high(vocab), a.name, a.keyword)
            if isinstance(a.guess, G.TensorGuess) and a.guess.orig is None and a.guess.dtype in G.INT_DTYPES
            else a
            for a in state[1]
        )
        if forward == state[1]:
            return state, None
        widened = (state[0], forward)
        ok, _ = self.attempt(widened)
        if not ok:
            # Put the successful attempt back (emission and sizing read it).
            self.attempt(state)
            return state, None
        return widened, f"integer inputs drawn from [0, {vocab}) (the smallest embedding table)"

    def settle_sampling(self, state):
        """``state`` with a dropout probability (a constructor argument named ``*drop*``
        holding a float in (0, 1], a classifier-free-guidance U-Net's ``cond_drop_prob``; each
        alone, then all) set to 0.0, when the model built from it draws random numbers in its
        forward even in eval mode and does not without them: the task is the deterministic
        forward (the one the repository samples with); ``(state, step)``, step None when
        unchanged."""
        drops = [
            i
            for i, a in enumerate(state[0])
            if "drop" in (a.name or "").lower()
            and isinstance(a.guess, G.ValueGuess)
            and type(G.literal_value(a.guess)) is float
            and 0.0 < G.literal_value(a.guess) <= 1.0
        ]
        if not drops or not self._samples(state):
            return state, None
        # One probability at a time (a dropout layer's stays for eval mode), then all of them.
        for chosen in [[i] for i in drops] + ([drops] if len(drops) > 1 else []):
            init = state[0]
            for i in chosen:
                init = G.set_guess(init, i, G.ValueGuess(0.0))
            settled = (init, state[1])
            ok, _ = self.attempt(settled)
            if ok and not self._samples(settled):
                names = ", ".join(f"{state[0][i].name} {G.literal_value(state[0][i].guess)} -> 0.0" for i in chosen)
                return settled, f"{names} (the forward draws with it, in eval mode too)"
        self.attempt(state)  # put the successful attempt back (emission and sizing read it)
        return state, None

    def _samples(self, state) -> bool:
        """True when the model of ``state``, in eval mode, gives different outputs for two
        calls on the same inputs."""
        torch = self.torch
        try:
            model, inputs = self.build(state, reuse=True)
            model.eval()
            with torch.no_grad():
                first = flatten_outputs(model(*inputs), torch, [])
                second = flatten_outputs(model(*inputs), torch, [])
        except ProbeTimeout:
            raise
        except Exception:  # noqa: BLE001 - a model that fails here is left to verification
            return False
        return not same_values(first, second)

    def give_up(self):
        """The search's answer when no state ran: ``(None, steps, root cause)``."""
        root = root_cause(self.history)
        return None, (root.steps if root else []), (root.failure if root else None)

    def history_lines(self) -> list[str]:
        """The failed attempts in order, one line each (at most ``HISTORY_LIMIT``), then why the
        search stopped early when it did."""
        return [a.line() for a in self.history[:HISTORY_LIMIT]] + ([self.stopped] if self.stopped else [])

    # --- emitting and verifying -------------------------------------------------------------------

    def emit(self, initial, state, render: Render = render_guess, force: Collection[str] = ()) -> str:
        """The program with the guesses of ``state`` written into whichever of
        ``get_init_inputs``/``get_inputs`` changed (or whose side, ``"init"``/``"input"``, is in
        ``force``), each argument written by ``render``."""
        new_defs = {}
        keep = []
        if state[0] != initial[0] or not self.init_original_ok or self.init_rewrite or "init" in force:
            src, reads = init_source(state[0], self.init_params, render)
            new_defs["get_init_inputs"] = src
            if reads:
                keep.append("get_init_inputs")
        if state[1] != initial[1] or not self.inputs_original_ok or "input" in force:
            src, reads = inputs_source(state[1], self.inputs_form, render)
            new_defs["get_inputs"] = src
            if reads:
                keep.append("get_inputs")
        if not new_defs:
            return self.text
        return replace_functions(self.text, new_defs, keep)

    def run_fresh(self, text: str):
        """Runs an emitted program from scratch; returns (outputs, model, forward_ms)."""
        torch = self.torch
        self.attempts += 1
        ns = exec_program(text, "<ksmith-rewritten-program>")
        seed_all(self.seed, torch)
        model = ns["Model"](*split_init(ns["get_init_inputs"]()))
        inputs = ns["get_inputs"]()
        if not isinstance(inputs, (list, tuple)):
            inputs = [inputs]
        with torch.no_grad():
            t0 = time.thread_time()
            out = model(*inputs)
            forward_ms = (time.thread_time() - t0) * 1000.0
        tensors = flatten_outputs(out, torch, [])
        if not tensors:
            raise TypeError(f"forward returned no tensor (got {type(out).__name__})")
        self.fresh = (model, inputs)
        return tensors, model, forward_ms

    def aten_ops(self) -> tuple[dict[str, int], list[str], list[str]]:
        """The ATen operators one more forward call of the last fresh run dispatches."""
        if self.fresh is None:
            raise RuntimeError("no verified run to record the operators of")
        model, inputs = self.fresh
        return record_aten_ops(model, inputs, self.torch)


TRACE_LIMIT = 4096


def warm_aten_recording(torch) -> None:
    """Records one tiny forward pass, in the warm worker before it forks any child.

    The first recording in a process imports what ``TorchDispatchMode`` needs (about 900 modules:
    torch's dispatch and symbolic-shape machinery, sympy, mpmath), which takes seconds; done here
    once, every forked child finds them imported (measured in a child: 2.7 s for its first
    recording without this, 0.02 s with it) instead of spending its time limit on them.
    """
    record_aten_ops(torch.nn.Linear(2, 2), [torch.zeros(1, 2)], torch)


def record_aten_ops(model, inputs, torch) -> tuple[dict[str, int], list[str], list[str]]:
    """Calls ``model(*inputs)`` once under a ``TorchDispatchMode`` and returns how often each ATen
    operator was dispatched (``{"aten::addmm": 1, "aten::t": 1}``, sorted by name), the
    operators in the order they ran (the first ``TRACE_LIMIT``) and the same calls with the
    attributes that decide their kernel (``aten::addmm(a,w)``, :func:`.aten_calls.signature`).

    The mode sees what actually runs below autograd: composite operators arrive decomposed
    (``F.linear`` as ``aten::t`` + ``aten::addmm``), fused kernels as themselves
    (``aten::native_layer_norm``, ``aten::convolution``). In-place updates of one-element
    integer tensors are bookkeeping, not compute (batch norm's ``num_batches_tracked += 1``), and
    are left out.
    """
    from torch.utils._python_dispatch import TorchDispatchMode

    from .aten_calls import Weights, signature

    counts: dict[str, int] = {}
    trace: list[str] = []
    calls: list[str] = []
    weights = Weights(model, torch)

    def bookkeeping(name: str, args) -> bool:
        first = args[0] if args else None
        return (
            name.endswith("_")
            and isinstance(first, torch.Tensor)
            and first.numel() == 1
            and not first.is_floating_point()
            and not first.is_complex()
        )

    class OpRecorder(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            packet = getattr(func, "overloadpacket", None)
            name = getattr(packet, "_qualified_op_name", None) or str(func)
            if not bookkeeping(name, args):
                counts[name] = counts.get(name, 0) + 1
                if len(trace) < TRACE_LIMIT:
                    trace.append(name)
                    calls.append(signature(func, args, kwargs, weights))
            return func(*args, **(kwargs or {}))

    with torch.no_grad(), OpRecorder():
        model(*inputs)
    return dict(sorted(counts.items())), trace, calls


def apply_override(text: str, override: str) -> str:
    """Replaces ``get_inputs`` / ``get_init_inputs`` with the definitions found in ``override``."""
    tree = ast.parse(override)
    new_defs = {}
    for name in ("get_init_inputs", "get_inputs"):
        node = find_function(tree, name)
        if node is not None:
            segment = ast.get_source_segment(override, node)
            if segment:
                new_defs[name] = segment
    if not new_defs:
        raise ValueError("the answer defines neither get_inputs() nor get_init_inputs()")
    return replace_functions(text, new_defs)


def _judge_in_eval_mode(
    result: dict, judged: str, verdict: tuple[str, str], seed: int, torch
) -> tuple[str, str] | None:
    """The program judged again built in eval mode (:mod:`.eval_mode`), for a forward that writes
    its weights or draws random numbers in training mode. When eval mode makes it a task, the
    result's program becomes the eval-mode one and the step is recorded; otherwise the
    training-mode verdict stands."""
    from .degenerate import judge
    from .eval_mode import in_eval_mode

    why = "writes its own weights" if verdict[0] == "writes" else "draws random numbers"
    # a draw whose two calls agreed is a task as it is unless eval mode removes it
    stands = None if verdict[0] == "drew" else verdict
    program = in_eval_mode(result["program"], why)
    again_text = in_eval_mode(judged, why)
    if program is None or again_text is None:
        return stands
    try:
        again = judge(again_text, seed, torch)
    except ProbeTimeout:
        raise
    except BaseException:  # noqa: BLE001 - module code: the training-mode verdict stands
        return stands
    if again is not None and (again[0] != "drew" or verdict[0] == "drew"):
        # (a draw in both modes that changed no output: the task as it is)
        return stands
    result["program"] = program
    result["repair_steps"] = list(result.get("repair_steps") or []) + [
        f"eval mode: in training mode {verdict[1].split(':')[0].removeprefix('its ')}"
    ]
    return None


def _check_host_tensors(text: str, seed: int, torch, result: dict[str, Any]) -> None:
    """A program that runs here but whose forward a GPU refuses (:mod:`.host_tensors`: CPU
    tensors beside the device's) is ``degenerate`` with that reason; where the check cannot run
    on ``meta``, the verdict stands and the attempt log says so."""
    from .host_tensors import check, describe

    try:
        found = check(text, seed, torch)
    except ProbeTimeout:
        raise
    except BaseException as exc:  # noqa: BLE001 - module code; the module's verdict stands
        line = f"gpu device check: not run on meta ({type(exc).__name__}: {exc})"
        result["attempt_log"] = list(result.get("attempt_log") or []) + [line[:MESSAGE_LIMIT]]
        return
    if found is not None:
        result.update(describe(found[:MESSAGE_LIMIT]))


def _observe(text: str, seed: int, torch, result: dict[str, Any]) -> list[dict[str, Any]]:
    """The configurations the program gives its own classes (:mod:`.observe`), at its sizes (the
    sized program's when it was sized: a U-Net's middle attention then sees the 4 x 4 tokens of a
    32-pixel image, not the 1 x 1 of the probe's 8 pixels), the batch cut to
    :data:`.provenance.OBSERVE_BATCH` where it is larger (the whole batch where the cut one fails). What
    stops the observation (the time limit included) leaves the verdict as it is and is said in
    the attempt log."""
    from ..shared.constants import set_constants
    from .observe import observe

    texts = [text]
    if json.loads(result.get("sizes") or "{}").get("batch_size", 0) > OBSERVE_BATCH:
        texts.insert(0, set_constants(text, {"batch_size": OBSERVE_BATCH}))
    why = ""
    for candidate in texts:
        try:
            return observe(candidate, seed, torch)
        except ProbeTimeout:
            why = "the time limit"
            break
        except BaseException as exc:  # noqa: BLE001 - module code; the module's verdict stands
            why = f"{type(exc).__name__}: {exc}"
    result["attempt_log"] = list(result.get("attempt_log") or []) + [f"observe: stopped by {why}"[:MESSAGE_LIMIT]]
    return []


def run_request(request: dict[str, Any], torch) -> dict[str, Any]:
    """Probes one program; returns the result fields of the protocol's response."""
    result = empty_result("failed")
    text = request["program"]
    probe = Probe(
        text,
        int(request.get("seed", DEFAULTS["seed"])),
        torch,
        int(request.get("max_steps", DEFAULTS["max_steps"])),
        int(request.get("restarts", DEFAULTS["restarts"])),
        float(request.get("repair_budget_s", DEFAULTS["repair_budget_s"])) or None,
    )

    def fail(cls: str, message: str, status: str = "failed"):
        result["status"] = status
        result["error_class"] = cls
        result["error_message"] = message[:MESSAGE_LIMIT]
        result["attempts"] = probe.attempts
        result["attempt_log"] = probe.history_lines()
        return result

    if request.get("sizing") is not None:
        from .work import make_mode

        # The successful attempt's measure is the sizing step's starting point.
        probe.work_mode = make_mode(torch)
    try:
        override = request.get("override")
        if override:
            try:
                text = apply_override(text, override)
            except (SyntaxError, ValueError) as exc:
                return fail("InvalidRepairAnswer", str(exc))
            probe.text = text
        try:
            probe.ns = exec_program(text)
            initial = probe.initial_state()
        except ProbeTimeout:
            raise
        except LookupError as exc:
            return fail("NoModelClass", str(exc))
        except ConfigFieldError as exc:
            return fail("ConfigField", str(exc))
        except BaseException as exc:  # noqa: BLE001 - SystemExit in module code is data too
            f = failure_of(exc, "define")
            status = "oom" if OOM_RE.search(f.message) or f.exc_class == "MemoryError" else "failed"
            return fail(f.exc_class, f"while defining the program: {f.message}", status)
        if override:
            # An override stands for arguments someone knows (a model's own, the LLM's): one
            # that does not evaluate is that override's failure, never a cue to guess.
            broken = [f"{n}() raised {e}" for n, e in probe.original_errors.items() if f"def {n}(" in override]
            if broken:
                return fail("InvalidOverride", "the override does not run: " + "; ".join(broken))
        state, steps, last = probe.search(initial)
        if state is not None:
            state, filled = probe.draw_uninitialized(state)
            steps = steps + [filled] if filled else steps
            text = probe.text
            state, widened = probe.widen_indices(state)
            steps = steps + [widened] if widened else steps
            state, settled = probe.settle_sampling(state)
            steps = steps + [settled] if settled else steps
        result["repair_steps"] = steps
        if state is None:
            assert last is not None
            status = "oom" if OOM_RE.search(last.message) or last.exc_class == "MemoryError" else "failed"
            message = f"{last.phase}: {last.message}"
            if probe.stopped:  # kept whole past `fail`'s cut: the message makes room for it
                note = f" ({probe.stopped})"
                message = message[: MESSAGE_LIMIT - len(note)] + note
            return fail(last.exc_class, message, status)
        try:
            emitted = probe.emit(initial, state)
        except InitContractError as exc:
            return fail("InitContract", str(exc))
        at_probe_sizes = emitted
        sized: dict[str, Any] = {}
        if request.get("sizing") is not None:
            from .sizing import size_program

            # Sizing confirms its program by running it twice from scratch: that is the
            # verification when it succeeds; the program at the probe's sizes is verified only
            # when sizing does not succeed.
            sized = size_program(
                probe, initial, state, emitted, request["sizing"], probe.last_attempt_s, Provenance.of(request)
            )
        confirmed = sized.pop("confirmed", None)
        program = sized.pop("sized_program", None)
        judged_text = sized.pop("confirmed_program", None)
        try:
            if confirmed is not None:
                first, model, forward_ms = confirmed
                second = first  # the sizing step compared its two runs already
                emitted = program
            elif emitted == text and probe.last_success is not None:
                # Unchanged: the successful attempt was already a run of this exact text.
                first, model = probe.last_success
                second, _, forward_ms = probe.run_fresh(emitted)
            else:
                first, model, forward_ms = probe.run_fresh(emitted)
                second, _, _ = probe.run_fresh(emitted)
        except ProbeTimeout:
            raise
        except BaseException as exc:  # noqa: BLE001
            f = failure_of(exc, "verify")
            return fail(f.exc_class, f"the rewritten program does not run: {f.message}")
        result["program"] = emitted
        result["output_shapes"] = [str(list(t.shape)) for t in first]
        result["output_dtypes"] = [str(t.dtype) for t in first]
        result["param_count"] = int(sum(p.numel() for p in model.parameters()))
        result["forward_ms"] = forward_ms
        try:
            result["aten_ops"], result["aten_trace"], result["aten_calls"] = probe.aten_ops()
        except ProbeTimeout:
            raise
        except BaseException:  # noqa: BLE001 - the module ran; only its operator list is missing
            result["aten_ops"], result["aten_trace"], result["aten_calls"] = None, [], []
        result["attempts"] = probe.attempts
        result["attempt_log"] = probe.history_lines()
        result.update(sized)
        if not same_values(first, second):
            result["status"] = "nondeterministic"
            result["error_message"] = "two runs with the same seed gave different outputs"
            return result
        from .degenerate import SecondDrawFailed, judge

        try:
            verdict = judge(judged_text or emitted, probe.seed, torch)
        except ProbeTimeout:
            raise
        except SecondDrawFailed as exc:
            return fail("SecondDrawFailed", f"the program fails on inputs drawn with another seed: {exc}")
        except BaseException as exc:  # noqa: BLE001
            f = failure_of(exc, "judge")
            return fail(f.exc_class, f"the verified program does not run again: {f.message}")
        if verdict is not None and verdict[0] in ("random", "writes", "drew"):
            verdict = _judge_in_eval_mode(result, judged_text or emitted, verdict, probe.seed, torch)
        if verdict is None:
            result["status"] = "ok"
            _check_host_tensors(at_probe_sizes, probe.seed, torch, result)
        else:
            random = verdict[0] == "random"
            result["status"] = "nondeterministic" if random else "degenerate"
            result["error_class"] = "RandomForward" if random else "Degenerate"
            result["error_message"] = verdict[1]
        result["submodules"] = _observe(emitted, probe.seed, torch, result)
        return result
    except ProbeTimeout:
        return fail("Timeout", "the module ran past its time limit", "timeout")
    except MemoryError:
        return fail("MemoryError", "the module ran past its memory limit", "oom")
