"""Short fused sequences of operations (KernelBench level-2 style)."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class ConvReLUBiasAdd(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size=3):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2)
        self.bias = nn.Parameter(torch.randn(out_channels, 1, 1) * 0.02)

    def forward(self, x):
        return torch.relu(self.conv(x)) + self.bias


class LinearGELUScale(nn.Module):
    def __init__(self, in_features, out_features, scale=0.5):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features)
        self.scale = scale

    def forward(self, x):
        return F.gelu(self.fc(x)) * self.scale


class ConvTanhMaxPool(nn.Module):
    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, 3, padding=1)
        self.pool = nn.MaxPool2d(2)

    def forward(self, x):
        return self.pool(torch.tanh(self.conv(x)))


class MatmulSoftmaxDropout(nn.Module):
    def __init__(self, in_features, out_features, dropout=0.0):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(in_features, out_features) * 0.1)
        self.drop = nn.Dropout(dropout)

    def forward(self, x):
        return self.drop(torch.softmax(x @ self.weight, dim=-1))


class Conv1dGLU(nn.Module):
    def __init__(self, channels, kernel_size=3):
        super().__init__()
        self.conv = nn.Conv1d(channels, 2 * channels, kernel_size, padding=kernel_size // 2)

    def forward(self, x):
        return F.glu(self.conv(x), dim=1)


class Conv3dInstanceNormLeaky(nn.Module):
    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, 3, padding=1)
        self.norm = nn.InstanceNorm3d(out_channels, affine=True)

    def forward(self, x):
        return F.leaky_relu(self.norm(self.conv(x)), 0.1)
