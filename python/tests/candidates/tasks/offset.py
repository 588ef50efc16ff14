import torch
import torch.nn as nn

N = 4096


class Model(nn.Module):
    """x shifted by a large offset on a few elements and back: exact to float32 rounding, off by up
    to 0.25 on those elements when computed in float16."""

    def __init__(self):
        super().__init__()
        offset = torch.zeros(N)
        offset[::512] = 1000.0
        self.register_buffer("offset", offset)

    def forward(self, x):
        return (x + self.offset) - self.offset


def get_inputs():
    return [torch.randn(N)]


def get_init_inputs():
    return []
