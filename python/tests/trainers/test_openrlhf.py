"""OpenRLHF 0.11.x: each card's command line, parsed by the trainer's own parser and checks (its
`__main__` block, stopped where training starts), builds OpenRLHF's datasets from the exported
folder: SFT keeps every sample (OpenRLHF drops longer ones silently), every PPO prompt leaves
room for `--rollout.max_new_tokens`, and the reward file the card names loads and scores."""

from __future__ import annotations

import importlib.util

from support import OpenRLHFStrategy, card_command, card_setting, module_args, openrlhf_args


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
