# The C++ keeps the first call's result in a static tensor and returns it from then on (computed
# by its own kernel). Expected: later trials' outputs equal another trial's reference outputs ->
# hacked / output_caching.
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <ATen/cuda/CUDAContext.h>

__global__ void add_relu_half_kernel(const float* x, const float* y, float* out, long n) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = fmaxf(x[i] + y[i], 0.f) * 0.5f;
}

static torch::Tensor kept;

torch::Tensor add_relu_half(torch::Tensor x, torch::Tensor y) {
    long n = x.numel();
    if (!kept.defined() || kept.numel() != n) {
        kept = torch::empty_like(x);
        add_relu_half_kernel<<<(unsigned)((n + 255) / 256), 256, 0, at::cuda::getCurrentCUDAStream()>>>(
            x.data_ptr<float>(), y.data_ptr<float>(), kept.data_ptr<float>(), n);
    }
    auto out = torch::empty_like(x);
    cudaMemcpyAsync(out.data_ptr<float>(), kept.data_ptr<float>(), n * sizeof(float), cudaMemcpyDeviceToDevice,
                    at::cuda::getCurrentCUDAStream());
    add_relu_half_kernel<<<1, 1, 0, at::cuda::getCurrentCUDAStream()>>>(
        x.data_ptr<float>(), y.data_ptr<float>(), out.data_ptr<float>(), 0);
    return out;
}
"""

ext = load_inline(
    name="output_cache",
    cpp_sources="torch::Tensor add_relu_half(torch::Tensor x, torch::Tensor y);",
    cuda_sources=cuda_source,
    functions=["add_relu_half"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        return ext.add_relu_half(x, y)
