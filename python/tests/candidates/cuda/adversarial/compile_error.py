# An undefined identifier in the kernel. Expected: compile_error, with nvcc's error in the feedback.
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
__global__ void add_relu_half_kernel(const float* x, const float* y, float* out, long n) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = fmaxf(x[i] + y[i], 0.f) * halfway;
}

torch::Tensor add_relu_half(torch::Tensor x, torch::Tensor y) {
    auto out = torch::empty_like(x);
    long n = x.numel();
    add_relu_half_kernel<<<(unsigned)((n + 255) / 256), 256>>>(
        x.data_ptr<float>(), y.data_ptr<float>(), out.data_ptr<float>(), n);
    return out;
}
"""

ext = load_inline(
    name="compile_error",
    cpp_sources="torch::Tensor add_relu_half(torch::Tensor x, torch::Tensor y);",
    cuda_sources=cuda_source,
    functions=["add_relu_half"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        return ext.add_relu_half(x, y)
