import os
import torch
import torch.nn as nn

TARGET = os.environ.get("KSMITH_TEST_OUTSIDE", "/tmp/ksmith-probe-outside")


class Model(nn.Module):
    def forward(self, x):
        with open(TARGET, "w") as f:
            f.write("escaped")
        with open("inside.txt", "w") as f:
            f.write("fine")
        return x


def get_inputs():
    return [torch.rand(2)]


def get_init_inputs():
    return []
