"""The answer reader (`ksmith.answer`) against the cases the rollout's reader runs too
(`crates/ksmith-core/tests/data/answer_cases.json`): same outcome, same format, same program."""

from __future__ import annotations

import json
import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python"))

from ksmith import answer  # noqa: E402
from ksmith.reward import extract_program  # noqa: E402

CASES_FILE = ROOT / "crates" / "ksmith-core" / "tests" / "data" / "answer_cases.json"
SHARED = json.loads(CASES_FILE.read_text())


def text(value: str | list[str]) -> str:
    """A text of the case file: a string, or lines joined with a newline."""
    return value if isinstance(value, str) else "\n".join(value)


CASES = SHARED["cases"]


def test_the_case_file_covers_the_answer_shapes():
    assert len(CASES) >= 50
    assert len({c["name"] for c in CASES}) == len(CASES)
    outcomes = {c["outcome"] for c in CASES}
    assert outcomes == {"applied", "no_op", "unparseable", "search_not_found", "outside_block", "too_long", "truncated"}


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_shared_case(case):
    parent = text(SHARED["parents"][case["parent"]])
    got = answer.apply_answer(parent, text(case["answer"]), case.get("finish_reason"), case.get("max_chars"))
    expected = None if case["program"] is None else text(case["program"])
    assert (got.outcome, got.format) == (case["outcome"], case["format"]), got.error
    assert got.program == expected
    if case["outcome"] == "applied":
        assert got.error is None
    else:
        assert got.error and case.get("error", "") in got.error


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_the_reward_reads_the_same_program(case):
    """The reward has no finish reason and no size limit: it reads what the rollout applies
    without them, and nothing else."""
    if case.get("finish_reason") or case.get("max_chars"):
        pytest.skip("the rollout's finish reason and size limit")
    parent = text(SHARED["parents"][case["parent"]])
    program, how = extract_program(text(case["answer"]), parent)
    expected = None if case["program"] is None else text(case["program"])
    assert program == expected
    assert how == (case["format"] if program is not None else answer.apply_answer(parent, text(case["answer"])).error)


def test_text_is_split_and_trimmed_as_rust_does():
    # `str::lines` keeps a lone \r inside a line and a \r at the very end without \n.
    assert answer._lines("a\r\nb\rc\n\nd\r") == ["a", "b\rc", "", "d\r"]
    assert answer._lines("") == [] and answer._lines("\n") == [""]
    # U+001C is whitespace to Python's str.split, not to Rust's char::is_whitespace.
    assert answer._norm("\x1cx \u3000 y\t") == "\x1cx y"
    assert answer._indent("\u00a0\tx") == 2
