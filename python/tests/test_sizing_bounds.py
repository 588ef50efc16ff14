"""Sizing within the repository's sizes: a structural size that came from the repository (a call
site, a default, a model's observed configuration) grows at most ``max_structural_scale`` times,
and a class that reaches the work target only past that is ``too_small``; the probe's own guesses
grow as before (``provenance.py``, ``sizing.py``)."""

from __future__ import annotations

import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import torch  # noqa: E402
from ksmith.probe.execute import run_request  # noqa: E402
from ksmith.probe.guesses import Arg, TensorGuess, ValueGuess  # noqa: E402
from ksmith.probe.provenance import Provenance  # noqa: E402
from ksmith.probe.slots import state_slots  # noqa: E402

torch.set_num_threads(1)
HEADER = "import math\nimport torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n\n"


def program(body: str, inputs: str, init: str) -> str:
    return (
        f"{HEADER}{body}\n\ndef get_inputs():\n    return [{inputs}]\n\n\ndef get_init_inputs():\n    return [{init}]\n"
    )


def probed(text: str, **request) -> dict:
    result = run_request({"program": text, "sizing": {}, **request}, torch)
    assert result["status"] == "ok", (result["error_message"], result["attempt_log"])
    return result


# diffusion's time embedding: one sine and cosine per time step and frequency
TIME_EMBEDDING = program(
    """class Model(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        half_dim = self.dim // 2
        emb = math.log(10000) / (half_dim - 1)
        emb = torch.exp(torch.arange(half_dim, device=x.device) * -emb)
        emb = x[:, None] * emb[None, :]
        return torch.cat((emb.sin(), emb.cos()), dim=-1)
""",
    "torch.rand([2])",
    "16",
)


def test_a_tiny_width_of_the_repository_is_not_blown_up_and_says_too_small():
    # as a U-Net builds and calls it: 16 wide, one time step per sample of the batch
    r = probed(TIME_EMBEDDING, observed=True)
    assert r["size_status"] == "unsizable", r["sizes"]
    assert r["size_reason_code"] == "too_small"
    assert "within 8x of its repository's sizes (dim 16 -> 128)" in r["size_reason"], r["size_reason"]
    assert r["program"] == TIME_EMBEDDING and r["sizes"] == "{}"
    # from a call site, the same: its time steps are the batch, grown to the batch's cap
    r = probed(TIME_EMBEDDING, arg_sources=["dim=16: call unet.py:40"])
    assert r["size_reason_code"] == "too_small", r["sizes"]
    # the bound is what stops it: without one, its width and time steps grow to the target
    free = probed(TIME_EMBEDDING, observed=True, sizing={"max_structural_scale": 0})
    assert free["size_status"] == "sized", free["size_reason"]
    assert json.loads(free["sizes"])["dim"] > 128, free["sizes"]


def test_a_width_the_probe_guessed_grows_as_before():
    # the extractor guessed the width: no repository size to stay near
    r = probed(TIME_EMBEDDING, arg_sources=["dim=16: guess"])
    assert r["size_status"] == "sized", r["size_reason"]
    assert json.loads(r["sizes"])["dim"] > 128, r["sizes"]


MLP = program(
    """class Model(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.up = nn.Linear(dim, hidden)
        self.down = nn.Linear(hidden, dim)

    def forward(self, x):
        return self.down(F.gelu(self.up(x)))
""",
    "torch.rand([2, 16, 64])",
    "64, 256",
)


def test_a_module_with_work_reaches_the_target_within_the_bound():
    # widths from a call site: they grow at most 8x, the batch and tokens supply the rest
    r = probed(MLP, arg_sources=["dim=64: call m.py:3", "hidden=256: call m.py:3"])
    assert r["size_status"] == "sized", r["size_reason"]
    sizes = json.loads(r["sizes"])
    assert sizes["dim"] <= 8 * 64 and sizes.get("hidden", 256) <= 8 * 256, sizes
    assert r["est_flops"] >= 0.2e9 or r["est_bytes"] >= 64 * 2**20


def test_provenance_reads_the_argument_sources_and_the_observation():
    p = Provenance.of({"arg_sources": ["dim=64: call a.py:3 (dim of Unet)", "arg1=4: guess", "eps=1e-5: default"]})
    assert p.kinds == {"dim": "call", "arg1": "guess", "eps": "default"} and not p.observed
    assert p.init_is_repository(0, Arg(ValueGuess(64, (0,)), "dim"))
    assert not p.init_is_repository(1, Arg(ValueGuess(4, (1,)), None))
    # a value the repair search replaced is the probe's
    assert not p.init_is_repository(0, Arg(ValueGuess(128), "dim"))
    seen = Provenance.of({"observed": True})
    assert seen.init_is_repository(1, Arg(ValueGuess(4, (1,)), None))
    image = TensorGuess((2, 3, 64, 64), orig=(0,))
    assert [seen.dim_is_repository(image, d) for d in range(4)] == [False, True, True, True]
    assert not Provenance().dim_is_repository(image, 1)


def test_vector_inputs_are_the_batch_unless_a_tensor_input_has_one():
    times = Arg(TensorGuess((4,), orig=(0,)), "x")
    width = Arg(ValueGuess(16, (0,)), "dim")
    only_vectors = state_slots(((width,), (times,)), Provenance(observed=True))
    assert [(s.side, s.role, s.repository) for s in only_vectors] == [
        ("init", "features", True),
        ("input", "batch", False),
    ]
    image = Arg(TensorGuess((4, 3, 8, 8), orig=(0,)), "x")
    with_image = state_slots(((width,), (image, times)))
    assert [s.role for s in with_image if s.rank == 1] == ["features"]
    assert [s.role for s in with_image if s.rank == 4][0] == "batch"
