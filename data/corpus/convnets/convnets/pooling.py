import torch
import torch.nn as nn
import torch.nn.functional as F


class GeM(nn.Module):
    """Generalized mean pooling."""

    def __init__(self, p=3.0, eps=1e-6):
        super().__init__()
        self.p = nn.Parameter(torch.ones(1) * p)
        self.eps = eps

    def forward(self, x):
        pooled = F.avg_pool2d(x.clamp(min=self.eps).pow(self.p), (x.size(-2), x.size(-1)))
        return pooled.pow(1.0 / self.p)


class GlobalAvgMaxPool(nn.Module):
    def forward(self, x):
        return torch.cat([F.adaptive_avg_pool2d(x, 1), F.adaptive_max_pool2d(x, 1)], dim=1).flatten(1)


class SpatialPyramidPool(nn.Module):
    def __init__(self, levels=(1, 2, 4)):
        super().__init__()
        self.levels = levels

    def forward(self, x):
        feats = [F.adaptive_max_pool2d(x, level).flatten(1) for level in self.levels]
        return torch.cat(feats, dim=1)


class SoftPool2d(nn.Module):
    def __init__(self, kernel_size=2, stride=2):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride

    def forward(self, x):
        w = torch.exp(x - x.amax(dim=(-2, -1), keepdim=True))
        num = F.avg_pool2d(x * w, self.kernel_size, self.stride)
        den = F.avg_pool2d(w, self.kernel_size, self.stride)
        return num / den.clamp(min=1e-12)
