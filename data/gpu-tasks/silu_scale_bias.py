import torch
import torch.nn as nn
import torch.nn.functional as F

ROWS = 8192
COLS = 8192


class Model(nn.Module):
    """TASK:silu_scale_bias. SiLU, then a per-column scale and bias."""

    def __init__(self, cols=COLS):
        super().__init__()
        self.scale = nn.Parameter(torch.randn(cols))
        self.bias = nn.Parameter(torch.randn(cols))

    def forward(self, x):
        return F.silu(x) * self.scale + self.bias


def get_inputs():
    return [torch.randn(ROWS, COLS)]


def get_init_inputs():
    return [COLS]
