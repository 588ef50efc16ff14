import time

import torch
import torch.nn as nn


class Model(nn.Module):
    """Takes two seconds per forward call: long enough to be caught mid-run."""

    def __init__(self, dim):
        super().__init__()
        self.fc = nn.Linear(dim, dim)

    def forward(self, x):
        time.sleep(2.0)
        return self.fc(x)


def get_inputs():
    return [torch.rand(2, 8)]


def get_init_inputs():
    return [8]
