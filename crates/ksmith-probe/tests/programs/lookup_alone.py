import torch
import torch.nn as nn

TABLE = {}


class Model(nn.Module):
    """Reads a table the model fills when it is built: it runs inside the model only."""

    def __init__(self, dim):
        super().__init__()
        self.scale = nn.Parameter(torch.full([dim], 0.5))

    def forward(self, x):
        return x * self.scale * TABLE["gain"]


def get_inputs():
    return [torch.rand([4, 4])]


def get_init_inputs():
    return [4]
