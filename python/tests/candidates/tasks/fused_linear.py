import torch
import torch.nn as nn

BATCH = 32
IN = 64
OUT = 48


class Model(nn.Module):
    """Linear layer followed by GELU (tanh approximation) and a scale."""

    def __init__(self, in_features, out_features, scale):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.scale = scale

    def forward(self, x):
        return torch.nn.functional.gelu(self.linear(x), approximate="tanh") * self.scale


def get_inputs():
    return [torch.randn(BATCH, IN)]


def get_init_inputs():
    return [IN, OUT, 0.5]
