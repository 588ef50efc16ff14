"""Attention layers on (batch, tokens, dim) inputs."""
import torch
import torch.nn as nn
import torch.nn.functional as F

import attnlab.utils as U
from attnlab.utils import split_heads, merge_heads


class MultiHeadSelfAttention(nn.Module):
    def __init__(self, dim, num_heads=2, dropout=0.0):
        super().__init__()
        assert dim % num_heads == 0
        self.heads = num_heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.drop = nn.Dropout(dropout)

    def forward(self, x):
        b, n, d = x.shape
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        q, k, v = (split_heads(t, self.heads) for t in (q, k, v))
        out = U.scaled_dot_product(q, k, v)
        return self.drop(self.proj(merge_heads(out)))


class CrossAttention(nn.Module):
    def __init__(self, dim, context_dim, num_heads=2):
        super().__init__()
        self.heads = num_heads
        self.to_q = nn.Linear(dim, dim, bias=False)
        self.to_kv = nn.Linear(context_dim, 2 * dim, bias=False)
        self.out = nn.Linear(dim, dim)

    def forward(self, x, context):
        b, n, d = x.shape
        q = split_heads(self.to_q(x), self.heads)
        k, v = self.to_kv(context).chunk(2, dim=-1)
        k, v = split_heads(k, self.heads), split_heads(v, self.heads)
        return self.out(merge_heads(U.scaled_dot_product(q, k, v)))


class LinearAttention(nn.Module):
    """Kernelized attention with the elu + 1 feature map."""

    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.qkv = nn.Linear(dim, 3 * dim)
        self.eps = eps

    def forward(self, x):
        b, n, d = x.shape
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        q, k = F.elu(q) + 1, F.elu(k) + 1
        kv = torch.einsum("bnd,bne->bde", k, v)
        z = 1.0 / (torch.einsum("bnd,bd->bn", q, k.sum(dim=1)) + self.eps)
        return torch.einsum("bnd,bde,bn->bne", q, kv, z)


class MaskedAttention(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.qkv = nn.Linear(dim, 3 * dim)

    def forward(self, x):
        b, n, d = x.shape
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        causal = torch.tril(torch.ones(n, n, device=x.device))
        return U.scaled_dot_product(q, k, v, causal)
