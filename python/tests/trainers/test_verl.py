"""verl 0.9.x builds its datasets from each card's command line: `RLHFDataset` (main_ppo) with
the card's overrides keeps every prompt and loads the reward function, `MultiTurnSFTDataset`
(sft_trainer) takes every conversation without truncation, with the assistant turn trained."""

from __future__ import annotations

import os

import pytest
from support import card_command, card_setting, hydra_config, module_args


def rl_config(dataset, model):
    _, argv = card_command(dataset, model)
    module, overrides = module_args(argv)
    assert module == "verl.trainer.main_ppo"
    return hydra_config("ppo_trainer", overrides), overrides


def test_rl_dataset_keeps_every_prompt_with_the_cards_settings(dataset, tiny_model, rows):
    from verl.trainer.ppo.utils import create_rl_dataset
    from verl.utils import hf_tokenizer

    ds_dir = dataset("verl-rl")
    cfg, overrides = rl_config(ds_dir, tiny_model)
    assert cfg.data.max_prompt_length == card_setting(ds_dir, "verl `data.max_prompt_length`")
    assert cfg.data.max_response_length == card_setting(ds_dir, "verl `data.max_response_length`")
    assert cfg.data.filter_overlong_prompts is True
    tokenizer = hf_tokenizer(cfg.actor_rollout_ref.model.path)
    train = create_rl_dataset(cfg.data.train_files, cfg.data, tokenizer, None, is_train=True)
    assert len(train) == rows("verl-rl", "train"), "verl's overlong filter dropped prompts"
    item = train[0]
    assert item["raw_prompt"][-1]["role"] == "user" and item["reward_model"]["ground_truth"]
    val = create_rl_dataset(cfg.data.val_files, cfg.data, tokenizer, None, is_train=False)
    assert len(val) == (rows("verl-rl", "validation") or rows("verl-rl", "train"))
    # verl's default prompt length would drop what the card's setting keeps.
    texts = [
        tokenizer.apply_chat_template(train[i]["raw_prompt"], add_generation_prompt=True, tokenize=False)
        for i in range(len(train))
    ]
    longest = max(len(tokenizer(t, add_special_tokens=False)["input_ids"]) for t in texts)
    assert longest <= cfg.data.max_prompt_length
    assert longest > 512 or "KSMITH_TRAINERS_DATASETS" in os.environ, "the fixture's prompts outgrow verl's default"
    if longest > 512:
        default = hydra_config("ppo_trainer", [o for o in overrides if "max_prompt_length" not in o])
        assert default.data.max_prompt_length == 512
        dropped = create_rl_dataset(default.data.train_files, default.data, tokenizer, None)
        assert len(dropped) < len(train)


def test_the_cards_reward_function_loads_in_verl_and_scores(dataset, tiny_model):
    from verl.trainer.ppo.reward import get_custom_reward_fn

    ds_dir = dataset("verl-rl")
    cfg, _ = rl_config(ds_dir, tiny_model)
    score = get_custom_reward_fn(cfg)
    assert score is not None, "the card's reward.custom_reward_function is not read by verl"
    import pyarrow.parquet as pq

    row = pq.read_table(cfg.data.train_files[0]).slice(0, 1).to_pylist()[0]
    result = score(
        data_source=row["data_source"],
        solution_str="I cannot write this kernel.",
        ground_truth=row["reward_model"]["ground_truth"],
        extra_info=row["extra_info"],
    )
    assert result["score"] == 0.0 and result["has_code"] == 0.0, result


def test_multiturn_sft_dataset_takes_every_conversation_whole(dataset, tiny_model, rows):
    from verl.utils import hf_tokenizer
    from verl.utils.dataset.multiturn_sft_dataset import MultiTurnSFTDataset

    ds_dir = dataset("verl-sft")
    _, argv = card_command(ds_dir, tiny_model)
    module, overrides = module_args(argv)
    assert module == "verl.trainer.sft_trainer"
    cfg = hydra_config("sft_trainer_engine", overrides)
    assert cfg.data.max_length == card_setting(ds_dir, "verl `data.max_length`")
    assert cfg.data.truncation == "error"
    tokenizer = hf_tokenizer(cfg.model.path)

    # What verl.trainer.sft_trainer.create_sft_dataset does without a custom class (importing
    # that module pulls verl's whole engine stack, which this environment leaves out).
    def build(config):
        return MultiTurnSFTDataset(parquet_files=config.data.train_files, tokenizer=tokenizer, config=config.data)

    ds = build(cfg)
    assert len(ds) == rows("verl-sft", "train")
    lengths = []
    for i in range(len(ds)):
        item = ds[i]  # raises when a conversation is longer than max_length (truncation=error)
        lengths.append(int(item["input_ids"].shape[-1]))
        assert int(item["loss_mask"].sum()) > 0, f"row {i}: no assistant token is trained"
    assert max(lengths) <= cfg.data.max_length
    assert max(lengths) > 512 or "KSMITH_TRAINERS_DATASETS" in os.environ
    if max(lengths) > 512:
        short = build(hydra_config("sft_trainer_engine", [*overrides, "data.max_length=512"]))
        with pytest.raises(ValueError, match="max_length"):
            for i in range(len(short)):
                short[i]
