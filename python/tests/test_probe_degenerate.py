"""What the probe refuses as a task although it runs: random forwards, forwards that write their
own parameters, constant outputs and outputs that do not depend on the inputs (in-process)."""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import pytest  # noqa: E402
import torch  # noqa: E402
from ksmith.probe.execute import run_request  # noqa: E402

HEADER = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n\n"


def program(init: str, forward: str, inputs: str = "torch.rand([4, 8])", init_args: str = "8") -> str:
    return (
        f"{HEADER}class Model(nn.Module):\n    def __init__(self, dim):\n        super().__init__()\n"
        f"{init}\n\n    def forward(self, x):\n{forward}\n\n\ndef get_inputs():\n    return [{inputs}]\n\n\n"
        f"def get_init_inputs():\n    return [{init_args}]\n"
    )


CASES = {
    "zero_gain": (
        program("        self.gain = nn.Parameter(torch.zeros(dim))", "        return x * self.gain"),
        "degenerate",
        "its output is constant",
    ),
    "ignores_its_input": (
        program(
            "        self.lo = nn.Parameter(torch.rand(dim))",
            "        return self.lo.expand(x.shape[0], -1).clamp(min=0.5, max=0.5) + self.lo",
        ),
        "degenerate",
        "does not depend on its inputs",
    ),
    "inputs_without_randomness": (
        program("        self.fc = nn.Linear(dim, dim)", "        return self.fc(x)", inputs="torch.ones([4, 8])"),
        "degenerate",
        "inputs do not change with the seed",
    ),
    # Sampling in both modes: eval mode does not make it a task.
    "sampling": (
        program("        self.fc = nn.Linear(dim, dim)", "        return self.fc(x) + torch.randn_like(x)"),
        "nondeterministic",
        "draws random numbers",
    ),
    # Written in both modes: eval mode does not make it a task.
    "ema_update_in_forward": (
        program(
            "        self.register_buffer('ema', torch.zeros(dim))",
            "        self.ema.mul_(0.9).add_(x.mean(0) * 0.1)\n        return x - self.ema",
        ),
        "degenerate",
        "writes its own parameters or buffers (ema)",
    ),
    # Parameters and input draws are compared as outputs are (`ksmith.shared.outputs.same_values`):
    # a zero turned NaN is a write, and NaNs at the same places are the same draw.
    "nan_written_into_a_zero_buffer": (
        program(
            "        self.fc = nn.Linear(dim, dim)\n        self.register_buffer('seen', torch.zeros(dim))",
            "        self.seen.fill_(float('nan'))\n        return self.fc(x)",
        ),
        "degenerate",
        "writes its own parameters or buffers (seen)",
    ),
    "nan_inputs_without_randomness": (
        program(
            "        self.fc = nn.Linear(dim, dim)",
            "        return self.fc(x.nan_to_num(1.0))",
            inputs="torch.full([4, 8], float('nan'))",
        ),
        "degenerate",
        "inputs do not change with the seed",
    ),
    # A residual branch scaled by a layer scale initialised to 1e-6 (ConvNeXt's block): the
    # output is the input within the evaluator's tolerance, so a copy kernel would pass.
    "tiny_layer_scale_residual": (
        program(
            "        self.fc = nn.Linear(dim, dim)\n        self.gamma = nn.Parameter(1e-6 * torch.ones(dim))",
            "        return x + self.gamma * self.fc(x)",
        ),
        "degenerate",
        "its output equals its input 0 within the evaluator's tolerance",
    ),
    # Swin-V2's logit scale: a CPU scalar made inside forward, which clamp refuses beside CUDA
    # tensors (all four Swin-V2 tasks failed so on an H200, and ran here).
    "cpu_tensor_made_in_forward": (
        program(
            "        self.fc = nn.Linear(dim, dim)\n        self.scale = nn.Parameter(torch.ones(dim))",
            "        s = torch.clamp(self.scale, max=torch.log(torch.tensor(1. / 0.01))).exp()\n"
            "        return self.fc(x) * s",
        ),
        "degenerate",
        "aten.clamp.Tensor is given CPU tensors ([]) beside the model's",
    ),
    # A plain attribute is not moved by `.to(device)`.
    "tensor_kept_outside_the_buffers": (
        program(
            "        self.fc = nn.Linear(dim, dim)\n        self.mask = torch.ones(dim)",
            "        return self.fc(x) * self.mask",
        ),
        "degenerate",
        "aten.mul.Tensor is given CPU tensors ([8]) beside the model's",
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_program_that_cannot_be_a_task_gets_a_reason(name):
    text, status, words = CASES[name]
    result = run_request({"program": text}, torch)
    assert result["status"] == status, result
    assert words in result["error_message"], result["error_message"]
    # The row keeps what ran, for whoever reads why it is not a task.
    assert result["program"] and result["output_shapes"]


@pytest.mark.parametrize(
    "init, forward",
    [
        ("        self.fc = nn.Linear(dim, dim)", "        return self.fc(x)"),
        # Batch norm's training forward updates its running statistics by design.
        ("        self.bn = nn.BatchNorm1d(dim)", "        return self.bn(x)"),
        # Dropout of probability 0 draws nothing.
        ("        self.drop = nn.Dropout(0.0)", "        return self.drop(x) * 2"),
        # A residual whose branch is small but above the tolerance is no copy.
        (
            "        self.fc = nn.Linear(dim, dim)\n        self.gamma = nn.Parameter(1e-2 * torch.ones(dim))",
            "        return x + self.gamma * self.fc(x)",
        ),
        # A draw in both modes that cannot change the output (a condition dropped with
        # probability 0): a task as it is.
        (
            "        self.fc = nn.Linear(dim, dim)",
            "        keep = x.new_empty(x.shape[0], 1).bernoulli_(1.0)\n        return self.fc(x) * keep",
        ),
        # A CPU scalar as an operand of a binary operator is taken beside CUDA tensors.
        ("        self.fc = nn.Linear(dim, dim)", "        return self.fc(x) * torch.tensor(2.0) + torch.tensor(1.0)"),
        # A buffer moves with the model; CPU indices index a device tensor.
        (
            "        self.register_buffer('mask', torch.ones(dim))\n        self.order = torch.arange(dim).flip(0)",
            "        return x[:, self.order] * self.mask",
        ),
    ],
    ids=[
        "linear",
        "batch_norm",
        "dropout_zero",
        "layer_scale_1e-2",
        "draw_that_changes_nothing",
        "cpu_scalar_operand",
        "registered_buffer",
    ],
)
def test_a_real_task_passes(init, forward):
    result = run_request({"program": program(init, forward)}, torch)
    assert result["status"] == "ok", result


def test_constant_indices_are_drawn_over_the_vocabulary():
    # An embedding fed `torch.ones` indices gives one row, a constant: the indices are drawn
    # again, over the whole table.
    text = program(
        "        self.table = nn.Embedding(50, dim)",
        "        return self.table(x)",
        inputs="torch.ones([4, 4], dtype=torch.int64)",
    )
    result = run_request({"program": text}, torch)
    assert result["status"] == "ok", result
    assert "torch.randint(0, 50, [4, 4], dtype=torch.int64)" in result["program"]
    assert any("drawn from [0, 50)" in s for s in result["repair_steps"])


def test_the_copy_tolerance_is_the_evaluators():
    import json
    import pathlib

    from ksmith.probe import degenerate

    defaults = json.loads((pathlib.Path(degenerate.__file__).parents[1] / "evaluator" / "defaults.json").read_text())
    assert list(degenerate.COPY_TOLERANCE) == defaults["tolerances"]["float32"]
    assert degenerate.COPY_RELATIVE_ERROR == defaults["relative_error"]["float32"]


# Karras-style weight normalization: in training mode the forward renormalizes and copies into
# its weight; in eval mode it computes the same normalized weight without the write.
WEIGHT_NORMALIZED = program(
    "        self.weight = nn.Parameter(torch.randn(dim, dim))",
    "        if self.training:\n            with torch.no_grad():\n"
    "                self.weight.copy_(F.normalize(self.weight, dim=-1))\n"
    "        return x @ F.normalize(self.weight, dim=-1).t()",
)


@pytest.mark.parametrize(
    "text, why",
    [
        (WEIGHT_NORMALIZED, "writes its own parameters or buffers (weight)"),
        (
            program(
                "        self.fc = nn.Linear(dim, dim)", "        return F.dropout(self.fc(x), 0.5, self.training)"
            ),
            "forward draws random numbers",
        ),
        # Swin's stochastic depth: a rare draw, only in training mode (the two calls agree here)
        (
            program(
                "        self.fc = nn.Linear(dim, dim)",
                "        if self.training:\n            x = x * x.new_empty(x.shape[0], 1).bernoulli_(1.0)\n"
                "        return self.fc(x)",
            ),
            "the random generator moved during a call",
        ),
    ],
    ids=["weight_write", "dropout", "rare_draw_in_training"],
)
def test_a_forward_that_writes_or_draws_only_in_training_mode_is_a_task_in_eval_mode(text, why):
    result = run_request({"program": text}, torch)
    assert result["status"] == "ok", result
    assert "        self.eval()  # the task runs in eval mode" in result["program"]
    assert any(s.startswith("eval mode: in training mode") and why in s for s in result["repair_steps"]), result[
        "repair_steps"
    ]
    # Built as the evaluator builds it, the model is in eval mode and its forward leaves the weight.
    from ksmith.probe.loading import exec_program

    ns = exec_program(result["program"], "<eval-mode>")
    model = ns["Model"](*ns["get_init_inputs"]())
    assert not model.training and not any(m.training for m in model.modules())
    before = [p.detach().clone() for p in model.parameters()]
    with torch.no_grad():
        model(*ns["get_inputs"]())
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters()))


def test_eval_mode_is_added_to_a_model_without_its_own_constructor():
    from ksmith.probe.eval_mode import in_eval_mode

    text = (
        "import torch.nn as nn\n\n\nclass Model(nn.Dropout):\n"
        "    def forward(self, x):\n        return super().forward(x)\n"
    )
    out = in_eval_mode(text, "draws random numbers")
    assert out is not None
    ns: dict = {}
    exec(compile(out, "<t>", "exec"), ns)
    assert not ns["Model"](0.5).training
    # A constructor on one line cannot take a line at its end: no rewrite.
    one_line = "import torch.nn as nn\n\n\nclass Model(nn.Module):\n    def __init__(self): super().__init__()\n"
    assert in_eval_mode(one_line, "writes its own weights") is None
