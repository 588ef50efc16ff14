"""The configurations a program gives its own classes: how a whole model builds its parts and
what it calls them on.

A class that a repository only builds inside another one (Swin's ``PatchMerging``, built by
``BasicLayer`` with a resolution computed from the patch embedding; SAM's ``MLP`` inside the
mask decoder) gets its constructor arguments from call sites or guesses, and its forward inputs
from guesses: a rank and sizes the repository never uses. When the whole model runs, every
such part is built with its real arguments and called on real shapes.

:func:`observe` runs a verified program once more, with the ``__init__`` of each class the
program defines wrapped to record its arguments and a forward pre-hook on each of the model's
submodules, and returns for each class (its first instance that is called) the source of a
``get_init_inputs()`` and a ``get_inputs()`` that build and call it that way. The probe stage
probes the class's own program again with them (``override``); see the Rust
``ksmith_probe::observed``.

A configuration is only written when every argument has a source form: a literal, a tensor
(drawn afresh with the observed shape and dtype; integer tensors over the observed range), a
list or tuple of those, a value the program's namespace names (a class, a function, or an
attribute of a module it imported, as ``nn.LayerNorm``), or a module of a class the program
defines, written as the call that built it (``PreNorm(64, LinearAttention(64))``). Arguments equal to their parameter's
default are left out from the end; a keyword-only argument that is not its default makes the
class unobservable (``get_init_inputs()`` is positional).
"""

from __future__ import annotations

import inspect
import math
from typing import Any

from . import guesses as G
from .loading import PROGRAM_MODULE, exec_program, seed_all, split_init

#: Classes recorded per program at most (a model with hundreds of part classes is rare).
MAX_CLASSES = 64
#: Instances of a class whose first call is recorded: the first one whose arguments can all be
#: written is the class's configuration.
MAX_INSTANCES = 8


class _Unwritable(Exception):
    """A value with no source form."""


def _namespace_name(value, ns: dict[str, Any]) -> str | None:
    """A name the program's namespace binds to ``value`` (``Mlp``), or ``module.attr`` for an
    attribute of a module it imported (``nn.LayerNorm``)."""
    for name, bound in ns.items():
        if bound is value and not name.startswith("__"):
            return name
    owner = getattr(value, "__module__", None)
    attr = getattr(value, "__name__", None)
    if not isinstance(attr, str) or not isinstance(owner, str):
        return None
    for name, bound in ns.items():
        if not name.startswith("__") and type(bound).__name__ == "module" and getattr(bound, attr, None) is value:
            return f"{name}.{attr}"
    return None


class Writer:
    """Writes observed values as source in the program's namespace ``ns``. ``built`` maps the
    ids of the modules built while observing to (module, args, kwargs): such a module, when it
    is itself an argument (``PreNorm(dim, LinearAttention(dim))``), is written as the call that
    built it."""

    #: Module-valued arguments nested deeper than this are not written.
    MAX_DEPTH = 4

    def __init__(self, ns: dict[str, Any], torch, built: dict[int, tuple[Any, tuple, dict]]):
        self.ns = ns
        self.torch = torch
        self.built = built
        #: The names of the program's own classes and functions the sources written use.
        self.needs: set[str] = set()

    def _own(self, value, name: str) -> str:
        if getattr(value, "__module__", None) == PROGRAM_MODULE:
            self.needs.add(name)
        return name

    def value(self, value, depth: int = 0) -> str:
        """Python source that gives ``value`` again in the program (tensors: a fresh draw of
        the same shape and dtype); raises :class:`_Unwritable`."""
        torch = self.torch
        if isinstance(value, torch.Tensor):
            return G.source_of(_tensor_guess(value, torch), "_orig")
        if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
            return f"float({str(value)!r})"
        if value is None or isinstance(value, (bool, int, float, str)):
            return repr(value)
        if isinstance(value, torch.dtype):
            return str(value)
        if isinstance(value, (list, tuple)):
            items = [self.value(v, depth) for v in value]
            if isinstance(value, list):
                return "[" + ", ".join(items) + "]"
            return "(" + items[0] + ",)" if len(items) == 1 else "(" + ", ".join(items) + ")"
        if isinstance(value, dict) and all(isinstance(k, str) for k in value):
            return "{" + ", ".join(f"{k!r}: {self.value(v, depth)}" for k, v in value.items()) + "}"
        if isinstance(value, type) or inspect.isfunction(value) or inspect.isbuiltin(value):
            name = _namespace_name(value, self.ns)
            if name is not None:
                return self._own(value, name)
        if isinstance(value, torch.nn.Module) and depth < self.MAX_DEPTH:
            record = self.built.get(id(value))
            name = _namespace_name(type(value), self.ns)
            sig = _signature(type(value))
            if record is not None and record[0] is value and name is not None and sig is not None:
                args = self.positional(sig, record[1], record[2], depth + 1)
                return f"{self._own(type(value), name)}({', '.join(args)})"
        raise _Unwritable(type(value).__name__)

    def positional(
        self, sig: inspect.Signature, args: tuple, kwargs: dict, depth: int = 0, plain: bool = False
    ) -> list[str]:
        """The sources of a call's arguments in positional form: bound to ``sig``, the ones
        equal to their defaults left out from the end; raises :class:`_Unwritable` when a
        keyword-only argument differs from its default or an argument has no source form.
        ``plain``: an argument that needs one of the program's own classes or functions
        (``downsample=PatchMerging``) takes its parameter's default instead (raises where it
        has none), for a program that does not define them."""
        bound = sig.bind(*args, **kwargs)
        slots: list[tuple[inspect.Parameter, Any, bool]] = []  # parameter, value, given
        for p in sig.parameters.values():
            given = p.name in bound.arguments
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
                slots.append((p, bound.arguments[p.name] if given else p.default, given))
            elif p.kind == p.VAR_POSITIONAL:
                extra = bound.arguments.get(p.name, ())
                if extra:
                    slots.extend((p, v, True) for v in extra)
            elif given and (p.kind == p.VAR_KEYWORD or not _same(bound.arguments[p.name], p.default)):
                raise _Unwritable(f"keyword-only argument {p.name}")
        if plain:
            slots = [self._plain(p, value, given, depth) for p, value, given in slots]
        needed = 0
        for i, (p, value, given) in enumerate(slots):
            if p.kind == p.VAR_POSITIONAL or (given and (p.default is p.empty or not _same(value, p.default))):
                needed = i + 1
        out = []
        for p, value, _given in slots[:needed]:
            if value is inspect.Parameter.empty:
                raise _Unwritable(f"no value for {p.name}")
            out.append(self.value(value, depth))
        return out

    def _plain(self, p: inspect.Parameter, value, given: bool, depth: int) -> tuple[inspect.Parameter, Any, bool]:
        outer, self.needs = self.needs, set()
        try:
            self.value(value, depth)
            own = bool(self.needs)
        except _Unwritable:
            own = False  # said when the argument is written
        finally:
            self.needs = outer
        if not own:
            return p, value, given
        if p.kind == p.VAR_POSITIONAL or p.default is p.empty:
            raise _Unwritable(f"{p.name} needs the program's own definitions")
        return p, p.default, False


def _tensor_guess(t, torch) -> G.TensorGuess:
    dtype = str(t.dtype).replace("torch.", "")
    shape = tuple(int(s) for s in t.shape)
    if dtype in G.FLOAT_DTYPES or dtype == "bool":
        return G.TensorGuess(shape, dtype)
    if dtype in G.INT_DTYPES:
        if t.numel() == 0 or t.is_meta:
            # Values unknown on meta: drawn from {0, 1}, widened to the vocabulary they index
            # by the probe of the class's program (`Probe.widen_indices`).
            return G.TensorGuess(shape, dtype)
        if int(t.min()) < 0:
            raise _Unwritable(f"{dtype} tensor with negative values")
        return G.TensorGuess(shape, dtype, None, max(2, int(t.max()) + 1))
    raise _Unwritable(f"{dtype} tensor")


def _same(a, b) -> bool:
    try:
        return a is b or bool(a == b)
    except Exception:  # noqa: BLE001 - a comparison that fails (tensors) is not equality
        return False


def _signature(fn) -> inspect.Signature | None:
    try:
        return inspect.signature(fn)
    except (TypeError, ValueError):
        return None


def observe(text: str, seed: int, torch) -> list[dict[str, Any]]:
    """For each class the program defines (other than ``Model``) whose instance the model's
    forward calls, the configuration of the first such call whose arguments can all be
    written: ``{"class_name", "init", "inputs", "summary", "needs", "init_without"}``, where
    ``init`` and ``inputs`` are the sources of a ``get_init_inputs()`` and a ``get_inputs()``,
    ``needs`` the program's own classes and functions ``init`` uses by name, and
    ``init_without`` the ``get_init_inputs()`` with the arguments that use them at their
    defaults (None when one has no default), for a class whose program lacks them. Classes whose arguments have
    no source form in every recorded call are left out. Raises what the program raises."""
    ns = exec_program(text, "<ksmith-observed-program>")
    model_cls = ns["Model"]
    classes = [
        v
        for v in list(ns.values())
        if isinstance(v, type)
        and issubclass(v, torch.nn.Module)
        and v.__module__ == PROGRAM_MODULE
        and v is not model_cls
    ]
    if not classes:
        return []
    try:
        # On meta nothing is computed: a sized whole model is built and called in milliseconds.
        built, called = _build_and_call(ns, classes, seed, torch, "meta")
    except Exception:  # noqa: BLE001 - what meta cannot run (`.item()`, data-dependent branches)
        built, called = _build_and_call(ns, classes, seed, torch, "cpu")
    writer = Writer(ns, torch, built)
    found = []
    for cls, calls in called.items():
        for module, args, kwargs in calls:
            written = _written(writer, cls, module, args, kwargs)
            if written is not None:
                found.append(written)
                break
    return found


def _build_and_call(ns: dict[str, Any], classes: list[type], seed: int, torch, device: str):
    """Builds ``Model`` with the ``__init__`` of ``classes`` wrapped and calls it once on
    ``device``, with a forward pre-hook on each of their instances. Returns the records of the
    modules built (id -> (module, args, kwargs)) and, per class, the first calls of its
    instances (at most :data:`MAX_INSTANCES`, in call order)."""
    built: dict[int, tuple[Any, tuple, dict]] = {}
    originals = {cls: cls.__dict__.get("__init__") for cls in classes}

    def wrap(inner):
        def __init__(self, *args, **kwargs):  # noqa: N807 - stands in for the class's own
            built.setdefault(id(self), (self, args, kwargs))
            inner(self, *args, **kwargs)

        return __init__

    for cls in classes:
        cls.__init__ = wrap(cls.__init__)  # type: ignore[misc]
    try:
        seed_all(seed, torch)
        with torch.device(device):
            model = ns["Model"](*split_init(ns["get_init_inputs"]()))
            inputs = ns["get_inputs"]()
    finally:
        for cls, original in originals.items():
            if original is None:
                del cls.__init__  # type: ignore[misc]
            else:
                cls.__init__ = original  # type: ignore[misc]
    if not isinstance(inputs, (list, tuple)):
        inputs = [inputs]
    own = set(classes)
    called: dict[type, list[tuple[Any, tuple, dict]]] = {}
    seen: set[int] = set()

    def pre_hook(module, args, kwargs):
        calls = called.get(type(module))
        if calls is None:
            if len(called) >= MAX_CLASSES:
                return
            calls = called[type(module)] = []
        if id(module) not in seen and len(calls) < MAX_INSTANCES:
            seen.add(id(module))
            calls.append((module, args, kwargs))

    handles = [m.register_forward_pre_hook(pre_hook, with_kwargs=True) for m in model.modules() if type(m) in own]
    try:
        with torch.no_grad(), torch.device(device):
            model(*inputs)
    finally:
        for h in handles:
            h.remove()
    return built, called


def _written(writer: Writer, cls: type, module, args: tuple, kwargs: dict) -> dict[str, Any] | None:
    """One call of a module of ``cls`` as the sources of ``get_init_inputs()`` and
    ``get_inputs()`` (None when some argument has no source form)."""
    record = writer.built.get(id(module))
    init_sig = _signature(cls)
    forward_sig = _signature(module.forward)
    if record is None or record[0] is not module or init_sig is None or forward_sig is None:
        return None
    writer.needs = set()
    try:
        init = writer.positional(init_sig, record[1], record[2])
        needs = sorted(writer.needs)
        call = writer.positional(forward_sig, args, kwargs)
    except (_Unwritable, TypeError):
        return None
    if writer.needs.difference(needs):
        return None  # an input that is one of the program's classes: rare, and never plain
    without = None
    if needs:
        try:
            without = (
                "def get_init_inputs():\n    return ["
                + ", ".join(writer.positional(init_sig, record[1], record[2], plain=True))
                + "]\n"
            )
        except (_Unwritable, TypeError):
            without = None
    shapes = ", ".join(_short(a, writer.torch) for a in args)
    return {
        "class_name": cls.__name__,
        "init": "def get_init_inputs():\n    return [" + ", ".join(init) + "]\n",
        "inputs": "def get_inputs():\n    return [" + ", ".join(call) + "]\n",
        "summary": f"{cls.__name__}({', '.join(init)}) called on ({shapes})",
        "needs": needs,
        "init_without": without,
    }


def _short(value, torch) -> str:
    if isinstance(value, torch.Tensor):
        return f"{list(value.shape)} {str(value.dtype).replace('torch.', '')}"
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
