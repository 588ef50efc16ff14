"""Shared pieces of the normalization layers."""
import torch
import torch.nn as nn

DEFAULT_EPS = 1e-5
REGISTRY = {}


def register(cls):
    REGISTRY[cls.__name__] = cls
    return cls


def rms(x, dim=-1, eps=DEFAULT_EPS):
    return torch.sqrt(torch.mean(x * x, dim=dim, keepdim=True) + eps)


class NormBase(nn.Module):
    """Base of the layers: owns the affine parameters."""

    def __init__(self, num_features, eps=DEFAULT_EPS, affine=True):
        super().__init__()
        self.num_features = num_features
        self.eps = eps
        if affine:
            self.weight = nn.Parameter(torch.ones(num_features))
            self.bias = nn.Parameter(torch.zeros(num_features))
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)

    def normalize(self, x):
        raise NotImplementedError

    def forward(self, x):
        raise NotImplementedError

    def affine(self, x, shape):
        if self.weight is None:
            return x
        return x * self.weight.view(shape) + self.bias.view(shape)
