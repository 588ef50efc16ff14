import torch
import torch.nn as nn


class SeqModule(nn.Module):
    """Base for layers on (batch, time, features) inputs."""

    def check(self, x):
        if x.dim() != 3:
            raise ValueError("expected a (batch, time, features) tensor")
        return x
