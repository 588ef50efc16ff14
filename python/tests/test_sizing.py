"""The sizing step, in-process: programs sized for the GPU keep their constraints, carry their
sizes as module-level constants, have alternate size sets that run, stay within the work
bounds, and programs that cannot be sized say why. Also the work measure (FLOPs equal to
``FlopCounterMode``'s). The constants themselves are `test_shared.py`'s."""

from __future__ import annotations

import json
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import pytest  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
from ksmith.probe import work as W  # noqa: E402
from ksmith.probe.execute import exec_program, run_request, split_init  # noqa: E402
from ksmith.probe.sizing import Targets  # noqa: E402
from ksmith.shared import constants as K  # noqa: E402

torch.set_num_threads(1)
TARGETS = Targets()
HEADER = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n\n"


def program(body: str, inputs: str, init: str) -> str:
    return (
        f"{HEADER}{body}\n\ndef get_inputs():\n    return [{inputs}]\n\n\ndef get_init_inputs():\n    return [{init}]\n"
    )


def sized(text: str, **sizing) -> dict:
    result = run_request({"program": text, "sizing": sizing}, torch)
    assert result["status"] == "ok", (result["error_message"], result["attempt_log"])
    return result


def build(text: str, values: dict | None = None, device: str = "meta"):
    """Runs a program (with a size set substituted) from scratch on ``device``; its work."""
    if values is not None:
        text = K.set_constants(text, values)
    ns = exec_program(text)
    with torch.device(device):
        args = split_init(ns["get_init_inputs"]())
        model = ns["Model"](*args)
        inputs = ns["get_inputs"]()
        _, work = W.measure(model, inputs, torch)
    return ns, args, inputs, work


CONV = program(
    """class Model(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=1)
        self.bn = nn.BatchNorm2d(out_channels)

    def forward(self, x):
        return torch.relu(self.bn(self.conv(x)))
""",
    "torch.rand([4, 4, 4, 4])",
    "4, 4, 3",
)

ATTENTION = program(
    """class Model(nn.Module):
    def __init__(self, dim, num_heads, max_len):
        super().__init__()
        assert dim % num_heads == 0
        self.heads = num_heads
        self.pos = nn.Parameter(torch.zeros(1, max_len, dim))
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        B, N, C = x.shape
        x = x + self.pos[:, :N]
        assert self.pos.shape[1] >= N, "sequence longer than the position table"
        q, k, v = self.qkv(x).reshape(B, N, 3, self.heads, C // self.heads).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v)
        return self.proj(a.transpose(1, 2).reshape(B, N, C))
""",
    "torch.rand([4, 4, 48])",
    "48, 6, 64",
)

KERNELBENCH = f"""{HEADER}class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        return torch.matmul(A, B)


M = 64
K = 32
N = 48


def get_inputs():
    return [torch.rand(M, K), torch.rand(K, N)]


def get_init_inputs():
    return []
"""


def test_a_conv_program_is_sized_with_its_constants_written_in():
    r = sized(CONV)
    assert r["size_status"] == "sized", r["size_reason"]
    sizes = json.loads(r["sizes"])
    text = r["program"]
    # KernelBench style: one module-level constant per size, read by the input functions.
    assert K.int_constants(text).items() >= sizes.items()
    assert "batch_size" in sizes and "in_channels" in sizes
    assert "def get_inputs():\n    return [torch.rand([batch_size, in_channels, " in text
    ns, args, inputs, work = build(text)
    assert args[0] == sizes["in_channels"] and inputs[0].shape[1] == sizes["in_channels"]
    assert args[2] == 3, "the kernel size is structure, not a size"
    # Work within bounds, and the row's estimate is the program's.
    assert TARGETS.reached(work)
    assert work.eager_ms() <= TARGETS.max_ms
    assert r["est_flops"] == pytest.approx(work.flops) and r["est_ms"] == pytest.approx(work.eager_ms())
    assert r["peak_bytes"] <= TARGETS.max_memory_mb * 2**20


def test_constraints_are_kept_in_the_sizes_and_every_alternate():
    r = sized(ATTENTION)
    assert r["size_status"] in ("sized", "below_target"), r["size_reason"]
    sizes = json.loads(r["sizes"])
    alternates = json.loads(r["alt_sizes"])
    assert len(alternates) >= 2
    assert all(a.keys() == sizes.keys() and a != sizes for a in alternates)
    for values in [sizes] + alternates:
        # Every set runs from scratch as the evaluator would run it (the largest on meta, the
        # alternates on the CPU), and keeps dim % heads and the sequence within the table.
        device = "meta" if values is sizes else "cpu"
        ns, args, inputs, _ = build(r["program"], values, device)
        dim, heads, max_len = args
        assert dim % heads == 0 and inputs[0].shape[1] <= max_len
    # The position table bounds the sequence; the width grew instead.
    assert json.loads(r["sizes"]).get("max_len", 64) == 64 or "max_len" not in sizes


UNET = program(
    """class Model(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.inp = nn.Conv2d(3, dim, 3, padding=1)
        self.time = nn.Linear(1, dim)
        self.down = nn.ModuleList([nn.Conv2d(dim, dim, 3, stride=2, padding=1) for _ in range(3)])
        self.out = nn.Conv2d(dim, 3, 1)

    def forward(self, x, time):
        assert x.shape[-2] % 8 == 0 and x.shape[-1] % 8 == 0, "your input dimensions need to be divisible by 8"
        h = self.inp(x) + self.time(time[:, None])[:, :, None, None]
        for down in self.down:
            h = down(h)
        return self.out(F.interpolate(h, size=x.shape[-2:]))
""",
    "torch.rand([4, 3, 8, 8]), torch.rand([4])",
    "16",
)


def test_a_unet_keeps_its_divisibility_and_its_time_step_per_sample_in_every_size_set():
    r = sized(UNET)
    assert r["size_status"] in ("sized", "below_target"), r["size_reason"]
    sizes = json.loads(r["sizes"])
    alternates = json.loads(r["alt_sizes"])
    assert len(alternates) >= 2
    # The time step is one per sample: the batch knob sizes it with the image.
    assert "batch_size" in sizes
    for values in [sizes] + alternates:
        _, _, (x, time), _ = build(r["program"], values, "meta")
        assert x.shape[-2] % 8 == 0 and x.shape[-1] % 8 == 0, values
        assert time.shape == (x.shape[0],), values


#: A backbone meta cannot run (its forward reads a value) whose five downsamplings need sides
#: of at least 32: sized on the CPU, where the plan first halves what is over the CPU's limit.
BACKBONE = program(
    """class Model(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.stem = nn.Conv2d(3, dim, 3, padding=1)
        self.mix = nn.Conv2d(dim, dim, 3, padding=1)
        self.downs = nn.Sequential(*[nn.Conv2d(dim, dim, 2, stride=2) for _ in range(5)])

    def forward(self, x):
        scale = 1.0 if x.abs().sum().item() >= 0 else 0.0
        return self.downs(self.mix(self.stem(x))) * scale
""",
    "torch.rand([4, 3, 32, 32])",
    "96",
)

#: A model whose constructor fixes the image size (Swin's 224): the batch is its only knob, and
#: one image is already past the CPU's limit (meta cannot run its forward).
FIXED_IMAGE = program(
    """class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 96, 3, padding=1)
        self.mix = nn.Sequential(nn.Conv2d(96, 96, 3, padding=1), nn.Conv2d(96, 96, 3, padding=1))

    def forward(self, x):
        assert x.shape[-2:] == (32, 32), "input image size doesn't match the model"
        scale = 1.0 if x.abs().sum().item() >= 0 else 0.0
        return self.mix(self.stem(x)) * scale
""",
    "torch.rand([4, 3, 32, 32])",
    "",
)


def test_a_constructor_meta_cannot_run_is_built_on_the_cpu_and_sized_on_meta():
    # timm's drop-path schedule: `[x.item() for x in torch.linspace(...)]` in `__init__`.
    schedule = program(
        """class Model(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.rates = [x.item() for x in torch.linspace(0, 0.1, 4)]
        self.fc1 = nn.Linear(dim, 4 * dim)
        self.fc2 = nn.Linear(4 * dim, dim)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x)))
""",
        "torch.rand([4, 4, 4])",
        "4",
    )
    r = sized(schedule)
    assert r["size_status"] == "sized", r["size_reason"]
    assert r["sized_on"] == "meta"
    assert r["est_flops"] >= TARGETS.min_gflop * 1e9 or r["est_bytes"] >= TARGETS.min_mb * 2**20


def test_a_model_of_many_small_kernels_grows_until_its_work_counts():
    # A whole model's hundreds of kernels take the aim in launches alone at any size: it grows
    # until its arithmetic is half the aim too.
    deep = program(
        """class Model(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.layers = nn.Sequential(*[nn.Sequential(nn.Linear(dim, dim), nn.GELU()) for _ in range(200)])

    def forward(self, x):
        return self.layers(x)
""",
        "torch.rand([4, 4])",
        "4",
    )
    r = sized(deep)
    assert r["size_status"] == "sized", r["size_reason"]
    assert r["est_flops"] / W.FLOPS * 1e3 >= TARGETS.aim_ms / 4, json.loads(r["sizes"])


def test_a_side_the_cpu_plan_halved_below_what_ran_comes_back():
    r = sized(BACKBONE)
    assert r["sized_on"] == "cpu"
    assert r["size_status"] in ("sized", "below_target"), r["size_reason"]
    for values in [json.loads(r["sizes"])] + json.loads(r["alt_sizes"]):
        _, _, (x,), _ = build(r["program"], values, "cpu")
        assert x.shape[-1] % 32 == 0, values


def test_a_model_whose_only_knob_is_the_batch_gets_two_alternates():
    r = sized(FIXED_IMAGE)
    assert r["size_status"] in ("sized", "below_target"), r["size_reason"]
    sizes = json.loads(r["sizes"])
    alternates = json.loads(r["alt_sizes"])
    assert set(sizes) == {"batch_size"}
    assert len(alternates) >= 2 and sizes not in alternates


def test_module_level_constants_of_the_program_are_its_knobs():
    r = sized(KERNELBENCH)
    assert r["size_status"] == "sized", r["size_reason"]
    sizes = json.loads(r["sizes"])
    assert set(sizes) == {"M", "K", "N"}
    # The program is the original with its constants rewritten, byte for byte otherwise.
    assert r["program"] == K.set_constants(KERNELBENCH, sizes)
    assert all(sizes[k] >= v for k, v in {"M": 64, "K": 32, "N": 48}.items())
    assert r["est_flops"] == pytest.approx(2 * sizes["M"] * sizes["K"] * sizes["N"])


def test_integer_inputs_keep_their_value_range():
    embed = program(
        """class Model(nn.Module):
    def __init__(self, vocab_size, dim):
        super().__init__()
        self.emb = nn.Embedding(vocab_size, dim)

    def forward(self, ids):
        return self.emb(ids).mean(dim=1)
""",
        "torch.randint(0, 100, [4, 4])",
        "100, 4",
    )
    r = sized(embed)
    assert r["size_status"] in ("sized", "below_target"), r["size_reason"]
    # Drawn like the program's own indices (between the smallest and largest it drew).
    m = re.search(r"torch\.randint\((\d+), (\d+), \[batch_size, seq_len\]", r["program"])
    assert m and 0 <= int(m.group(1)) < int(m.group(2)) <= 100, r["program"]
    for values in json.loads(r["alt_sizes"]):
        build(r["program"], values, "cpu")


def test_programs_that_cannot_be_sized_stay_and_say_why():
    fixed = program(
        """class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.arange(64.0).reshape(8, 8))

    def forward(self, scale):
        return self.w * scale
""",
        "torch.rand(())",
        "",
    )
    r = sized(fixed)
    assert r["size_status"] == "unsizable"
    assert r["size_reason_code"] == "no_size_knob" and "no argument" in r["size_reason"]
    assert r["program"] == fixed and r["sizes"] == "{}" and r["alt_sizes"] == "[]"
    # Out of time: the probe's own result is kept.
    r = sized(CONV, budget_s=0.001)
    assert r["size_status"] == "unsizable" and r["size_reason_code"] == "timeout"
    assert r["program"] == CONV


def test_a_program_meta_cannot_run_is_sized_on_the_cpu():
    data_dependent = program(
        """class Model(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.fc = nn.Linear(dim, dim)

    def forward(self, x):
        k = int(x.shape[0] * (x.abs().sum() > -1).item())
        return self.fc(x)[:k]
""",
        "torch.rand([4, 4])",
        "4",
    )
    r = sized(data_dependent)
    assert r["sized_on"] == "cpu"
    assert r["size_status"] == "sized", r["size_reason"]
    assert r["est_flops"] >= TARGETS.min_gflop * 1e9 or r["est_bytes"] >= TARGETS.min_mb * 2**20


def test_sizing_off_leaves_the_probe_as_it_was():
    r = run_request({"program": CONV}, torch)
    assert r["status"] == "ok" and r["program"] == CONV and r["size_status"] is None


# --- the work measure ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "make, shapes",
    [
        (lambda: nn.Sequential(nn.Conv2d(3, 8, 3), nn.ReLU(), nn.Conv2d(8, 4, 1)), [(2, 3, 16, 16)]),
        (lambda: nn.Sequential(nn.Linear(32, 64), nn.GELU(), nn.Linear(64, 8)), [(4, 7, 32)]),
        (lambda: nn.MultiheadAttention(32, 4, batch_first=True), [(2, 9, 32)] * 3),
        (lambda: nn.LSTM(16, 8), [(5, 2, 16)]),
        (lambda: nn.ConvTranspose2d(4, 2, 2, stride=2), [(1, 4, 8, 8)]),
    ],
    ids=["conv", "mlp", "attention", "lstm", "conv_transpose"],
)
@pytest.mark.parametrize("device", ["cpu", "meta"])
def test_flops_are_flop_counter_modes_on_cpu_and_meta(make, shapes, device):
    from torch.utils.flop_counter import FlopCounterMode

    with torch.device(device):
        model = make()
        inputs = [torch.rand(s) for s in shapes]
    counter = FlopCounterMode(display=False)
    with counter, torch.no_grad():
        model(*inputs)
    _, work = W.measure(model, inputs, torch)
    assert work.flops == counter.get_total_flops()
    # The one miss is PyTorch's own: its fused CPU LSTM kernel has no FLOP formula (on meta the
    # LSTM runs as matmuls and is counted).
    assert work.flops > 0 or (device, type(model)) == ("cpu", nn.LSTM)
    assert work.kernels > 0 and work.bytes > 0


def test_bytes_views_and_peak_memory():
    x = torch.rand(256, 256)  # 256 KiB

    class Chain(nn.Module):
        def forward(self, x):
            for _ in range(8):
                x = (x * 2).view(-1).view(256, 256) + 1  # two kernels, two free views
            return x

    _, work = W.measure(Chain(), [x], torch)
    assert work.kernels == 16
    assert work.bytes == 16 * 2 * x.nbytes  # each kernel reads and writes one tensor
    # Intermediates are freed as the chain goes: never more than a few alive at once.
    assert work.input_bytes == x.nbytes and work.param_bytes == 0
    assert x.nbytes * 2 <= work.peak_bytes <= x.nbytes * 4
    assert work.eager_ms() >= 16 * W.HOST_US / 1000


#: A constructor argument that is a module the repository's call site builds (extract writes
#: the call into `get_init_inputs()`), and a bool forward argument.
MODULE_ARG = program(
    """class Inner(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.fc = nn.Linear(dim, dim)

    def forward(self, x):
        return self.fc(x)


class Model(nn.Module):
    def __init__(self, dim, inner):
        super().__init__()
        self.inner = inner
        self.out = nn.Linear(dim, dim)

    def forward(self, x, multimask_output: bool):
        y = self.out(self.inner(x))
        return y if multimask_output else y[:, :1]
""",
    "torch.rand([4, 16]), False",
    "16, Inner(16)",
)


def test_a_module_constructor_argument_is_kept_and_is_no_knob():
    r = sized(MODULE_ARG)
    sizes = json.loads(r["sizes"])
    # The module is built by the program's own call, whatever sizes are chosen; the width it
    # fixes (16) is no knob, the batch is.
    assert r["program"].endswith("def get_init_inputs():\n    return [16, Inner(16)]\n"), r["program"]
    assert set(sizes) == {"batch_size"}, sizes
    for values in [sizes, *json.loads(r["alt_sizes"])]:
        ns, args, inputs, _ = build(r["program"], values, device="cpu")
        assert isinstance(args[1], ns["Inner"]) and args[1].fc.in_features == 16
        assert inputs[1] is False


PER_BATCH_INPUT = program(
    """class Model(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.proj = nn.Linear(dim, dim)
        self.mix = nn.Conv2d(dim, dim, 1)

    def forward(self, image, pe, tokens, dense):
        # one image embedding and its positional encoding, repeated for each prompt of the batch
        src = torch.repeat_interleave(image, tokens.shape[0], dim=0) + dense
        pos = torch.repeat_interleave(pe, tokens.shape[0], dim=0)
        keys = self.mix(src + pos).flatten(2).transpose(1, 2)
        scores = torch.softmax(self.proj(tokens) @ keys.transpose(1, 2), dim=-1)
        return scores @ keys""",
    "torch.randn(1, 8, 16, 16), torch.randn(1, 8, 16, 16), torch.randn(1, 5, 8), torch.randn(1, 8, 16, 16)",
    "8",
)


def test_inputs_one_per_batch_stay_one_while_the_batch_grows():
    # SAM's mask decoder: the whole batch doubled fails (the image is repeated per prompt), so the
    # batch used to be no knob and sizing grew the prompt count instead
    r = sized(PER_BATCH_INPUT)
    assert r["size_status"] in ("sized", "below_target"), r["size_reason"]
    sizes = json.loads(r["sizes"])
    assert "batch_size" in sizes and sizes["batch_size"] > 1, sizes
    _, _, inputs, _ = build(r["program"])
    image, pe, tokens, dense = inputs
    assert image.shape[0] == 1 and pe.shape[0] == 1
    assert tokens.shape[0] == dense.shape[0] == sizes["batch_size"]
    for alternate in json.loads(r["alt_sizes"]):
        _, _, inputs, _ = build(r["program"], alternate)
        assert inputs[0].shape[0] == 1 and inputs[2].shape[0] == inputs[3].shape[0]


TIED_LENGTH = program(
    """class Model(nn.Module):
    def __init__(self, n_mels, n_ctx, width):
        super().__init__()
        self.conv1 = nn.Conv1d(n_mels, width, 3, padding=1)
        self.conv2 = nn.Conv1d(width, width, 3, stride=2, padding=1)
        self.register_buffer("pos", torch.randn(n_ctx, width))
        self.proj = nn.Linear(width, width)

    def forward(self, x):
        # frames are twice the context: the stride-2 convolution halves them to n_ctx
        x = F.gelu(self.conv2(F.gelu(self.conv1(x)))).permute(0, 2, 1)
        assert x.shape[1:] == self.pos.shape, "incorrect audio shape"
        return self.proj(x + self.pos)""",
    "torch.randn(2, 4, 8)",
    "4, 4, 16",
)


def test_sizes_tied_by_a_ratio_grow_together():
    # whisper's AudioEncoder: the mel frames must be twice n_ctx; neither runs doubled alone, so
    # both stayed at the probe's 4 and 8 while only the width grew
    r = sized(TIED_LENGTH)
    assert r["size_status"] in ("sized", "below_target"), r["size_reason"]
    for values in [json.loads(r["sizes"])] + json.loads(r["alt_sizes"]):
        _, args, inputs, _ = build(r["program"], values)
        n_ctx = args[1]
        assert inputs[0].shape[2] == 2 * n_ctx, (values, inputs[0].shape, args)
    _, args, inputs, _ = build(r["program"])
    assert args[1] > 4 and inputs[0].shape[2] > 8, (args, inputs[0].shape)


FEED_FORWARD = program(
    """class Model(nn.Module):
    def __init__(self, dim, mult, num_mem_kv):
        super().__init__()
        self.mem = nn.Parameter(torch.rand(num_mem_kv, dim))
        self.up = nn.Linear(dim, dim * mult)
        self.down = nn.Linear(dim * mult, dim)

    def forward(self, x):
        x = torch.cat([self.mem.expand(x.shape[0], -1, -1), x], dim=1)
        return self.down(torch.relu(self.up(x)))""",
    "torch.rand([4, 16, 32])",
    "32, 4, 4",
)


def test_a_width_multiplier_and_a_count_of_memory_slots_are_structure():
    # Both are 4, as the batch is: neither grows with the widths or the batch (a feed-forward
    # sized to 32 times its width is no layer of the repository).
    r = sized(FEED_FORWARD)
    sizes = json.loads(r["sizes"])
    assert re.search(r"return \[\w+, 4, 4\]\n$", r["program"]), r["program"]
    assert not {"mult", "num_mem_kv"} & set(sizes), sizes
    assert sizes.get("batch_size", 4) > 4 or max(sizes.values()) > 32, sizes
