import torch
import torch.nn as nn


class Model(nn.Module):
    """C = A @ B for a tall-skinny A."""

    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        return torch.matmul(A, B)


M = 256
K = 64
N = 128


def get_inputs():
    A = torch.randn(M, K)
    B = torch.randn(K, N)
    return [A, B]


def get_init_inputs():
    return []
