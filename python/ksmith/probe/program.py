"""Rewriting ``get_inputs()`` / ``get_init_inputs()`` in a program's text.

The repaired arguments are written back as new top-level function definitions. When a new
function still needs values of the original one (a tensor it did not change, an object that has
no literal form), the original definition is kept under the name ``_ksmith_original_<name>``
and the new one reads from its result. Everything else in the program stays byte-for-byte.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Sequence

from .config_args import collapse
from .guesses import Arg, ConfigGuess, config_source, source_of, uses_original

ORIGINAL_PREFIX = "_ksmith_original_"

#: Writes one argument: its source (reading the original function's result from ``_orig``) and
#: whether it reads that result.
Render = Callable[[Arg], tuple[str, bool]]


def render_guess(arg: Arg) -> tuple[str, bool]:
    """The default :data:`Render`: the guess as it stands (:func:`.guesses.source_of`)."""
    return source_of(arg.guess, "_orig"), uses_original(arg.guess)


def find_function(tree: ast.Module, name: str) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    """The last top-level definition of ``name`` (the one that is in effect)."""
    found = None
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
            found = node
    return found


def _span(node: ast.FunctionDef | ast.AsyncFunctionDef) -> tuple[int, int]:
    start = min([node.lineno] + [d.lineno for d in node.decorator_list])
    return start, node.end_lineno or node.lineno


def replace_functions(program: str, new_defs: dict[str, str], keep_original: Sequence[str] = ()) -> str:
    """Replaces (or appends) top-level functions.

    ``new_defs`` maps a function name to its complete new source. A function named in
    ``keep_original`` is renamed to ``_ksmith_original_<name>`` instead of being removed, and
    the new definition goes right after it.
    """
    tree = ast.parse(program)
    lines = program.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    edits: list[tuple[int, int, list[str]]] = []  # (start, end) 1-based inclusive -> new lines
    appended: list[str] = []
    for name, source in new_defs.items():
        new_lines = [line + "\n" for line in source.rstrip("\n").split("\n")]
        node = find_function(tree, name)
        if node is None:
            appended.append("\n\n")
            appended.extend(new_lines)
            continue
        start, end = _span(node)
        if name in keep_original:
            old = lines[start - 1 : end]
            def_index = node.lineno - start
            old[def_index] = old[def_index].replace(f"def {name}(", f"def {ORIGINAL_PREFIX}{name}(", 1)
            edits.append((start, end, old + ["\n\n"] + new_lines))
        else:
            edits.append((start, end, new_lines))
    for start, end, new_lines in sorted(edits, reverse=True):
        lines[start - 1 : end] = new_lines
    out = "".join(lines)
    if appended:
        out = out.rstrip("\n") + "\n" + "".join(appended)
    return out if out.endswith("\n") else out + "\n"


def inputs_source(forward: Sequence[Arg], original_shape: str, render: Render = render_guess) -> tuple[str, bool]:
    """Source of a new ``get_inputs()`` and whether it reads the original function.

    ``original_shape`` says how the original returned its inputs: ``"list"`` (a list or tuple)
    or ``"single"`` (one value, not in a list). ``render`` writes each argument.
    """
    rendered = [render(a) for a in forward]
    reads = any(r for _, r in rendered)
    body = []
    if reads:
        call = f"{ORIGINAL_PREFIX}get_inputs()"
        body.append(f"    _orig = [{call}]" if original_shape == "single" else f"    _orig = {call}")
    items = ", ".join(src for src, _ in rendered)
    body.append(f"    return [{items}]")
    return "def get_inputs():\n" + "\n".join(body) + "\n", reads


class InitContractError(ValueError):
    """The constructor arguments that ran cannot all be passed positionally, as the KernelBench
    contract (``Model(*get_init_inputs())``) needs."""


def init_source(
    init: Sequence[Arg], params: Sequence[tuple[str, str, object]] | None, render: Render = render_guess
) -> tuple[str, bool]:
    """Source of a new ``get_init_inputs()`` and whether it reads the original function.

    Always the positional form (``return [a, b]``, what KernelBench's and the evaluator's
    ``Model(*get_init_inputs())`` expects), keyword arguments put in position using the
    constructor's signature ``params`` (name, kind, default); raises
    :class:`InitContractError` when one cannot be (a keyword-only parameter, or one absorbed by
    ``**kwargs``). ``render`` writes each argument; the fields of a configuration object
    (:mod:`.config_args`) are written as the call that builds it, each field by ``render``.
    """
    init = collapse(init)
    render = _with_configs(render)
    reads = any(render(a)[1] for a in init)
    body = []
    if reads:
        body.append(f"    _orig = {ORIGINAL_PREFIX}get_init_inputs()")
    positional = [a for a in init if not a.keyword]
    keywords = [a for a in init if a.keyword]
    items = _as_positional(positional, keywords, params, render)
    if items is None:
        names = ", ".join(str(a.name) for a in keywords)
        raise InitContractError(
            f"the constructor arguments that run cannot all be passed positionally ({names}): "
            "get_init_inputs() must return Model's positional arguments"
        )
    body.append("    return [" + ", ".join(items) + "]")
    return "def get_init_inputs():\n" + "\n".join(body) + "\n", reads


def _with_configs(render: Render) -> Render:
    """``render``, writing a configuration object as ``Cls(field=..., ...)``."""

    def written(arg: Arg) -> tuple[str, bool]:
        if not isinstance(arg.guess, ConfigGuess):
            return render(arg)
        fields = [render(f) for f in arg.guess.fields]
        by_field = dict(zip((id(f) for f in arg.guess.fields), fields))
        return config_source(arg.guess, lambda f: by_field[id(f)][0]), any(r for _, r in fields)

    return written


def _as_positional(positional, keywords, params, render: Render) -> list[str] | None:
    items = [render(a)[0] for a in positional]
    if not keywords:
        return items
    if params is None:
        return None
    by_name = {a.name: a for a in keywords}
    slots = [p for p in params if p[1] in ("POSITIONAL_ONLY", "POSITIONAL_OR_KEYWORD")]
    if any(n not in {p[0] for p in slots} for n in by_name):
        return None  # a keyword-only argument or one absorbed by **kwargs
    last = max(i for i, p in enumerate(slots) if p[0] in by_name)
    for i in range(len(positional), last + 1):
        name, _kind, default = slots[i]
        if name in by_name:
            items.append(render(by_name[name])[0])
        elif default is not _EMPTY and _literal_default(default):
            items.append(repr(default))
        else:
            return None
    return items


class _Empty:
    pass


_EMPTY = _Empty()


def empty_marker():
    """The marker :func:`init_source` expects for a parameter without a default."""
    return _EMPTY


def _literal_default(value) -> bool:
    from .guesses import is_literal

    return is_literal(value)
