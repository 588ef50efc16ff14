import torch
import torch.nn as nn

N = 4096


class Model(nn.Module):
    """TASK:add_relu_half. Residual add, ReLU, halving."""

    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        return torch.relu(x + y) * 0.5


def get_inputs():
    return [torch.randn(N, N), torch.randn(N, N)]


def get_init_inputs():
    return []
