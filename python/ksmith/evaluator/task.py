"""The reference program of a task at one size set, as both children build it: its module, its
init inputs, its model with seeded weights, and each trial's inputs (see `inputs`).

The reference child (`reference_child`) and the candidate child (`candidate_child`) each build
what they need from the same program text and seed, so nothing large travels between processes;
the candidate's harness compares fingerprints with the reference's before it imports the
candidate. Seeds: the model and the init inputs take the task's seed; trial `k` takes
``seed + 7919 * (k + 1)``, and at size set `i` additionally ``+ 104729 * (i + 1)``.

An init input may be a module (a submodule the repository's call site builds,
``TwoWayTransformer(depth=2, ...)``): every model gets its own, from `get_init_inputs()` called
afresh under the task's seed (then the seed again for the model), so the reference and the
candidate never share one and each is built with the same weights.
"""

from __future__ import annotations

import os
from types import ModuleType
from typing import Any

import torch

from . import shapes
from .child_common import load_module
from .inputs import fingerprint, make_inputs

REFERENCE_MODULE = "ksmith_reference"


class TaskProgram:
    """The reference at the visible sizes (`set_index` None) or at size set `set_index`."""

    def __init__(
        self,
        source: str,
        workdir: str,
        seed: int,
        device: str,
        sizes: dict[str, int] | None = None,
        set_index: int | None = None,
    ):
        self.seed = seed
        self.device = device
        self.sizes = sizes
        self.set_index = set_index
        text = shapes.rewrite(source, sizes) if sizes else source
        name = REFERENCE_MODULE if set_index is None else f"{REFERENCE_MODULE}_s{set_index}"
        path = os.path.join(workdir, f"{name}.py")
        with open(path, "w") as f:
            f.write(text)
        self.module: ModuleType = load_module(path, name)
        #: The init inputs the fingerprints read and the candidate is built from; the
        #: reference builds its model from its own (`build_model`).
        self.init: list[Any] = self.init_inputs()

    def init_inputs(self) -> list[Any]:
        """`get_init_inputs()` called afresh under the task's seed."""
        torch.manual_seed(self.seed)
        return list(self.module.get_init_inputs())

    def build_model(self) -> torch.nn.Module:
        """`Model(*init)` with fresh init inputs (`init_inputs`), then the task's seed, on the
        device."""
        init = self.init_inputs()
        torch.manual_seed(self.seed)
        model: torch.nn.Module = self.module.Model(*init).to(self.device)
        return model

    def trial_seed(self, k: int) -> int:
        extra = 0 if self.set_index is None else 104729 * (self.set_index + 1)
        return self.seed + 7919 * (k + 1) + extra

    def inputs(self, k: int) -> list[Any]:
        """Trial `k`'s inputs, on the device."""
        return make_inputs(self.module.get_inputs, self.trial_seed(k), k, self.device)


def state_of(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """A detached copy of the model's `state_dict`."""
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def init_fingerprint(init: list[Any], state: dict[str, torch.Tensor]) -> str:
    """The fingerprint of a model's init inputs and weights."""
    return fingerprint([init, state])
