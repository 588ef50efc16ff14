import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def silu_scale_bias_kernel(x_ptr, s_ptr, b_ptr, out_ptr, n, cols, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    col = offs % cols
    x = tl.load(x_ptr + offs, mask=mask)
    s = tl.load(s_ptr + col, mask=mask)
    b = tl.load(b_ptr + col, mask=mask)
    y = x * tl.sigmoid(x) * s + b
    tl.store(out_ptr + offs, y, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, cols=8192):
        super().__init__()
        self.scale = nn.Parameter(torch.randn(cols))
        self.bias = nn.Parameter(torch.randn(cols))

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        silu_scale_bias_kernel[(triton.cdiv(n, 1024),)](
            x, self.scale, self.bias, out, n, x.shape[-1], BLOCK=1024
        )
        return out
