import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <ATen/cuda/CUDAContext.h>
#include <cfloat>

// One block per row: a max pass, a sum-of-exponentials pass, then the normalized write.
__global__ void row_softmax_kernel(const float* __restrict__ x, float* __restrict__ out, int cols) {
    extern __shared__ float shared[];
    const float* row = x + (long)blockIdx.x * cols;
    float* dst = out + (long)blockIdx.x * cols;
    float m = -FLT_MAX;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) m = fmaxf(m, row[c]);
    shared[threadIdx.x] = m;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) shared[threadIdx.x] = fmaxf(shared[threadIdx.x], shared[threadIdx.x + s]);
        __syncthreads();
    }
    m = shared[0];
    __syncthreads();
    float total = 0.f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) total += expf(row[c] - m);
    shared[threadIdx.x] = total;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) shared[threadIdx.x] += shared[threadIdx.x + s];
        __syncthreads();
    }
    float inv = 1.f / shared[0];
    for (int c = threadIdx.x; c < cols; c += blockDim.x) dst[c] = expf(row[c] - m) * inv;
}

torch::Tensor row_softmax(torch::Tensor x) {
    auto xc = x.contiguous();
    auto out = torch::empty_like(xc);
    int cols = (int)xc.size(-1);
    long rows = xc.numel() / cols;
    int threads = 256;
    row_softmax_kernel<<<(unsigned)rows, threads, threads * sizeof(float), at::cuda::getCurrentCUDAStream()>>>(
        xc.data_ptr<float>(), out.data_ptr<float>(), cols);
    return out;
}
"""

cpp_source = "torch::Tensor row_softmax(torch::Tensor x);"

ext = load_inline(
    name="row_softmax",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["row_softmax"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return ext.row_softmax(x)
