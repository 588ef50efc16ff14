"""The exported datasets load as the trainers load them, with the columns and types they expect.

The datasets come from `cargo run -p ksmith-export --example export_fixture`, which writes a
synthetic selection and runs the real export stage on it (several shards, several row groups,
train and validation splits, nullable fields both null and set).
"""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys

import pyarrow.parquet as pq
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "python"))

datasets = pytest.importorskip(
    "datasets", reason="`datasets` is in python/requirements.txt; run scripts/setup-python.sh"
)
yaml = pytest.importorskip("yaml")

FOLDERS = [
    "verl-rl",
    "verl-sft",
    "trl-sft",
    "trl-sft-standard",
    "trl-grpo",
    "openrlhf-rl",
    "openrlhf-sft",
    "verl-sft-multiturn",
    "trl-sft-multiturn",
    "openrlhf-sft-multiturn",
    "verl-agent",
    "trl-env",
    "openrlhf-agent",
]
GRPO = {"verl-rl", "trl-grpo", "openrlhf-rl"}
ENV = {"verl-agent", "trl-env", "openrlhf-agent"}
CHAINS = {"verl-sft-multiturn", "trl-sft-multiturn", "openrlhf-sft-multiturn"}
TRL_RESERVED = {
    "completion",
    "completion_ids",
    "prompts",
    "completions",
    "trainer_state",
    "log_extra",
    "log_metric",
    "environments",
}
MESSAGE = datasets.List({"role": datasets.Value("string"), "content": datasets.Value("string")})


def run_fixture(workdir: str, rows: tuple[int, int] | None = None) -> dict:
    cargo = os.environ.get("CARGO", "cargo")
    extra = [str(n) for n in rows] if rows else []
    out = subprocess.run(
        [cargo, "run", "-q", "-p", "ksmith-export", "--example", "export_fixture", "--", workdir, *extra],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert out.returncode == 0, f"export_fixture failed:\n{out.stderr[-4000:]}"
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="session")
def exported(tmp_path_factory):
    workdir = str(tmp_path_factory.mktemp("export"))
    summary = run_fixture(workdir)
    summary["datasets"] = os.path.join(workdir, "datasets")
    # A private cache: a load must read these files, never an earlier session's cache.
    summary["cache"] = str(tmp_path_factory.mktemp("hf-cache"))
    return summary


def shards(exported, folder, split=None):
    pattern = f"{split}-*.parquet" if split else "*.parquet"
    return sorted(glob.glob(os.path.join(exported["datasets"], folder, "data", pattern)))


def source(folder: str) -> str:
    """The selected table a dataset is made from."""
    if folder in GRPO:
        return "grpo"
    if folder in ENV:
        return "env"
    if folder in CHAINS:
        return "chains"
    return "sft"


def expected_rows(exported, folder, split):
    return exported["rows"][source(folder)].get(split, 0)


def card(exported, folder) -> tuple[dict, str]:
    text = open(os.path.join(exported["datasets"], folder, "README.md")).read()
    assert text.startswith("---\n")
    header, body = text[4:].split("\n---\n", 1)
    return yaml.safe_load(header), body


def test_every_format_is_exported_in_the_hf_layout(exported):
    names = sorted(os.listdir(exported["datasets"]))
    assert names == sorted([*FOLDERS, "export.json"]), "no temporary folders are left behind"
    record = json.load(open(os.path.join(exported["datasets"], "export.json")))
    assert sorted(record["written"]) == sorted(FOLDERS) and record["omitted"] == {}
    for folder in FOLDERS:
        for split in ("train", "validation"):
            files = shards(exported, folder, split)
            n = expected_rows(exported, folder, split)
            assert n > 0, "the fixture fills both splits"
            want = -(-n // exported["shard_rows"])
            assert [os.path.basename(f) for f in files] == [
                f"{split}-{i:05d}-of-{want:05d}.parquet" for i in range(want)
            ]


@pytest.mark.parametrize("folder", FOLDERS)
def test_pyarrow_sees_one_schema_zstd_metadata_and_small_row_groups(exported, folder):
    files = shards(exported, folder)
    schemas = [pq.read_schema(f) for f in files]
    assert all(s.equals(schemas[0], check_metadata=True) for s in schemas), "one fixed schema across shards and splits"
    for f in files:
        pf = pq.ParquetFile(f)
        footer = pf.metadata.metadata
        assert footer[b"ksmith.dataset_schema_version"] == b"1.5.0"
        assert pq.read_schema(f).metadata[b"ksmith.dataset_schema_version"] == b"1.5.0"
        assert footer[b"ksmith.format"] == folder.replace("-", "_").encode()
        for g in range(pf.metadata.num_row_groups):
            rg = pf.metadata.row_group(g)
            assert rg.num_rows <= exported["row_group_rows"]
            for c in range(rg.num_columns):
                assert rg.column(c).compression == "ZSTD"
    for split in ("train", "validation"):
        rows = sum(pq.ParquetFile(f).metadata.num_rows for f in shards(exported, folder, split))
        assert rows == expected_rows(exported, folder, split)
    assert "map<" not in str(schemas[0]), "no Arrow map type (datasets cannot load it)"
    assert "large_" not in str(schemas[0]), "plain string/list types"


@pytest.mark.parametrize("folder", FOLDERS)
def test_datasets_loads_each_file_and_the_folder_through_the_card(exported, folder):
    # verl's exact call, file by file.
    for f in shards(exported, folder):
        ds = datasets.load_dataset("parquet", data_files=f, cache_dir=exported["cache"])["train"]
        assert ds.num_rows == pq.ParquetFile(f).metadata.num_rows
    # The folder, through the card's `configs` header.
    header, body = card(exported, folder)
    config = header["configs"][0]
    assert config["config_name"] == "default"
    assert {d["split"]: d["path"] for d in config["data_files"]} == {
        split: [os.path.relpath(f, os.path.join(exported["datasets"], folder)) for f in shards(exported, folder, split)]
        for split in ("train", "validation")
    }, "every shard of every split is named"
    dd = datasets.load_dataset(os.path.join(exported["datasets"], folder), cache_dir=exported["cache"])
    assert set(dd.keys()) == {"train", "validation"}
    for split in ("train", "validation"):
        assert dd[split].num_rows == expected_rows(exported, folder, split)
        assert f"| {split} | {expected_rows(exported, folder, split)} |" in body
    assert "## Provenance" in body and "org/vision" in body and "`" + "0" * 30 in body, "repos with pinned commits"
    assert "Fixture rule" in body and "fixture-select-config" in body, "selection rules and config hash"
    assert header["license"] == "other", "two licenses in the samples"


def load(exported, folder):
    return datasets.load_dataset(os.path.join(exported["datasets"], folder), cache_dir=exported["cache"])


def test_verl_rl_schema(exported):
    dd = load(exported, "verl-rl")
    ds = dd["train"]
    assert list(ds.features) == ["data_source", "prompt", "ability", "reward_model", "extra_info"]
    assert ds.features["prompt"] == MESSAGE
    assert ds.features["reward_model"] == {"style": datasets.Value("string"), "ground_truth": datasets.Value("string")}
    assert ds.features["extra_info"]["index"] == datasets.Value("int64")
    for split in ("train", "validation"):
        rows = dd[split]
        assert [r["extra_info"]["index"] for r in rows] == list(range(rows.num_rows)), "index within the split"
        assert {r["extra_info"]["split"] for r in rows} == {split}
    row = ds[0]
    assert (
        isinstance(row["prompt"], list) and row["prompt"][0]["role"] == "system" and row["prompt"][-1]["role"] == "user"
    )
    assert row["reward_model"]["style"] == "rule"
    gt = json.loads(row["reward_model"]["ground_truth"])
    assert {
        "version",
        "task_id",
        "entry_point",
        "reference_program",
        "parent_program",
        "parent_is_reference",
        "parent_runtime_ms",
        "eager_runtime_ms",
        "tolerances",
    } <= set(gt)
    assert gt["entry_point"] == "ModelNew" and "class Model" in gt["reference_program"]
    speedups = [r["extra_info"]["parent_speedup"] for r in ds]
    assert None in speedups and any(isinstance(s, float) for s in speedups), "nullable field, both states"
    # verl routes rewards by data_source and requires reward_model.ground_truth on every row.
    assert all(r["data_source"] and r["reward_model"]["ground_truth"] for r in ds)


def test_verl_sft_has_messages_and_no_trl_trigger_columns(exported):
    ds = load(exported, "verl-sft")["train"]
    assert ds.features["messages"] == MESSAGE
    assert not {"prompt", "completion", "text"} & set(ds.features), "TRL would pick the prompt-completion branch"
    roles = [m["role"] for m in ds[0]["messages"]]
    assert roles == ["system", "user", "assistant"]
    # verl's SFT datasets read with pandas: nested cells arrive as arrays of dicts.
    df = pq.read_table(shards(exported, "verl-sft", "train")[0]).to_pandas()
    assert df["messages"].iloc[0][2]["role"] == "assistant"


def test_trl_sft_conversational_and_standard(exported):
    conv = load(exported, "trl-sft")["train"]
    assert conv.features["prompt"] == MESSAGE and conv.features["completion"] == MESSAGE
    assert "messages" not in conv.features
    for r in conv:
        assert [m["role"] for m in r["completion"]] == ["assistant"]
        assert r["prompt"][-1]["role"] == "user"
    std = load(exported, "trl-sft-standard")["train"]
    assert std.features["prompt"] == datasets.Value("string") and std.features["completion"] == datasets.Value("string")
    assert std[0]["prompt"].startswith("You are an expert") and "class ModelNew" in std[0]["completion"]


def test_trl_grpo_is_prompt_only_with_reward_kwargs(exported):
    ds = load(exported, "trl-grpo")["train"]
    assert ds.features["prompt"] == MESSAGE
    assert not TRL_RESERVED & set(ds.features), "columns become reward-function keyword arguments"
    assert json.loads(ds[0]["ground_truth"])["entry_point"] == "ModelNew"


def test_openrlhf_keys(exported):
    rl = load(exported, "openrlhf-rl")["train"]
    assert rl.features["input"] == MESSAGE
    assert rl.features["label"] == datasets.Value("string") and rl.features["datasource"] == datasets.Value("string")
    json.loads(rl[0]["label"])
    sft = load(exported, "openrlhf-sft")["train"]
    assert sft.features["input"] == MESSAGE and sft.features["output"] == MESSAGE
    assert [m["role"] for m in sft[0]["output"]] == ["assistant"]


TOOL_MESSAGE_KEYS = ["role", "content", "tool_calls", "name"]


def test_multiturn_sft_has_tool_calls_tools_and_no_trl_trigger_columns(exported):
    for folder in ("verl-sft-multiturn", "trl-sft-multiturn"):
        ds = load(exported, folder)["train"]
        assert list(ds.features) == ["messages", "tools", "meta"]
        assert list(ds.features["messages"].feature) == TOOL_MESSAGE_KEYS
        row = ds[0]
        roles = [m["role"] for m in row["messages"]]
        assert roles == ["system", "user", "assistant", "tool", "assistant", "tool", "assistant"]
        call = row["messages"][2]["tool_calls"][0]
        assert call["type"] == "function" and call["function"]["name"] == "evaluate"
        assert "class ModelNew" in call["function"]["arguments"]["program"]
        assert "```" not in row["messages"][2]["content"], "the program travels in the call, not the text"
        assert row["messages"][1]["tool_calls"] is None and row["messages"][3]["name"] == "evaluate"
        first, second = json.loads(row["messages"][3]["content"]), json.loads(row["messages"][5]["content"])
        assert first["status"] == "incorrect" and "max abs error" in first["error"]
        assert second["correct"] is True and second["error"] == ""
        assert row["messages"][6]["tool_calls"] is None, "the conversation ends without a call"
        assert row["tools"][0]["function"]["parameters"]["required"] == ["program"]
        assert len(row["meta"]["step_ids"]) == 2
        assert row["meta"]["end_speedup"] == second["speedup"] == 1.3, "the report's speedup is the chain's end"
    # verl's multi-turn SFT dataset reads with pandas (pyarrow backend): nested cells as dicts.
    df = pq.read_table(shards(exported, "verl-sft-multiturn", "train")[0]).to_pandas()
    assert df["messages"].iloc[0][2]["tool_calls"][0]["function"]["name"] == "evaluate"
    text = load(exported, "openrlhf-sft-multiturn")["train"]
    assert text.features["input"] == MESSAGE and "output" not in text.features
    roles = [m["role"] for m in text[0]["input"]]
    assert roles == ["system", "user", "assistant", "user", "assistant", "user", "assistant"]
    assert "```python" in text[0]["input"][2]["content"], "text answers keep their code"


def test_agent_datasets_carry_the_ground_truth_for_the_tool_and_the_instructions(exported):
    verl = load(exported, "verl-agent")["train"]
    assert list(verl.features) == ["data_source", "agent_name", "prompt", "ability", "reward_model", "extra_info"]
    row = verl[0]
    assert row["agent_name"] == "tool_agent"
    assert (
        row["extra_info"]["tools_kwargs"]["evaluate"]["create_kwargs"]["ground_truth"]
        == row["reward_model"]["ground_truth"]
    )
    gt = json.loads(row["reward_model"]["ground_truth"])
    assert gt["parent_is_reference"] and "# EVOLVE-BLOCK-START" in gt["parent_program"]
    assert "`evaluate` tool" in row["prompt"][0]["content"]
    trl = load(exported, "trl-env")["train"]
    assert not TRL_RESERVED & set(trl.features)
    assert json.loads(trl[0]["ground_truth"])["task_id"] == "relu_scale"
    orl = load(exported, "openrlhf-agent")["train"]
    assert "SEARCH/REPLACE blocks applied to your last program" in orl[0]["input"][0]["content"]
    json.loads(orl[0]["label"])


def test_a_second_export_with_nothing_changed_does_nothing(exported):
    assert exported["skipped"] is False
    first = {f: os.stat(f).st_mtime_ns for folder in FOLDERS for f in shards(exported, folder)}
    again = run_fixture(exported["workdir"])
    assert again["skipped"] is True
    assert again["fingerprint"] == exported["fingerprint"]
    assert {f: os.stat(f).st_mtime_ns for f in first} == first


def test_a_re_exported_folder_is_not_answered_from_the_cache_of_an_earlier_export(tmp_path):
    # `datasets` caches a local folder by its name and card header, not by its files: the card
    # names the export's fingerprint so a changed export gets a new cache entry.
    cache = str(tmp_path / "cache")
    counts = {}
    for name, rows in (("first", (5, 4)), ("second", (11, 9))):
        workdir = str(tmp_path / name)
        summary = run_fixture(workdir, rows)
        dd = datasets.load_dataset(os.path.join(workdir, "datasets", "verl-rl"), cache_dir=cache)
        counts[name] = (sum(d.num_rows for d in dd.values()), sum(summary["rows"]["grpo"].values()))
    assert counts["first"] == (4, 4) and counts["second"] == (9, 9), counts


@pytest.mark.parametrize("folder", FOLDERS)
def test_dataset_info_is_complete_and_loads_without_warnings(exported, folder, caplog):
    header, body = card(exported, folder)
    info = header["dataset_info"]
    files = shards(exported, folder)
    # The features are the shards' own schema, as `datasets` reads it.
    assert datasets.Features._from_yaml_list(info["features"]) == datasets.Features.from_arrow_schema(
        pq.read_schema(files[0])
    )
    for split in info["splits"]:
        assert {"name", "num_bytes", "num_examples"} <= set(split), split
        assert split["num_bytes"] > 0
        assert split["num_examples"] == expected_rows(exported, folder, split["name"])
    assert info["dataset_size"] == sum(s["num_bytes"] for s in info["splits"])
    with caplog.at_level("WARNING"):
        load(exported, folder)
    assert not [r for r in caplog.records if "dataset_info" in r.getMessage() or "malformed" in r.getMessage()], [
        r.getMessage() for r in caplog.records
    ]
    # The usage names every shard file.
    for f in files:
        assert os.path.relpath(f, os.path.join(exported["datasets"], folder)) in body


@pytest.mark.parametrize("folder", FOLDERS)
def test_the_card_states_lengths_that_match_the_rows(exported, folder):
    header, body = card(exported, folder)
    assert "## Lengths" in body and "## Trainer settings" in body
    ds = load(exported, folder)
    meta = {"verl-rl": lambda r: r["extra_info"], "verl-agent": lambda r: r["extra_info"]["meta"]}
    rows = [meta.get(folder, lambda r: r["meta"])(r) for split in ds.values() for r in split]
    if folder in GRPO or folder in ENV:
        longest = max(r["prompt_tokens"] for r in rows)
    else:
        longest = max(r["prompt_tokens"] + r["response_tokens"] for r in rows)
        assert all(r["tokens"] == r["prompt_tokens"] + r["response_tokens"] for r in rows)
    assert f"| {longest} |" in body, f"the longest sample ({longest} tokens) is in the lengths table"
