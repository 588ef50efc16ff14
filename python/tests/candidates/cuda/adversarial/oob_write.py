# The kernel computes the right values and also writes far past the end of its output. Expected:
# an illegal address (the process is discarded with its sticky CUDA error) -> runtime_error.
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <ATen/cuda/CUDAContext.h>

__global__ void add_relu_half_kernel(const float* x, const float* y, float* out, long n) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = fmaxf(x[i] + y[i], 0.f) * 0.5f;
    if (i == 0) out[n + (1L << 36)] = 1.f;
}

torch::Tensor add_relu_half(torch::Tensor x, torch::Tensor y) {
    auto out = torch::empty_like(x);
    long n = x.numel();
    add_relu_half_kernel<<<(unsigned)((n + 255) / 256), 256, 0, at::cuda::getCurrentCUDAStream()>>>(
        x.data_ptr<float>(), y.data_ptr<float>(), out.data_ptr<float>(), n);
    return out;
}
"""

ext = load_inline(
    name="oob_write",
    cpp_sources="torch::Tensor add_relu_half(torch::Tensor x, torch::Tensor y);",
    cuda_sources=cuda_source,
    functions=["add_relu_half"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        return ext.add_relu_half(x, y)
