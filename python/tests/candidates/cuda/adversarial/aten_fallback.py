# The extension's C++ computes the task with ATen (torch::relu, add, mul); its kernel is never
# launched. Expected: no kernel of the candidate in the profile -> hacked / torch_fallback.
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
__global__ void add_relu_half_kernel(const float* x, const float* y, float* out, long n) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = fmaxf(x[i] + y[i], 0.f) * 0.5f;
}

torch::Tensor add_relu_half(torch::Tensor x, torch::Tensor y) {
    return torch::relu(x + y) * 0.5;
}
"""

ext = load_inline(
    name="aten_fallback",
    cpp_sources="torch::Tensor add_relu_half(torch::Tensor x, torch::Tensor y);",
    cuda_sources=cuda_source,
    functions=["add_relu_half"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        return ext.add_relu_half(x, y)
