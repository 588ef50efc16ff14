# Computes honestly, but raises while it is being captured into a CUDA graph, so that it is timed
# by another method than the reference (whose graph captures): a refusal must not buy a different,
# kinder measurement. No suspicious import.
import torch
import torch.nn as nn
import triton
import triton.language as tl


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

    def forward(self, x, y):
        if torch.cuda.is_available() and torch.cuda.is_current_stream_capturing():
            raise RuntimeError("this model does not support CUDA graphs")
        x = x.contiguous()
        y = y.contiguous()
        out = torch.empty_like(x)
        relu_mul_add_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, out, x.numel(), BLOCK=1024)
        return out
