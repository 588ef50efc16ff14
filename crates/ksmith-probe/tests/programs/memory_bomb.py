import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        hoard = []
        while True:
            hoard.append(bytearray(256 << 20))


def get_inputs():
    return [torch.rand(2)]


def get_init_inputs():
    return []
