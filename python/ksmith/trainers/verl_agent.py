"""verl 0.9's agent RL on the ksmith evaluator: the `evaluate` tool and the episode's reward.

- `EvaluateTool` (`verl_tools.yaml` names it; verl's `ToolAgentLoop`, the `tool_agent` every
  `verl-agent` row names, runs it): verl creates one instance per call with the row's
  `extra_info.tools_kwargs.evaluate.create_kwargs` (the ground-truth JSON), the call evaluates the
  complete program with `ksmith.environment.KernelEnvironment` (`ksmith.reward.score_program`), the
  report is the tool's answer and the score its reward. Each call's score is also recorded in the
  trajectory's `extra_fields` (`ksmith_calls`), which verl hands to the reward function.
- `compute_score` (`reward.custom_reward_function.path` points at this file): the episode's
  reward is its best call's score; an episode without a call is scored as a single-turn answer
  (`ksmith.reward.compute_score` on the final text). Every result has the same keys (`score`,
  `tool_calls`, `correct`, `speedup_vs_parent`), as verl's metrics need.

An evaluator that cannot be reached must not score every call 0: verl's tool loop turns a tool's
exception into a message, so the failure is recorded (`ksmith_errors`) and `compute_score`
raises it.
"""

import asyncio
import os
import sys
from typing import Any
from uuid import uuid4

if __package__ in (None, ""):
    # Loaded by path (verl `reward.custom_reward_function.path`): make `ksmith` importable.
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from verl.tools.base_tool import BaseTool  # noqa: E402
from verl.tools.schemas import OpenAIFunctionToolSchema, ToolResponse  # noqa: E402

from ksmith import reward  # noqa: E402
from ksmith.environment import TOOL_SCHEMA, KernelEnvironment, report_text  # noqa: E402

CALLS_KEY = "ksmith_calls"
ERRORS_KEY = "ksmith_errors"


def _call_metrics(result: dict) -> dict:
    speedup = result.get("speedup_vs_parent")
    return {
        "score": float(result["score"]),
        "correct": float(bool(result["correct"])),
        "speedup_vs_parent": float(speedup) if speedup is not None else 0.0,
    }


class EvaluateTool(BaseTool):
    """The `evaluate` tool: one `KernelEnvironment` per created instance."""

    def __init__(self, config: dict, tool_schema: OpenAIFunctionToolSchema | None = None):
        super().__init__(config, tool_schema or OpenAIFunctionToolSchema.model_validate(TOOL_SCHEMA))
        self.reward_config = reward.RewardConfig.from_kwargs(config or {})
        self._episodes: dict[str, KernelEnvironment] = {}

    async def create(self, instance_id: str | None = None, **kwargs: Any) -> tuple[str, ToolResponse]:
        create_kwargs = kwargs.get("create_kwargs") or {}
        ground_truth = create_kwargs.get("ground_truth")
        if ground_truth is None:
            raise ValueError(
                "the `evaluate` tool needs extra_info.tools_kwargs.evaluate.create_kwargs.ground_truth "
                "(the rows of a ksmith `verl-agent` dataset carry it)"
            )
        instance_id = instance_id or uuid4().hex
        self._episodes[instance_id] = KernelEnvironment(ground_truth, self.reward_config)
        return instance_id, ToolResponse()

    async def execute(
        self, instance_id: str, parameters: dict[str, Any], **kwargs: Any
    ) -> tuple[ToolResponse, float, dict]:
        episode = self._episodes[instance_id]
        agent_data = kwargs.get("agent_data")
        try:
            rep = await asyncio.to_thread(episode.evaluate, parameters.get("program"))
        except reward.EvaluatorUnavailable as e:
            if agent_data is not None:
                agent_data.extra_fields.setdefault(ERRORS_KEY, []).append(str(e))
            raise
        result = episode.results[-1]
        if agent_data is not None:
            agent_data.extra_fields.setdefault(CALLS_KEY, []).append(_call_metrics(result))
        return ToolResponse(text=report_text(rep)), float(result["score"]), {"status": rep["status"]}

    async def release(self, instance_id: str, **kwargs: Any) -> None:
        self._episodes.pop(instance_id, None)


def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs) -> dict:
    """verl's reward of one agent episode: its best `evaluate` call, or the final answer when it
    made none."""
    info = extra_info or {}
    errors = info.get(ERRORS_KEY)
    if errors is not None and len(errors) > 0:
        raise reward.EvaluatorUnavailable(f"an `evaluate` call could not reach the evaluator: {errors[0]}")
    calls = info.get(CALLS_KEY)
    if calls is not None and len(calls) > 0:
        best = max(calls, key=lambda c: c["score"])
        return {**best, "tool_calls": float(len(calls))}
    single = reward.compute_score(data_source, solution_str, ground_truth, extra_info, **kwargs)
    return {
        "score": single["score"],
        "correct": single["correct"],
        "speedup_vs_parent": single["speedup_vs_parent"],
        "tool_calls": 0.0,
    }
