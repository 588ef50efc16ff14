import os

import torch
import torch.nn as nn

N = 4096


class Model(nn.Module):
    """relu(x) * y + x, scaled by a constant it makes inside `forward`, as Swin-V2's
    `torch.clamp(self.logit_scale, max=torch.log(torch.tensor(1. / 0.01)))` does: a CPU tensor.
    On a GPU that is refused beside the device's tensors (torch 2.11: `Expected all tensors to be
    on the same device`). A plain CPU run (the probe's) cannot see it, so here the evaluator's
    device, Triton's interpreter (`TRITON_INTERPRET=1` in its children), stands for the GPU: on
    it the same error is raised."""

    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        scale = torch.log(torch.tensor(1.0 / 0.01))
        if os.environ.get("TRITON_INTERPRET") == "1":
            raise RuntimeError(
                "Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!"
            )
        return (torch.relu(x) * y + x) * scale


def get_inputs():
    return [torch.randn(N), torch.randn(N)]


def get_init_inputs():
    return []
