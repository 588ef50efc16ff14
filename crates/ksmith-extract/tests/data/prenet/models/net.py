from torch import nn

from .blocks import Gated, LinearAttention, Stage


class Net(nn.Module):
    def __init__(self, dim=4, mults=(1, 2)):
        super().__init__()
        self.stage = Stage(dim, heads=2)
        dims = [dim * m for m in mults]
        self.levels = nn.ModuleList([])
        for d_in, d_out in zip(dims[:-1], dims[1:]):
            self.levels.append(Gated(LinearAttention(d_in), scale=0.5))
            self.levels.append(nn.Conv2d(d_in, d_out, 1))

    def forward(self, x):
        x = self.stage(x)
        for level in self.levels:
            x = level(x)
        return x
