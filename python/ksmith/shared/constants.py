"""A program's module-level integer constants, read and rewritten in place.

KernelBench keeps a problem's sizes as module-level constants (``batch_size = 16``,
``dim = 16384``) that ``get_inputs()`` / ``get_init_inputs()`` read. A size set is a JSON object
mapping such names to values (``{"batch_size": 8, "dim": 2048}``); :func:`set_constants` applies
one by rewriting the constants' values, so the program builds its model and inputs at those sizes
when it is run from scratch. The probe's sizing step writes and grows them; the evaluator checks a
candidate at the hidden size sets the same way.

A constant is a top-level statement ``NAME = <value>`` (or ``NAME: T = <value>``) whose value is an
integer literal or arithmetic of integer literals (``2 ** 11``, ``-3``, ``64 * 1024``; not a bool),
and ``NAME`` is bound by no other top-level statement (assigned again, a loop or ``with`` target,
an import, a function or class, ``x = NAME = 1``). Setting a constant replaces its whole value
with the literal.
"""

from __future__ import annotations

import ast
import builtins
import functools
import symtable

#: Largest absolute value a constant expression may reach while it is evaluated.
_LIMIT = 1 << 62


def _value(node: ast.AST) -> int | None:
    """The integer a constant expression of integer literals evaluates to (`+ - * // % ** << >>`,
    unary plus and minus), or None."""
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        v = _value(node.operand)
        return None if v is None else (-v if isinstance(node.op, ast.USub) else v)
    if not isinstance(node, ast.BinOp):
        return None
    a, b = _value(node.left), _value(node.right)
    if a is None or b is None:
        return None
    try:
        if isinstance(node.op, ast.Add):
            v = a + b
        elif isinstance(node.op, ast.Sub):
            v = a - b
        elif isinstance(node.op, ast.Mult):
            v = a * b
        elif isinstance(node.op, ast.FloorDiv):
            v = a // b
        elif isinstance(node.op, ast.Mod):
            v = a % b
        elif isinstance(node.op, ast.Pow) and 0 <= b <= 64:
            v = a**b
        elif isinstance(node.op, ast.LShift) and 0 <= b <= 62:
            v = a << b
        elif isinstance(node.op, ast.RShift) and 0 <= b:
            v = a >> b
        else:
            return None
    except ZeroDivisionError:
        return None
    return v if abs(v) < _LIMIT else None


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
    """Each constant's value node, in the order the constants appear."""
    counts = _module_bindings(tree)
    out: dict[str, ast.expr] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            target, value = node.target, node.value
        else:
            continue
        if isinstance(target, ast.Name) and counts.get(target.id) == 1 and _value(value) is not None:
            out[target.id] = value
    return out


def int_constants(text: str) -> dict[str, int]:
    """The module-level integer constants of a program, in the order they appear. Raises
    ``SyntaxError`` for a program that does not parse."""
    nodes = _constant_nodes(ast.parse(text))
    return {name: v for name, node in nodes.items() if (v := _value(node)) is not None}


@functools.lru_cache(maxsize=8)
def _constant_spans(text: str) -> dict[str, tuple[int, int]]:
    """Where each constant's value is in ``text``: byte offsets ``(start, end)`` in its UTF-8
    encoding. Cached: the sizing step sets the constants of one program text many times."""
    nodes = _constant_nodes(ast.parse(text))
    offsets = [0]
    for line in text.splitlines(keepends=True):
        offsets.append(offsets[-1] + len(line.encode("utf-8")))
    spans = {}
    for name, node in nodes.items():
        assert node.end_lineno is not None and node.end_col_offset is not None  # parsed, not built
        spans[name] = (offsets[node.lineno - 1] + node.col_offset, offsets[node.end_lineno - 1] + node.end_col_offset)
    return spans


def set_constants(text: str, values: dict[str, int]) -> str:
    """``text`` with each named constant's value replaced by the given integer; every other byte
    kept.

    Raises ``KeyError`` naming a constant the program does not have, ``TypeError`` for a value
    that is not an int, ``SyntaxError`` for a program that does not parse.
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
