"""Functional forms of the activations."""
import math

import torch
import torch.nn.functional as F

SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
GELU_COEF = 0.044715
HARD_SIGMOID_SLOPE = 1.0 / 6.0


def swish(x, beta=1.0):
    return x * torch.sigmoid(beta * x)


def mish(x):
    return x * torch.tanh(F.softplus(x))


def hard_sigmoid(x, slope=HARD_SIGMOID_SLOPE):
    return torch.clamp(x * slope + 0.5, 0.0, 1.0)


def hard_swish(x):
    return x * hard_sigmoid(x)


def gelu_tanh(x):
    inner = SQRT_2_OVER_PI * (x + GELU_COEF * torch.pow(x, 3))
    return 0.5 * x * (1.0 + torch.tanh(inner))


def squared_relu(x):
    return torch.pow(F.relu(x), 2)
