"""Tasks built in eval mode, for programs whose training-mode forward the task cannot use.

A forward that writes its own weights in training mode (a weight-normalized layer that
renormalizes and copies into its weight under ``if self.training``, as the Karras U-Nets do) or
that draws random numbers only in training mode (dropout with a probability written in the code)
does work the task does not mean, and changes from call to call. In eval mode the same layers
compute the same normalized weights without the write, and dropout is the identity: that is the
computation the task means. :func:`in_eval_mode` rewrites the program so that ``Model``'s
constructor ends with ``self.eval()`` (the evaluator builds ``Model(*get_init_inputs())`` and
never changes the mode), and the probe judges it again.
"""

from __future__ import annotations

import ast

#: The line the rewrite adds, after its indentation.
EVAL_LINE = "self.eval()  # the task runs in eval mode: in training mode the forward {why}"


def _entry(tree: ast.Module) -> ast.ClassDef | None:
    classes = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Model"]
    return classes[-1] if classes else None


def in_eval_mode(text: str, why: str) -> str | None:
    """``text`` with ``self.eval()`` at the end of ``Model.__init__`` (an ``__init__`` that
    passes its arguments on is added when ``Model`` has none); None when the program cannot be
    rewritten safely (no top-level ``Model``, an ``__init__`` on one line or with a ``return``)."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return None
    cls = _entry(tree)
    if cls is None or not cls.body or cls.end_lineno is None:
        return None
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    line = EVAL_LINE.format(why=why)
    init = next((n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"), None)
    if init is not None:
        if init.end_lineno is None or init.body[0].lineno == init.lineno:
            return None
        if any(isinstance(n, ast.Return) for n in ast.walk(init)):
            return None
        indent = " " * init.body[0].col_offset
        at, added = init.end_lineno, [f"{indent}{line}\n"]
    else:
        if cls.body[0].lineno == cls.lineno:
            return None
        indent = " " * cls.body[0].col_offset
        at = cls.end_lineno
        added = [
            "\n",
            f"{indent}def __init__(self, *args, **kwargs):\n",
            f"{indent}    super().__init__(*args, **kwargs)\n",
            f"{indent}    {line}\n",
        ]
    out = "".join(lines[:at] + added + lines[at:])
    try:
        ast.parse(out)
    except SyntaxError:
        return None
    return out
