"""The cost of reading an answer in the trainers' reward (`ksmith.answer`, the rollout's rules in
Python): the time per answer over the shared cases of `answer_cases.json`, per round.

    python3 scripts/answer_reader_bench.py [--rounds 30]

Prints a Markdown table. The reader runs once per answer, before an evaluation that takes
seconds; its cost only has to stay small next to that.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))
from ksmith.answer import apply_answer  # noqa: E402

CASES = os.path.join(ROOT, "crates", "ksmith-core", "tests", "data", "answer_cases.json")


def text(value: str | list[str]) -> str:
    return value if isinstance(value, str) else "\n".join(value)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=30)
    a = ap.parse_args()
    shared = json.load(open(CASES))
    cases = [(text(shared["parents"][c["parent"]]), text(c["answer"])) for c in shared["cases"]]
    per_answer_us = []
    for _ in range(a.rounds):
        start = time.perf_counter()
        for parent, answer in cases:
            apply_answer(parent, answer)
        per_answer_us.append((time.perf_counter() - start) / len(cases) * 1e6)
    print("| reader | answers | rounds | median us per answer | min | max |\n|---|---|---|---|---|---|")
    print(
        f"| ksmith.answer | {len(cases)} | {a.rounds} | {statistics.median(per_answer_us):.1f} | "
        f"{min(per_answer_us):.1f} | {max(per_answer_us):.1f} |"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
