import torch
import torch.nn as nn


class DepthwiseSeparableConv(nn.Module):
    def __init__(self, in_chs, out_chs, dw_kernel_size=3, stride=1):
        super().__init__()
        self.conv_dw = nn.Conv2d(in_chs, in_chs, dw_kernel_size, stride, dw_kernel_size // 2, groups=in_chs, bias=False)
        self.bn1 = nn.BatchNorm2d(in_chs)
        self.act = nn.SiLU()
        self.conv_pw = nn.Conv2d(in_chs, out_chs, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(out_chs)
        self.has_skip = stride == 1 and in_chs == out_chs

    def forward(self, x):
        shortcut = x
        x = self.act(self.bn1(self.conv_dw(x)))
        x = self.bn2(self.conv_pw(x))
        return x + shortcut if self.has_skip else x


class Model(DepthwiseSeparableConv):
    pass


def get_inputs():
    return [torch.rand([4, 4, 4, 4])]


def get_init_inputs():
    return [4, 4]
