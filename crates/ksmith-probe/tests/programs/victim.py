import os
import time
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 32)

    def forward(self, x):
        if not os.path.exists("slept"):  # the first run waits while its sibling attacks
            open("slept", "w").close()
            time.sleep(5.0)
        if os.path.exists("forged.txt"):
            raise RuntimeError("a sibling wrote into this module's folder")
        return self.fc(x)


def get_inputs():
    return [torch.rand(8, 16)]


def get_init_inputs():
    return []
