import torch
import torch.nn as nn


class Model(nn.Module):
    """Scaled ReLU: a tiny task for the export fixture and the reward tests."""

    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x):
        return torch.relu(x) * self.scale


def get_inputs():
    return [torch.randn(16, 32)]


def get_init_inputs():
    return [2.0]
