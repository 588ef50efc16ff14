"""OpenRLHF 0.11's agent RL on the ksmith evaluator: the file `--train.agent_func_path` names.

OpenRLHF loads `AgentExecutor` from this file (by path) and runs one `KernelAgent` per prompt:
`reset` reads the row's label (the `openrlhf-agent` datasets' ground-truth JSON), and each `step`
reads the model's answer as a single-turn answer (`ksmith.environment.KernelEnvironment.answer`:
`ksmith.reward.extract_program` against the last program, scored by `ksmith.reward.score_program`)
and returns the evaluator's report as the next user turn, rendered with the model's own chat
template. An answer without a program, or `KSMITH_AGENT_MAX_TURNS` answers (default 4), end the
episode. OpenRLHF sums the steps' rewards, so each step returns what it adds to the best score so
far: the episode's reward is its best answer's score, as for verl and TRL.
"""

import asyncio
import os
import sys

if __package__ in (None, ""):
    # Loaded by path (OpenRLHF `--train.agent_func_path`): make `ksmith` importable.
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

import torch  # noqa: E402
from openrlhf.utils.agent import AgentInstanceBase, MultiTurnAgentExecutor  # noqa: E402

from ksmith.environment import KernelEnvironment, report_text  # noqa: E402

MAX_TURNS_ENV = "KSMITH_AGENT_MAX_TURNS"
DEFAULT_MAX_TURNS = 4
_ANSWER = "KSMITH_ANSWER_9f3c"
_REPORT = "KSMITH_REPORT_4b1e"


def max_turns() -> int:
    """Answers per episode: `KSMITH_AGENT_MAX_TURNS`, default 4."""
    raw = os.environ.get(MAX_TURNS_ENV, "").strip()
    if not raw:
        return DEFAULT_MAX_TURNS
    try:
        n = int(raw)
    except ValueError:
        raise ValueError(f"{MAX_TURNS_ENV}={raw!r}: not a whole number") from None
    if n < 1:
        raise ValueError(f"{MAX_TURNS_ENV}={raw!r}: must be at least 1")
    return n


def feedback_turn(tokenizer) -> tuple[str, str]:
    """The text around a user message that follows an assistant answer, in `tokenizer`'s chat
    template: (what closes the answer and opens the user turn, what closes it and opens the next
    answer)."""
    messages = [
        {"role": "user", "content": "task"},
        {"role": "assistant", "content": _ANSWER},
        {"role": "user", "content": _REPORT},
    ]
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    after_answer = text.split(_ANSWER, 1)[1]
    before, after = after_answer.split(_REPORT, 1)
    return before, after


class KernelAgent(AgentInstanceBase):
    """One episode on one prompt."""

    # The chat template's turn text, set by `AgentExecutor.execute` from OpenRLHF's tokenizer.
    turn: tuple[str, str] | None = None
    eos_token: str | None = None

    def __init__(self):
        self.episode: KernelEnvironment | None = None
        self.turns = 0
        self.total = 0.0
        self.max_turns = max_turns()

    async def reset(self, states: dict, **kwargs) -> dict:
        self.episode = KernelEnvironment(states["label"])
        self.turns = 0
        self.total = 0.0
        return {"observation": states["observation"]}

    def _feedback(self, action: str, rep: dict) -> str:
        if self.turn is None:
            raise RuntimeError("KernelAgent.step before AgentExecutor.execute set the chat template's turn text")
        before, after = self.turn
        eos = self.eos_token or ""
        # The answer's own end-of-turn token closes it already when the model emitted it.
        if eos and before.startswith(eos) and action.rstrip().endswith(eos):
            before = before[len(eos) :]
        return before + report_text(rep) + after

    async def step(self, states: dict, **kwargs) -> dict:
        action = states["action_text"]
        episode = self.episode
        if episode is None:
            raise RuntimeError("KernelAgent.step before reset started the episode")
        rep = await asyncio.to_thread(episode.answer, action)
        self.turns += 1
        done = rep is None or self.turns >= self.max_turns
        best = episode.reward()
        gain = best - self.total
        self.total = best
        return {
            "rewards": torch.tensor(gain, dtype=torch.float32),
            "scores": torch.tensor(best, dtype=torch.float32),
            "environment_feedback": "" if done or rep is None else self._feedback(action, rep),
            "done": done,
            "sampling_params": states.get("sampling_params"),
            "extra_logs": {
                "evaluations": torch.tensor(float(len(episode.results))),
                "best_score": torch.tensor(best, dtype=torch.float32),
            },
        }


class AgentExecutor(MultiTurnAgentExecutor):
    """What OpenRLHF loads: `MultiTurnAgentExecutor` over `KernelAgent`."""

    def __init__(self):
        super().__init__(KernelAgent)

    async def execute(self, prompt, label, sampling_params, max_length: int, hf_tokenizer, llm_engine, images=None):
        if KernelAgent.turn is None:
            KernelAgent.turn = feedback_turn(hf_tokenizer)
            KernelAgent.eos_token = hf_tokenizer.eos_token
        return await super().execute(prompt, label, sampling_params, max_length, hf_tokenizer, llm_engine, images)
