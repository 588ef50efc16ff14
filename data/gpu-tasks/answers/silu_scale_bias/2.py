import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def silu_scale_bias_kernel(x_ptr, s_ptr, b_ptr, out_ptr, n, cols, BLOCK: tl.constexpr):
    # Broken on purpose: the bias is indexed by the flat offset instead of the column.
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    s = tl.load(s_ptr + offs % cols, mask=mask)
    b = tl.load(b_ptr + offs % 1024, mask=mask)
    tl.store(out_ptr + offs, x * tl.sigmoid(x) * s + b, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, cols=8192):
        super().__init__()
        self.scale = nn.Parameter(torch.randn(cols))
        self.bias = nn.Parameter(torch.randn(cols))

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        silu_scale_bias_kernel[(triton.cdiv(n, 4096),)](
            x, self.scale, self.bias, out, n, x.shape[-1], BLOCK=4096, num_warps=8
        )
        return out
