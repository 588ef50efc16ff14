"""Fixtures of the trainer tests (`make test-trainers`: the trainers' environment, `-m trainers`).

Every test here is marked `trainers`; `pytest python/tests` in the ksmith environment does not
collect this folder (see python/tests/conftest.py). Nothing is downloaded: the Hugging Face
libraries run offline with private caches, the model and tokenizer are made in the test, and
the datasets come from the real export stage (`export_fixture`), or from a work directory of a
real run when `KSMITH_TRAINERS_DATASETS` names its `datasets/` folder (then set
`KSMITH_TRAINERS_MODEL` to a model folder made by `support.make_tiny_model` whose
`tokenizer.json` that export counted with, or expect the cards' settings to fit a real model's
tokenizer only; the multi-turn tests use that model with Qwen 2.5's chat template, or
`KSMITH_TRAINERS_TOOL_MODEL`).
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import sys
import tempfile

import pytest

_CACHE = tempfile.mkdtemp(prefix="ksmith-trainers-hf-")
atexit.register(shutil.rmtree, _CACHE, True)
os.environ["HF_HOME"] = _CACHE
os.environ["HF_DATASETS_CACHE"] = os.path.join(_CACHE, "datasets")
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ["HF_DATASETS_OFFLINE"] = "1"
os.environ["WANDB_DISABLED"] = "true"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# The agent tests evaluate programs with the reward's local evaluator: on the CPU (the Triton
# interpreter, untimed), whatever GPU the machine has, so their scores are the same everywhere.
os.environ.setdefault("KSMITH_EVAL_DEVICE", "cpu")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from support import export_fixture, make_tiny_model, make_tool_model  # noqa: E402


def pytest_collection_modifyitems(items):
    for item in items:
        item.add_marker(pytest.mark.trainers)


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory) -> str:
    return os.environ.get("KSMITH_TRAINERS_MODEL") or make_tiny_model(str(tmp_path_factory.mktemp("tiny-model")))


@pytest.fixture(scope="session")
def tool_model(tiny_model, tmp_path_factory) -> str:
    """The model of the multi-turn tests: `KSMITH_TRAINERS_TOOL_MODEL` (a model whose chat template
    renders tool calls), else the test model with Qwen 2.5's template (same tokenizer)."""
    return os.environ.get("KSMITH_TRAINERS_TOOL_MODEL") or make_tool_model(
        tiny_model, str(tmp_path_factory.mktemp("tool-model"))
    )


@pytest.fixture(scope="session")
def datasets_root(tiny_model, tmp_path_factory) -> str:
    given = os.environ.get("KSMITH_TRAINERS_DATASETS")
    if given:
        return given
    workdir = str(tmp_path_factory.mktemp("export"))
    export_fixture(workdir, os.path.join(tiny_model, "tokenizer.json"))
    return os.path.join(workdir, "datasets")


@pytest.fixture(scope="session")
def record(datasets_root) -> dict:
    with open(os.path.join(datasets_root, "export.json")) as f:
        return json.load(f)


@pytest.fixture
def dataset(datasets_root, record):
    """The folder of a format's dataset; a format a real run left out is skipped with the
    reason its export recorded (the fixture export writes every format)."""

    def get(folder: str) -> str:
        if folder in record["omitted"]:
            assert "KSMITH_TRAINERS_DATASETS" in os.environ, f"the fixture export left out {folder}"
            pytest.skip(f"{folder} was left out by that export: {record['omitted'][folder]}")
        return os.path.join(datasets_root, folder)

    return get


@pytest.fixture
def rows(record):
    """Rows of a dataset's split, as the export wrote them."""
    return lambda folder, split: record["written"][folder]["splits"].get(split, 0)
