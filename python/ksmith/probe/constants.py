"""A program's module-level integer constants, read and rewritten in place.

KernelBench keeps a problem's sizes as module-level constants (``batch_size = 16``,
``dim = 16384``) that ``get_inputs()`` / ``get_init_inputs()`` read. A size set is a JSON object
mapping such names to values (``{"batch_size": 8, "dim": 2048}``); :func:`set_constants` applies
one by rewriting the literals, so the program builds its model and inputs at those sizes when it
is run from scratch (the evaluator substitutes its hidden size sets the same way).

A constant is a top-level statement ``NAME = <int literal>`` (a negative literal too), and the
only top-level assignment of ``NAME``; anything else (a name bound twice, in a loop, by an
import) is not a constant and cannot be set.
"""

from __future__ import annotations

import ast
import builtins
import functools
import symtable


def _int_literal(node: ast.expr) -> int | None:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if (
        isinstance(node, ast.UnaryOp)
        and isinstance(node.op, ast.USub)
        and isinstance(node.operand, ast.Constant)
        and type(node.operand.value) is int
    ):
        return -node.operand.value
    return None


def _module_bindings(tree: ast.Module) -> dict[str, int]:
    """How many top-level statements bind each name."""
    counts: dict[str, int] = {}

    def bind(name: str) -> None:
        counts[name] = counts.get(name, 0) + 1

    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bind(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                bind((alias.asname or alias.name).split(".")[0])
        else:
            for sub in ast.walk(node):
                if isinstance(sub, ast.Name) and isinstance(sub.ctx, (ast.Store, ast.Del)):
                    bind(sub.id)
    return counts


def _constant_nodes(tree: ast.Module) -> dict[str, ast.expr]:
    counts = _module_bindings(tree)
    out: dict[str, ast.expr] = {}
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and _int_literal(node.value) is not None
            and counts.get(node.targets[0].id) == 1
        ):
            out[node.targets[0].id] = node.value
    return out


def int_constants(text: str) -> dict[str, int]:
    """The module-level integer constants of a program, in the order they appear."""
    nodes = _constant_nodes(ast.parse(text))
    return {name: _int_literal(node) for name, node in nodes.items()}  # type: ignore[misc]


@functools.lru_cache(maxsize=8)
def _constant_spans(text: str) -> dict[str, tuple[int, int]]:
    """Where each constant's literal is in ``text``: byte offsets ``(start, end)`` in its UTF-8
    encoding. Cached: the sizing step sets the constants of one program text many times."""
    nodes = _constant_nodes(ast.parse(text))
    offsets = [0]
    for line in text.splitlines(keepends=True):
        offsets.append(offsets[-1] + len(line.encode("utf-8")))
    return {
        name: (offsets[node.lineno - 1] + node.col_offset, offsets[node.end_lineno - 1] + node.end_col_offset)  # type: ignore[operator]
        for name, node in nodes.items()
    }


def set_constants(text: str, values: dict[str, int]) -> str:
    """``text`` with each named constant's literal replaced by its value; every other byte kept.

    Raises ``KeyError`` naming a constant the program does not have, ``TypeError`` for a value
    that is not an int.
    """
    spans = _constant_spans(text)
    data = text.encode("utf-8")
    edits = []
    for name, value in values.items():
        if name not in spans:
            raise KeyError(f"the program has no module-level integer constant {name!r}")
        if type(value) is not int:
            raise TypeError(f"size {name} = {value!r} is not an int")
        edits.append((*spans[name], str(value).encode()))
    for start, end, new in sorted(edits, reverse=True):
        data = data[:start] + new + data[end:]
    return data.decode("utf-8")


def taken_names(text: str) -> set[str]:
    """Names a new module-level constant must not take: every top-level binding, every name a
    function or class reads as a global (it would start reading the constant), and builtins."""
    taken = set(dir(builtins))
    taken.update(_module_bindings(ast.parse(text)))
    table = symtable.symtable(text, "<program>", "exec")
    stack = [table]
    while stack:
        t = stack.pop()
        for sym in t.get_symbols():
            if t.get_type() == "module" or sym.is_global() or sym.is_free():
                taken.add(sym.get_name())
        stack.extend(t.get_children())
    return taken
