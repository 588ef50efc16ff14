"""Parameters a constructor leaves uninitialized.

Whisper's ``TextDecoder`` makes its positional embedding ``nn.Parameter(torch.empty(n_ctx,
n_state))`` and never writes it: the repository loads it from a checkpoint. Built from the
program, its values are whatever memory held, so two builds with the same seed differ (the
probe calls such a program ``nondeterministic``) and the evaluator's reference computes on
garbage. :func:`uninitialized` finds such parameters and buffers (built with uninitialized
memory filled with NaN, torch's deterministic mode: a tensor that is NaN throughout was never
written); :func:`drawn` rewrites the program so that a ``Parameter`` made from
``torch.empty(...)`` or the legacy ``torch.Tensor(...)`` / ``torch.FloatTensor(...)`` is drawn
with ``torch.randn`` instead (the seeded draw a task's weights are, as if initialized).
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from typing import Any

#: Calls that allocate without writing, as ``torch.<name>``.
ALLOCATING = ("empty", "Tensor", "FloatTensor")
#: What replaces them.
DRAW = "torch.randn"


def uninitialized(build: Callable[[], Any], torch) -> list[str]:
    """The names of the parameters and buffers of the model ``build()`` returns that no code
    wrote (NaN throughout when built with uninitialized memory filled with NaN)."""
    from torch.utils import deterministic

    was = torch.are_deterministic_algorithms_enabled()
    fill = deterministic.fill_uninitialized_memory  # type: ignore[attr-defined]
    try:
        torch.use_deterministic_algorithms(True)
        deterministic.fill_uninitialized_memory = True  # type: ignore[attr-defined]
        model = build()
    finally:
        torch.use_deterministic_algorithms(was)
        deterministic.fill_uninitialized_memory = fill  # type: ignore[attr-defined]
    named = list(model.named_parameters()) + list(model.named_buffers())
    return [
        name for name, t in named if t.is_floating_point() and t.numel() > 0 and bool(torch.isnan(t.detach()).all())
    ]


def _allocating(node: ast.Call) -> bool:
    return (
        isinstance(node.func, ast.Attribute)
        and node.func.attr in ALLOCATING
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == "torch"
    )


def _is_parameter(node: ast.Call) -> bool:
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    return name == "Parameter"


def drawn(text: str) -> str | None:
    """``text`` with the allocation passed first to each ``Parameter(...)`` call drawn with
    ``torch.randn``; None when there is none."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return None
    spans = []
    for node in ast.walk(tree):
        first = node.args[0] if isinstance(node, ast.Call) and _is_parameter(node) and node.args else None
        if isinstance(first, ast.Call) and _allocating(first):
            func = first.func
            spans.append((func.lineno, func.col_offset, func.end_lineno, func.end_col_offset))
    if not spans:
        return None
    lines = text.splitlines(keepends=True)
    for line, start, end_line, end in sorted(spans, reverse=True):
        if end_line != line:
            continue
        row = lines[line - 1]
        # ast offsets are in UTF-8 bytes
        raw = row.encode()
        lines[line - 1] = (raw[:start] + DRAW.encode() + raw[end:]).decode()
    return "".join(lines)
