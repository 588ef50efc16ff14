import math

import numpy as np
import torch
import torch.nn as nn
from scipy.special import erf


class TimestepEmbedding(nn.Module):
    def __init__(self, dim, max_period=10000):
        super().__init__()
        self.dim = dim
        self.max_period = max_period
        self.mlp = nn.Sequential(nn.Linear(dim, dim), nn.SiLU(), nn.Linear(dim, dim))

    def forward(self, t):
        half = self.dim // 2
        freqs = torch.exp(-math.log(self.max_period) * torch.arange(half, dtype=torch.float32) / half)
        args = t.float().reshape(-1, 1) * freqs[None]
        emb = torch.cat([torch.cos(args), torch.sin(args)], dim=-1)
        return self.mlp(emb)


class RotaryEmbedding(nn.Module):
    def __init__(self, dim, base=10000.0):
        super().__init__()
        inv = 1.0 / (base ** (np.arange(0, dim, 2, dtype=np.float32) / dim))
        self.register_buffer("inv_freq", torch.from_numpy(inv))

    def forward(self, x):
        b, n, d = x.shape
        t = torch.arange(n, dtype=self.inv_freq.dtype)
        freqs = torch.einsum("i,j->ij", t, self.inv_freq)
        cos, sin = freqs.cos()[None], freqs.sin()[None]
        x1, x2 = x[..., 0::2], x[..., 1::2]
        return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)


class ErfGate(nn.Module):
    def forward(self, x):
        return x * torch.from_numpy(0.5 * (1.0 + erf(x.numpy() / math.sqrt(2.0))))


class PatchEmbed(nn.Module):
    def __init__(self, in_channels, dim, patch_size=2):
        super().__init__()
        self.proj = nn.Conv2d(in_channels, dim, kernel_size=patch_size, stride=patch_size)

    def forward(self, x):
        return self.proj(x).flatten(2).transpose(1, 2)
