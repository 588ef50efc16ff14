# An honest kernel that imports harmless standard modules (json, time, weakref, typing,
# dataclasses, functools): the static gate refuses capabilities, not these.
import dataclasses
import functools
import json
import time
import weakref
from typing import Optional

import torch
import torch.nn as nn
import triton
import triton.language as tl


@dataclasses.dataclass(frozen=True)
class LaunchConfig:
    block: int = 1024
    note: Optional[str] = None


CONFIG = LaunchConfig(**json.loads('{"block": 1024, "note": "relu(x) * y + x"}'))


@functools.lru_cache(maxsize=None)
def grid_for(n: int) -> tuple:
    return (triton.cdiv(n, CONFIG.block),)


@triton.jit
def relu_mul_add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, tl.maximum(x, 0.0) * y + x, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.created = time.monotonic()
        self.me = weakref.ref(self)

    def forward(self, x, y):
        out = torch.empty_like(x)
        relu_mul_add_kernel[grid_for(x.numel())](x, y, out, x.numel(), BLOCK=CONFIG.block)
        return out
