import torch
import torch.nn as nn

N = 4096


class Model(nn.Module):
    """A tiny-valued output: x * 1e-6 + y * 1e-6."""

    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        return x * 1e-6 + y * 1e-6


def get_inputs():
    return [torch.randn(N), torch.randn(N)]


def get_init_inputs():
    return []
