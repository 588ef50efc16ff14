"""Two networks building their stages in a loop."""

import torch.nn as nn

from models.layers import Fold, Shrink, Stage

WIDTH = 32


class Embed(nn.Module):
    """Cuts an image into patches and embeds each as a token."""

    def __init__(self, image_size=64, patch=4, dim=WIDTH):
        super().__init__()
        self.grid = (image_size // patch, image_size // patch)
        self.proj = nn.Conv2d(3, dim, patch, stride=patch)

    def forward(self, x):
        return self.proj(x).flatten(2).transpose(1, 2)


class PyramidNet(nn.Module):
    """Stages at resolutions its defaults give, the last one without downsampling."""

    def __init__(self, size=16, embed_dim=WIDTH, depths=(2, 2, 2)):
        super().__init__()
        self.num_stages = len(depths)
        self.stages = nn.ModuleList()
        for i in range(self.num_stages):
            self.stages.append(
                Stage(
                    int(embed_dim * 2**i),
                    (size, size // 2**i),
                    depths[i],
                    downsample=None if i == self.num_stages - 1 else Shrink,
                )
            )

    def forward(self, x):
        for stage in self.stages:
            x = stage(x)
        return x


class FoldNet(nn.Module):
    """Stages at the resolutions of its patch grid, read from the embedding."""

    def __init__(self, embed_dim=WIDTH, depths=(2, 2)):
        super().__init__()
        self.embed = Embed(dim=embed_dim)
        grid = self.embed.grid
        self.num_stages = len(depths)
        self.stages = nn.ModuleList(
            [
                Stage(
                    dim=embed_dim,
                    input_resolution=(grid[0], grid[1] // 2**i),
                    depth=depths[i],
                    downsample=Fold if i < self.num_stages - 1 else None,
                )
                for i in range(self.num_stages)
            ]
        )

    def forward(self, x):
        x = self.embed(x)
        for stage in self.stages:
            x = stage(x)
        return x
