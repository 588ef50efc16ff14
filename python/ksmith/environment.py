"""The evaluator as an environment: what multi-turn agent RL calls between the model's turns.

One `KernelEnvironment` is one episode on one exported environment start (the ground-truth JSON
of the `verl-agent`, `trl-env` and `openrlhf-agent` datasets: the task, its reference and the
program the episode starts from). The model works with the evaluator in one of two ways, as the
multi-turn SFT datasets show it (`crates/ksmith-export/src/tool.rs` writes those; the trainer
tests check both sides against each other):

- tool calls (verl, TRL): `evaluate(program)` with the complete program;
- text (OpenRLHF's agent loop): `answer(text)`, an answer read as the single-turn answers are
  (`ksmith.reward.extract_program` against the last program: SEARCH/REPLACE blocks or a fenced
  program); an answer without a program ends the episode.

Every program is scored as it is by `ksmith.reward.score_program` (the evaluation half of
`ksmith.reward.score_answer`) against the episode's ground truth, so the
score, the evaluator (local, or remote with `KSMITH_EVAL_URL`) and the speedup relative to the
starting program are exactly the single-turn reward's. The episode's reward is its best score
(no evaluation: `no_code_reward`). Each evaluation answers with a report (`report`): `status`,
`compiled`, `correct`, `speedup` over PyTorch eager (two decimals; null when not measured),
`hack` and `error` (the end of the error log, empty when correct).
"""

import json
import math

from ksmith import reward

TOOL_NAME = "evaluate"
TOOL_DESCRIPTION = (
    "Compile a Triton program, check it against the PyTorch reference on fresh random inputs and time it on "
    "the GPU evaluator; returns a JSON report."
)
PROGRAM_DESCRIPTION = (
    "The complete program: imports, Triton kernels and class ModelNew, with the editable block between the "
    "# EVOLVE-BLOCK-START and # EVOLVE-BLOCK-END lines."
)
TOOL_SCHEMA = {
    "type": "function",
    "function": {
        "name": TOOL_NAME,
        "description": TOOL_DESCRIPTION,
        "parameters": {
            "type": "object",
            "properties": {"program": {"type": "string", "description": PROGRAM_DESCRIPTION}},
            "required": ["program"],
        },
    },
}
# The end of an error log a report shows: the reward function's cut.
ERROR_TAIL_CHARS = reward.ERROR_TAIL_CHARS
REPORT_KEYS = ("status", "compiled", "correct", "speedup", "hack", "error")


def report(result: dict) -> dict:
    """The report on one evaluation, from `ksmith.reward.score_program`'s result."""
    correct = bool(result["correct"])
    speedup = result.get("speedup_vs_reference") if correct else None
    return {
        "status": result["status"],
        "compiled": bool(result["compiled"]),
        "correct": correct,
        # Half away from zero, as the Rust side rounds (Python's round() rounds half to even).
        "speedup": math.floor(float(speedup) * 100 + 0.5) / 100 if speedup is not None else None,
        "hack": result.get("hack"),
        "error": "" if correct else (result.get("message") or "")[-ERROR_TAIL_CHARS:],
    }


def report_text(rep: dict) -> str:
    """A report as the datasets show it: compact JSON, keys in order."""
    return json.dumps({k: rep[k] for k in REPORT_KEYS}, separators=(",", ":"), ensure_ascii=False)


class KernelEnvironment:
    """One episode: the ground truth, the last program and every evaluation's score."""

    def __init__(self, ground_truth, config: reward.RewardConfig | None = None, backend=None):
        self.ground_truth = reward.parse_ground_truth(ground_truth)
        self.config = config or reward.RewardConfig()
        self.backend = backend
        self.current = self.ground_truth["parent_program"]
        self.results: list[dict] = []

    def evaluate(self, program: object) -> dict:
        """Evaluates a complete program (anything but a non-empty string is `no_code`); returns its report."""
        if not isinstance(program, str) or not program.strip():
            result = {
                "status": "no_code",
                "compiled": False,
                "correct": False,
                "hack": None,
                "score": self.config.no_code_reward,
                "message": "the `program` argument is empty: pass the complete program",
            }
        else:
            result = reward.score_program(program, self.ground_truth, self.config, self.backend)
            if result["has_code"]:
                self.current = program
        self.results.append(result)
        return report(result)

    def answer(self, text: str) -> dict | None:
        """Evaluates the program of a text answer (edits apply to the last program); None when
        the answer gives no program, which ends a text episode."""
        program, _ = reward.extract_program(text, self.current, self.ground_truth["entry_point"])
        if program is None:
            return None
        return self.evaluate(program)

    @property
    def last_score(self) -> float:
        """The score of the last evaluation (`no_code_reward` before any)."""
        return float(self.results[-1]["score"]) if self.results else self.config.no_code_reward

    def reward(self) -> float:
        """The episode's reward: its best evaluation's score (`no_code_reward` without one)."""
        if not self.results:
            return self.config.no_code_reward
        return max(float(r["score"]) for r in self.results)

    def best(self) -> dict | None:
        """The result of the best evaluation, if any."""
        if not self.results:
            return None
        return max(self.results, key=lambda r: float(r["score"]))
