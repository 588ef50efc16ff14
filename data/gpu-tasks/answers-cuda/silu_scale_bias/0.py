import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <ATen/cuda/CUDAContext.h>

__global__ void silu_scale_bias_kernel(const float* __restrict__ x, const float* __restrict__ scale,
                                       const float* __restrict__ bias, float* __restrict__ out,
                                       long n, long cols) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    long stride = (long)gridDim.x * blockDim.x;
    for (; i < n; i += stride) {
        float v = x[i];
        long c = i % cols;
        out[i] = v / (1.f + expf(-v)) * scale[c] + bias[c];
    }
}

torch::Tensor silu_scale_bias(torch::Tensor x, torch::Tensor scale, torch::Tensor bias) {
    auto xc = x.contiguous();
    auto out = torch::empty_like(xc);
    long n = xc.numel();
    long cols = xc.size(-1);
    int threads = 256;
    long blocks = (n + threads - 1) / threads;
    if (blocks > 65535L * 8) blocks = 65535L * 8;
    silu_scale_bias_kernel<<<(unsigned)blocks, threads, 0, at::cuda::getCurrentCUDAStream()>>>(
        xc.data_ptr<float>(), scale.contiguous().data_ptr<float>(), bias.contiguous().data_ptr<float>(),
        out.data_ptr<float>(), n, cols);
    return out;
}
"""

cpp_source = "torch::Tensor silu_scale_bias(torch::Tensor x, torch::Tensor scale, torch::Tensor bias);"

ext = load_inline(
    name="silu_scale_bias",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["silu_scale_bias"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self, cols):
        super().__init__()
        self.scale = nn.Parameter(torch.randn(cols))
        self.bias = nn.Parameter(torch.randn(cols))

    def forward(self, x):
        return ext.silu_scale_bias(x, self.scale, self.bias)
