# The sources are computed at run time, so the evaluator cannot build them from the text.
# Expected: static_rejected (and, with the static checks off, the same from the worker's build
# step, which reads the extensions whatever the static checks say).
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

PIECES = ["__global__ void k(float* o) { o[0] = 1.f; }", "torch::Tensor f(torch::Tensor x) { return x; }"]

ext = load_inline(
    name="computed",
    cpp_sources="torch::Tensor f(torch::Tensor x);",
    cuda_sources="\n".join(PIECES),
    functions=["f"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        return ext.f(x)
