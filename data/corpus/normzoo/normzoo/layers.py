"""Normalization layers over the last or the channel dimension."""
import torch

from .base import DEFAULT_EPS, NormBase, register, rms


@register
class RMSNorm(NormBase):
    def forward(self, x):
        return self.affine(x / rms(x, -1, self.eps), (-1,))


@register
class LayerNorm2d(NormBase):
    """LayerNorm over channels of an NCHW tensor."""

    def forward(self, x):
        mean = x.mean(dim=1, keepdim=True)
        var = (x - mean).pow(2).mean(dim=1, keepdim=True)
        y = (x - mean) / torch.sqrt(var + self.eps)
        return self.affine(y, (1, -1, 1, 1))


@register
class ScaleNorm(NormBase):
    def __init__(self, num_features, eps=DEFAULT_EPS):
        super().__init__(num_features, eps, affine=False)
        self.g = torch.nn.Parameter(torch.tensor(float(num_features) ** 0.5))

    def forward(self, x):
        norm = torch.norm(x, dim=-1, keepdim=True).clamp(min=self.eps)
        return self.g * x / norm


class PixelNorm(NormBase):
    def __init__(self, eps=1e-8):
        super().__init__(1, eps, affine=False)

    def forward(self, x):
        return x / rms(x, 1, self.eps)


class GroupNormLite(NormBase):
    def __init__(self, num_features, groups=2, eps=DEFAULT_EPS):
        super().__init__(num_features, eps)
        self.groups = groups

    def forward(self, x):
        n, c, h, w = x.shape
        g = x.view(n, self.groups, -1)
        mean = g.mean(-1, keepdim=True)
        var = g.var(-1, keepdim=True, unbiased=False)
        g = (g - mean) / torch.sqrt(var + self.eps)
        return self.affine(g.view(n, c, h, w), (1, -1, 1, 1))
