# The product comes from cuBLAS through ATen's C++ BLAS wrapper (no dispatcher op, so the dispatch
# log sees nothing); a kernel of its own only adds zero. Expected: the profile shows the GPU time
# in cuBLAS's kernels, not the candidate's -> hacked / decoy_kernel.
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDABlas.h>

__global__ void add_zero_kernel(float* out, long n) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = out[i] + 0.f;
}

torch::Tensor product(torch::Tensor a, torch::Tensor b) {
    auto ac = a.contiguous();
    auto bc = b.contiguous();
    long m = ac.size(0), k = ac.size(1), n = bc.size(1);
    auto out = torch::empty({m, n}, ac.options());
    // row-major C = A B is column-major C^T = B^T A^T (a batch of one: ATen exports bgemm<float>)
    at::cuda::blas::bgemm<float>('n', 'n', n, m, k, 1.f, bc.data_ptr<float>(), n, k * n, ac.data_ptr<float>(), k,
                                 m * k, 0.f, out.data_ptr<float>(), n, m * n, 1);
    long total = m * n;
    add_zero_kernel<<<(unsigned)((total + 255) / 256), 256, 0, at::cuda::getCurrentCUDAStream()>>>(
        out.data_ptr<float>(), total);
    return out;
}
"""

ext = load_inline(
    name="cublas_call",
    cpp_sources="torch::Tensor product(torch::Tensor a, torch::Tensor b);",
    cuda_sources=cuda_source,
    functions=["product"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return ext.product(a, b)
