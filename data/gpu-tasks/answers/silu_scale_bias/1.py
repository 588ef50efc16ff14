import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def silu_scale_bias_rows(x_ptr, s_ptr, b_ptr, out_ptr, cols, BLOCK: tl.constexpr):
    # One program per row: the column index is the lane, no modulo, scale and bias loaded once.
    row = tl.program_id(0)
    for start in range(0, cols, BLOCK):
        col = start + tl.arange(0, BLOCK)
        mask = col < cols
        x = tl.load(x_ptr + row * cols + col, mask=mask)
        s = tl.load(s_ptr + col, mask=mask)
        b = tl.load(b_ptr + col, mask=mask)
        tl.store(out_ptr + row * cols + col, x * tl.sigmoid(x) * s + b, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, cols=8192):
        super().__init__()
        self.scale = nn.Parameter(torch.randn(cols))
        self.bias = nn.Parameter(torch.randn(cols))

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        rows, cols = x.shape
        silu_scale_bias_rows[(rows,)](x, self.scale, self.bias, out, cols, BLOCK=2048, num_warps=8)
        return out
