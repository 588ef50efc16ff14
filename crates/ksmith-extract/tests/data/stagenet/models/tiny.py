"""A one-stage model, every argument written out."""

from models.layers import Merge, Stage


def tiny_stage():
    return Stage(48, (8, 8), 2, Merge)


def plain_stage():
    return Stage(48, (8, 8), 1, downsample=None)
