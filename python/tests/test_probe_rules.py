"""The probe's repair rules, its search and its program rewriting, run in-process (no sandbox).

Each rule is tested against the exception torch really raises, and a fix counts only if the
operation then works with the fixed guess.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import pytest  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from ksmith.probe import guesses as G  # noqa: E402
from ksmith.probe.execute import Probe, exec_program, failure_of, run_request, split_init  # noqa: E402
from ksmith.probe.program import replace_functions  # noqa: E402
from ksmith.probe.rules import Failure, propose  # noqa: E402


def fwd_state(*shapes, dtype="float32", names=None):
    names = names or [None] * len(shapes)
    return ((), tuple(G.Arg(G.TensorGuess(tuple(s), dtype), n) for s, n in zip(shapes, names)))


def failure(fn, *args, phase="forward"):
    try:
        fn(*args)
    except Exception as exc:  # noqa: BLE001
        return failure_of(exc, phase)
    raise AssertionError("expected the call to fail")


def first_working(fixes, fn):
    """The first fix whose tensors make ``fn`` work (the search would find it)."""
    for fix in fixes:
        tensors = [G.make_tensor(a.guess, torch) for a in fix.state[1]]
        try:
            fn(*tensors)
            return fix
        except Exception:  # noqa: BLE001
            continue
    return None


def repaired_by_search(fn, state, max_steps=16):
    """Greedy depth-first search over the rules, as the probe does, in-process."""
    tried = set()
    frontier = [[state]]
    steps = 0
    while frontier and steps < max_steps:
        if not frontier[-1]:
            frontier.pop()
            continue
        s = frontier[-1].pop(0)
        if s in tried:
            continue
        tried.add(s)
        steps += 1
        tensors = [G.make_tensor(a.guess, torch) for a in s[1]]
        try:
            fn(*tensors)
            return s
        except Exception as exc:  # noqa: BLE001
            frontier.append([f.state for f in propose(failure_of(exc, "forward"), s)])
    return None


def test_matmul_mismatch_sets_the_last_dimension():
    lin = nn.Linear(16, 8)
    state = fwd_state((4, 4))
    fix = first_working(propose(failure(lin, torch.rand(4, 4)), state), lin)
    assert fix is not None and fix.state[1][0].guess.shape == (4, 16)
    assert "matmul" in fix.step


def test_conv_channel_mismatch_sets_channels():
    conv = nn.Conv2d(3, 8, 3)
    state = fwd_state((4, 4, 8, 8))
    fix = first_working(propose(failure(conv, torch.rand(4, 4, 8, 8)), state), conv)
    assert fix is not None and fix.state[1][0].guess.shape[1] == 3


def test_wrong_rank_for_conv_is_fixed_by_search():
    conv = nn.Conv2d(3, 8, 5)
    s = repaired_by_search(conv, fwd_state((4, 4)))
    assert s is not None
    g = s[1][0].guess
    assert g.rank in (3, 4) and g.shape[-3] == 3 and min(g.shape[-2:]) >= 5


def test_concatenating_tensors_of_two_ranks_reranks_the_input():
    """SAM's mask decoder concatenates its learned tokens (3-D) with the sparse prompt
    embeddings, guessed 4-D like its image input; no restart makes one input 3-D and the
    other 4-D."""
    conv = nn.Conv2d(4, 4, 3, padding=1)
    tokens = torch.rand(1, 2, 4)

    def fn(image, sparse):
        return conv(image).mean() + torch.cat((tokens.expand(sparse.size(0), -1, -1), sparse), dim=1)

    state = fwd_state((4, 4, 4, 4), (4, 4, 4, 4), names=["image", "sparse"])
    fix = first_working(propose(failure(fn, torch.rand(4, 4, 4, 4), torch.rand(4, 4, 4, 4)), state), fn)
    assert fix is not None
    assert [a.guess.shape for a in fix.state[1]] == [(4, 4, 4, 4), (4, 4, 4)]
    assert "concatenated ranks 3 vs 4" in fix.step


def test_broadcast_mismatch():
    fn = lambda a, b: a + b  # noqa: E731
    s = repaired_by_search(fn, fwd_state((4, 5), (4, 6)))
    assert s is not None
    assert s[1][0].guess.shape == s[1][1].guess.shape


def test_view_size():
    fn = lambda x: x.view(3, 2, -1)  # noqa: E731
    s = repaired_by_search(fn, fwd_state((4, 4)))
    assert s is not None
    assert s[1][0].guess.numel() % 6 == 0


def test_kernel_larger_than_input_grows_spatial_dims():
    conv = nn.Conv2d(4, 4, 7)
    s = repaired_by_search(conv, fwd_state((1, 4, 4, 4)))
    assert s is not None and min(s[1][0].guess.shape[2:]) >= 7


def test_embedding_needs_long_indices():
    emb = nn.Embedding(10, 3)
    fixes = propose(failure(emb, torch.rand(4, 4)), fwd_state((4, 4)))
    fix = first_working(fixes, emb)
    assert fix is not None and fix.state[1][0].guess.dtype == "int64"


def test_float_needed_after_long():
    lin = nn.Linear(4, 2)
    fixes = propose(failure(lin, torch.ones(4, 4, dtype=torch.int64)), fwd_state((4, 4), dtype="int64"))
    fix = first_working(fixes, lin)
    assert fix is not None and fix.state[1][0].guess.dtype == "float32"


def test_unpacking_a_shape_changes_the_rank():
    def fn(x):
        b, c, h, w = x.shape
        return x.reshape(b, c * h * w)

    s = repaired_by_search(fn, fwd_state((4, 4)))
    assert s is not None and s[1][0].guess.rank == 4


def test_layer_norm_normalized_shape():
    ln = nn.LayerNorm(10)
    s = repaired_by_search(ln, fwd_state((4, 4)))
    assert s is not None and s[1][0].guess.shape[-1] == 10


def test_layer_norm_over_concatenated_parts_sizes_the_parts():
    """Swin's PatchMerging concatenates four neighbours, then normalises `4 * dim` channels: the
    input needs `dim`, the norm's size over the number of parts, not the norm's size."""
    ln = nn.LayerNorm(4 * 96)

    def merge(x):
        return ln(torch.cat([x[:, 0::4], x[:, 1::4], x[:, 2::4], x[:, 3::4]], -1))

    s = repaired_by_search(merge, fwd_state((4, 16, 4)))
    assert s is not None and s[1][0].guess.shape == (4, 16, 96)


def test_matmul_over_concatenated_parts_sizes_the_parts():
    """Swin V2's PatchMerging concatenates four neighbours, then reduces `4 * dim` channels with
    a linear layer before its norm."""
    lin = nn.Linear(4 * 96, 2 * 96)

    def merge(x):
        return lin(torch.cat([x[:, 0::4], x[:, 1::4], x[:, 2::4], x[:, 3::4]], -1))

    s = repaired_by_search(merge, fwd_state((4, 16, 4)))
    assert s is not None and s[1][0].guess.shape == (4, 16, 96)


def test_batchnorm_channels():
    bn = nn.BatchNorm1d(6)
    s = repaired_by_search(bn, fwd_state((4, 4)))
    assert s is not None and s[1][0].guess.shape[1] == 6


def test_cross_entropy_targets_become_long():
    fn = lambda logits, target: F.cross_entropy(logits, target)  # noqa: E731
    s = repaired_by_search(fn, fwd_state((4, 4), (4,)))
    assert s is not None and s[1][1].guess.dtype == "int64"


def test_names_in_the_traceback_rank_candidates_first():
    f = Failure(
        "forward", "RuntimeError", "mat1 and mat2 shapes cannot be multiplied (4x4 and 16x8)", "return self.fc(y)"
    )
    state = fwd_state((4, 4), (4, 4), names=["x", "y"])
    fixes = propose(f, state)
    assert fixes and fixes[0].state[1][1].guess.shape == (4, 16), fixes[0].step


# --- constructor arguments -------------------------------------------------------------------


def init_state(**kwargs):
    return (tuple(G.Arg(G.ValueGuess(v), k, True) for k, v in kwargs.items()), ())


def test_missing_and_unexpected_constructor_arguments():
    class M(nn.Module):
        def __init__(self, dim, kernel_size, stride=1):
            super().__init__()

    f = failure(lambda: M(dim=4), phase="init")
    fixes = propose(f, init_state(dim=4))
    assert fixes and [a.name for a in fixes[0].state[0]] == ["dim", "kernel_size"]
    assert G.literal_value(fixes[0].state[0][1].guess) == 3  # "kernel" guesses 3

    f = failure(lambda: M(dim=4, kernel_size=3, bogus=1), phase="init")
    fixes = propose(f, init_state(dim=4, kernel_size=3, bogus=1))
    assert fixes and [a.name for a in fixes[0].state[0]] == ["dim", "kernel_size"]


def test_int_used_as_a_sequence_becomes_a_list():
    class M(nn.Module):
        def __init__(self, sizes):
            super().__init__()
            self.first = sizes[0]

    f = failure(lambda: M(sizes=4), phase="init")
    fixes = propose(f, init_state(sizes=4))
    assert fixes and G.literal_value(fixes[0].state[0][0].guess) == [4, 4]


def test_divisibility_is_fixed_by_changing_an_int():
    f = failure(lambda: nn.MultiheadAttention(6, 4), phase="init")
    fixes = propose(f, init_state(embed_dim=6, num_heads=4))
    works = [
        fx
        for fx in fixes
        if _try(lambda fx=fx: nn.MultiheadAttention(*[G.literal_value(a.guess) for a in fx.state[0]]))
    ]
    assert works


def _try(fn):
    try:
        fn()
        return True
    except Exception:  # noqa: BLE001
        return False


def test_name_guesses():
    assert G.guess_for_name("stride") == G.ValueGuess(1)
    assert G.guess_for_name("dropout") == G.ValueGuess(0.0)
    assert G.guess_for_name("drop_path_rate") == G.ValueGuess(0.0)
    assert G.guess_for_name("norm_layer") == G.ExprGuess("torch.nn.Identity")
    assert G.guess_for_name("hidden_dim") == G.ValueGuess(4)
    assert G.guess_for_name(None) == G.ValueGuess(4)


def test_unrelated_errors_propose_nothing():
    assert propose(Failure("forward", "ValueError", "this module always fails"), fwd_state((4, 4))) == []


# --- the whole search and the rewrite, in-process ---------------------------------------------

WRONG_CONV = """import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_ch, out_ch, kernel_size):
        super().__init__()
        self.conv = nn.Conv2d(in_ch, out_ch, kernel_size)

    def forward(self, x):
        return self.conv(x)


def get_inputs():
    return [torch.rand(4, 4)]


def get_init_inputs():
    return [3, 8, 5]
"""


def run_probe(text, **kw):
    probe = Probe(text, 42, torch, **kw)
    probe.ns = exec_program(text)
    initial = probe.initial_state()
    state, steps, last = probe.search(initial)
    return probe, initial, state, steps, last


def test_search_repairs_and_the_emitted_program_runs_as_it_stands():
    probe, initial, state, steps, last = run_probe(WRONG_CONV)
    assert state is not None, last
    assert steps
    emitted = probe.emit(initial, state)
    assert "torch.rand(4, 4)" not in emitted
    assert "return [3, 8, 5]" in emitted  # unchanged function kept byte for byte
    outputs, model, _ = probe.run_fresh(emitted)
    assert outputs[0].shape[1] == 8
    # Probing the emitted program needs no repair.
    _, _, state2, steps2, _ = run_probe(emitted)
    assert state2 is not None and steps2 == []


def test_restarts_use_2d_then_3d_inputs():
    text = WRONG_CONV.replace("nn.Conv2d", "nn.Conv1d").replace("torch.rand(4, 4)", "torch.rand(4, 4, 4, 4, 4)")
    probe, initial, state, steps, last = run_probe(text)
    assert state is not None, (steps, last)
    assert state[1][0].guess.rank in (2, 3)


def test_init_inputs_are_positional_arguments_only():
    # KernelBench's contract (the evaluator's too): `[[3], {'out_ch': 8}]` is two positional
    # arguments, a list and a dict, not arguments and keywords.
    text = WRONG_CONV.replace("return [3, 8, 5]", "return [[3], {'out_ch': 8}]")
    probe, initial, state, steps, last = run_probe(text)
    assert [a.keyword for a in initial[0]] == [False, False]
    assert state is None and "'dict'" in last.message


def test_a_constructor_that_runs_only_with_a_keyword_argument_breaks_the_contract():
    text = WRONG_CONV.replace(
        "def __init__(self, in_ch, out_ch, kernel_size):", "def __init__(self, in_ch, *, out_ch, kernel_size=3):"
    ).replace("return [3, 8, 5]", "return [3]")
    result = run_request({"program": text}, torch)
    assert result["status"] == "failed"
    assert result["error_class"] == "InitContract"
    assert "out_ch" in result["error_message"] and "positionally" in result["error_message"]


def test_original_objects_are_read_from_the_renamed_original():
    text = """import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, act, dim):
        super().__init__()
        self.act = act
        self.fc = nn.Linear(dim, dim)

    def forward(self, x, scale):
        return self.act(self.fc(x)) * scale


def get_inputs():
    return [torch.rand(4, 4), torch.full((1,), 2.0)]


def get_init_inputs():
    return [nn.Tanh(), 16]
"""
    probe, initial, state, steps, last = run_probe(text)
    assert state is not None, last
    emitted = probe.emit(initial, state)
    assert "def _ksmith_original_get_inputs():" in emitted
    assert "_orig[1]" in emitted  # the untouched second input comes from the original
    assert "return [nn.Tanh(), 16]" in emitted  # get_init_inputs untouched
    outputs, _, _ = probe.run_fresh(emitted)
    assert list(outputs[0].shape) == [4, 16]


def test_split_init_forms():
    assert split_init([1, 2]) == [1, 2]
    assert split_init(([1], {"a": 2})) == [[1], {"a": 2}]
    with pytest.raises(TypeError):
        split_init(3)


def test_replace_functions_appends_missing_and_keeps_everything_else():
    text = "import torch\nX = 1\n\ndef get_inputs():\n    return [X]\n\n# tail comment\n"
    out = replace_functions(
        text,
        {
            "get_inputs": "def get_inputs():\n    return [2]\n",
            "get_init_inputs": "def get_init_inputs():\n    return []\n",
        },
    )
    assert "return [X]" not in out and "return [2]" in out
    assert "X = 1" in out and "# tail comment" in out
    assert out.rstrip().endswith("return []")
    ns = {}
    exec(out, ns)
    assert ns["get_inputs"]() == [2] and ns["get_init_inputs"]() == []


def test_timeouts_are_not_swallowed_by_the_search():
    from ksmith.probe.execute import ProbeTimeout

    text = WRONG_CONV.replace("return self.conv(x)", "raise ProbeTimeoutForTest()")
    probe = Probe(text, 42, torch)
    probe.ns = exec_program(text)
    probe.ns["ProbeTimeoutForTest"] = ProbeTimeout
    initial = probe.initial_state()
    with pytest.raises(ProbeTimeout):
        probe.search(initial)


@pytest.mark.parametrize(
    "layer, shape",
    [
        (nn.GroupNorm(2, 6), (4, 4, 4)),
        (nn.InstanceNorm2d(3, affine=True), (4, 4, 4)),
        (nn.MultiheadAttention(16, 4, batch_first=True), (4, 4, 4)),
    ],
    ids=["groupnorm", "instancenorm", "attention"],
)
def test_norm_and_attention_feature_sizes(layer, shape):
    fn = (lambda x: layer(x, x, x)) if isinstance(layer, nn.MultiheadAttention) else layer
    assert repaired_by_search(fn, fwd_state(shape)) is not None


def test_keywords_become_positional_through_literal_defaults():
    from ksmith.probe.program import empty_marker, init_source

    params = [
        ("a", "POSITIONAL_OR_KEYWORD", empty_marker()),
        ("scale", "POSITIONAL_OR_KEYWORD", 2.0),
        ("b", "POSITIONAL_OR_KEYWORD", empty_marker()),
        ("act", "POSITIONAL_OR_KEYWORD", nn.ReLU()),
        ("c", "POSITIONAL_OR_KEYWORD", empty_marker()),
    ]
    init = (G.Arg(G.ValueGuess(3), "a"), G.Arg(G.ValueGuess(5), "b", True))
    src, reads = init_source(init, params)
    assert "return [3, 2.0, 5]" in src and not reads
    # A gap with a default that has no literal form: no positional form, no program.
    from ksmith.probe.program import InitContractError

    init = init + (G.Arg(G.ValueGuess(7), "c", True),)
    with pytest.raises(InitContractError, match="b, c"):
        init_source(init, params)


RECORDED = """import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 4)
        self.norm = nn.LayerNorm(4)

    def forward(self, x):
        return torch.relu(self.norm(self.fc(x))) + torch.relu(x[:, :4])


def get_inputs():
    return [torch.rand(2, 8)]


def get_init_inputs():
    return []
"""


def test_the_aten_operators_of_one_forward_are_recorded_with_counts():
    out = run_request({"program": RECORDED, "seed": 1}, torch)
    assert out["status"] == "ok", out
    ops = out["aten_ops"]
    assert ops["aten::addmm"] == 1
    assert ops["aten::native_layer_norm"] == 1
    assert ops["aten::relu"] == 2
    assert ops["aten::add"] == 1
    assert list(ops) == sorted(ops)
    # In order: the linear layer's operators, then the norm, then the two relus and the add.
    compute = [op for op in out["aten_trace"] if op in ops and op not in ("aten::t", "aten::slice")]
    assert compute == [
        "aten::addmm",
        "aten::native_layer_norm",
        "aten::relu",
        "aten::relu",
        "aten::add",
    ], out["aten_trace"]
    assert sum(ops.values()) == len(out["aten_trace"])
    # Only the forward call is recorded: building inputs and the module is not.
    assert not any("rand" in op or "uniform" in op for op in ops), ops


def test_a_module_that_fails_records_no_operators():
    text = RECORDED.replace("return torch.relu(self.norm", "raise ValueError('no')\n        return (self.norm")
    out = run_request({"program": text, "seed": 1}, torch)
    assert out["status"] == "failed"
    assert out["aten_ops"] is None
    assert out["aten_trace"] == []


def test_batch_norm_bookkeeping_is_not_an_operator():
    text = RECORDED.replace("nn.LayerNorm(4)", "nn.BatchNorm1d(4)")
    out = run_request({"program": text, "seed": 1}, torch)
    assert out["status"] == "ok", out
    ops = out["aten_ops"]
    assert ops["aten::native_batch_norm"] == 1
    assert "aten::add_" not in ops, ops  # num_batches_tracked += 1


def test_a_forward_that_dispatches_nothing_records_an_empty_list():
    text = RECORDED.replace("return torch.relu(self.norm", "return x\n        return (self.norm")
    out = run_request({"program": text, "seed": 1}, torch)
    # It runs, and returning its input is no task (a copy would pass): the operators are
    # recorded all the same.
    assert out["status"] == "degenerate" and "equals its input" in out["error_message"], out
    assert out["aten_ops"] == {}
    assert out["aten_trace"] == []


def test_the_worker_warm_up_imports_what_a_recording_needs():
    # In a fresh interpreter (this one may have imported them already): after the warm-up the
    # worker does before forking, recording another module imports nothing, so no child spends
    # its time limit on the imports of its first recording.
    import subprocess

    code = (
        "import sys, torch\n"
        "from ksmith.probe.execute import warm_aten_recording, record_aten_ops\n"
        "warm_aten_recording(torch)\n"
        "warmed = set(sys.modules)\n"
        "ops, _, _ = record_aten_ops(torch.nn.Conv2d(3, 4, 3), [torch.zeros(1, 3, 8, 8)], torch)\n"
        "assert ops == {'aten::convolution': 1}, ops\n"
        "print(sorted(set(sys.modules) - warmed))\n"
    )
    root = os.path.join(os.path.dirname(__file__), "..")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=root, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]", out.stdout


# --- SAM's mask decoder: the patterns its repair needs (issue 29) ---------------------------------


def test_concatenated_sizes_fix_the_last_mismatching_dimension_first():
    """Learned tokens ``[1, 2, 8]`` expanded to the prompts' batch and concatenated with them: the
    prompts take 8 features, not a batch of 8 (changed first, it ends at ``[8, 8, 8]``)."""
    tokens = torch.rand(1, 2, 8)

    def fn(sparse):
        return torch.cat((tokens.expand(sparse.size(0), -1, -1), sparse), dim=1)

    s = repaired_by_search(fn, fwd_state((4, 4, 4), names=["sparse"]))
    assert s is not None and s[1][0].guess.shape == (4, 4, 8)


def test_a_repeated_batch_takes_batch_one():
    """``repeat_interleave(image, tokens.shape[0])`` then added to per-token data: the image takes
    batch 1 and the per-token inputs keep theirs (setting the added operand to the repeated
    batch also runs, but repeats the image once per token for nothing)."""

    def fn(image, sparse, dense):
        return torch.repeat_interleave(image, sparse.shape[0], dim=0) + dense + sparse.sum()

    s = repaired_by_search(fn, fwd_state((4, 3), (2, 3), (2, 3), names=["image", "sparse", "dense"]))
    assert s is not None
    assert [a.guess.shape for a in s[1]] == [(1, 3), (2, 3), (2, 3)]


def test_an_image_read_as_a_sequence_of_pixels_takes_the_channels_a_matmul_wants():
    """``x.flatten(2).transpose(1, 2)`` into a linear layer of 8 features: the channels (dimension
    1) take 8, not the width."""
    lin = nn.Linear(8, 4)

    def fn(image):
        return lin(image.flatten(2).transpose(1, 2))

    s = repaired_by_search(fn, fwd_state((1, 4, 4, 4), names=["image"]))
    assert s is not None and s[1][0].guess.shape == (1, 8, 4, 4)


def test_a_broadcast_operand_takes_the_shape_of_its_sibling_input():
    """An image and its positional encoding, both read as sequences of pixels and added: the
    encoding takes the image's shape (the broadcast dimension, 2, is its channels, 1)."""
    lin = nn.Linear(8, 4)

    def fn(image, pe, other):
        return lin(image.flatten(2).transpose(1, 2) + pe.flatten(2).transpose(1, 2)) + other.mean()

    state = fwd_state((1, 8, 4, 4), (1, 4, 4, 4), (1, 8, 4, 4), names=["image", "pe", "other"])
    fixes = propose(failure(fn, *[G.make_tensor(a.guess, torch) for a in state[1]]), state)
    assert fixes and [a.guess.shape for a in fixes[0].state[1]] == [(1, 8, 4, 4)] * 3
    assert "like input0(image)" in fixes[0].step
