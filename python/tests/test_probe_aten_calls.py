"""The probe records each ATen call with the attributes that decide its kernel (``aten_calls``):
the same computation written two ways records the same calls, different kernels different ones."""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import json  # noqa: E402
import pathlib  # noqa: E402

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from ksmith.probe import aten_calls  # noqa: E402
from ksmith.probe.execute import record_aten_ops, run_request  # noqa: E402


def calls(model, *inputs) -> list[str]:
    """The calls that do work (views and tensor creation left out), without the namespace."""
    _, trace, recorded = record_aten_ops(model, list(inputs), torch)
    assert len(trace) == len(recorded)
    for name, call in zip(trace, recorded, strict=True):
        assert call.startswith(name), (name, call)
    skip = ("view", "_unsafe_view", "unsqueeze", "empty", "t(w)", "expand", "split(w)")
    out = [c.removeprefix("aten::") for c in recorded]
    return [c for c in out if not c.startswith(skip)]


class ChannelsFirstNorm(nn.Module):
    """ConvNeXt's channels-first layer norm, written out."""

    def __init__(self, c):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(c))
        self.bias = nn.Parameter(torch.zeros(c))

    def forward(self, x):
        u = x.mean(1, keepdim=True)
        s = (x - u).pow(2).mean(1, keepdim=True)
        x = (x - u) / torch.sqrt(s + 1e-6)
        return self.weight[:, None, None] * x + self.bias[:, None, None]


class PermutedNorm(nn.Module):
    """A channels-first norm through a permute: nn.LayerNorm on a strided view."""

    def __init__(self, c, contiguous=False):
        super().__init__()
        self.norm = nn.LayerNorm(c)
        self.contiguous = contiguous

    def forward(self, x):
        x = x.permute(0, 2, 3, 1)
        if self.contiguous:
            x = x.contiguous()
        return self.norm(x).permute(0, 3, 1, 2)


class FunctionalBlock(nn.Module):
    """Linear + GELU + LayerNorm with nn.functional and its own parameters."""

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(16, 8))
        self.b = nn.Parameter(torch.zeros(16))
        self.g = nn.Parameter(torch.ones(16))
        self.beta = nn.Parameter(torch.zeros(16))

    def forward(self, x):
        return F.layer_norm(F.gelu(F.linear(x, self.w, self.b)), (16,), self.g, self.beta)


class Wrapped(nn.Module):
    """An extra module around another that adds nothing."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, x):
        return self.inner(x)


def test_the_same_computation_written_two_ways_records_the_same_calls():
    x = torch.randn(2, 5, 8)
    modules = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.LayerNorm(16))
    assert calls(modules, x) == calls(FunctionalBlock(), x) == calls(Wrapped(FunctionalBlock()), x)
    assert calls(modules, x) == ["addmm(a,w)", "gelu", "native_layer_norm(KR)"]
    # The input's rank is no attribute: the same norm over the last dimension of 3-D and 4-D.
    assert calls(nn.LayerNorm(8), x) == calls(nn.LayerNorm(8), torch.randn(2, 3, 4, 8))


def test_channels_first_and_last_dim_norms_record_different_calls():
    x = torch.randn(2, 8, 5, 5)
    last = calls(nn.LayerNorm(8), torch.randn(2, 25, 8))
    assert last == ["native_layer_norm(KR)"]
    # The norm of a permuted view works along the middle of the memory order.
    assert calls(PermutedNorm(8), x) == ["permute(p=021)", "native_layer_norm(KRKK)", "permute(p=021)"]
    # Made contiguous first: the transposing copy is recorded.
    assert calls(PermutedNorm(8, contiguous=True), x)[:3] == [
        "permute(p=021)",
        "clone(m=021)",
        "native_layer_norm(KR)",
    ]
    # Written out, its means run along the channels (middle) too.
    written = calls(ChannelsFirstNorm(8), x)
    assert written[0] == "mean(KRKK)" and "mean(KR)" not in written


def test_depthwise_grouped_and_dense_convolutions_differ():
    x = torch.randn(1, 8, 6, 6)
    dw = calls(nn.Conv2d(8, 8, 3, padding=1, groups=8), x)
    dense = calls(nn.Conv2d(8, 8, 3, padding=1), x)
    grouped = calls(nn.Conv2d(8, 8, 3, padding=1, groups=2), x)
    assert dw == ["convolution(2d,k3x3,s1,p1,d1,dw)"]
    assert dense == ["convolution(2d,k3x3,s1,p1,d1,dense)"]
    assert grouped == ["convolution(2d,k3x3,s1,p1,d1,grp)"]
    # nn.functional with the module's own weight is the same call; a weight given as an input
    # is marked.
    conv = nn.Conv2d(8, 8, 3, padding=1, groups=8)

    class Functional(nn.Module):
        def __init__(self):
            super().__init__()
            self.weight, self.bias = conv.weight, conv.bias

        def forward(self, x):
            return F.conv2d(x, self.weight, self.bias, padding=1, groups=8)

    assert calls(Functional(), x) == dw
    dynamic = calls(lambda x, w: F.conv2d(x, w, padding=1, groups=8), x, conv.weight.detach().clone())
    assert dynamic == ["convolution(2d,k3x3,s1,p1,d1,dw,nobias,dyn)"]
    strided = calls(nn.Conv1d(8, 4, 5, stride=2, dilation=2, bias=False), torch.randn(1, 8, 32))
    assert strided == ["convolution(1d,k5,s2,p0,d2,dense,nobias)"]
    assert calls(nn.Conv2d(8, 8, 1), x.to(memory_format=torch.channels_last)) == [
        "convolution(2d,k1x1,s1,p0,d1,dense,cl)"
    ]


def test_reduction_axes_are_recorded_in_memory_order():
    x = torch.randn(2, 3, 4, 5)
    assert calls(lambda x: x.sum(-1), x) == ["sum(KR)"]
    assert calls(lambda x: x.sum(1), x) == ["sum(KRKK)"]
    assert calls(lambda x: x.sum(2), x) == ["sum(KRK)"]
    assert calls(lambda x: x.sum(0), x) == ["sum(RKKK)"]
    assert calls(lambda x: x.sum(0), x[0, 0]) == ["sum(RK)"]
    # The input's rank does not change a reduction over its last dimension.
    assert calls(lambda x: x.sum(-1), x[0]) == ["sum(KR)"]
    assert calls(lambda x: x.mean((2, 3)), x) == ["mean(KR)"]
    assert calls(lambda x: x.amax(), x) == ["amax(R)"]
    assert calls(lambda x: x.softmax(1), x) == ["_softmax(KRKK)"]
    assert calls(lambda x: torch.cat([x, x], -1), x) == ["cat(KR)"]
    # A reduction over the last dimension of a transposed view runs along memory's middle.
    assert calls(lambda x: x.transpose(1, 3).sum(-1), x) == ["transpose(p=0321)", "sum(KRKK)"]


def test_matmul_factors_have_roles():
    x = torch.randn(2, 4, 8)
    assert calls(nn.Linear(8, 8, bias=False), x) == ["mm(a,w)"]
    assert calls(lambda a, b: a @ b.transpose(-2, -1), x, x) == ["transpose(p=021)", "bmm(a,a)"]


def test_norm_pool_attention_and_dtype_attributes():
    x = torch.randn(2, 8, 6, 6)
    assert calls(nn.BatchNorm2d(8), x) == ["native_batch_norm(RKR,train)"]
    assert calls(nn.BatchNorm2d(8).eval(), x) == ["native_batch_norm(RKR,eval)"]
    assert calls(nn.GroupNorm(8, 8), x) == ["native_group_norm(gC)"]
    assert calls(nn.GroupNorm(1, 8), x) == ["native_group_norm(g1)"]
    assert calls(nn.MaxPool2d(3, 2, 1), x) == ["max_pool2d_with_indices(k3,s2,p1)"]
    assert calls(nn.AdaptiveAvgPool2d(1), x) == ["mean(KR)"]
    assert calls(nn.GELU("tanh"), x) == ["gelu(tanh)"]
    q = torch.randn(1, 2, 4, 8)
    causal = calls(lambda q: F.scaled_dot_product_attention(q, q, q, is_causal=True), q)
    assert len(causal) == 1 and causal[0].endswith("(causal)"), causal
    assert calls(lambda x: x * 2.0, x) == ["mul(s)"]


def test_broadcasts_say_along_which_dimensions_the_smaller_operand_varies():
    x = torch.randn(2, 8, 6, 6)
    per_channel = calls(lambda x, g: x * g, x, torch.randn(8, 1, 1))
    last_dim = calls(lambda x, g: x * g, torch.randn(2, 36, 8), torch.randn(8))
    assert per_channel == ["mul(b=KRKK)"]
    assert last_dim == ["mul(b=KR)"]
    # timm's LayerScale2d and LayerScale: the same multiply, another layout.
    assert calls(lambda x, g: x * g.view(1, -1, 1, 1), x, torch.randn(8)) == per_channel
    # A mean subtracted along the channels varies along everything else.
    assert calls(lambda x: x - x.mean(1, keepdim=True), x) == ["mean(KRKK)", "sub(b=RKR)"]
    assert calls(lambda a, b: a + b, x, x) == ["add"]
    assert calls(lambda x: torch.relu(x), x.double()) == ["relu@f64"]
    assert calls(lambda x: x.to(torch.bfloat16), x)[0] == "_to_copy(to=bf16)"


RECORDED = """import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(4, 4, 3, padding=1, groups=4)

    def forward(self, x):
        return torch.relu(self.conv(x))


def get_inputs():
    return [torch.rand(2, 4, 8, 8)]


def get_init_inputs():
    return []
"""


def test_the_probe_records_the_calls_beside_the_trace():
    out = run_request({"program": RECORDED, "seed": 1}, torch)
    assert out["status"] == "ok", out
    assert len(out["aten_calls"]) == len(out["aten_trace"])
    assert out["aten_calls"] == ["aten::convolution(2d,k3x3,s1,p1,d1,dw)", "aten::relu"], out["aten_calls"]
    failed = run_request({"program": RECORDED.replace("return torch.relu", "raise ValueError\n"), "seed": 1}, torch)
    assert failed["aten_calls"] == []


def test_the_view_operators_are_the_shared_list():
    # One list with ksmith-embed's operator kinds (`crates/ksmith-embed/src/aten.rs` reads the
    # same file: every operator in it is a view there).
    path = pathlib.Path(aten_calls.__file__).with_name("aten_views.json")
    lists = json.loads(path.read_text())
    assert aten_calls.VIEWS == set(lists["reshape"]) and aten_calls.PERMUTES == set(lists["permute"])
    assert not (aten_calls.VIEWS & aten_calls.PERMUTES)
    model = nn.Linear(3, 4)
    weights = aten_calls.Weights(model, torch)
    x = torch.randn(2, 3, 5)
    for name in lists["reshape"] + lists["permute"]:
        # A view of a weight is written `w`, whatever the view.
        assert aten_calls._attributes(name, "", {}, model.weight, weights) == ["w"], name
    for name in lists["reshape"]:
        assert aten_calls._attributes(name, "", {}, x, weights) == [], name
    named = {"self": x, "dim0": 1, "dim1": 2}
    assert aten_calls._attributes("transpose", "int", named, x, weights)[0].startswith("p=")
