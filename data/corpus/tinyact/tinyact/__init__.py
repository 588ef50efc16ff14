"""Activation layers and their functional forms."""
from .functional import swish, mish, hard_sigmoid, gelu_tanh
from .modules import Swish, Mish, HardSigmoid, GeluTanh
