"""Turning a model's answer into a candidate program: the reward's copy of the rollout's reader.

The Rust reader (`crates/ksmith-core/src/answer.rs` and `evolve_block.rs`, which the rollout
applies) is the reference; this module reads every answer exactly as it does, so that the program
a trainer's reward scores is the program the rollout evaluated and trained on. Both run the same cases,
`crates/ksmith-core/tests/data/answer_cases.json` (`python/tests/test_answer.py` here,
`answer::tests::the_shared_cases` there), with identical expected programs.

The rules, in order:

- ``finish_reason == "length"``: truncated, nothing is read.
- ``<think>...</think>`` sections are dropped, and so is everything before a ``</think>`` that has no
  opening tag (a serving engine that put the opening tag in the prompt); an opening tag that is
  never closed leaves nothing to read.
- The parent must have exactly one editable block (a line starting with ``# EVOLVE-BLOCK-START``
  then one starting with ``# EVOLVE-BLOCK-END``); only that block may change.
- An answer with a ``<<<<<<< SEARCH`` or ``>>>>>>> REPLACE`` line is SEARCH/REPLACE blocks, applied
  in order, all or none. A SEARCH text is matched exactly (trailing whitespace ignored), else line
  by line with whitespace runs folded; then the replacement is re-indented by the indentation
  difference at the first non-blank line (counted in characters).
- Otherwise the closed, not blank, fenced block (tag ``python``, ``py``, ``python3`` or none) that mentions the
  entry point or a marker, else the longest one, is the new block; one holding the whole program
  with its markers contributes its block, and the code outside must be unchanged but for
  whitespace.
- A result equal to the parent, or equal but for whitespace, is a no-op; one longer than
  ``max_chars`` bytes is too long.

Text is split into lines and whitespace is recognised as Rust does (``str::lines``,
``char::is_whitespace``), not as Python's ``splitlines`` and ``str.isspace`` do.
"""

from __future__ import annotations

import dataclasses
import re

BLOCK_START = "# EVOLVE-BLOCK-START"
BLOCK_END = "# EVOLVE-BLOCK-END"
#: The class a candidate program defines.
ENTRY_POINT = "ModelNew"

#: Rust's `char::is_whitespace` (Unicode White_Space); Python's `str.isspace` also takes U+001C..F.
_WS = "\t\n\x0b\x0c\r \x85\xa0\u1680" + "".join(map(chr, range(0x2000, 0x200B))) + "\u2028\u2029\u202f\u205f\u3000"
_WS_RUN = re.compile(f"[{_WS}]+")
_PYTHON_ONLY_WS = re.compile("[\x1c-\x1f]")
_FENCE_TAGS = ("python", "py", "python3", "")

# The outcomes and formats are `EditOutcome` and `EditFormat` of `ksmith_core::tables::steps`.
APPLIED = "applied"
NO_OP = "no_op"
UNPARSEABLE = "unparseable"
SEARCH_NOT_FOUND = "search_not_found"
OUTSIDE_BLOCK = "outside_block"
TOO_LONG = "too_long"
TRUNCATED = "truncated"
DIFF = "diff"
FULL_REWRITE = "full_rewrite"


@dataclasses.dataclass(frozen=True)
class Edit:
    """What became of an answer: the recognised format (``diff``, ``full_rewrite``, or None), the
    outcome (``applied`` when ``program`` is set), the candidate program, and why there is none
    (phrased for the model)."""

    format: str | None
    outcome: str
    program: str | None
    error: str | None


class _Failed(Exception):
    def __init__(self, outcome: str, message: str):
        super().__init__(message)
        self.outcome = outcome
        self.message = message


def _trim(s: str) -> str:
    return s.strip(_WS)


def _trim_start(s: str) -> str:
    return s.lstrip(_WS)


def _trim_end(s: str) -> str:
    return s.rstrip(_WS)


def _lines(text: str) -> list[str]:
    """Rust's `str::lines`: split at `\\n`, a `\\r` before it dropped, no empty last line."""
    parts = text.split("\n")
    last = parts.pop()
    out = [p[:-1] if p.endswith("\r") else p for p in parts]
    if last:
        out.append(last)
    return out


def _norm(line: str) -> str:
    """The words of ``line`` joined by one space."""
    if _PYTHON_ONLY_WS.search(line):
        return " ".join(w for w in _WS_RUN.split(line) if w)
    return " ".join(line.split())


def _normalized_lines(text: str) -> list[str]:
    return [n for n in (_norm(line) for line in _lines(text)) if n]


def _indent(line: str) -> int:
    return len(line) - len(_trim_start(line))


# -- the editable block ---------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Block:
    """A program split around its editable block: ``prefix`` ends with the start-marker line,
    ``suffix`` starts with the end-marker line."""

    prefix: str
    body: str
    suffix: str

    def with_body(self, body: str) -> str:
        """The program with ``body`` as its block."""
        newline = "\n" if body and not body.endswith("\n") else ""
        return self.prefix + body + newline + self.suffix


def _marker_lines(code: str, marker: str) -> list[tuple[int, int]]:
    """The (start, end) offsets of the lines whose text starts with ``marker`` after whitespace."""
    found = []
    at = code.find(marker)
    while at >= 0:
        start = code.rfind("\n", 0, at) + 1
        if not _trim_start(code[start:at]):
            end = code.find("\n", at)
            found.append((start, len(code) if end < 0 else end + 1))
        at = code.find(marker, at + 1)
    return found


def split_block(code: str) -> Block:
    """Splits ``code`` around its block; ``ValueError`` unless there is exactly one start and one
    end marker line, in that order."""
    starts = _marker_lines(code, BLOCK_START)
    ends = _marker_lines(code, BLOCK_END)
    if len(starts) == 1 and len(ends) == 1:
        s_end, e_start = starts[0][1], ends[0][0]
        if s_end <= e_start:
            return Block(code[:s_end], code[s_end:e_start], code[e_start:])
        raise ValueError(f"{BLOCK_END} comes before {BLOCK_START}")
    raise ValueError(f"expected one {BLOCK_START} and one {BLOCK_END} line, found {len(starts)} and {len(ends)}")


def has_marker(code: str) -> bool:
    """Whether ``code`` contains either marker."""
    return "EVOLVE-BLOCK-START" in code or "EVOLVE-BLOCK-END" in code


# -- the answer -----------------------------------------------------------------------------------


def strip_think(answer: str) -> str:
    """``answer`` without its ``<think>`` sections (and without what comes before a ``</think>``
    that has no opening tag); ``ValueError`` for a section that is never closed."""
    out = []
    rest = answer
    while (i := rest.find("<think>")) >= 0:
        out.append(rest[:i])
        rest = rest[i + len("<think>") :]
        j = rest.find("</think>")
        if j < 0:
            raise ValueError("the answer ends inside an unfinished <think> section")
        rest = rest[j + len("</think>") :]
    out.append(rest)
    text = "".join(out)
    k = text.rfind("</think>")
    return text[k + len("</think>") :] if k >= 0 else text


@dataclasses.dataclass(frozen=True)
class SearchReplace:
    """One SEARCH/REPLACE pair: the lines to find and the lines to put instead."""

    search: list[str]
    replace: list[str]


def _trim_blank(lines: list[str]) -> list[str]:
    while lines and not _trim(lines[-1]):
        lines.pop()
    lead = 0
    while lead < len(lines) and not _trim(lines[lead]):
        lead += 1
    return lines[lead:]


def parse_diff(answer: str) -> list[SearchReplace]:
    """Every SEARCH/REPLACE block of an answer; ``ValueError`` saying what is malformed."""
    out: list[SearchReplace] = []
    search: list[str] | None = None
    replace: list[str] | None = None
    for line in _lines(answer):
        t = _trim(line)
        n = len(out) + 1
        if search is None:
            if t == "<<<<<<< SEARCH":
                search = []
            elif t in ("=======", ">>>>>>> REPLACE"):
                raise ValueError(f"SEARCH/REPLACE block #{n}: `{t}` without a preceding `<<<<<<< SEARCH`")
        elif replace is None:
            if t == "=======":
                replace = []
            elif t in ("<<<<<<< SEARCH", ">>>>>>> REPLACE"):
                raise ValueError(f"SEARCH/REPLACE block #{n}: `{t}` before the `=======` line")
            else:
                search.append(line)
        elif t == ">>>>>>> REPLACE":
            out.append(SearchReplace(_trim_blank(search), _trim_blank(replace)))
            search = replace = None
        elif t in ("<<<<<<< SEARCH", "======="):
            raise ValueError(f"SEARCH/REPLACE block #{n}: `{t}` before the `>>>>>>> REPLACE` line")
        else:
            replace.append(line)
    if search is not None:
        raise ValueError(f"SEARCH/REPLACE block #{len(out) + 1} is not closed by `>>>>>>> REPLACE`")
    for i, e in enumerate(out):
        if not e.search:
            raise ValueError(f"SEARCH/REPLACE block #{i + 1} has an empty SEARCH part")
    return out


def _find(lines: list[str], search: list[str]) -> tuple[int, int] | None:
    """Where ``search`` occurs in ``lines`` (exact but for trailing whitespace, else with
    whitespace folded) and the indentation shift to apply to its replacement."""
    n = len(search)
    if n == 0 or n > len(lines):
        return None
    exact = _first(list(map(_trim_end, lines)), list(map(_trim_end, search)))
    if exact is not None:
        return exact, 0
    i = _first(list(map(_norm, lines)), list(map(_norm, search)))
    if i is None:
        return None
    k = next((j for j, s in enumerate(search) if _trim(s)), 0)
    return i, _indent(lines[i + k]) - _indent(search[k])


def _first(haystack: list[str], needle: list[str]) -> int | None:
    n = len(needle)
    return next((i for i in range(len(haystack) - n + 1) if haystack[i : i + n] == needle), None)


def _reindent(line: str, shift: int) -> str:
    if shift == 0 or not _trim(line):
        return line
    if shift > 0:
        return " " * shift + line
    return line[min(_indent(line), -shift) :]


def _bigrams(s: str) -> list[str]:
    c = _norm(s)
    return [c[i : i + 2] for i in range(len(c) - 1)]


def _similarity(a: str, b: str) -> float:
    """Dice similarity of character bigrams, for "closest line" hints."""
    x, y = _bigrams(a), _bigrams(b)
    if not x or not y:
        return 0.0
    total = len(x) + len(y)
    common = 0
    for g in x:
        if g in y:
            y.remove(g)
            common += 1
    return 2.0 * common / total


def _closest_hint(lines: list[str], search: list[str]) -> str:
    first = next((s for s in search if _trim(s)), None)
    if first is None:
        return ""
    best: tuple[float, int] | None = None
    for i, line in enumerate(lines):
        score = _similarity(first, line)
        if best is None or score >= best[0]:
            best = (score, i)
    if best is not None and best[0] > 0.3:
        i = best[1]
        return f" Its first line `{_trim(first)}` is closest to line {i + 1} of the block: `{_trim(lines[i])}`."
    return f" No line of the block resembles its first line `{_trim(first)}`."


def _apply_diff(block: Block, edits: list[SearchReplace]) -> str:
    lines = _lines(block.body)
    outside = _lines(block.prefix) + _lines(block.suffix)
    for k, e in enumerate(edits, 1):
        if any(has_marker(line) for line in e.search + e.replace):
            raise _Failed(
                OUTSIDE_BLOCK,
                f"SEARCH/REPLACE block #{k} touches an EVOLVE-BLOCK marker line; "
                "only the code between the markers may change",
            )
        found = _find(lines, e.search)
        if found is not None:
            at, shift = found
            lines[at : at + len(e.search)] = [_reindent(line, shift) for line in e.replace]
        elif _find(outside, e.search) is not None:
            raise _Failed(
                OUTSIDE_BLOCK,
                f"SEARCH/REPLACE block #{k} matches code outside the EVOLVE block; only the code between "
                "`# EVOLVE-BLOCK-START` and `# EVOLVE-BLOCK-END` may change (put new imports inside the block)",
            )
        else:
            raise _Failed(
                SEARCH_NOT_FOUND,
                f"SEARCH/REPLACE block #{k} was not found in the EVOLVE block (no edit was applied)."
                f"{_closest_hint(lines, e.search)} Copy SEARCH lines exactly from the current program.",
            )
    body = "\n".join(lines)
    return body + "\n" if body else body


def _fenced_blocks(answer: str) -> list[tuple[str, str, bool]]:
    """The fenced code blocks of an answer: (language tag, content, closed)."""
    out = []
    current: tuple[str, list[str]] | None = None
    for line in _lines(answer):
        t = _trim_start(line)
        if current is None:
            if t.startswith("```"):
                current = (_ascii_lower(_trim(t[3:])), [])
        elif t.startswith("```"):
            out.append((current[0], "\n".join(current[1]) + "\n", True))
            current = None
        else:
            current[1].append(line)
    if current is not None:
        out.append((current[0], "\n".join(current[1]), False))
    return out


def _ascii_lower(s: str) -> str:
    return "".join(chr(ord(c) + 32) if "A" <= c <= "Z" else c for c in s)


def _rewrite_body(block: Block, answer: str, entry_point: str) -> str:
    blocks = _fenced_blocks(answer)
    closed = [b for b in blocks if b[2] and b[0] in _FENCE_TAGS and _trim(b[1])]
    chosen = next((b for b in closed if entry_point in b[1] or has_marker(b[1])), None)
    if chosen is None and closed:
        chosen = max(reversed(closed), key=lambda b: len(b[1].encode()))
    if chosen is None:
        if any(not b[2] for b in blocks):
            raise _Failed(UNPARSEABLE, "the answer has a code fence that is never closed")
        raise _Failed(UNPARSEABLE, "the answer has neither a fenced ```python code block nor SEARCH/REPLACE blocks")
    code = chosen[1]
    if not has_marker(code):
        return code
    try:
        inner = split_block(code)
    except ValueError as e:
        raise _Failed(UNPARSEABLE, f"the code in the answer has broken EVOLVE-BLOCK markers: {e}") from None
    for part, mine, theirs in (("before", block.prefix, inner.prefix), ("after", block.suffix, inner.suffix)):
        a, b = _normalized_lines(mine), _normalized_lines(theirs)
        if a != b:
            first = next(
                (f"`{x}` became `{y}`" for x, y in zip(a, b) if x != y),
                "lines were added or removed",
            )
            raise _Failed(
                OUTSIDE_BLOCK,
                f"the rewrite changes the code {part} the EVOLVE block ({first}); only the code between the "
                "markers may change (put new imports inside the block)",
            )
    return inner.body


def apply_answer(
    parent: str,
    answer: str,
    finish_reason: str | None = None,
    max_chars: int | None = None,
    entry_point: str = ENTRY_POINT,
) -> Edit:
    """Applies ``answer`` to ``parent`` as the rollout does. ``finish_reason`` is the model's
    (``length`` means truncated); programs longer than ``max_chars`` bytes are refused."""
    if finish_reason == "length":
        return Edit(
            None,
            TRUNCATED,
            None,
            "the answer was cut off at the token limit before it ended; give a shorter answer "
            "(SEARCH/REPLACE blocks instead of a full rewrite)",
        )
    try:
        block = split_block(parent)
    except ValueError as e:
        return Edit(None, UNPARSEABLE, None, f"the parent program has no editable block: {e}")
    try:
        text = strip_think(answer)
    except ValueError as e:
        return Edit(None, UNPARSEABLE, None, str(e))
    if "<<<<<<< SEARCH" in text or ">>>>>>> REPLACE" in text:
        fmt = DIFF
        try:
            edits = parse_diff(text)
        except ValueError as e:
            return Edit(fmt, UNPARSEABLE, None, str(e))
        try:
            body = _apply_diff(block, edits)
        except _Failed as e:
            return Edit(fmt, e.outcome, None, e.message)
    else:
        fmt = FULL_REWRITE
        try:
            body = _rewrite_body(block, text, entry_point)
        except _Failed as e:
            return Edit(None if e.outcome == UNPARSEABLE else fmt, e.outcome, None, e.message)
    program = block.with_body(body)
    if program == parent:
        return Edit(fmt, NO_OP, None, "the edit leaves the program unchanged; propose an actual change")
    if _normalized_lines(program) == _normalized_lines(parent):
        return Edit(fmt, NO_OP, None, "the edit only changes whitespace; propose an actual change")
    size = len(program.encode())
    if max_chars is not None and size > max_chars:
        return Edit(fmt, TOO_LONG, None, f"the program would be {size} bytes, above the limit of {max_chars}")
    return Edit(fmt, APPLIED, program, None)
