import math

import torch

NEG_INF = -1e9


def scaled_dot_product(q, k, v, mask=None):
    scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(q.size(-1))
    if mask is not None:
        scores = scores.masked_fill(mask == 0, NEG_INF)
    return torch.matmul(torch.softmax(scores, dim=-1), v)


def split_heads(x, heads):
    b, n, d = x.shape
    return x.view(b, n, heads, d // heads).transpose(1, 2)


def merge_heads(x):
    b, h, n, d = x.shape
    return x.transpose(1, 2).reshape(b, n, h * d)
