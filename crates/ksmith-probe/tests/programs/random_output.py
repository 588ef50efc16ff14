import os
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return x + int.from_bytes(os.urandom(4), "little")


def get_inputs():
    return [torch.rand(3)]


def get_init_inputs():
    return []
