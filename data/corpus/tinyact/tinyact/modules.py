"""Activation modules."""
import torch
import torch.nn as tnn
from torch import nn as N

from .functional import swish, mish, hard_sigmoid, hard_swish, gelu_tanh, squared_relu


class Swish(tnn.Module):
    def __init__(self, beta=1.0):
        super().__init__()
        self.beta = beta

    def forward(self, x):
        return swish(x, self.beta)


class LearnableSwish(tnn.Module):
    def __init__(self, num_parameters=1, init=1.0):
        super().__init__()
        self.beta = tnn.Parameter(torch.full((num_parameters,), init))

    def forward(self, x):
        return x * torch.sigmoid(self.beta * x)


class Mish(N.Module):
    def forward(self, x):
        return mish(x)


class HardSigmoid(N.Module):
    def forward(self, x):
        return hard_sigmoid(x)


class HardSwish(N.Module):
    def forward(self, x):
        return hard_swish(x)


class GeluTanh(tnn.Module):
    def forward(self, x):
        return gelu_tanh(x)


class SquaredReLU(tnn.Module):
    def forward(self, x):
        return squared_relu(x)


class ScaledTanh(tnn.Module):
    def __init__(self, scale=1.7159, slope=2.0 / 3.0):
        super().__init__()
        self.scale = scale
        self.slope = slope

    def forward(self, x):
        return self.scale * torch.tanh(self.slope * x)


class StarReLU(tnn.Module):
    """s * relu(x) ** 2 + b with learnable scale and bias."""

    def __init__(self, scale_value=1.0, bias_value=0.0):
        super().__init__()
        self.scale = tnn.Parameter(torch.tensor(scale_value))
        self.bias = tnn.Parameter(torch.tensor(bias_value))

    def forward(self, x):
        return self.scale * squared_relu(x) + self.bias


class SwiGLU(tnn.Module):
    def __init__(self, dim, hidden_dim):
        super().__init__()
        self.w_gate = tnn.Linear(dim, hidden_dim)
        self.w_up = tnn.Linear(dim, hidden_dim)
        self.w_down = tnn.Linear(hidden_dim, dim)

    def forward(self, x):
        return self.w_down(swish(self.w_gate(x)) * self.w_up(x))
