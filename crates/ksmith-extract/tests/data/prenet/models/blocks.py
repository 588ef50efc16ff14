import torch
import torch.nn.functional as F
from torch import nn


class RMSNorm(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.g = nn.Parameter(torch.ones(1, dim, 1, 1))

    def forward(self, x):
        return F.normalize(x, dim=1) * self.g * (x.shape[1] ** 0.5)


class LinearAttention(nn.Module):
    def __init__(self, dim, heads=4, dim_head=8):
        super().__init__()
        self.heads = heads
        hidden = heads * dim_head
        self.to_qkv = nn.Conv2d(dim, hidden * 3, 1, bias=False)
        self.to_out = nn.Conv2d(hidden, dim, 1)

    def forward(self, x):
        b, c, h, w = x.shape
        q, k, v = self.to_qkv(x).chunk(3, dim=1)
        q = q.reshape(b, self.heads, -1, h * w).softmax(dim=-2)
        k = k.reshape(b, self.heads, -1, h * w).softmax(dim=-1)
        v = v.reshape(b, self.heads, -1, h * w)
        context = torch.einsum("bhdn,bhen->bhde", k, v)
        out = torch.einsum("bhde,bhdn->bhen", context, q)
        return self.to_out(out.reshape(b, -1, h, w))


class PreNorm(nn.Module):
    def __init__(self, dim, fn):
        super().__init__()
        self.norm = RMSNorm(dim)
        self.fn = fn

    def forward(self, x):
        return self.fn(self.norm(x))


class Residual(nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, x):
        return self.fn(x) + x


class Gated(nn.Module):
    def __init__(self, fn, scale):
        super().__init__()
        self.fn = fn
        self.scale = scale

    def forward(self, x):
        return self.fn(x) * torch.sigmoid(x * self.scale)


class Stage(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.attn = Residual(PreNorm(dim, LinearAttention(dim, heads=heads)))

    def forward(self, x):
        return self.attn(x)
