import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_ch, out_ch, kernel_size):
        super().__init__()
        self.conv = nn.Conv2d(in_ch, out_ch, kernel_size)
        self.bn = nn.BatchNorm2d(out_ch)

    def forward(self, x):
        return self.bn(self.conv(x))


def get_inputs():
    return [torch.rand(4, 4)]


def get_init_inputs():
    return [3, 8, 7]
