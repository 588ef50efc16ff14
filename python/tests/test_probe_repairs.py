"""The repair gaps real code showed, each against the error torch (or Python) really raises: the
reported error is the root cause with the attempt history kept; config objects, module-valued
arguments, divisibility, string options, dtypes, ints and lists, sizes passed as tensors. Each
test runs the whole repair search in-process and checks that the repaired program runs from
scratch."""

from __future__ import annotations

import os
import re
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import pytest  # noqa: E402
import torch  # noqa: E402
from ksmith.probe.execute import Probe, diverging, exec_program, repair_budget, run_request  # noqa: E402

HEADER = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\nfrom dataclasses import dataclass\n\n\n"


def program(body: str, inputs: str, init: str) -> str:
    return (
        f"{HEADER}{body}\n\ndef get_inputs():\n    return [{inputs}]\n\n\ndef get_init_inputs():\n    return [{init}]\n"
    )


def repaired(text: str):
    """Runs the search; returns (emitted program, steps) after checking it runs from scratch."""
    probe = Probe(text, 42, torch)
    probe.ns = exec_program(text)
    initial = probe.initial_state()
    state, steps, root = probe.search(initial)
    assert state is not None, (root, probe.history_lines())
    emitted = probe.emit(initial, state)
    outputs, _, _ = probe.run_fresh(emitted)
    assert outputs
    return emitted, steps


# --- the root cause and the history -----------------------------------------------------------

FIXED_SIZE = program(
    """class Model(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.proj = nn.Conv2d(channels, 8, 1)

    def forward(self, x):
        y = self.proj(x)
        B, C, H, W = x.shape
        # Not an equality: the evaluated-assertion rule has nothing to solve.
        assert H in (224, 384), "the image size is fixed by the checkpoint"
        return y
""",
    "torch.rand([4, 4, 4, 4])",
    "4",
)


def test_the_reported_error_is_the_root_cause_not_the_last_restart():
    result = run_request({"program": FIXED_SIZE}, torch)
    assert result["status"] == "failed"
    # The restart with 2-D inputs ends in "not enough values to unpack" (the 3-D one starts where
    # it went already); the program's own inputs reached the real reason.
    assert result["error_class"] == "AssertionError"
    assert "the image size is fixed" in result["error_message"]
    log = result["attempt_log"]
    assert log[0].startswith("g0 forward AssertionError: the image size is fixed")
    assert log[-1].startswith("g1 forward ValueError: not enough values to unpack (expected 4, got 3)")
    assert result["attempts"] == len(log)


def test_a_rule_fixed_first_error_is_not_the_root_cause():
    text = FIXED_SIZE.replace("torch.rand([4, 4, 4, 4])", "torch.rand([4, 3, 4, 4])")
    result = run_request({"program": text}, torch)
    assert result["status"] == "failed"
    # g0: conv wants 4 channels (repaired), then the assertion: the dead end is the cause.
    assert "the image size is fixed" in result["error_message"]
    assert result["repair_steps"] and "channels" in result["repair_steps"][0]
    assert result["attempt_log"][0].startswith("g0 forward RuntimeError: Given groups=1")


def test_a_size_assertion_with_numbers_is_repaired():
    text = FIXED_SIZE.replace(
        'assert H in (224, 384), "the image size is fixed by the checkpoint"',
        'assert H == 224, f"Input height ({H}) doesn\'t match model (224)."',
    )
    emitted, steps = repaired(text)
    assert "224" in emitted and any("224" in s for s in steps)


# --- constructor arguments ----------------------------------------------------------------------

GPT = """@dataclass
class GPTConfig:
    n_embd: int = 32
    n_head: int = 4
    block_size: int = 16


class Model(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.ln = nn.LayerNorm(config.n_embd)
        self.attn = nn.Linear(config.n_embd, 3 * config.n_embd)

    def forward(self, x):
        return self.attn(self.ln(x))
"""


@pytest.mark.parametrize(
    "config",
    [
        GPT,
        GPT.replace(
            "@dataclass\nclass GPTConfig:\n    n_embd: int = 32\n    n_head: int = 4\n    block_size: int = 16",
            "class GPTConfig:\n    def __init__(self, n_embd=32, n_head=4):\n        self.n_embd = n_embd\n"
            "        self.n_head = n_head",
        ),
    ],
    ids=["dataclass", "class_with_defaults"],
)
def test_a_config_parameter_gets_an_instance_built_from_its_defaults(config):
    emitted, steps = repaired(program(config, "torch.rand([4, 4, 32])", "4"))
    assert "return [GPTConfig()]" in emitted
    assert any("GPTConfig" in s for s in steps)


def test_module_valued_arguments_get_a_shape_keeping_module():
    residual = """class Model(nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, x):
        return self.fn(x) + x
"""
    emitted, _ = repaired(program(residual, "torch.rand([4, 4])", "4"))
    assert "torch.nn.Identity()" in emitted
    parallel = """class Model(nn.Module):
    def __init__(self, *fns):
        super().__init__()
        self.fns = nn.ModuleList(fns)

    def forward(self, x):
        return sum(f(x) for f in self.fns)
"""
    emitted, _ = repaired(program(parallel, "torch.rand([4, 4])", "4, 4"))
    assert emitted.count("torch.nn.Identity()") == 2


@pytest.mark.parametrize(
    "check",
    [
        "assert dim % num_heads == 0",
        "self.scale = (dim // num_heads) ** -0.5",
        "if dim % num_heads:\n"
        '            raise ValueError(f"dim must be divisible by num_heads, got {dim} and {num_heads}")',
    ],
    ids=["assert", "floor_division", "message"],
)
def test_divisibility_is_repaired_with_compatible_sizes(check):
    attention = f"""class Model(nn.Module):
    def __init__(self, dim, num_heads):
        super().__init__()
        {check}
        self.heads = num_heads
        self.qkv = nn.Linear(dim, 3 * dim)

    def forward(self, x):
        B, N, C = x.shape
        return self.qkv(x).reshape(B, N, 3, self.heads, C // self.heads)
"""
    emitted, steps = repaired(program(attention, "torch.rand([4, 4, 6])", "6, 4"))
    ns = exec_program(emitted)
    dim, heads = ns["get_init_inputs"]()
    assert dim % heads == 0 and dim // heads > 0, steps


def test_a_string_reduction_only_where_it_is_a_loss():
    se = """class Model(nn.Module):
    def __init__(self, channels, reduction):
        super().__init__()
        self.fc = nn.Linear(channels, channels // reduction)

    def forward(self, x):
        return self.fc(x)
"""
    emitted, _ = repaired(program(se, "torch.rand([4, 16])", "16, 'mean'"))
    assert "'mean'" not in emitted.split("def get_init_inputs")[1]
    loss = """class Model(nn.Module):
    def __init__(self, reduction):
        super().__init__()
        self.reduction = reduction

    def forward(self, pred, target):
        return F.mse_loss(pred, target, reduction=self.reduction)
"""
    emitted, steps = repaired(program(loss, "torch.rand([4, 4]), torch.rand([4, 4])", "'mean'"))
    assert steps == [] and "return ['mean']" in emitted


# --- dtypes, ints and lists ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "forward, inputs, want",
    [
        # A patch embedding convolution takes floats ("Input type (long int) and bias type ...").
        ("self.proj = nn.Conv2d(4, 8, 2, 2)", "torch.ones([2, 4, 8, 8], dtype=torch.int64)", "float32"),
        # LayerNorm on integers: "mixed dtype (CPU): all inputs must share same datatype."
        ("self.proj = nn.LayerNorm(4)", "torch.ones([2, 4], dtype=torch.int64)", "float32"),
        # An embedding takes indices.
        ("self.proj = nn.Embedding(10, 4)", "torch.rand([2, 4])", "int64"),
    ],
    ids=["conv_long_to_float", "layernorm_long_to_float", "embedding_float_to_long"],
)
def test_dtype_is_repaired_from_the_error_text(forward, inputs, want):
    body = f"""class Model(nn.Module):
    def __init__(self):
        super().__init__()
        {forward}

    def forward(self, x):
        return self.proj(x)
"""
    probe = Probe(program(body, inputs, ""), 42, torch)
    probe.ns = exec_program(probe.text)
    state, steps, root = probe.search(probe.initial_state())
    assert state is not None, probe.history_lines()
    assert state[1][0].guess.dtype == want, steps


def test_a_float_mask_becomes_boolean():
    body = """class Model(nn.Module):
    def forward(self, x, mask):
        return x.masked_fill(mask, 0.0)
"""
    emitted, steps = repaired(program(body, "torch.rand([4, 4]), torch.rand([4, 4])", ""))
    assert "dtype=torch.bool" in emitted, steps


@pytest.mark.parametrize(
    "layer, init, want",
    [
        # normalized_shape guessed as a list of lists: "empty(): ... found element of type list".
        ("nn.LayerNorm(shape)", "[[4, 4]]", [4, 4]),
        # a list where an int is needed: "type must be tuple of ints,but got list".
        ("nn.Linear(4, shape)", "[4, 4]", 4),
    ],
    ids=["list_of_lists_to_list", "list_to_int"],
)
def test_lists_that_must_be_ints_and_the_reverse(layer, init, want):
    body = f"""class Model(nn.Module):
    def __init__(self, shape):
        super().__init__()
        self.layer = {layer}

    def forward(self, x):
        return self.layer(x)
"""
    emitted, steps = repaired(program(body, "torch.rand([4, 4, 4])", init))
    assert exec_program(emitted)["get_init_inputs"]() == [want], steps


def test_sizes_passed_to_forward_become_ints():
    body = """class Model(nn.Module):
    def forward(self, x, H, W):
        B, N, C = x.shape
        return x.transpose(1, 2).reshape(B, C, H, W)
"""
    emitted, steps = repaired(program(body, "torch.rand([4, 4, 4]), torch.rand([4]), torch.rand([4])", ""))
    assert any("used as a size" in s for s in steps), steps


def test_recurrent_hidden_state_shape_and_probability_and_output_padding():
    gru = """class Model(nn.Module):
    def __init__(self, dropout):
        super().__init__()
        self.rnn = nn.GRU(4, 6)
        self.drop = nn.Dropout(dropout)

    def forward(self, x, h):
        return self.drop(self.rnn(x, h)[0])
"""
    emitted, steps = repaired(program(gru, "torch.rand([3, 4, 4]), torch.rand([4, 4, 4])", "4"))
    assert any("probability" in s for s in steps) and any("hidden state" in s for s in steps), steps
    up = """class Model(nn.Module):
    def __init__(self, output_padding):
        super().__init__()
        self.up = nn.ConvTranspose2d(4, 4, 3, output_padding=output_padding)

    def forward(self, x):
        return self.up(x)
"""
    emitted, steps = repaired(program(up, "torch.rand([1, 4, 8, 8])", "4"))
    assert "return [0]" in emitted, steps


# --- repairs that do not converge ---------------------------------------------------------------

SCALING_VIEW = program(
    """class Model(nn.Module):
    def __init__(self, d_model, n_head, d_k):
        super().__init__()
        self.n_head, self.d_k = n_head, d_k
        # Four times the features the view wants, whatever n_head and d_k are: changing either
        # scales both sides of the mismatch.
        self.qkv = nn.Linear(d_model, 4 * n_head * d_k)

    def forward(self, x):
        b, n, _ = x.shape
        return self.qkv(x).view(b, n, self.n_head, self.d_k)
""",
    "torch.rand([4, 4, 4])",
    "4, 2, 4",
)


def test_a_repair_that_scales_both_sides_of_a_mismatch_is_not_followed():
    probe = Probe(SCALING_VIEW, 42, torch)
    probe.ns = exec_program(SCALING_VIEW)
    state, _, root = probe.search(probe.initial_state())
    assert state is None
    assert re.fullmatch(r"shape '\[4, 4, \d+, \d+\]' is invalid for input of size \d+", root.message)
    # Followed blindly, n_head and d_k grow fourfold per attempt until memory runs out (minutes of
    # CPU); each path stops after two repairs that only scaled the mismatch.
    lines = probe.history_lines()
    assert not any("allocate" in line or "memory" in line for line in lines), lines
    grown = [int(n) for line in lines for n in re.findall(r"-> (\d+) \(view", line)]
    assert grown and max(grown) <= 4**4, lines


@pytest.mark.parametrize(
    ("trail", "cut"),
    [
        ((("f #", 8), ("f #", 32), ("f #", 128)), True),  # the same failure, growing: cut
        ((("f #", 8), ("f #", 32)), False),  # one repeat is allowed
        ((("f #", 128), ("f #", 32), ("f #", 8)), False),  # shrinking: converging
        ((("f #", 8), ("g #", 32), ("f #", 128)), False),  # the failure changed in between
        ((("f #", 8), ("f #", 8), ("f #", 8)), False),  # not growing
    ],
)
def test_a_path_is_cut_only_when_the_same_failure_keeps_growing(trail, cut):
    assert diverging(trail) is cut


SLOW_AND_BROKEN = program(
    """class Model(nn.Module):
    def __init__(self, dim):
        super().__init__()
        # A huge default configuration: every build takes a while.
        self.table = nn.Parameter(torch.randn(1 << 21))
        for _ in range(4):
            torch.randn(1 << 21).sort()
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        b, c, h, w = x.shape
        assert h in (224, 384), "the image size is fixed"
        return self.proj(x)
""",
    "torch.rand([4, 4, 4, 4])",
    "4",
)


def test_the_repair_search_stops_on_its_cpu_budget_and_says_so():
    unlimited = run_request({"program": SLOW_AND_BROKEN, "restarts": 3}, torch)
    budgeted = run_request({"program": SLOW_AND_BROKEN, "restarts": 3, "repair_budget_s": 0.05}, torch)
    assert unlimited["status"] == budgeted["status"] == "failed"
    assert unlimited["attempts"] > 1
    # Past the budget no attempt starts: the first one used it all.
    assert budgeted["attempts"] == 1
    assert "the repair search stopped after 1 attempt:" in budgeted["error_message"]
    # Its first attempt took more than the budget: the budget grew to its cap, 4 x 0.05 s.
    assert "budget of 0.2 s of CPU" in budgeted["attempt_log"][-1]
    # The root cause is still the program's own failure.
    assert "AssertionError" == budgeted["error_class"] == unlimited["error_class"]
    assert "the image size is fixed" in budgeted["error_message"]
    assert "stopped" not in unlimited["error_message"]


@pytest.mark.parametrize(
    "budget, first, want",
    [(3.0, 0.1, 3.0), (3.0, 1.0, 4.0), (3.0, 2.5, 10.0), (3.0, 10.0, 12.0)],
)
def test_the_repair_budget_makes_room_for_attempts_as_slow_as_the_first_within_its_cap(budget, first, want):
    assert repair_budget(budget, first) == pytest.approx(want)


SLOW_AND_FIXABLE = program(
    """class Model(nn.Module):
    def __init__(self, dim):
        super().__init__()
        for _ in range(6):
            torch.randn(1 << 20).sort()
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        return self.proj(x)
""",
    "torch.rand([4, 4, 6])",
    "4",
)


def test_a_model_slow_to_build_gets_the_attempts_its_repair_needs():
    # A budget below one attempt's CPU time: scaled to the first attempt, the second (the
    # repaired width) still starts.
    probe = Probe(SLOW_AND_FIXABLE, 42, torch)
    probe.ns = exec_program(SLOW_AND_FIXABLE)
    started = time.process_time()
    probe.attempt(probe.initial_state())
    first = time.process_time() - started
    r = run_request({"program": SLOW_AND_FIXABLE, "repair_budget_s": first / 2}, torch)
    assert r["status"] == "ok", (r["error_message"], r["attempt_log"])
    assert r["attempts"] >= 2


def test_an_input_takes_the_sequence_length_its_constructor_declares():
    # A Karras 1-D U-Net: `x.shape[1:] == (channels, seq_len)`; the constructor's length is the
    # repository's configuration, the guessed input is what must change.
    unet = """class Model(nn.Module):
    def __init__(self, seq_len, channels=4):
        super().__init__()
        self.seq_len, self.channels = seq_len, channels
        self.conv = nn.Conv1d(channels, channels, 3, padding=1)
        self.pool = nn.AvgPool1d(seq_len // 4)

    def forward(self, x):
        assert x.shape[1:] == (self.channels, self.seq_len)
        return self.pool(self.conv(x))
"""
    emitted, steps = repaired(program(unet, "torch.rand([4, 4, 4])", "32"))
    ns = exec_program(emitted)
    assert ns["get_init_inputs"]() == [32], steps
    assert ns["get_inputs"]()[0].shape == (4, 4, 32), steps
    assert steps == ["input0(x): shape [4, 4, 4] -> [4, 4, 32] (assertion (4, 4) == (4, 32))"]


# --- ranks and sizes read from einops patterns and evaluated assertions -------------------------

TIME_EMBEDDING = """from einops import rearrange


class Model(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        half = self.dim // 2
        freqs = torch.exp(torch.arange(half) * -0.5)
        x = rearrange(x, "b -> b 1") * freqs
        return torch.cat((x.sin(), x.cos()), dim=-1)
"""


def test_a_one_dimensional_input_is_read_from_the_einops_pattern():
    emitted, steps = repaired(program(TIME_EMBEDDING, "torch.rand([4, 4, 4, 4])", "8"))
    ns = exec_program(emitted)
    assert ns["get_inputs"]()[0].dim() == 1, steps
    assert any("einops pattern 'b -> b 1' wants 1 dims" in s for s in steps), steps


def test_a_time_input_stays_one_dimensional_when_the_search_restarts():
    unet = """class Model(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.conv = nn.Conv2d(dim, dim, 1)
        self.time = nn.Linear(1, dim)

    def forward(self, x, time):
        t = self.time(time[:, None])
        return self.conv(x) + t[:, :, None, None]
"""
    # The 2-D restart fixes the image input; the time input must still be 1-D then.
    text = program(unet, "torch.rand([4]), torch.rand([4])", "4")
    probe = Probe(text, 42, torch)
    probe.ns = exec_program(text)
    initial = probe.initial_state()
    restarted = probe.restart_state(initial, 1)
    assert [a.guess.shape for a in restarted[1]] == [(4, 4), (4,)]
    emitted, _ = repaired(program(unet, "torch.rand([4, 4, 4, 4]), torch.rand([4])", "4"))
    assert "torch.rand([4])" in emitted


def test_class_labels_stay_one_per_sample_when_the_search_restarts():
    labels = """class Model(nn.Module):
    def __init__(self, num_classes, dim):
        super().__init__()
        self.emb = nn.Embedding(num_classes, dim)
        self.conv = nn.Conv2d(dim, dim, 1)

    def forward(self, x, classes):
        return self.conv(x) + self.emb(classes)[:, :, None, None]
"""
    text = program(labels, "torch.rand([4]), torch.randint(0, 4, [4])", "10, 4")
    probe = Probe(text, 42, torch)
    probe.ns = exec_program(text)
    restarted = probe.restart_state(probe.initial_state(), 1)
    assert [a.guess.shape for a in restarted[1]] == [(4, 4), (4,)]


def test_image_sides_grow_until_an_einops_layer_can_split_them():
    # A U-Net's downsampling layer (`Rearrange`): its error names no tensor, the side it cannot
    # split is derived from the input's after earlier downsamplings.
    unet = """from einops.layers.torch import Rearrange


class Model(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.downs = nn.Sequential(
            *[nn.Sequential(Rearrange("b c (h p1) (w p2) -> b (c p1 p2) h w", p1=2, p2=2), nn.Conv2d(dim * 4, dim, 1))
              for _ in range(3)]
        )

    def forward(self, x):
        return self.downs(x)
"""
    emitted, steps = repaired(program(unet, "torch.rand([4, 4, 4, 4])", "4"))
    assert exec_program(emitted)["get_inputs"]()[0].shape == (4, 4, 8, 8), steps
    assert all("image sides x 2" in s for s in steps), steps


def test_a_dropout_probability_the_forward_draws_with_in_eval_mode_too_is_set_to_zero():
    # Classifier-free guidance: the forward drops the class condition with `cond_drop_prob`
    # whatever the mode; the repository samples with 0.
    cfg = """class Model(nn.Module):
    def __init__(self, dim, cond_drop_prob=0.5, dropout=0.1):
        super().__init__()
        self.cond_drop_prob = cond_drop_prob
        self.proj = nn.Linear(dim, dim)
        self.drop = nn.Dropout(dropout)
        self.null = nn.Parameter(torch.randn(dim))

    def forward(self, x):
        keep = torch.rand(x.shape[0], device=x.device) >= self.cond_drop_prob
        return self.drop(self.proj(torch.where(keep[:, None], x, self.null)))
"""
    r = run_request({"program": program(cfg, "torch.rand([4, 4])", "4, 0.5, 0.1")}, torch)
    assert r["status"] == "ok", (r["error_message"], r["attempt_log"])
    assert "cond_drop_prob 0.5 -> 0.0 (the forward draws with it, in eval mode too)" in r["repair_steps"]
    # Dropout layers are eval mode's business: their probability stays.
    assert exec_program(r["program"])["get_init_inputs"]() == [4, 0.0, 0.1]


def test_einops_chunks_make_heads_divide_the_width():
    heads = """from einops import rearrange


class Model(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, dim)

    def forward(self, x):
        q = rearrange(self.qkv(x), "b n (h d) -> b h n d", h=self.heads)
        return q.softmax(dim=-1)
"""
    emitted, steps = repaired(program(heads, "torch.rand([4, 4, 4])", "4, 8"))
    dim, h = exec_program(emitted)["get_init_inputs"]()
    assert dim % h == 0, steps
    assert any("einops splits an axis of 4 in chunks of 8" in s for s in steps), steps


def test_an_assertion_between_an_input_length_and_a_context_size_is_solved():
    # Whisper's audio encoder: a stride-2 convolution halves the frames, which must then equal
    # the positional embedding's context length; the assertion's message says nothing.
    encoder = """class Model(nn.Module):
    def __init__(self, n_mels, n_ctx, n_state):
        super().__init__()
        self.conv = nn.Conv1d(n_mels, n_state, 3, stride=2, padding=1)
        self.positional_embedding = nn.Parameter(torch.zeros(n_ctx, n_state))

    def forward(self, x):
        x = F.gelu(self.conv(x)).permute(0, 2, 1)
        assert x.shape[1:] == self.positional_embedding.shape, "incorrect audio shape"
        return x + self.positional_embedding
"""
    emitted, steps = repaired(program(encoder, "torch.rand([4, 4, 4])", "4, 6, 4"))
    assert any("assertion" in s for s in steps), steps
    ns = exec_program(emitted)
    (x,) = ns["get_inputs"]()
    n_mels, n_ctx, n_state = ns["get_init_inputs"]()
    assert (x.shape[1], (x.shape[2] + 1) // 2) == (n_mels, n_ctx)


def test_an_assertion_on_attributes_is_solved_by_their_values():
    # `self.inner % self.n` names no constructor parameter: the evaluated operands do.
    attention = """class Model(nn.Module):
    def __init__(self, width, heads):
        super().__init__()
        self.inner, self.n = width, heads
        self.proj = nn.Linear(width, width)

    def forward(self, x):
        assert self.inner % self.n == 0
        return self.proj(x).view(*x.shape[:-1], self.n, -1)
"""
    emitted, steps = repaired(program(attention, "torch.rand([4, 6])", "6, 4"))
    width, heads = exec_program(emitted)["get_init_inputs"]()
    assert width % heads == 0, steps
    assert any("divisible by" in s for s in steps), steps


@pytest.mark.parametrize(
    "check",
    ["assert dim % num_heads == 0, 'num_heads must divide dim.'", "assert self.dim % self.heads == 0"],
    ids=["parameters", "attributes"],
)
def test_divisibility_raises_the_dividend_and_keeps_the_head_count(check):
    # SAM's TwoWayTransformer: 8 heads from the repository's call site, a width guessed 4. The
    # width becomes a multiple of 8; the head count is not lowered (to 4, 2, then 1).
    attention = f"""class Model(nn.Module):
    def __init__(self, dim, num_heads):
        super().__init__()
        self.dim, self.heads = dim, num_heads
        {check}
        self.qkv = nn.Linear(dim, 3 * dim)

    def forward(self, x):
        B, N, C = x.shape
        return self.qkv(x).reshape(B, N, 3, self.heads, C // self.heads)
"""
    emitted, steps = repaired(program(attention, "torch.rand([4, 4, 4])", "4, 8"))
    dim, heads = exec_program(emitted)["get_init_inputs"]()
    assert heads == 8, steps
    assert dim % 8 == 0 and dim >= 8, steps


def test_input_sizes_shown_in_a_divisibility_message_become_multiples():
    # A U-Net downsampling three times: both spatial sizes must be multiples of 8, and the
    # message shows them as a torch.Size.
    unet = """class Model(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.down = nn.Sequential(*[nn.Conv2d(dim, dim, 3, stride=2, padding=1) for _ in range(3)])

    def forward(self, x):
        assert all(d % 8 == 0 for d in x.shape[-2:]), (
            f"your input dimensions {x.shape[-2:]} need to be divisible by 8, given the unet"
        )
        return self.down(x)
"""
    emitted, steps = repaired(program(unet, "torch.rand([4, 4, 4, 12])", "4"))
    assert "torch.rand([4, 4, 8, 16])" in emitted, steps
    assert any("sizes [4, 12] divisible by 8" in s for s in steps), steps


# --- shapes a forward's docstring states ----------------------------------------------------------

TWO_WAY = '''class Model(nn.Module):
    def __init__(self, depth, embedding_dim, num_heads):
        super().__init__()
        self.attn = nn.MultiheadAttention(embedding_dim, num_heads, batch_first=True)
        self.norm = nn.LayerNorm(embedding_dim)

    def forward(self, image_embedding, image_pe, point_embedding):
        """
        Args:
          image_embedding (torch.Tensor): image to attend to. Should be shape
            B x embedding_dim x h x w for any h and w.
          image_pe (torch.Tensor): the positional encoding to add to the image. Must
            have the same shape as image_embedding.
          point_embedding (torch.Tensor): the embedding to add to the query points.
            Must have shape B x N_points x embedding_dim for any N_points.
        """
        keys = (image_embedding + image_pe).flatten(2).permute(0, 2, 1)
        out, _ = self.attn(point_embedding, keys, keys)
        return self.norm(out + point_embedding)
'''


def test_doc_shapes_reads_dimensions_named_after_constructor_arguments():
    from ksmith.probe.doc_shapes import doc_shapes

    ns = exec_program(program(TWO_WAY, "torch.rand([4])", "2, 64, 8"))
    shapes = doc_shapes(
        ns["Model"].forward.__doc__, ["image_embedding", "image_pe", "point_embedding"], {"embedding_dim": 64}, 4
    )
    assert shapes == {"image_embedding": (4, 64, 4, 4), "image_pe": (4, 64, 4, 4), "point_embedding": (4, 4, 64)}
    assert doc_shapes("x: a tensor of shape (B, 3, H, W)", ["x"], {}, 4) == {"x": (4, 3, 4, 4)}
    assert doc_shapes("x: any tensor", ["x"], {}, 4) == {}


def test_guessed_inputs_take_the_shapes_the_docstring_states():
    # The extractor's guesses (every dimension 4) give way to the documented shapes; the
    # program then runs at its first attempt.
    guessed = "torch.rand([4, 4, 4, 4]), torch.rand([4, 4, 4, 4]), torch.rand([4, 4, 4, 4])"
    r = run_request({"program": program(TWO_WAY, guessed, "2, 64, 8")}, torch)
    assert r["status"] == "ok", (r["error_message"], r["attempt_log"])
    assert r["repair_steps"] == ["inputs shaped as the forward's docstring states"] and r["attempt_log"] == []
    shapes = [tuple(x.shape) for x in exec_program(r["program"])["get_inputs"]()]
    assert shapes == [(4, 64, 4, 4), (4, 64, 4, 4), (4, 4, 64)]
    # A program's own inputs (not all of the default size) are kept.
    own = "torch.rand([2, 64, 8, 8]), torch.rand([2, 64, 8, 8]), torch.rand([2, 5, 64])"
    r = run_request({"program": program(TWO_WAY, own, "2, 64, 8")}, torch)
    assert [tuple(x.shape) for x in exec_program(r["program"])["get_inputs"]()] == [(2, 64, 8, 8)] * 2 + [(2, 5, 64)]


VIT = """class Model(nn.Module):
    def __init__(self, img_size, patch_size, dim):
        super().__init__()
        self.patch = nn.Conv2d(3, dim, patch_size, stride=patch_size)
        self.pos = nn.Parameter(torch.randn(1, dim, img_size // patch_size, img_size // patch_size))

    def forward(self, x):
        return self.patch(x) + self.pos
"""


@pytest.mark.parametrize(
    "declared, side, note",
    [(64, 64, ""), (1024, 256, " (1024 -> 256 for the probe; sizing grows it)")],
)
def test_an_image_input_takes_the_sides_its_constructor_declares(declared, side, note):
    emitted, steps = repaired(program(VIT, "torch.rand([4, 4, 4, 4])", f"{declared}, 16, 8"))
    assert steps[0] == f"image inputs {side} x {side}: the img_size the constructor declares{note}"
    ns = exec_program(emitted)
    assert ns["get_init_inputs"]() == [side, 16, 8]
    assert ns["get_inputs"]()[0].shape == (4, 3, side, side)
