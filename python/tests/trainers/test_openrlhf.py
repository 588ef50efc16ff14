"""OpenRLHF 0.11.x: each card's command line, parsed by the trainer's own parser and checks (its
`__main__` block, stopped where training starts), builds OpenRLHF's datasets from the exported
folder: SFT keeps every sample (OpenRLHF drops longer ones silently), every PPO prompt leaves
room for `--rollout.max_new_tokens`, and the reward file the card names loads and scores; the
multi-turn SFT trains every answer, and the agent file runs an episode through OpenRLHF's
`MultiTurnAgentExecutor` with ksmith's evaluator."""

from __future__ import annotations

import importlib.util
import json
import os
import re
from types import SimpleNamespace

import pytest
from support import OpenRLHFStrategy, card_command, card_setting, chain_for_a_start, module_args, openrlhf_args


def test_sft_dataset_keeps_every_sample(dataset, tiny_model, rows):
    from openrlhf.datasets import SFTDataset
    from openrlhf.datasets.utils import blending_datasets
    from transformers import AutoTokenizer

    ds_dir = dataset("openrlhf-sft")
    _, argv = card_command(ds_dir, tiny_model)
    module, rest = module_args(argv)
    assert module == "openrlhf.cli.train_sft"
    args = openrlhf_args(module, rest)
    assert args.data.max_len == card_setting(ds_dir, "OpenRLHF `--data.max_len`")
    strategy = OpenRLHFStrategy(args)
    tokenizer = AutoTokenizer.from_pretrained(args.model.model_name_or_path)
    data = blending_datasets(args.data.dataset, None, strategy, dataset_split=args.data.dataset_split)
    assert len(data) == rows("openrlhf-sft", "train")
    kept = SFTDataset(data, tokenizer, args.data.max_len, strategy, num_processors=1)
    assert len(kept) == len(data), "OpenRLHF dropped samples longer than --data.max_len"
    if args.eval.dataset:
        val = blending_datasets(args.eval.dataset, None, strategy, dataset_split=args.eval.split)
        assert len(val) == rows("openrlhf-sft", "validation")


def test_ppo_prompts_fit_with_room_for_the_answer_and_the_reward_loads(dataset, tiny_model, rows):
    from openrlhf.datasets import PromptDataset
    from openrlhf.datasets.utils import blending_datasets
    from transformers import AutoTokenizer

    ds_dir = dataset("openrlhf-rl")
    _, argv = card_command(ds_dir, tiny_model)
    module, rest = module_args(argv)
    assert module == "openrlhf.cli.train_ppo_ray"
    args = openrlhf_args(module, rest)
    assert args.data.max_len == card_setting(ds_dir, "OpenRLHF `--data.max_len`")
    assert args.rollout.max_new_tokens == card_setting(ds_dir, "OpenRLHF `--rollout.max_new_tokens`")
    strategy = OpenRLHFStrategy(args)
    tokenizer = AutoTokenizer.from_pretrained(args.actor.model_name_or_path)
    data = blending_datasets(args.data.prompt_dataset, None, strategy, dataset_split=args.data.prompt_split)
    assert len(data) == rows("openrlhf-rl", "train")
    prompts = PromptDataset(data, tokenizer, strategy, input_template=args.data.input_template)
    assert len(prompts) == len(data)
    for i in range(len(prompts)):
        datasource, prompt, label = prompts[i][:3]
        assert datasource == "ksmith/triton_kernel" and label
        used = len(tokenizer(prompt, add_special_tokens=False)["input_ids"])
        assert used + args.rollout.max_new_tokens <= args.data.max_len, (i, used)
    [path] = args.reward.remote_url
    spec = importlib.util.spec_from_file_location("reward_func", path)
    reward = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(reward)
    out = reward.reward_func(queries=[prompt + "no code"], prompts=[prompt], labels=[label])
    assert float(out["rewards"][0]) == 0.0 and "extra_logs" in out


# -- multi-turn: SFT on text conversations, agent RL with the evaluator as the environment -------


def test_multiturn_sft_dataset_trains_every_answer_and_keeps_every_conversation(dataset, tool_model, rows):
    from openrlhf.datasets import SFTDataset
    from openrlhf.datasets.utils import blending_datasets
    from transformers import AutoTokenizer

    ds_dir = dataset("openrlhf-sft-multiturn")
    _, argv = card_command(ds_dir, tool_model)
    module, rest = module_args(argv)
    assert module == "openrlhf.cli.train_sft"
    args = openrlhf_args(module, rest)
    assert args.data.multiturn and args.data.output_key is None
    assert args.data.max_len == card_setting(ds_dir, "OpenRLHF `--data.max_len`")
    strategy = OpenRLHFStrategy(args)
    tokenizer = AutoTokenizer.from_pretrained(args.model.model_name_or_path)
    data = blending_datasets(args.data.dataset, None, strategy, dataset_split=args.data.dataset_split)
    assert len(data) == rows("openrlhf-sft-multiturn", "train")
    kept = SFTDataset(data, tokenizer, args.data.max_len, strategy, num_processors=1, multiturn=True)
    assert len(kept) == len(data), "OpenRLHF dropped conversations longer than --data.max_len"
    for i in range(len(data)):
        answers = sum(1 for m in data[i]["input"] if m["role"] == "assistant")
        assert len(kept.response_ranges[i]) == answers, "every answer is trained"


class ScriptedEngine:
    """OpenRLHF's vLLM engine for one episode: scripted answers, or the tiny model's own tokens."""

    def __init__(self, tokenizer, answers=None, model=None):
        self.tokenizer = tokenizer
        self.answers = list(answers or [])
        self.model = model
        self.prompts = []

    async def generate(self, prompt_ids, sampling_params, multi_modal_data=None):
        import torch

        self.prompts.append(list(prompt_ids))
        if self.model is not None:
            with torch.no_grad():
                out = self.model.generate(
                    torch.tensor([prompt_ids]), max_new_tokens=24, do_sample=False, pad_token_id=0
                )
            ids = out[0, len(prompt_ids) :].tolist()
            text = self.tokenizer.decode(ids)
        else:
            text = self.answers.pop(0) + self.tokenizer.eos_token
            ids = self.tokenizer.encode(text, add_special_tokens=False)
        output = SimpleNamespace(token_ids=ids, text=text, finish_reason="stop", logprobs=None)
        return SimpleNamespace(outputs=[output])


def test_agent_prompts_fit_and_one_episode_runs_through_openrlhfs_executor(dataset, tool_model, rows):
    """The card's command parsed by OpenRLHF, its prompts built by OpenRLHF's `PromptDataset`, and
    one episode through OpenRLHF's own `MultiTurnAgentExecutor` loaded from the card's agent file:
    a scripted answer with the program the multi-turn SFT data ends at is evaluated in the Triton
    CPU interpreter, its report comes back as a user turn in the model's chat template, and an
    answer without code ends the episode. (OpenRLHF's training step needs vLLM and a GPU.)"""
    import asyncio

    from openrlhf.datasets import PromptDataset
    from openrlhf.datasets.utils import blending_datasets
    from openrlhf.utils.agent import AgentExecutorBase
    from transformers import AutoTokenizer

    ds_dir = dataset("openrlhf-agent")
    env, argv = card_command(ds_dir, tool_model)
    module, rest = module_args(argv)
    assert module == "openrlhf.cli.train_ppo_ray"
    assert env == {"KSMITH_AGENT_MAX_TURNS": str(card_setting(ds_dir, "`KSMITH_AGENT_MAX_TURNS`"))}
    args = openrlhf_args(module, rest)
    assert args.data.max_len == card_setting(ds_dir, "OpenRLHF `--data.max_len`")
    strategy = OpenRLHFStrategy(args)
    tokenizer = AutoTokenizer.from_pretrained(args.actor.model_name_or_path)
    data = blending_datasets(args.data.prompt_dataset, None, strategy, dataset_split=args.data.prompt_split)
    assert len(data) == rows("openrlhf-agent", "train")
    prompts = PromptDataset(data, tokenizer, strategy, input_template=args.data.input_template)
    chain, i = chain_for_a_start(
        dataset("openrlhf-sft-multiturn"), [data[j] for j in range(len(data))], lambda r: r["meta"]["task_id"]
    )
    _, prompt, label = prompts[i][:3]

    # What OpenRLHF's `_load_agent_executor` does with --train.agent_func_path.
    spec = importlib.util.spec_from_file_location("agent_module", args.train.agent_func_path)
    agent_module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(agent_module)
    assert issubclass(agent_module.AgentExecutor, AgentExecutorBase)
    last = [m["content"] for m in chain["input"] if m["role"] == "assistant"][-2]
    kernel = re.search(r"```python\n(.*?)```", last, re.S)
    assert kernel, "the chain's last answer with code"
    # That kernel as an answer to this start's program (the rollout's rules: only the block
    # changes, new imports go inside it; code without block markers is the new block).
    from ksmith.answer import has_marker, split_block
    from ksmith.reward import parse_ground_truth

    code = kernel.group(1)
    body = split_block(code).body if has_marker(code) else code
    if "import triton" not in body:
        body = "import triton\nimport triton.language as tl\n" + body
    start = split_block(parse_ground_truth(label)["parent_program"])
    answer = "```python\n" + start.with_body(body) + "```\n"
    engine = ScriptedEngine(tokenizer, [answer, "Done: that is my result."])
    sampling = SimpleNamespace(max_tokens=None, logprobs=None)
    executor = agent_module.AgentExecutor()
    out = asyncio.run(executor.execute(prompt, label, sampling, args.data.max_len, tokenizer, engine))
    assert len(out["action_ranges"]) == 2 and len(engine.prompts) == 2
    assert out["reward"] >= 0.3 and float(out["scores"]) == pytest.approx(out["reward"])
    if os.environ["KSMITH_EVAL_DEVICE"] == "cpu":
        assert out["reward"] == pytest.approx(0.3), "untimed on CPU: the correctness reward"
    second_prompt = tokenizer.decode(engine.prompts[1])
    turn = re.search(r"<\|im_start\|>user\n(\{.*\})<\|im_end\|>\n<\|im_start\|>assistant\n$", second_prompt, re.S)
    assert turn, second_prompt[-300:]
    assert json.loads(turn.group(1))["status"] == "correct"
    assert second_prompt.count("<|im_end|>\n<|im_start|>user") == 2, "the answer's own end closes it once"

    # The tiny model itself: its answer has no program, which ends the episode with no reward.
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(args.actor.model_name_or_path)
    out = asyncio.run(
        executor.execute(prompt, label, sampling, args.data.max_len, tokenizer, ScriptedEngine(tokenizer, model=model))
    )
    assert len(out["action_ranges"]) == 1 and out["reward"] == 0.0
