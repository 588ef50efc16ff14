# The elementwise task, but its reference raises in the judge (its child's config says the mode):
# the build holds, and every candidate's evaluation then fails on the worker's side (an internal
# error), never by the candidate or the device.
import json

import torch
import torch.nn as nn

N = 4096


class Model(nn.Module):
    """relu(x) * y + x."""

    def __init__(self):
        super().__init__()
        if json.load(open("config.json")).get("mode") == "judge":
            raise RuntimeError("this reference refuses to judge")

    def forward(self, x, y):
        return torch.relu(x) * y + x


def get_inputs():
    return [torch.randn(N), torch.randn(N)]


def get_init_inputs():
    return []
