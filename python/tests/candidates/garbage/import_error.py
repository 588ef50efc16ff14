import torch
import torch.nn as nn
import triton
import triton.language as tl

SCALE = undefined_constant * 2  # noqa: F821 (the error this candidate is for)


@triton.jit
def k(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


class ModelNew(nn.Module):
    def forward(self, x, y):
        out = torch.empty_like(x)
        k[(1,)](x, out, x.numel(), BLOCK=4096)
        return out
