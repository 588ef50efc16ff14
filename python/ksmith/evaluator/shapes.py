"""Hidden shapes: the alternate size sets a candidate is also checked at, and the rewriting of a
program's module-level size constants.

A size set is a JSON object mapping a program's module-level integer constant names to values,
e.g. ``{"batch_size": 8, "dim": 2048}`` (the sizing step records them in `alt_sizes`; see
`ksmith_core` `TaskRow`). Applying a set rewrites those constants' assignments in the program's
text (`rewrite`), so `get_inputs()`, `get_init_inputs()` and everything else that reads them see
the new sizes; the evaluator applies it to BOTH the reference and the candidate and rebuilds both
models. A candidate that hard-codes the visible shape (a literal, or a constant of another name)
then computes the wrong thing, or fails, at the hidden one.

On the CPU (Triton's interpreter: correctness only) a task with recorded sets is judged at its
smallest one instead of its GPU sizes (`smallest`; the other sets stay hidden ones), which the
verdict's warnings say: at GPU sizes the interpreter takes minutes per call or exceeds the
memory budget.

Where a task has no recorded set (imported tasks), `derive` makes one from the reference's own
constants: every even constant of 2 or more is halved, the others stay (halving keeps the
divisibility the sizes have among themselves: heads of a width, groups of channels, tiles). The
reference must run at a set and change something there, or the set is dropped (`reference_child`
checks at build).
"""

from __future__ import annotations

import ast
import json
import math
from typing import Any

#: Largest absolute value a constant expression may reach while it is evaluated.
_LIMIT = 1 << 62


def _value(node: ast.AST) -> int | None:
    """The integer a constant expression of integer literals evaluates to (`+ - * // % ** << >>`,
    unary minus), or None."""
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        v = _value(node.operand)
        return None if v is None else (-v if isinstance(node.op, ast.USub) else v)
    if isinstance(node, ast.BinOp):
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
    return None


def _assignments(tree: ast.Module) -> dict[str, list[ast.AST]]:
    """Every module-level assignment's value node, per plain name assigned."""
    found: dict[str, list[ast.AST]] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    found.setdefault(target.id, []).append(node.value)
                else:
                    for n in ast.walk(target):
                        if isinstance(n, ast.Name):
                            found.setdefault(n.id, []).append(target)  # unpacking: not a constant
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            found.setdefault(node.target.id, []).append(node.value)
        elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
            found.setdefault(node.target.id, []).append(node)
    return found


def int_constants(source: str) -> dict[str, int]:
    """The program's module-level integer constants: names assigned once, at module level, an
    integer (a literal or arithmetic of literals; not a bool)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return {}
    out = {}
    for name, values in _assignments(tree).items():
        if len(values) == 1:
            v = _value(values[0])
            if v is not None:
                out[name] = v
    return out


def derive(source: str) -> list[dict[str, int]]:
    """The size sets of a task that has none recorded: one, every even constant >= 2 halved
    (none when the program has no such constant)."""
    halved = {name: v // 2 for name, v in int_constants(source).items() if v >= 2 and v % 2 == 0}
    return [halved] if halved else []


def rewrite(source: str, sizes: dict[str, int]) -> str:
    """`source` with each module-level constant named in `sizes` assigned its new value (names the
    program does not define as such a constant are left alone). Raises `SyntaxError` for a
    program that does not parse."""
    tree = ast.parse(source)
    constants = int_constants(source)
    spans = []
    for name, values in _assignments(tree).items():
        if name in sizes and name in constants:
            node = values[0]
            spans.append((node.lineno, node.col_offset, node.end_lineno, node.end_col_offset, int(sizes[name])))
    lines = source.splitlines(keepends=True)
    for start, col, end, end_col, value in sorted(spans, reverse=True):
        first = lines[start - 1]
        last = lines[end - 1]
        # ast offsets are in UTF-8 bytes
        head = first.encode()[:col].decode()
        tail = last.encode()[end_col:].decode()
        lines[start - 1 : end] = [head + str(value) + tail]
    return "".join(lines)


def smallest(source: str, sets: list[dict[str, int]]) -> tuple[dict[str, int] | None, list[dict[str, int]]]:
    """Of the sets that change `source` (`touches`), the one of least size (the product of its
    values; the first of equals), and the other sets in their order; None and `sets` when no set
    changes it."""
    sizes = [math.prod(max(v, 1) for v in s.values()) if touches(source, s) else None for s in sets]
    known = [n for n in sizes if n is not None]
    if not known:
        return None, sets
    i = sizes.index(min(known))
    return sets[i], sets[:i] + sets[i + 1 :]


def rewritten(source: str, sizes: dict[str, int]) -> str:
    """`rewrite`, or `source` unchanged when it does not parse (a candidate's compile error is
    found where it is compiled)."""
    try:
        return rewrite(source, sizes)
    except SyntaxError:
        return source


def touches(source: str, sizes: dict[str, int]) -> bool:
    """Whether `rewrite` would change `source` (it defines one of the constants)."""
    return bool(set(int_constants(source)) & set(sizes))


def label(sizes: dict[str, int]) -> str:
    """A size set as its verdicts name it."""
    return json.dumps(sizes, sort_keys=True)


def parse_sets(value: Any) -> list[dict[str, int]]:
    """The size sets of a request's `alt_sizes` (a list of objects of names to integers, or the
    JSON text of one); `ValueError` naming what is wrong."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError as e:
            raise ValueError(f"`alt_sizes` is not JSON: {e}") from None
    if not isinstance(value, list):
        raise ValueError("`alt_sizes` must be a list of objects")
    sets = []
    for i, entry in enumerate(value):
        if not isinstance(entry, dict) or not entry:
            raise ValueError(f"`alt_sizes[{i}]` must be a non-empty object of constant names to integers")
        for k, v in entry.items():
            if not isinstance(k, str) or not k.isidentifier() or type(v) is not int or v < 0:
                raise ValueError(f"`alt_sizes[{i}]`: `{k}` must name a constant and map to an integer >= 0")
        sets.append(dict(entry))
    return sets
