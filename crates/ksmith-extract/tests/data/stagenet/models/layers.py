"""Layers of a small hierarchical vision model: stages that end in an optional downsampling
layer, given to them as a class and built in their constructor."""

import torch
import torch.nn as nn


class Merge(nn.Module):
    """Merges 2x2 neighbouring tokens of a (B, H*W, C) sequence into one token of 2C channels."""

    def __init__(self, input_resolution, dim, norm_layer=nn.LayerNorm):
        super().__init__()
        self.input_resolution = input_resolution
        self.norm = norm_layer(4 * dim)
        self.reduction = nn.Linear(4 * dim, 2 * dim, bias=False)

    def forward(self, x):
        h, w = self.input_resolution
        b, n, c = x.shape
        assert n == h * w, "input feature has wrong size"
        x = x.view(b, h // 2, 2, w // 2, 2, c).permute(0, 1, 3, 4, 2, 5)
        return self.reduction(self.norm(x.reshape(b, -1, 4 * c)))


class Shrink(nn.Module):
    """Averages an (B, H*W, C) sequence pairwise along its width, doubling the channels."""

    def __init__(self, input_resolution, dim, norm_layer=nn.LayerNorm):
        super().__init__()
        self.input_resolution = input_resolution
        self.norm = norm_layer(dim)
        self.expand = nn.Linear(dim, 2 * dim)

    def forward(self, x):
        h, w = self.input_resolution
        b, n, c = x.shape
        assert n == h * w, "input feature has wrong size"
        x = x.view(b, h, w // 2, 2, c).mean(3)
        return self.expand(self.norm(x.reshape(b, -1, c)))


class Fold(nn.Module):
    """Folds pairs of columns of an (B, H*W, C) sequence into the channels."""

    def __init__(self, input_resolution, dim, norm_layer=nn.LayerNorm):
        super().__init__()
        self.input_resolution = input_resolution
        self.proj = nn.Linear(2 * dim, dim)

    def forward(self, x):
        h, w = self.input_resolution
        b, n, c = x.shape
        assert n == h * w, "input feature has wrong size"
        return self.proj(x.reshape(b, h * (w // 2), 2 * c))


class Spare(nn.Module):
    """A downsampling layer no model of the repository uses."""

    def __init__(self, input_resolution, dim, norm_layer=nn.LayerNorm):
        super().__init__()
        self.input_resolution = input_resolution
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        return self.proj(x)


class Stage(nn.Module):
    """`depth` token-wise layers, then `downsample` when it is given (a class, built here)."""

    def __init__(self, dim, input_resolution, depth, downsample=None, norm_layer=nn.LayerNorm):
        super().__init__()
        self.norm = norm_layer(dim)
        self.blocks = nn.ModuleList([nn.Linear(dim, dim) for _ in range(depth)])
        if downsample is not None:
            self.downsample = downsample(input_resolution, dim=dim, norm_layer=norm_layer)
        else:
            self.downsample = None

    def forward(self, x):
        for block in self.blocks:
            x = x + block(self.norm(x))
        if self.downsample is not None:
            x = self.downsample(x)
        return x


class Tower(nn.Module):
    """Builds the layer class it is given, under a capitalized parameter name."""

    def __init__(self, Spare, dim=8):
        super().__init__()
        self.layer = Spare((2, 2), dim)

    def forward(self, x):
        return self.layer(x)


class Norm(nn.Module):
    """Scales each token to a unit mean square."""

    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.scale = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.scale


class Mixer(nn.Module):
    """A token-wise layer normalised by its `norm` class, `Norm` unless it is given another."""

    def __init__(self, dim, norm=Norm):
        super().__init__()
        self.norm = norm(dim)
        self.fc = nn.Linear(dim, dim)

    def forward(self, x):
        return self.fc(self.norm(x))
