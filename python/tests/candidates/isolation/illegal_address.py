# Stores far outside any allocation: a segfault in the interpreter, an illegal address on a GPU
# (which poisons that process's CUDA context).
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def bad_store_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs + (1 << 40), tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        out = torch.empty_like(x)
        bad_store_kernel[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), BLOCK=1024)
        return out
