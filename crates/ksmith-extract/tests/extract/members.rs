//! Parts of a definition read only when needed, beyond methods: registry decorators
//! (`@BACKBONES.register_module()`), which record a class and return it unchanged, and
//! class-body aliases (`decode = decode_function`), methods in all but syntax.
#![allow(clippy::unwrap_used)] // Tests may unwrap.

use crate::common::cpython::run_verdicts;
use crate::common::*;

/// An OpenMMLab segmentation backbone: the registry is in a package off the allow-list, and so
/// is the logger of a method nothing calls.
const SEG_BACKBONE: &str = r#"import torch.nn as nn
from mmseg.models.builder import BACKBONES
from mmseg.utils import get_root_logger


@BACKBONES.register_module()
class SegNet(nn.Module):
    def __init__(self, dim=4):
        super().__init__()
        self.proj = nn.Linear(dim, dim)
        self.norm = nn.LayerNorm(dim)

    def init_weights(self, pretrained=None):
        logger = get_root_logger()
        logger.info(pretrained)

    def forward(self, x):
        return self.norm(self.proj(x))
"#;

/// An mmdet backbone whose registry module (`det/models/builder.py`) is not in the repository.
const DET_BACKBONE: &str = r#"import torch
import torch.nn as nn
from ..builder import BACKBONES


@BACKBONES.register_module
class DetNet(nn.Module):
    def __init__(self, dim=4):
        super().__init__()
        self.stem = nn.Linear(dim, dim)
        self.head = nn.Linear(dim, dim)

    @torch.no_grad()
    def fold(self):
        return self.head.weight.sum()

    def forward(self, x):
        return self.head(torch.relu(self.stem(x)))
"#;

/// A detectron2-style registry the repository defines itself (it could be inlined).
const D2_REGISTRY: &str = r#"class Registry:
    def __init__(self, name):
        self.name = name
        self.entries = {}

    def register(self, obj=None):
        def deco(o):
            self.entries[o.__name__] = o
            return o
        return deco if obj is None else deco(obj)


BACKBONE_REGISTRY = Registry("BACKBONE")
"#;

const D2_BACKBONE: &str = r#"import torch.nn as nn
from .registry import BACKBONE_REGISTRY


@BACKBONE_REGISTRY.register
def make_act():
    return nn.GELU()


@BACKBONE_REGISTRY.register()
class D2Net(nn.Module):
    def __init__(self, dim=4):
        super().__init__()
        self.fc1 = nn.Linear(dim, 2 * dim)
        self.act = make_act()
        self.fc2 = nn.Linear(2 * dim, dim)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))
"#;

#[test]
fn registry_decorators_whose_registry_cannot_be_inlined_or_adds_definitions_are_dropped() {
    let rows = extract(&[
        ("seg/backbone.py", SEG_BACKBONE),
        ("det/models/__init__.py", ""),
        ("det/models/backbones/__init__.py", ""),
        ("det/models/backbones/net.py", DET_BACKBONE),
        ("d2/__init__.py", ""),
        ("d2/registry.py", D2_REGISTRY),
        ("d2/net.py", D2_BACKBONE),
    ]);
    let seg = ok_program(&rows, "SegNet");
    assert!(
        seg.contains(
            "# removed by ksmith: @BACKBONES.register_module() (import_not_allowed: mmseg)\nclass Model(nn.Module):\n"
        ),
        "{seg}"
    );
    // The method that needs the logger is stubbed as before, naming the package.
    assert!(
        seg.contains("    def init_weights(self, pretrained=None):\n        raise NotImplementedError(\"removed by ksmith: import_not_allowed: mmseg\")\n"),
        "{seg}"
    );
    assert!(
        !seg.contains("import mmseg") && !seg.contains("from mmseg"),
        "{seg}"
    );

    let det = ok_program(&rows, "DetNet");
    assert!(
        det.contains(
            "# removed by ksmith: @BACKBONES.register_module (unresolved_import: from ..builder import BACKBONES)\nclass Model(nn.Module):\n"
        ),
        "{det}"
    );
    // A decorator that is not a registration stays as written.
    assert!(
        det.contains("    @torch.no_grad()\n    def fold(self):\n"),
        "{det}"
    );

    // A registry the repository defines is not inlined just to record the class in it.
    let d2 = ok_program(&rows, "D2Net");
    assert!(
        d2.contains("# removed by ksmith: @BACKBONE_REGISTRY.register() (the registry needs 2 more definitions)\nclass Model(nn.Module):\n"),
        "{d2}"
    );
    assert!(
        d2.contains("# removed by ksmith: @BACKBONE_REGISTRY.register (the registry needs 2 more definitions)\ndef make_act():\n"),
        "{d2}"
    );
    assert!(!d2.contains("class Registry"), "{d2}");
    assert!(!d2.contains("BACKBONE_REGISTRY ="), "{d2}");

    assert_eq!(run_verdicts(&[seg, det, d2]), vec![None, None, None]);
}

const DECODING: &str = r#"import numba
import torch


def decode(model, mel):
    return numba.njit(lambda m: m)(mel)


def detect_language(model, mel):
    return torch.argmax(model(mel), dim=-1)
"#;

const OPS: &str = r#"import torch


def project(self, x):
    return torch.tanh(self.enc(x))
"#;

const SPEECH: &str = r#"import torch.nn as nn
from .decoding import decode as decode_function
from .decoding import detect_language as detect_language_function
from .ops import project as project_function

DEFAULT_SCALE = 2.0
DEFAULT_EPS = 1e-5


class Speech(nn.Module):
    scale = DEFAULT_SCALE
    half = scale / 2

    def __init__(self, dim=4):
        super().__init__()
        self.enc = nn.Linear(dim, dim)
        self.dec = nn.Linear(dim, dim)

    def forward(self, x):
        return self.dec(self.project(x)) * self.half

    def logits(self, x):
        return self.dec(x)

    detect_language = detect_language_function
    decode = decode_function
    project = project_function
    run = logits
    eps = DEFAULT_EPS


class Greedy(Speech):
    def forward(self, x):
        return self.decode(x)
"#;

#[test]
fn class_body_aliases_are_members_needed_only_when_named() {
    let rows = extract(&[
        ("asr/__init__.py", ""),
        ("asr/decoding.py", DECODING),
        ("asr/ops.py", OPS),
        ("asr/model.py", SPEECH),
    ]);
    let p = ok_program(&rows, "Speech");
    // Named by nothing, and it reaches a package off the allow-list: a method that raises.
    assert!(
        p.contains("    def decode(self, *args, **kwargs): raise NotImplementedError(\"removed by ksmith: import_not_allowed: numba\")\n"),
        "{p}"
    );
    assert!(!p.contains("import numba"), "{p}");
    // Named by nothing, and what it reads can be inlined: kept as written, with what it reads
    // (class data may be read by means no name shows, `vars(cls)`, an `Enum`).
    assert!(
        p.contains("    detect_language = detect_language_function\n"),
        "{p}"
    );
    assert!(p.contains("def detect_language(model, mel):"), "{p}");
    // Named by forward: needed, and what it reads is inlined.
    assert!(p.contains("    project = project_function\n"), "{p}");
    assert!(p.contains("def project(self, x):"), "{p}");
    // Read by the class body itself: needed before `half` is computed.
    assert!(
        p.contains("    scale = DEFAULT_SCALE\n    half = scale / 2\n"),
        "{p}"
    );
    assert!(p.contains("    run = logits\n"), "{p}");
    assert!(p.contains("    eps = DEFAULT_EPS\n"), "{p}");
    assert!(p.contains("DEFAULT_EPS = 1e-5\n"), "{p}");
    assert_eq!(run_verdicts(&[p]), vec![None]);
    // Once something needed names an alias, what it reaches must be inlined.
    assert_eq!(
        row(&rows, "Greedy").reason.as_deref(),
        Some("import_not_allowed: numba")
    );
}
