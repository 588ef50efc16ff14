"""The repair search builds a slow model once per set of constructor arguments and copies it
for the attempts that change only the forward inputs (`Probe._construct`): the copies must run
exactly as freshly built models would (same weights, the random generators where the
constructor left them), and a model that cannot be copied is built every time."""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import torch  # noqa: E402
from ksmith.probe import execute  # noqa: E402
from ksmith.probe.execute import Probe, exec_program  # noqa: E402

PROGRAM = """import torch
import torch.nn as nn

BUILT = []


class Model(nn.Module):
    def __init__(self, dim):
        super().__init__()
        BUILT.append(dim)
        self.proj = nn.Linear(dim, dim)
        self.register_buffer("noise", torch.randn(dim))
{extra}

    def forward(self, x):
        if x.dim() != 3:
            raise ValueError(f"expected a 3-D input, got {{x.dim()}}-D")
        return self.proj(x) + self.noise


def get_inputs():
    return [torch.rand([4, 4])]


def get_init_inputs():
    return [4]
"""


def search(text: str):
    """The repair search's probe after success, and its successful attempt's outputs."""
    probe = Probe(text, 42, torch)
    probe.ns = exec_program(text)
    state, _, root = probe.search(probe.initial_state())
    assert state is not None, (root, probe.history_lines())
    return probe, probe.last_success[0]


def built_every_time(text: str, monkeypatch) -> list:
    """The successful attempt's outputs when every attempt builds its model."""
    with monkeypatch.context() as m:
        m.setattr(execute, "REUSE_MODEL_S", float("inf"))
        probe, outputs = search(text)
    assert len(probe.ns["BUILT"]) == probe.attempts
    return outputs


def same(a: list, b: list) -> bool:
    return len(a) == len(b) and all(torch.equal(x, y) for x, y in zip(a, b))


def test_attempts_with_the_same_constructor_arguments_build_the_model_once(monkeypatch):
    text = PROGRAM.format(extra="")
    want = built_every_time(text, monkeypatch)
    monkeypatch.setattr(execute, "REUSE_MODEL_S", 0.0)
    probe, outputs = search(text)
    assert probe.attempts >= 3  # the 2-D input fails until the 3-D restart
    assert probe.ns["BUILT"] == [4]
    # The successful attempt ran a copy: same weights and buffer, and the inputs drawn after the
    # constructor are the same, so the outputs are those of a model built for the attempt.
    assert same(outputs, want)


def test_a_model_that_cannot_be_copied_is_built_for_every_attempt(monkeypatch):
    # A generator cannot be deep-copied.
    text = PROGRAM.format(extra="        self.steps = (i for i in range(3))")
    want = built_every_time(text, monkeypatch)
    monkeypatch.setattr(execute, "REUSE_MODEL_S", 0.0)
    probe, outputs = search(text)
    assert len(probe.ns["BUILT"]) == probe.attempts >= 3
    assert same(outputs, want)


def test_fast_constructors_are_not_copied():
    probe, _ = search(PROGRAM.format(extra=""))
    assert len(probe.ns["BUILT"]) == probe.attempts >= 3
