"""TRL 1.16's agent RL on the ksmith evaluator: `KernelEnv` for
`GRPOTrainer(environment_factory=KernelEnv)`, and a command line that is `trl grpo` with it.

TRL makes one `KernelEnv` per rollout, calls `reset(**row)` with the dataset row (the `trl-env`
datasets carry the ground-truth JSON in `ground_truth`), exposes every public method but `reset`
and `get_reward` as a tool (here `evaluate`, whose schema TRL reads from its signature and
docstring: the schema the multi-turn SFT datasets carry) and calls `get_reward` once the rollout
ends: the best evaluation's `ksmith.reward.score_program` score. An evaluator that cannot be
reached raises from `get_reward` (TRL turns a tool's exception into a message, which must not
become a silent 0).

    PYTHONPATH=$KSMITH/python python -m ksmith.trainers.trl_env --model_name_or_path MODEL \\
        --dataset_name DATASET_FOLDER --max_completion_length N --max_tool_calling_iterations T \\
        --output_dir OUT

takes `trl grpo`'s arguments (`ScriptArguments`, `GRPOConfig`, `ModelConfig`) without
`--reward_funcs`: the environment owns the reward.
"""

from ksmith import reward
from ksmith.environment import PROGRAM_DESCRIPTION, TOOL_DESCRIPTION, KernelEnvironment, report_text


class KernelEnv:
    """One rollout's episode on the row's ground truth."""

    def __init__(self):
        self._episode: KernelEnvironment | None = None
        self._errors: list[str] = []

    def reset(self, **row) -> None:
        if "ground_truth" not in row:
            raise ValueError("KernelEnv needs a `ground_truth` column (a ksmith `trl-env` dataset)")
        self._episode = KernelEnvironment(row["ground_truth"])
        self._errors = []
        return None

    def evaluate(self, program: str):
        if self._episode is None:
            raise RuntimeError("KernelEnv.evaluate before reset")
        try:
            return report_text(self._episode.evaluate(program))
        except reward.EvaluatorUnavailable as e:
            self._errors.append(str(e))
            raise

    def get_reward(self) -> float:
        if self._errors:
            raise reward.EvaluatorUnavailable(f"an `evaluate` call could not reach the evaluator: {self._errors[0]}")
        if self._episode is None:
            return reward.RewardConfig().no_code_reward
        return self._episode.reward()


# TRL (through transformers' `get_json_schema`) reads the tool's description and its argument's
# from the docstring: the same texts as the schema in the datasets.
KernelEnv.evaluate.__doc__ = f"""
{TOOL_DESCRIPTION}

Args:
    program: {PROGRAM_DESCRIPTION}
"""


def make_parser():
    """`trl grpo`'s parser: script, GRPO and model arguments."""
    from trl import GRPOConfig, ModelConfig, ScriptArguments, TrlParser

    return TrlParser((ScriptArguments, GRPOConfig, ModelConfig))


def build_trainer(script_args, training_args, model_args):
    """A `GRPOTrainer` on the dataset folder with `KernelEnv` as the environment (and the model
    options `trl grpo` applies: quantization, PEFT)."""
    from datasets import load_dataset
    from trl import GRPOTrainer, get_peft_config, get_quantization_config

    dataset = load_dataset(script_args.dataset_name, name=script_args.dataset_config)
    eval_dataset = None
    if training_args.eval_strategy != "no" and script_args.dataset_test_split in dataset:
        eval_dataset = dataset[script_args.dataset_test_split]
    return GRPOTrainer(
        model=model_args.model_name_or_path,
        args=training_args,
        train_dataset=dataset[script_args.dataset_train_split],
        eval_dataset=eval_dataset,
        environment_factory=KernelEnv,
        quantization_config=get_quantization_config(model_args),
        peft_config=get_peft_config(model_args),
    )


def main(argv=None):
    script_args, training_args, model_args = make_parser().parse_args_and_config(args=argv)
    trainer = build_trainer(script_args, training_args, model_args)
    trainer.train(resume_from_checkpoint=training_args.resume_from_checkpoint)
    trainer.save_model(training_args.output_dir)


if __name__ == "__main__":
    main()
