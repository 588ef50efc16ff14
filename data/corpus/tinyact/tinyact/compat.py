# Older names kept for checkpoints that still refer to them.
import torch
from torch.nn import Module


class SiLUCompat(Module):

    def __init__(self, beta = 1.0):
        super( SiLUCompat, self ).__init__()
        self.beta = beta

    def forward(self, inputs):
        # same as Swish
        return inputs * torch.sigmoid( self.beta * inputs )


class MishCompat(Module):
    def forward(self, t):
        return t * torch.tanh(torch.nn.functional.softplus(t))
