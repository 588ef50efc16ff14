import torch
import torch.nn as nn

N = 4096


class Model(nn.Module):
    """relu(x) * y + x."""

    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        return torch.relu(x) * y + x


def get_inputs():
    return [torch.randn(N), torch.randn(N)]


def get_init_inputs():
    return []
