"""Adapters that plug the ksmith evaluator into the trainers' multi-turn agent RL, one per trainer
(each imports its trainer, so import only the one you train with):

- `verl_agent`: verl 0.9's `evaluate` tool (`EvaluateTool`, named by `verl_tools.yaml`) and the
  episode reward (`compute_score`);
- `trl_env`: TRL 1.16's environment (`KernelEnv`, for `GRPOTrainer(environment_factory=...)`) and
  a `trl grpo`-like command line (`python -m ksmith.trainers.trl_env`);
- `openrlhf_agent`: OpenRLHF 0.11's agent file (`--train.agent_func_path`: `AgentExecutor`).

All three run episodes of `ksmith.environment.KernelEnvironment`, so every program is scored by
`ksmith.reward.score_program`, the evaluation single-turn answers get from
`ksmith.reward.score_answer`.
"""
