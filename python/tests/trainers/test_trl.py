"""TRL 1.16.x: each card's `trl sft` / `trl grpo` command line, parsed by TRL's own parser,
builds the trainer on the exported folder and runs one optimizer step on the tiny model; SFT
keeps every completion whole, GRPO calls ksmith's reward function with the dataset's columns."""

from __future__ import annotations

import importlib
import sys

import pytest
from support import card_command, card_setting


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
