"""Constructor parameters annotated with a configuration class of the program (Whisper's
``Whisper(dims: ModelDimensions)``): the probe builds the object from its fields, repairs each
field like a constructor argument, and writes ``get_init_inputs()`` as ``[Dims(...)]``; a
field it cannot fill is a clear failure. The sample also has Whisper's other obstacles: 2-D
integer tokens beside a 3-D float input, an assertion tying the input's length to a context
size, and a parameter left uninitialized (``torch.empty``)."""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import torch  # noqa: E402
from ksmith.probe import DEFAULTS  # noqa: E402
from ksmith.probe import guesses as G  # noqa: E402
from ksmith.probe.config_args import collapse, config_fields, expand  # noqa: E402
from ksmith.probe.execute import run_request  # noqa: E402
from ksmith.probe.loading import exec_program, split_init  # noqa: E402
from ksmith.probe.provenance import Provenance  # noqa: E402

HEADER = "import torch\nimport torch.nn as nn\nfrom dataclasses import dataclass\nfrom typing import NamedTuple\n\n\n"

ENCODER_DECODER = (
    HEADER
    + """@dataclass
class Dims:
    n_feats: int
    n_ctx: int
    n_state: int
    n_head: int
    n_vocab: int
    n_layer: int = 3


class Model(nn.Module):
    def __init__(self, dims: Dims):
        super().__init__()
        self.conv = nn.Conv1d(dims.n_feats, dims.n_state, kernel_size=3, stride=2, padding=1)
        self.pos = nn.Parameter(torch.empty(dims.n_ctx, dims.n_state))
        self.embed = nn.Embedding(dims.n_vocab, dims.n_state)
        self.attn = nn.MultiheadAttention(dims.n_state, dims.n_head, batch_first=True)
        self.mlp = nn.Sequential(*[nn.Linear(dims.n_state, dims.n_state) for _ in range(dims.n_layer)])

    def forward(self, feats, tokens):
        x = self.conv(feats).permute(0, 2, 1)
        assert x.shape[1:] == self.pos.shape, "incorrect feature length"
        x = x + self.pos
        q = self.embed(tokens)
        n_batch, n_tokens, n_state = q.shape
        out, _ = self.attn(q, x, x)
        return self.mlp(out)


def get_inputs():
    return [torch.rand([4, 4, 4, 4]), torch.rand([4, 4, 4, 4])]


def get_init_inputs():
    return [[4, 4]]
"""
)


def _built(program: str):
    ns = exec_program(program)
    args = split_init(ns["get_init_inputs"]())
    return ns, args, ns["Model"](*args), ns["get_inputs"]()


def test_a_dataclass_config_is_built_from_its_fields_and_get_init_inputs_returns_the_call():
    result = run_request({"program": ENCODER_DECODER}, torch)
    assert result["status"] == "ok", (result["error_message"], result["attempt_log"])
    ns, args, model, inputs = _built(result["program"])
    # KernelBench's contract: Model(*get_init_inputs()), the one element the config object.
    assert len(args) == 1 and isinstance(args[0], ns["Dims"])
    dims = args[0]
    assert dims.n_layer == 3  # the class's default, kept
    assert dims.n_state % dims.n_head == 0
    feats, tokens = inputs
    assert feats.dtype == torch.float32 and feats.dim() == 3
    assert tokens.dtype == torch.int64 and tokens.dim() == 2
    assert 2 * dims.n_ctx == feats.shape[-1]  # the assertion solved: the stride halves it
    assert model(*inputs).shape == (tokens.shape[0], tokens.shape[1], dims.n_state)
    # Each field's source is recorded, first among the steps.
    first = result["repair_steps"][0]
    assert first.startswith("dims = Dims(") and "n_layer=3 default" in first and "n_head=8 guess" in first
    # The parameter a checkpoint would fill is drawn instead (two builds agree).
    assert "nn.Parameter(torch.randn(dims.n_ctx, dims.n_state))" in result["program"]
    assert any(s.startswith("uninitialized parameters drawn") and "pos" in s for s in result["repair_steps"])


def test_the_sized_program_keeps_the_config_call_with_its_sizes_as_constants():
    result = run_request({"program": ENCODER_DECODER, "sizing": DEFAULTS["sizing"]}, torch)
    assert result["status"] == "ok", (result["error_message"], result["attempt_log"])
    assert result["size_status"] == "sized", result["size_reason"]
    program = result["program"]
    init = program[program.index("def get_init_inputs") :]
    assert "return [Dims(" in init
    ns, args, model, inputs = _built(program)
    assert isinstance(args[0], ns["Dims"]) and args[0].n_state > 16  # a width grown by sizing
    assert model(*[t[:1] for t in inputs]) is not None


def test_a_field_the_probe_cannot_fill_names_the_class_and_the_field():
    program = (
        HEADER
        + """@dataclass
class Cfg:
    width: int
    block: nn.Module


class Model(nn.Module):
    def __init__(self, cfg: Cfg):
        super().__init__()
        self.proj = nn.Linear(cfg.width, cfg.width)

    def forward(self, x):
        return self.proj(x)


def get_inputs():
    return [torch.rand([4, 4])]


def get_init_inputs():
    return [[4, 4]]
"""
    )
    result = run_request({"program": program}, torch)
    assert result["status"] == "failed"
    assert result["error_class"] == "ConfigField"
    message = result["error_message"]
    assert "configuration class Cfg" in message and "`block: " in message and "cannot fill it" in message


def test_namedtuples_and_plain_classes_of_simple_values_are_configs_other_classes_are_not():
    ns = exec_program(
        HEADER
        + """class Tuple3(NamedTuple):
    dim: int
    heads: int = 4


class Plain:
    def __init__(self, dim: int, ratio: float = 0.5, name="x"):
        self.dim, self.ratio, self.name = dim, ratio, name


class Holder:
    def __init__(self, encoder):
        self.encoder = encoder

    def __repr__(self):
        return "Holder"


class Model(nn.Module):
    def __init__(self, a: Tuple3, b: "Plain", c: Holder = None):
        super().__init__()
"""
    )
    assert [(f.name, f.default) for f in config_fields(ns["Tuple3"])][1] == ("heads", 4)
    assert [f.name for f in config_fields(ns["Plain"])] == ["dim", "ratio", "name"]
    init = (G.Arg(G.ValueGuess(4), "a"), G.Arg(G.ValueGuess(4), "b"), G.Arg(G.ValueGuess(None), "c"))
    annotations = {"a": ns["Tuple3"], "b": "Plain", "c": ns["Holder"]}
    expanded = expand(init, annotations, [], ns, torch)
    names = [(a.name, a.within.cls if a.within else None) for a in expanded]
    tuple3, plain = [("dim", "Tuple3"), ("heads", "Tuple3")], [("dim", "Plain"), ("ratio", "Plain"), ("name", "Plain")]
    assert names == tuple3 + plain + [("c", None)]
    built = collapse(expanded)
    assert [a.name for a in built] == ["a", "b", "c"]
    a = G.materialize(built[0].guess, torch, ns, None)
    b = G.materialize(built[1].guess, torch, ns, None)
    assert a == ns["Tuple3"](dim=a.dim, heads=4) and a.dim not in (4, 8)  # a distinct size
    assert (b.ratio, b.name) == (0.5, "x")


def test_a_field_is_the_repositorys_while_it_holds_its_default():
    ns = exec_program(HEADER + "@dataclass\nclass D:\n    width: int\n    depth: int = 3\n")
    fields = expand((G.Arg(G.ValueGuess(4), "d"),), {"d": ns["D"]}, [], ns, torch)
    prov = Provenance.of({"arg_sources": ["d=[4, 4]: guess"]})
    width, depth = fields
    assert not prov.init_is_repository(0, width)  # a guess
    assert prov.init_is_repository(1, depth)  # the class's default
    assert not prov.init_is_repository(1, G.set_guess(fields, 1, G.ValueGuess(5))[1])  # repaired


def test_an_object_a_call_site_built_is_taken_apart_and_its_fields_are_the_repositorys():
    ns = exec_program(HEADER + "@dataclass\nclass D:\n    width: int\n    depth: int = 3\n")
    given = [ns["D"](width=64, depth=5)]
    fields = expand((G.Arg(G.OrigGuess((0,), "D"), "d"),), {"d": ns["D"]}, given, ns, torch)
    assert [(f.name, G.literal_value(f.guess), f.within.source) for f in fields] == [
        ("width", 64, "given"),
        ("depth", 5, "given"),
    ]
    prov = Provenance.of({"arg_sources": ["d=D(width=64, depth=5): call net.py:22"]})
    assert all(prov.init_is_repository(i, f) for i, f in enumerate(fields))
    guessed = Provenance.of({"arg_sources": ["d=[4, 4]: guess"]})
    assert not any(guessed.init_is_repository(i, f) for i, f in enumerate(fields))
    # a field with no literal form (a dtype) keeps the object whole, as the program built it
    whole = (G.Arg(G.OrigGuess((0,), "D"), "d"),)
    assert expand(whole, {"d": ns["D"]}, [ns["D"](width=torch.float16)], ns, torch) == whole
