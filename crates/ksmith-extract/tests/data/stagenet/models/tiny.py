"""A one-stage model, every argument written out."""

import torch.nn as nn

from models.layers import Merge, Mixer, Stage


def tiny_stage():
    return Stage(48, (8, 8), 2, Merge)


def plain_stage():
    return Stage(48, (8, 8), 1, downsample=None)


def layer_norm_mixer():
    return Mixer(56, norm=nn.LayerNorm)


def mixer():
    return Mixer(40)
