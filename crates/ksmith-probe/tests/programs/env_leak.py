import os
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        raise RuntimeError("environment: " + " ".join(sorted(os.environ)))


def get_inputs():
    return [torch.rand(2)]


def get_init_inputs():
    return []
