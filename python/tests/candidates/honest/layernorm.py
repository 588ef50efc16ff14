import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def layernorm_kernel(x_ptr, w_ptr, b_ptr, out_ptr, cols, stride, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < cols
    x = tl.load(x_ptr + row * stride + offs, mask=mask, other=0.0)
    mean = tl.sum(x, axis=0) / cols
    d = tl.where(mask, x - mean, 0.0)
    var = tl.sum(d * d, axis=0) / cols
    inv = 1.0 / tl.sqrt(var + eps)
    w = tl.load(w_ptr + offs, mask=mask)
    b = tl.load(b_ptr + offs, mask=mask)
    tl.store(out_ptr + row * stride + offs, d * inv * w + b, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, cols):
        super().__init__()
        self.norm = nn.LayerNorm(cols)

    def forward(self, x):
        x = x.contiguous()
        rows, cols = x.shape
        out = torch.empty_like(x)
        layernorm_kernel[(rows,)](
            x,
            self.norm.weight,
            self.norm.bias,
            out,
            cols,
            x.stride(0),
            self.norm.eps,
            BLOCK=triton.next_power_of_2(cols),
        )
        return out
