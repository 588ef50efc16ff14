"""The dedup benchmark's datasketch side finds the near-duplicate pairs it is given."""

import json
import pathlib
import subprocess
import sys

import pytest

pytest.importorskip("datasketch")

SCRIPT = pathlib.Path(__file__).resolve().parents[2] / "crates/ksmith-dedup/benches/datasketch_near.py"


def test_near_pairs_and_timing(tmp_path):
    base = [f"tok{i}" for i in range(120)]
    edited = list(base)
    edited[60] = "changed"  # one token: 5 of 116 shingles differ
    other = [f"other{i}" for i in range(120)]
    docs = [base, other, edited, [], ["a", "b"]]
    tokens = tmp_path / "tokens.jsonl"
    tokens.write_text("".join(json.dumps(d) + "\n" for d in docs), encoding="utf-8")
    pairs = tmp_path / "pairs.txt"
    out = subprocess.run(
        [sys.executable, str(SCRIPT), str(tokens), str(pairs), "5", "256", "0.7"],
        check=True,
        capture_output=True,
        text=True,
    )
    timing = json.loads(out.stdout)
    assert timing["b_r"] == [25, 10]
    assert timing["total_s"] >= 0
    assert pairs.read_text(encoding="utf-8").split("\n")[:-1] == ["0 2"]
