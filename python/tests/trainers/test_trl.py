"""TRL 1.16.x: each card's `trl sft` / `trl grpo` command line, parsed by TRL's own parser,
builds the trainer on the exported folder and runs one optimizer step on the tiny model; SFT
keeps every completion whole, GRPO calls ksmith's reward function with the dataset's columns;
multi-turn SFT trains the assistant turns of the tool conversations, and GRPO runs with ksmith's
evaluator as the environment (`ksmith.trainers.trl_env`)."""

from __future__ import annotations

import importlib
import json
import os
import sys

import pytest
from support import card_command, card_setting, chain_for_a_start, ksmith_on_path, module_args, rows_of


def parse(script, dataset, model, out, *extra):
    env, argv = card_command(dataset, model)
    assert argv[:2] == ["trl", script], argv
    parser = importlib.import_module(f"trl.scripts.{script}").make_parser()
    run_only = ["--output_dir", str(out), "--max_steps", "1", "--per_device_train_batch_size", "2"]
    run_only += ["--report_to", "none", "--save_strategy", "no", "--use_cpu", "true", *extra]
    args = [a for a in argv[2:]]
    if "--output_dir" in args:
        i = args.index("--output_dir")
        del args[i : i + 2]
    return env, parser.parse_args_and_config(args=[*args, *run_only], fail_with_unknown_args=True)


@pytest.mark.parametrize("folder", ["trl-sft", "trl-sft-standard"])
def test_sft_trainer_takes_whole_completions_and_steps(dataset, tiny_model, rows, tmp_path, folder):
    from datasets import load_dataset
    from trl import SFTTrainer

    ds_dir = dataset(folder)
    _, (script_args, training_args, model_args, _) = parse("sft", ds_dir, tiny_model, tmp_path, "--eval_strategy", "no")
    assert training_args.max_length == card_setting(ds_dir, "TRL `max_length`")
    ds = load_dataset(script_args.dataset_name)
    assert ds["train"].num_rows == rows(folder, "train")
    trainer = SFTTrainer(model=model_args.model_name_or_path, args=training_args, train_dataset=ds["train"])
    tokenized = trainer.train_dataset
    lengths = [len(ids) for ids in tokenized["input_ids"]]
    # TRL cuts at max_length from the end, i.e. the completion: nothing may reach it.
    assert max(lengths) < training_args.max_length, (max(lengths), training_args.max_length)
    assert all(sum(1 for t in labels if t != -100) > 0 for labels in tokenized["labels"])
    result = trainer.train()
    assert result.global_step == 1


def test_grpo_trainer_scores_with_the_ksmith_reward_and_steps(dataset, tiny_model, rows, tmp_path):
    from datasets import load_dataset
    from trl import GRPOTrainer

    ds_dir = dataset("trl-grpo")
    env, (script_args, training_args, model_args, _) = parse(
        "grpo", ds_dir, tiny_model, tmp_path, "--num_generations", "2"
    )
    assert training_args.max_completion_length == card_setting(ds_dir, "TRL `max_completion_length`")
    # A random model never stops early: generating the card's full length on CPU costs minutes
    # for nothing the step checks, so the step samples 64 tokens.
    training_args.max_completion_length = 64
    sys.path.insert(0, env["PYTHONPATH"])
    [name] = script_args.reward_funcs
    module, attr = name.rsplit(".", 1)
    reward = getattr(importlib.import_module(module), attr)
    calls = []

    def recorded(prompts, completions, **kwargs):
        scores = reward(prompts=prompts, completions=completions, **kwargs)
        calls.append((len(completions), set(kwargs), scores))
        return scores

    recorded.__name__ = attr
    ds = load_dataset(script_args.dataset_name)
    assert ds["train"].num_rows == rows("trl-grpo", "train")
    trainer = GRPOTrainer(
        model=model_args.model_name_or_path, reward_funcs=[recorded], args=training_args, train_dataset=ds["train"]
    )
    result = trainer.train()
    assert result.global_step == 1
    n, kwargs, scores = calls[0]
    assert n == 2 and {"ground_truth", "data_source", "meta"} <= kwargs, kwargs
    assert all(isinstance(s, float) for s in scores)


# -- multi-turn: SFT on chains with tool calls, GRPO with the evaluator as the environment -------


def test_sft_trainer_trains_the_assistant_turns_of_tool_conversations_and_steps(dataset, tool_model, rows, tmp_path):
    from datasets import load_dataset
    from trl import SFTTrainer

    ds_dir = dataset("trl-sft-multiturn")
    _, (script_args, training_args, model_args, _) = parse("sft", ds_dir, tool_model, tmp_path, "--eval_strategy", "no")
    assert training_args.max_length == card_setting(ds_dir, "TRL `max_length`")
    assert training_args.assistant_only_loss is True
    ds = load_dataset(script_args.dataset_name)
    assert ds["train"].num_rows == rows("trl-sft-multiturn", "train")
    trainer = SFTTrainer(model=model_args.model_name_or_path, args=training_args, train_dataset=ds["train"])
    tokenizer = trainer.processing_class
    tokenized = trainer.train_dataset
    lengths = [len(ids) for ids in tokenized["input_ids"]]
    assert max(lengths) < training_args.max_length, (max(lengths), training_args.max_length)
    for ids, labels in zip(tokenized["input_ids"], tokenized["labels"]):
        text = tokenizer.decode(ids)
        assert "<tool_call>" in text and "# Tools" in text, "the calls and the row's tools are rendered"
        trained = tokenizer.decode([t for t in labels if t != -100])
        assert '"name": "evaluate"' in trained and "<tool_response>" not in trained, "assistant turns only"
    assert trainer.train().global_step == 1


def test_grpo_with_the_kernel_environment_steps(dataset, tool_model, rows, tmp_path):
    """The card's command (`python -m ksmith.trainers.trl_env`, TRL's own parser) builds TRL's
    `GRPOTrainer` with `KernelEnv`: TRL probes it for its tools (the schema the datasets declare),
    resets one environment per rollout with the row and rewards each rollout with `get_reward`."""
    from datasets import load_dataset
    from ksmith.environment import TOOL_SCHEMA

    ds_dir = dataset("trl-env")
    env, argv = card_command(ds_dir, tool_model)
    module_name, args = module_args(argv)
    assert module_name == "ksmith.trainers.trl_env"
    ksmith_on_path(env)
    module = importlib.import_module(module_name)
    run_only = ["--output_dir", str(tmp_path), "--max_steps", "1", "--per_device_train_batch_size", "2"]
    run_only += ["--report_to", "none", "--save_strategy", "no", "--use_cpu", "true", "--num_generations", "2"]
    run_only += ["--eval_strategy", "no"]
    if "--output_dir" in args:
        i = args.index("--output_dir")
        del args[i : i + 2]
    script_args, training_args, model_args = module.make_parser().parse_args_and_config(args=[*args, *run_only])
    assert training_args.max_completion_length == card_setting(ds_dir, "TRL `max_completion_length`")
    assert training_args.max_tool_calling_iterations == card_setting(ds_dir, "TRL `max_tool_calling_iterations`")
    # A random model never stops early: 48 tokens are enough for the step.
    training_args.max_completion_length = 48
    assert load_dataset(script_args.dataset_name)["train"].num_rows == rows("trl-env", "train")

    seen = {"reset": [], "reward": []}

    class Recorded(module.KernelEnv):
        def reset(self, **row):
            seen["reset"].append(set(row))
            return super().reset(**row)

        def get_reward(self):
            value = super().get_reward()
            seen["reward"].append(value)
            return value

    Recorded.evaluate.__doc__ = module.KernelEnv.evaluate.__doc__
    original = module.KernelEnv
    module.KernelEnv = Recorded
    try:
        trainer = module.build_trainer(script_args, training_args, model_args)
    finally:
        module.KernelEnv = original
    from transformers.utils import get_json_schema

    assert [get_json_schema(t) for t in trainer.tools] == [TOOL_SCHEMA]
    assert trainer.train().global_step == 1
    assert len(seen["reset"]) == 2 and all({"prompt", "ground_truth"} <= keys for keys in seen["reset"])
    # The random model calls no tool: no evaluation, the no-code reward.
    assert seen["reward"] == [0.0, 0.0]

    # The tool as TRL calls it (keyword arguments from the parsed call), on the program the
    # multi-turn SFT data ends at: evaluated in the Triton CPU interpreter.
    starts = rows_of(script_args.dataset_name)
    chain, i = chain_for_a_start(dataset("trl-sft-multiturn"), starts, lambda row: row["meta"]["task_id"])
    row = starts[i]
    arguments = [m for m in chain["messages"] if m["tool_calls"]][-1]["tool_calls"][0]["function"]["arguments"]
    environment = module.KernelEnv()
    environment.reset(**row)
    report = json.loads(environment.evaluate(**arguments))
    assert report["status"] == "correct" and report["correct"], report
    assert environment.get_reward() >= 0.3, "correct: at least the correctness reward"
    if os.environ["KSMITH_EVAL_DEVICE"] == "cpu":
        assert report["speedup"] is None and environment.get_reward() == 0.3, "untimed on CPU"
