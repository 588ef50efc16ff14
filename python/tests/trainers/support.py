"""What the trainer tests share: the tiny model made in the test, the exported datasets, and the
card's command line as the trainer would receive it."""

from __future__ import annotations

import ast
import glob
import importlib.util
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from types import SimpleNamespace

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
SFT = ["verl-sft", "trl-sft", "trl-sft-standard", "openrlhf-sft"]
RL = ["verl-rl", "trl-grpo", "openrlhf-rl"]
MULTITURN = ["verl-sft-multiturn", "trl-sft-multiturn", "openrlhf-sft-multiturn"]
AGENT = ["verl-agent", "trl-env", "openrlhf-agent"]
CHATML = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def make_tiny_model(path: str) -> str:
    """A byte-level BPE tokenizer trained on ksmith's own Python sources (2,000 tokens, ChatML
    chat template) and a 2-layer Qwen2 model with random weights, saved in `path`. No download."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    files = sorted(glob.glob(os.path.join(ROOT, "python", "ksmith", "**", "*.py"), recursive=True))
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=2000,
        special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train(files, trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>")
    fast.chat_template = CHATML
    fast.save_pretrained(path)
    config = Qwen2Config(
        vocab_size=len(fast),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=32768,
        tie_word_embeddings=True,
        eos_token_id=fast.eos_token_id,
        pad_token_id=fast.pad_token_id,
    )
    torch.manual_seed(0)
    Qwen2ForCausalLM(config).save_pretrained(path)
    return path


def make_tool_model(model: str, path: str) -> str:
    """The tiny model with Qwen 2.5's chat template (as TRL ships it, so TRL recognizes it), which
    renders tools, `<tool_call>` blocks and tool messages: the multi-turn formats need a template
    that knows tool calls. Same tokenizer and weights as `model`."""
    from transformers import AutoTokenizer
    from trl.chat_template_utils import qwen2_5_chat_template

    shutil.copytree(model, path, dirs_exist_ok=True)
    tokenizer = AutoTokenizer.from_pretrained(model)
    tokenizer.chat_template = qwen2_5_chat_template
    tokenizer.save_pretrained(path)
    return path


def export_fixture(workdir: str, tokenizer_json: str) -> dict:
    """Runs the real export stage on the synthetic selection (`export_fixture`), counting tokens
    with the test model's tokenizer; returns its summary."""
    cargo = os.environ.get("CARGO", "cargo")
    env = {**os.environ, "KSMITH_FIXTURE_TOKENIZER": tokenizer_json}
    out = subprocess.run(
        [cargo, "run", "-q", "-p", "ksmith-export", "--example", "export_fixture", "--", workdir],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=1800,
        env=env,
    )
    assert out.returncode == 0, f"export_fixture failed:\n{out.stderr[-4000:]}"
    return json.loads(out.stdout.strip().splitlines()[-1])


def card_text(dataset: str) -> str:
    with open(os.path.join(dataset, "README.md")) as f:
        return f.read()


def card_setting(dataset: str, key: str) -> int:
    """The value the card's "Trainer settings" table gives `key` (e.g. "verl `data.max_length`")."""
    m = re.search(r"^\| " + re.escape(key) + r" \| (\d+) \|", card_text(dataset), re.M)
    assert m, f"{dataset}: no setting {key} in the card"
    return int(m.group(1))


def card_command(dataset: str, model: str) -> tuple[dict, list[str]]:
    """The card's command line with `DS`, `MODEL` and `KSMITH` filled in, split as a shell would:
    leading `NAME=value` words become the environment, the rest is argv."""
    usage = card_text(dataset).split("## Usage", 1)[1]
    block = re.search(r"```bash\n(.*?)```", usage, re.S)
    assert block, f"{dataset}: no bash block under Usage"
    lines = [line for line in block.group(1).splitlines() if not re.match(r"^[A-Z_]+=/path/", line)]
    text = "\n".join(lines).replace("\\\n", " ")
    values = {"DS": dataset, "MODEL": model, "KSMITH": ROOT}
    text = re.sub(r"\$(DS|MODEL|KSMITH)\b", lambda m: values[m.group(1)], text)
    argv = shlex.split(text)
    env = {}
    while argv and re.match(r"^[A-Z_]+=", argv[0]):
        name, value = argv.pop(0).split("=", 1)
        env[name] = value
    return env, argv


def ksmith_on_path(env: dict) -> None:
    """What the card's `PYTHONPATH=$KSMITH/python` does for the trainer's processes."""
    path = env.get("PYTHONPATH")
    assert path == os.path.join(ROOT, "python"), env
    if path not in sys.path:
        sys.path.insert(0, path)


def rows_of(dataset: str, split: str = "train") -> list[dict]:
    """The rows of a dataset's split, as `datasets` loads them."""
    import datasets

    return list(datasets.load_dataset(dataset)[split])


def chain_for_a_start(chain_dir: str, starts: list, task_of) -> tuple[dict, int]:
    """A multi-turn chain whose task has an environment start among `starts` (`task_of` gives a
    start's task), and that start's index: the chain's programs are that task's, so the start's
    evaluation can judge them. A real run without such a pair skips; the fixture always has one."""
    import pytest

    for chain in rows_of(chain_dir):
        for i, start in enumerate(starts):
            if task_of(start) == chain["meta"]["task_id"]:
                return chain, i
    assert "KSMITH_TRAINERS_DATASETS" in os.environ, "the fixture's chains and starts share their task"
    pytest.skip("no chain's task has an environment start in these datasets")


def module_args(argv: list[str]) -> tuple[str, list[str]]:
    """The module a command runs (`-m M` or `--module M`) and the arguments after it."""
    for flag in ("-m", "--module"):
        if flag in argv:
            i = argv.index(flag)
            return argv[i + 1], argv[i + 2 :]
    raise AssertionError(f"no module in {argv}")


def hydra_config(config_name: str, overrides: list[str]):
    """verl's own configuration (`verl/trainer/config/<config_name>.yaml`) with the overrides, as
    its `@hydra.main` entry point composes it."""
    import verl.trainer
    from hydra import compose, initialize_config_dir

    config_dir = os.path.join(os.path.dirname(verl.trainer.__file__), "config")
    with initialize_config_dir(config_dir=config_dir, version_base=None):
        return compose(config_name=config_name, overrides=overrides)


class _Parsed(Exception):
    pass


def openrlhf_args(module: str, args: list[str]) -> SimpleNamespace:
    """OpenRLHF's own parser and checks: the `if __name__ == "__main__":` block of the trainer's
    module run with `args`, stopped where it calls `train(args)`; returns those arguments."""
    import argparse
    import datetime

    spec = importlib.util.find_spec(module)
    with open(spec.origin) as f:
        tree = ast.parse(f.read())
    main = next(n for n in tree.body if isinstance(n, ast.If) and ast.unparse(n.test) in ("__name__ == '__main__'",))
    code = compile(ast.Module(body=main.body, type_ignores=[]), spec.origin, "exec")

    def train(parsed):
        raise _Parsed(parsed)

    namespace = {"argparse": argparse, "os": os, "datetime": datetime.datetime, "train": train}
    saved = sys.argv
    sys.argv = [spec.origin, *args]
    try:
        exec(code, namespace)  # noqa: S102 - the trainer's own argument code, from its installed package
    except _Parsed as p:
        return p.args[0]
    finally:
        sys.argv = saved
    raise AssertionError(f"{module}: the main block returned without starting training")


class OpenRLHFStrategy:
    """What OpenRLHF's datasets ask of a strategy: the parsed arguments, printing, rank."""

    def __init__(self, args):
        self.args = args

    def print(self, *_):
        pass

    def is_rank_0(self):
        return True
