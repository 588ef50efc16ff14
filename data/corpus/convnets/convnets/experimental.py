import torch
import torch.nn as nn


class UsesUndefined(nn.Module):
    def forward(self, x):
        return fused_kernel(x) + x


class StochasticDepth(nn.Module):
    def __init__(self, p=0.1):
        super().__init__()
        self.p = p

    def forward(self, x):
        if not self.training or self.p == 0.0:
            return x
        keep = torch.rand(x.shape[0], 1, 1, 1, device=x.device) > self.p
        return x * keep / (1.0 - self.p)
