"""The evaluator's task program when an init input is a module (a submodule the repository's
call site builds): each model gets its own instance, built under the task's seed."""

from __future__ import annotations

import torch
from ksmith.evaluator.task import TaskProgram

PROGRAM = """
import torch
import torch.nn as nn


class Inner(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.fc = nn.Linear(dim, dim)

    def forward(self, x):
        return self.fc(x)


class Model(nn.Module):
    def __init__(self, dim, inner):
        super().__init__()
        self.inner = inner
        self.out = nn.Linear(dim, 2)

    def forward(self, x):
        return self.out(self.inner(x))


def get_inputs():
    return [torch.rand(3, 8)]


def get_init_inputs():
    return [8, Inner(8)]
"""


def test_a_module_init_input_is_built_afresh_for_every_model(tmp_path):
    program = TaskProgram(PROGRAM, str(tmp_path), seed=5, device="cpu")
    first = program.build_model()
    second = program.build_model()
    # No two models share the submodule, nor does the candidate's init (program.init).
    assert first.inner is not second.inner
    assert program.init[1] is not first.inner and program.init[1] is not second.inner
    # Same seed, same weights: the nested module's and the model's own.
    for a, b in zip(first.state_dict().values(), second.state_dict().values(), strict=True):
        assert torch.equal(a, b)
    for a, b in zip(program.init[1].state_dict().values(), first.inner.state_dict().values(), strict=True):
        assert torch.equal(a, b)
    # Training one model leaves the other (and the candidate's init) untouched.
    with torch.no_grad():
        first.inner.fc.weight.add_(1.0)
    assert not torch.equal(first.inner.fc.weight, second.inner.fc.weight)
    assert torch.equal(program.init[1].fc.weight, second.inner.fc.weight)
