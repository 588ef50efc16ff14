"""Transformer pieces."""
import math

import torch
from torch import nn

from .attention import MultiHeadSelfAttention
from .utils import NEG_INF

MLP_RATIO = 2


class FeedForward(nn.Module):
    def __init__(self, dim, hidden_dim=None, dropout=0.0):
        super().__init__()
        hidden_dim = hidden_dim or dim * MLP_RATIO
        self.net = nn.Sequential(
            nn.Linear(dim, hidden_dim),
            nn.GELU(),
            nn.Dropout(dropout),
            nn.Linear(hidden_dim, dim),
        )

    def forward(self, x):
        return self.net(x)


class TransformerBlock(nn.Module):
    def __init__(self, dim, num_heads=2):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn = MultiHeadSelfAttention(dim, num_heads)
        self.norm2 = nn.LayerNorm(dim)
        self.ff = FeedForward(dim)

    def forward(self, x):
        b, n, d = x.shape
        x = x + self.attn(self.norm1(x))
        return x + self.ff(self.norm2(x))


class SinusoidalPositionalEncoding(nn.Module):
    def __init__(self, dim, max_len=512):
        super().__init__()
        position = torch.arange(max_len).unsqueeze(1)
        div = torch.exp(torch.arange(0, dim, 2) * (-math.log(10000.0) / dim))
        pe = torch.zeros(max_len, dim)
        pe[:, 0::2] = torch.sin(position * div)
        pe[:, 1::2] = torch.cos(position * div)
        self.register_buffer("pe", pe)

    def forward(self, x):
        b, n, d = x.shape
        return x + self.pe[:n]


class TokenEmbedding(nn.Module):
    def __init__(self, vocab_size, dim):
        super().__init__()
        self.emb = nn.Embedding(vocab_size, dim)
        self.scale = math.sqrt(dim)

    def forward(self, input_ids):
        return self.emb(input_ids) * self.scale


class MaskedMeanPool(nn.Module):
    def forward(self, x, mask):
        b, n, d = x.shape
        filled = x.masked_fill(mask.unsqueeze(-1) == 0, 0.0)
        return filled.sum(1) / mask.sum(1, keepdim=True).clamp(min=1.0)


class AttentionPool(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.score = nn.Linear(dim, 1)

    def forward(self, x):
        b, n, d = x.shape
        w = torch.softmax(self.score(x).squeeze(-1).clamp(min=NEG_INF), dim=-1)
        return torch.einsum("bn,bnd->bd", w, x)
