import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.fc = nn.Linear(dim, dim)

    def forward(self, batch):
        return self.fc(batch["features"])


def get_inputs():
    return [torch.rand(4, 8)]


def get_init_inputs():
    return [8]
