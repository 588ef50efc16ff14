"""Input shapes a forward's docstring states.

Extraction guesses every tensor input of a class as ``[4, 4, 4, 4]`` (or the rank its body
hints); a repository often says what it takes in the forward's docstring, in the form
segment-anything writes (``image_embedding (torch.Tensor): image to attend to. Should be shape
B x embedding_dim x h x w``; ``image_pe ...: Must have the same shape as image_embedding``).
:func:`doc_shapes` reads, per forward parameter, the shape its docstring entry states: each
dimension a number, a constructor parameter's name (its value in the probe's guesses) or a
letter (the probe's default size). The probe starts from those shapes where the program's
inputs are the extractor's all-default guesses (:meth:`.execute.Probe.initial_state`).
"""

from __future__ import annotations

import re

#: ``shape B x C x H x W``, ``shape (B, N, C)``, ``of shape [batch, seq_len, dim]``.
SHAPE_RE = re.compile(
    r"shape\s*(?:of\s*)?[\[(]?\s*(?P<dims>[A-Za-z_][\w]*|\d+)(?P<rest>(?:\s*(?:x|×|,|\*)\s*(?:[A-Za-z_][\w]*|\d+))+)",
)
#: ``the same shape as other`` (or ``with the shape of other``).
SAME_RE = re.compile(r"(?:same shape as|the shape of)\s+(?P<name>[A-Za-z_]\w*)")
#: Words a shape pattern may run into that are not dimensions.
NOT_DIMS = {"for", "and", "or", "any", "the", "where", "with", "of", "in", "if"}


def _entries(doc: str, names: list[str]) -> dict[str, str]:
    """The text of each parameter's entry in a docstring: from a line that starts with its
    name (``name:``, ``name (type):``) to the next such line of another parameter."""
    starts = []
    for name in names:
        m = re.search(rf"^\s*{re.escape(name)}\s*(?:\([^)]*\))?\s*:", doc, re.M)
        if m:
            starts.append((m.start(), name))
    starts.sort()
    out = {}
    for k, (at, name) in enumerate(starts):
        end = starts[k + 1][0] if k + 1 < len(starts) else len(doc)
        out[name] = doc[at:end]
    return out


def _dims(m: re.Match) -> list[str]:
    tokens = [m.group("dims")] + re.findall(r"(?:x|×|,|\*)\s*([A-Za-z_]\w*|\d+)", m.group("rest"))
    out = []
    for t in tokens:
        if not t or t.lower() in NOT_DIMS:
            break
        out.append(t)
    return out


def doc_shapes(doc: str | None, forward: list[str], sizes: dict[str, int], default: int) -> dict[str, tuple[int, ...]]:
    """Per forward parameter of ``forward``, the shape its entry in ``doc`` states, of rank 2
    or more: numbers as written, names of ``sizes`` (the constructor's integer arguments) at
    their value, other names ``default``."""
    if not doc:
        return {}
    entries = _entries(doc, forward)
    shapes: dict[str, tuple[int, ...]] = {}
    for name, text in entries.items():
        m = SHAPE_RE.search(text)
        if not m:
            continue
        dims = _dims(m)
        if len(dims) < 2:
            continue
        shapes[name] = tuple(int(d) if d.isdigit() else sizes.get(d, default) for d in dims)
    for name, text in entries.items():
        m = SAME_RE.search(text)
        if name not in shapes and m and m.group("name") in shapes:
            shapes[name] = shapes[m.group("name")]
    return shapes
