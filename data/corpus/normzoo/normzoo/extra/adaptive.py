import torch
import torch.nn as nn

from ..base import DEFAULT_EPS
from ..layers import RMSNorm
from .. import layers


class AdaptiveRMSNorm(nn.Module):
    """RMSNorm whose scale and shift come from a conditioning vector."""

    def __init__(self, dim, cond_dim):
        super().__init__()
        self.norm = RMSNorm(dim, DEFAULT_EPS, affine=False)
        self.to_scale_shift = nn.Linear(cond_dim, 2 * dim)

    def forward(self, x, cond):
        scale, shift = self.to_scale_shift(cond).chunk(2, dim=-1)
        return self.norm(x) * (1 + scale) + shift


class ChannelScaledNorm(layers.LayerNorm2d):
    def __init__(self, num_features, init_scale=0.5):
        super().__init__(num_features)
        self.gamma = nn.Parameter(torch.full((1, num_features, 1, 1), init_scale))

    def forward(self, x):
        return super().forward(x) * self.gamma
