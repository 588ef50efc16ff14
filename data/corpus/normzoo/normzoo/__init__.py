from .base import NormBase, REGISTRY, register
from .layers import RMSNorm, LayerNorm2d, ScaleNorm
