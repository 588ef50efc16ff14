# The product comes from cuBLAS, called directly on the handle ATen keeps (no dispatcher op, so the
# dispatch log sees nothing; no link flag: torch's CUDA library, which the extension links, brings
# libcublas); a kernel of its own only adds zero. Expected: the profile shows the GPU time in
# cuBLAS's kernels, not the candidate's -> hacked / decoy_kernel.
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <ATen/cuda/CUDAContext.h>
#include <cublas_v2.h>

__global__ void add_zero_kernel(float* out, long n) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = out[i] + 0.f;
}

torch::Tensor product(torch::Tensor a, torch::Tensor b) {
    auto ac = a.contiguous();
    auto bc = b.contiguous();
    int m = (int)ac.size(0), k = (int)ac.size(1), n = (int)bc.size(1);
    auto out = torch::empty({m, n}, ac.options());
    // on ATen's current stream
    cublasHandle_t handle = at::cuda::getCurrentCUDABlasHandle();
    const float one = 1.f, zero = 0.f;
    // row-major C = A B is column-major C^T = B^T A^T: B first, leading dimensions the row lengths
    cublasStatus_t status = cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &one, bc.data_ptr<float>(), n,
                                        ac.data_ptr<float>(), k, &zero, out.data_ptr<float>(), n);
    TORCH_CHECK(status == CUBLAS_STATUS_SUCCESS, "cublasSgemm failed: ", (int)status);
    long total = (long)m * n;
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
