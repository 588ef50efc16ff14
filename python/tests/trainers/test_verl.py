"""verl 0.9.x builds its datasets from each card's command line: `RLHFDataset` (main_ppo) with
the card's overrides keeps every prompt and loads the reward function, `MultiTurnSFTDataset`
(sft_trainer) takes every conversation without truncation, with the assistant turn trained; the
multi-turn formats: `MultiTurnSFTDataset` templates the tool calls and the tools' schema, the
agent dataset keeps every prompt with the tool's schema, and verl's `ToolAgentLoop` runs one
episode with ksmith's `evaluate` tool and reward."""

from __future__ import annotations

import os

import pytest
import support
from support import card_command, card_setting, hydra_config, ksmith_on_path, module_args


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


# -- multi-turn: SFT on chains with tool calls, agent RL with the evaluator as the tool ----------


def test_multiturn_sft_dataset_templates_tool_calls_and_the_schema_whole(dataset, tool_model, rows):
    from verl.utils import hf_tokenizer
    from verl.utils.dataset.multiturn_sft_dataset import MultiTurnSFTDataset

    ds_dir = dataset("verl-sft-multiturn")
    _, argv = card_command(ds_dir, tool_model)
    module, overrides = module_args(argv)
    assert module == "verl.trainer.sft_trainer"
    cfg = hydra_config("sft_trainer_engine", overrides)
    assert cfg.data.max_length == card_setting(ds_dir, "verl `data.max_length`")
    assert (cfg.data.messages_key, cfg.data.tools_key, cfg.data.truncation) == ("messages", "tools", "error")
    tokenizer = hf_tokenizer(cfg.model.path)
    ds = MultiTurnSFTDataset(parquet_files=cfg.data.train_files, tokenizer=tokenizer, config=cfg.data)
    assert len(ds) == rows("verl-sft-multiturn", "train")
    for i in range(len(ds)):
        # Each message templated on its own must equal the whole conversation (verl checks it and
        # raises otherwise), and no conversation may outgrow the card's max_length.
        item = ds[i]
        ids, mask = item["input_ids"], item["loss_mask"]
        assert int(ids.shape[-1]) <= cfg.data.max_length
        text = tokenizer.decode(ids)
        assert "<tool_call>" in text and '"name": "evaluate"' in text and "<tool_response>" in text
        assert '"program": ' in text and "# Tools" in text, "the call's arguments and the tools' schema"
        trained = tokenizer.decode(ids[mask.bool()])
        assert "<tool_call>" in trained and "<tool_response>" not in trained, "assistant turns only"


def agent_config(dataset, model):
    env, argv = card_command(dataset, model)
    module, overrides = module_args(argv)
    assert module == "verl.trainer.main_ppo"
    ksmith_on_path(env)
    return hydra_config("ppo_trainer", overrides)


def test_agent_dataset_keeps_every_prompt_with_the_tools_schema(dataset, tool_model, rows):
    from ksmith.environment import TOOL_SCHEMA
    from verl.trainer.ppo.utils import create_rl_dataset
    from verl.utils import hf_tokenizer

    ds_dir = dataset("verl-agent")
    cfg = agent_config(ds_dir, tool_model)
    rollout = cfg.actor_rollout_ref.rollout
    assert rollout.multi_turn.enable and rollout.multi_turn.format == "hermes"
    assert cfg.data.max_prompt_length == card_setting(ds_dir, "verl `data.max_prompt_length`")
    assert cfg.data.max_response_length == card_setting(ds_dir, "verl `data.max_response_length`")
    assert rollout.multi_turn.max_assistant_turns == card_setting(ds_dir, "verl `multi_turn.max_assistant_turns`")
    assert cfg.data.tool_config_path == rollout.multi_turn.tool_config_path
    tokenizer = hf_tokenizer(cfg.actor_rollout_ref.model.path)
    train = create_rl_dataset(cfg.data.train_files, cfg.data, tokenizer, None, is_train=True)
    # verl measured every prompt with the tool schemas the config names: ksmith's evaluate tool.
    assert train.tool_schemas == [TOOL_SCHEMA]
    assert len(train) == rows("verl-agent", "train"), "verl's overlong filter dropped prompts"
    item = train[0]
    assert item["agent_name"] == "tool_agent"
    assert item["tools_kwargs"]["evaluate"]["create_kwargs"]["ground_truth"] == item["reward_model"]["ground_truth"]


class ScriptedServer:
    """verl's LLM server for one agent loop: scripted answers, or the tiny model's own tokens."""

    def __init__(self, tokenizer, answers=None, model=None):
        self.tokenizer = tokenizer
        self.answers = list(answers or [])
        self.model = model
        self.prompts = []

    async def generate(self, request_id, prompt_ids, sampling_params, **_):
        import torch
        from verl.workers.rollout.replica import TokenOutput

        self.prompts.append(list(prompt_ids))
        if self.model is not None:
            with torch.no_grad():
                out = self.model.generate(
                    torch.tensor([prompt_ids]), max_new_tokens=24, do_sample=False, pad_token_id=0
                )
            ids = out[0, len(prompt_ids) :].tolist()
        else:
            text = self.answers.pop(0)
            ids = self.tokenizer.encode(text, add_special_tokens=False) + [self.tokenizer.eos_token_id]
        return TokenOutput(token_ids=ids, log_probs=[0.0] * len(ids), stop_reason="completed")


def run_tool_agent(cfg, tokenizer, item, server):
    import asyncio

    from verl.experimental.agent_loop.agent_loop import DictConfigWrap, ToolListWrap
    from verl.experimental.agent_loop.tool_agent_loop import ToolAgentLoop
    from verl.tools.tool_registry import load_all_tools
    from verl.utils.dataset.rl_dataset import RLHFDataset

    async def run():
        loop = ToolAgentLoop(
            trainer_config=DictConfigWrap(cfg),
            server_manager=server,
            tokenizer=tokenizer,
            processor=None,
            dataset_cls=RLHFDataset,
            data_config=DictConfigWrap(cfg.data),
            hf_model_type="qwen2",
            tools=ToolListWrap(load_all_tools(cfg.actor_rollout_ref.rollout.multi_turn.tool_config_path, None)),
        )
        kwargs = {k: v for k, v in item.items() if k != "agent_name"}
        return await loop.run({"temperature": 1.0, "top_p": 1.0, "top_k": -1, "logprobs": False}, **kwargs)

    return asyncio.run(run())


def test_one_tool_agent_rollout_evaluates_the_call_and_rewards_the_best(dataset, tool_model):
    """verl's own `ToolAgentLoop` on a `verl-agent` row, in this process: a scripted answer calls
    `evaluate` with the program the multi-turn SFT data ends at, the tool evaluates it in the Triton
    CPU interpreter, and the card's reward function scores the episode by that call. (verl's
    training step needs a GPU rollout engine; see the agent card.)"""
    import importlib.util
    import json

    from verl.trainer.ppo.utils import create_rl_dataset
    from verl.utils import hf_tokenizer

    ds_dir = dataset("verl-agent")
    cfg = agent_config(ds_dir, tool_model)
    tokenizer = hf_tokenizer(cfg.actor_rollout_ref.model.path)
    starts = create_rl_dataset(cfg.data.train_files, cfg.data, tokenizer, None)
    items = [starts[i] for i in range(len(starts))]
    chain, i = support.chain_for_a_start(
        dataset("verl-sft-multiturn"), items, lambda item: item["extra_info"]["meta"]["task_id"]
    )
    item = items[i]
    program = [m for m in chain["messages"] if m["tool_calls"]][-1]["tool_calls"][0]["function"]["arguments"]
    call = json.dumps({"name": "evaluate", "arguments": program})
    server = ScriptedServer(tokenizer, [f"One kernel does it.\n<tool_call>\n{call}\n</tool_call>", "Done."])
    out = run_tool_agent(cfg, tokenizer, item, server)
    response = tokenizer.decode(out.response_ids)
    assert '<tool_response>\n{"status":"correct","compiled":true,"correct":true' in response, response[-600:]
    [score] = out.extra_fields["tool_rewards"]
    [call] = out.extra_fields["ksmith_calls"]
    assert call == {"score": score, "correct": 1.0, "speedup_vs_parent": call["speedup_vs_parent"]}
    assert score >= 0.3, "correct: at least the correctness reward"
    if os.environ["KSMITH_EVAL_DEVICE"] == "cpu":
        assert score == 0.3, "untimed on CPU: the correctness reward"
    assert len(server.prompts) == 2 and out.num_turns == 4
    masked = [t for t, m in zip(out.response_ids, out.response_mask) if m == 0]
    assert '"status":"correct"' in tokenizer.decode(masked), "the report is not trained on"
    spec = importlib.util.spec_from_file_location("reward_fn", cfg.reward.custom_reward_function.path)
    reward_fn = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(reward_fn)
    extra_info = {**item["extra_info"], **out.extra_fields}
    result = getattr(reward_fn, cfg.reward.custom_reward_function.name)(
        data_source=item["data_source"],
        solution_str=response,
        ground_truth=item["reward_model"]["ground_truth"],
        extra_info=extra_info,
    )
    assert result == {**call, "tool_calls": 1.0}

    # The tiny model itself drives the loop: it makes no call, and the episode ends on its answer.
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(cfg.actor_rollout_ref.model.path)
    out = run_tool_agent(cfg, tokenizer, item, ScriptedServer(tokenizer, model=model))
    assert out.extra_fields["tool_rewards"] == [] and len(out.response_ids) > 0
