"""How a model builds and calls the classes its program defines (`ksmith.probe.observe`), the
configurations the probe stage gives those classes' own programs (in-process)."""

from __future__ import annotations

import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import torch  # noqa: E402
from ksmith.probe.execute import _observe, run_request  # noqa: E402
from ksmith.probe.observe import observe  # noqa: E402

PROGRAM = '''import torch
import torch.nn as nn


class Norm(nn.Module):
    def __init__(self, dim, eps=1e-6, affine=True):
        super().__init__()
        self.norm = nn.LayerNorm(dim, eps=eps, elementwise_affine=affine)

    def forward(self, x):
        return self.norm(x)


class Merge(nn.Module):
    def __init__(self, resolution, dim, norm=nn.LayerNorm):
        super().__init__()
        self.resolution = resolution
        self.norm = norm(4 * dim)
        self.reduce = nn.Linear(4 * dim, 2 * dim)

    def forward(self, x, scale=1.0):
        h, w = self.resolution
        b, n, c = x.shape
        x = x.view(b, h // 2, 2, w // 2, 2, c).permute(0, 1, 3, 2, 4, 5).reshape(b, -1, 4 * c)
        return self.reduce(self.norm(x)) * scale


class Gate(Norm):
    """Inherits its constructor: observed under its own name."""

    def forward(self, x, *, mask=None):
        return torch.sigmoid(self.norm(x)) if mask is None else x * mask


class Holder(nn.Module):
    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, x):
        return self.inner(x)


class Keyed(nn.Module):
    def __init__(self, dim, *, bias=False):
        super().__init__()
        self.proj = nn.Linear(dim, dim, bias=bias)

    def forward(self, x):
        return self.proj(x)


class Idx(nn.Module):
    def __init__(self, vocab, dim):
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)

    def forward(self, ids):
        return self.emb(ids)


class Model(nn.Module):
    def __init__(self, image=16, dim=8):
        super().__init__()
        grid = image // 2
        self.embed = nn.Conv2d(3, dim, 2, 2)
        self.merge = Merge((grid, grid), dim, norm=Norm)
        self.gate = Gate(2 * dim)
        self.unused = Norm(3)
        self.holder = Holder(nn.Identity())
        self.wrapped = Holder(Norm(2 * dim, 1e-5))
        self.keyed = Keyed(2 * dim, bias=True)
        self.idx = Idx(50, 2 * dim)

    def forward(self, img, ids):
        x = self.embed(img).flatten(2).transpose(1, 2)
        x = self.merge(x, scale=0.5)
        x = self.wrapped(self.gate(self.holder(x)))
        return self.keyed(x) + self.idx(ids)


def get_inputs():
    return [torch.rand([2, 3, 16, 16]), torch.randint(0, 50, [2, 16])]


def get_init_inputs():
    return []
'''


def by_class() -> dict[str, dict[str, str]]:
    return {o["class_name"]: o for o in observe(PROGRAM, 0, torch)}


def test_each_class_is_written_as_the_model_built_and_called_it():
    seen = by_class()
    merge = seen["Merge"]
    # The resolution the model computed; a class of the program is written by its name; the
    # keyword argument equal to its default is left out, the other one is kept in position.
    assert merge["init"] == "def get_init_inputs():\n    return [(8, 8), 8, Norm]\n"
    assert merge["inputs"] == "def get_inputs():\n    return [torch.rand([2, 64, 8]), 0.5]\n"
    assert merge["summary"] == "Merge((8, 8), 8, Norm) called on ([2, 64, 8] float32)"
    # An inherited constructor; a keyword-only forward argument left at its default.
    assert seen["Gate"]["init"] == "def get_init_inputs():\n    return [16]\n"
    assert seen["Gate"]["inputs"] == "def get_inputs():\n    return [torch.rand([2, 16, 16])]\n"
    # Observed on meta, where no value exists: integer inputs are drawn from {0, 1} (the probe
    # of the class's own program widens them to the table they index).
    assert seen["Idx"]["inputs"] == "def get_inputs():\n    return [torch.randint(0, 2, [2, 16], dtype=torch.int64)]\n"


def test_a_model_meta_cannot_run_is_observed_on_the_cpu():
    # `.item()` has no value on meta: the model is built and called on the CPU, where integer
    # inputs keep the range the model used.
    program = PROGRAM.replace(
        "        x = self.embed(img)", "        assert ids.max().item() < 50\n        x = self.embed(img)"
    )
    seen = {o["class_name"]: o for o in observe(program, 0, torch)}
    high = int(seen["Idx"]["inputs"].split("torch.randint(0, ")[1].split(",")[0])
    assert 40 <= high <= 50
    assert seen["Merge"]["init"] == by_class()["Merge"]["init"]


def test_a_module_argument_is_written_as_the_call_that_built_it():
    # The first Holder holds a torch module it cannot write; the second, one of the program's
    # classes, built with arguments it can.
    holder = by_class()["Holder"]
    assert holder["init"] == "def get_init_inputs():\n    return [Norm(16, 1e-05)]\n"
    # A program of Holder alone may not define Norm, and `inner` has no default to fall back on.
    assert holder["needs"] == ["Norm"]
    assert holder["init_without"] is None


def test_arguments_that_name_the_programs_own_classes_have_a_plain_form():
    seen = by_class()
    # `norm=Norm` needs the program's Norm; without it, the parameter's default (nn.LayerNorm)
    # is left out as any default is.
    assert seen["Merge"]["needs"] == ["Norm"]
    assert seen["Merge"]["init_without"] == "def get_init_inputs():\n    return [(8, 8), 8]\n"
    assert seen["Gate"]["needs"] == [] and seen["Gate"]["init_without"] is None


def test_what_cannot_be_written_or_was_never_called_is_left_out():
    seen = by_class()
    # A keyword-only constructor argument that is not its default cannot be passed
    # positionally; `Norm` is first called as `Merge`'s `norm`.
    assert "Keyed" not in seen
    assert "Model" not in seen
    assert seen["Norm"]["init"] == "def get_init_inputs():\n    return [32]\n"


def test_the_probe_reports_the_configurations_it_observed():
    result = run_request({"program": PROGRAM, "seed": 0, "max_steps": 8}, torch)
    assert result["status"] == "ok", result["error_message"]
    names = [s["class_name"] for s in result["submodules"]]
    assert names == ["Merge", "Norm", "Holder", "Gate", "Idx"]  # in the order of their first calls


def test_an_observation_that_fails_leaves_the_result_and_says_why():
    program = PROGRAM.replace("    return []\n", "    raise RuntimeError('built too often')\n")
    result = {"status": "ok", "attempt_log": ["g0 forward: earlier"]}
    assert _observe(program, 0, torch, result) == []
    assert result["status"] == "ok"
    assert result["attempt_log"] == ["g0 forward: earlier", "observe: stopped by RuntimeError: built too often"]


def test_an_override_that_does_not_evaluate_fails_instead_of_being_guessed():
    override = (
        "def get_init_inputs():\n    return [8, Missing]\n\n\ndef get_inputs():\n    return [torch.rand([2, 8])]\n"
    )
    program = PROGRAM.replace(
        "class Model(nn.Module):\n    def __init__(self, image=16, dim=8):",
        "class Model(nn.Module):\n    def __init__(self, image, dim):",
    )
    result = run_request({"program": program, "seed": 0, "max_steps": 8, "override": override}, torch)
    assert result["status"] == "failed"
    assert result["error_class"] == "InvalidOverride"
    assert (
        result["error_message"]
        == "the override does not run: get_init_inputs() raised NameError: name 'Missing' is not defined"
    )


def test_a_sized_program_is_observed_at_its_sizes_with_a_batch_of_two():
    # The classes' own probes run the model's sizes on the CPU: the batch, which their sizing
    # grows again, is cut to 2; the other sizes are the sized program's.
    result = run_request({"program": PROGRAM, "seed": 0, "sizing": {}}, torch)
    assert result["status"] == "ok", result["error_message"]
    assert json.loads(result["sizes"])["batch_size"] > 2
    merge = next(s for s in result["submodules"] if s["class_name"] == "Merge")
    assert merge["summary"] == "Merge((8, 8), 8, Norm) called on ([2, 64, 8] float32)"
