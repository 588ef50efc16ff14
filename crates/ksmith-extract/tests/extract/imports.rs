//! Imports as real repositories write them: fallbacks for missing packages, `TYPE_CHECKING`
//! blocks, lazy imports in methods nothing calls, read-only uses of `os` and `sys`, and the
//! grown allow-list.
#![allow(clippy::unwrap_used)] // Tests may unwrap.

use crate::common::cpython::cpython_verdicts;
use crate::common::*;
use ksmith_core::tables::ModuleStatus;

/// Asserts CPython compiles every given program.
fn compiles(programs: &[&str]) {
    for (p, verdict) in programs.iter().zip(cpython_verdicts(programs)) {
        assert_eq!(verdict, None, "does not compile:\n{p}");
    }
}

const FAST_NORM: &str = r#"import torch
import torch.nn.functional as F

try:
    from apex.normalization.fused_layer_norm import fused_layer_norm_affine
    has_apex = True
except ImportError:
    has_apex = False

try:
    import amp_C
    from apex.multi_tensor_apply import multi_tensor_applier as applier
    has_amp = True
except (ImportError, OSError):
    amp_C = None
    has_amp = False


def fast_layer_norm(x, shape, weight, bias, eps):
    if has_apex:
        return fused_layer_norm_affine(x, weight, bias, shape, eps)
    return F.layer_norm(x, shape, weight, bias, eps)


def l2norm(x):
    if has_amp:
        return applier(amp_C.multi_tensor_l2norm, x)
    return x.norm()
"#;

#[test]
fn a_fallback_for_a_missing_package_is_taken_one_level_deep_too() {
    let rows = extract(&[
        ("layers/__init__.py", ""),
        ("layers/fast_norm.py", FAST_NORM),
        (
            "layers/norm.py",
            "import torch\nimport torch.nn as nn\nfrom .fast_norm import fast_layer_norm, l2norm\n\n\nclass LayerNorm(nn.LayerNorm):\n    def forward(self, x):\n        return fast_layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)\n\n\nclass Norm2(nn.Module):\n    def forward(self, x):\n        return l2norm(x)\n",
        ),
        (
            "models/net.py",
            "import torch.nn as nn\nfrom layers.norm import LayerNorm\n\n\nclass Net(nn.Module):\n    def __init__(self, dim):\n        super().__init__()\n        self.norm = LayerNorm(dim)\n\n    def forward(self, x):\n        return self.norm(x)\n",
        ),
    ]);
    let ln = ok_program(&rows, "LayerNorm");
    assert!(
        ln.contains("    fused_layer_norm_affine = None; raise ImportError(\"apex is not available to extracted programs\")\n    has_apex = True\nexcept ImportError:\n    has_apex = False\n"),
        "{ln}"
    );
    assert!(!ln.contains("from apex"), "{ln}");
    let n2 = ok_program(&rows, "Norm2");
    assert!(
        n2.contains("    amp_C = None; raise ImportError(\"amp_C is not available to extracted programs\")\n    applier = None; raise ImportError(\"apex is not available to extracted programs\")\n"),
        "{n2}"
    );
    let net = ok_program(&rows, "Net");
    assert!(net.contains("has_apex = False"), "{net}");
    compiles(&[ln, n2, net]);
}

#[test]
fn a_fallback_that_defines_functions_reading_each_other_is_kept_whole() {
    let src = r#"import torch
import torch.nn as nn

try:
    from inplace_abn.functions import inplace_abn, inplace_abn_sync
    has_iabn = True
except ImportError:
    has_iabn = False

    def inplace_abn(x, weight, bias, eps=1e-05):
        raise ImportError("Please install InplaceABN")

    def inplace_abn_sync(**kwargs):
        inplace_abn(**kwargs)


class InplaceAbn(nn.BatchNorm2d):
    def forward(self, x):
        if has_iabn:
            return inplace_abn(x, self.weight, self.bias, self.eps)
        return super().forward(x)
"#;
    let rows = extract(&[("iabn.py", src)]);
    let p = ok_program(&rows, "InplaceAbn");
    assert!(
        p.contains("    inplace_abn = inplace_abn_sync = None; raise ImportError("),
        "{p}"
    );
    assert!(
        p.contains("    def inplace_abn_sync(**kwargs):\n        inplace_abn(**kwargs)\n"),
        "{p}"
    );
    compiles(&[p]);
}

#[test]
fn a_handler_that_never_runs_is_not_inlined() {
    // torch has rms_norm: the handler's local import would only bind the name a second time.
    let rows = extract(&[
        ("layers/__init__.py", ""),
        (
            "layers/fast_norm.py",
            "import torch\n\n\ndef rms_norm(x, shape, weight=None, eps=1e-6):\n    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)\n",
        ),
        (
            "layers/norm.py",
            "import torch.nn as nn\n\ntry:\n    from torch.nn.functional import rms_norm\nexcept ImportError:\n    from .fast_norm import rms_norm\n\n\nclass RmsNorm(nn.Module):\n    def forward(self, x):\n        return rms_norm(x, x.shape[-1:])\n",
        ),
        (
            "layers/block.py",
            "import torch.nn as nn\nfrom .norm import RmsNorm\n\n\nclass Block(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.norm = RmsNorm()\n\n    def forward(self, x):\n        return self.norm(x) * 2\n",
        ),
    ]);
    let p = ok_program(&rows, "RmsNorm");
    assert!(
        p.contains(
            "try:\n    from torch.nn.functional import rms_norm\nexcept ImportError:\n    pass\n"
        ),
        "{p}"
    );
    assert!(!p.contains("def rms_norm"), "{p}");
    let block = ok_program(&rows, "Block");
    compiles(&[p, block]);
}

#[test]
fn every_handler_that_catches_import_error_is_a_fallback_and_others_are_not() {
    let block = |handler: &str| {
        format!(
            "import torch.nn as nn\n\ntry:\n    import scipy.special as sp\nexcept {handler}:\n    sp = None\n\n\nclass Gate(nn.Module):\n    def forward(self, x):\n        return x if sp is None else x * 2\n"
        )
    };
    for handler in [
        "ImportError",
        "ModuleNotFoundError",
        "(OSError, ImportError)",
        "Exception as e",
        "BaseException",
        "",
    ] {
        let src = block(handler).replace("except :", "except:");
        let rows = extract(&[("gate.py", &src)]);
        let p = ok_program(&rows, "Gate");
        assert!(
            p.contains("    sp = None; raise ImportError("),
            "{handler}:\n{p}"
        );
        compiles(&[p]);
    }
    let rows = extract(&[("gate.py", &block("ValueError"))]);
    assert_eq!(
        row(&rows, "Gate").reason.as_deref(),
        Some("import_not_allowed: scipy")
    );
}

#[test]
fn a_missing_repository_module_with_a_fallback_takes_it() {
    // `_C` is a compiled extension: there is no `ops/_C.py`.
    let rows = extract(&[
        ("ops/__init__.py", ""),
        (
            "ops/fused.py",
            "import torch\nimport torch.nn as nn\n\ntry:\n    from ._C import fused_gelu\nexcept ImportError:\n    fused_gelu = None\n\n\nclass Gelu(nn.Module):\n    def forward(self, x):\n        if fused_gelu is not None:\n            return fused_gelu(x)\n        return torch.nn.functional.gelu(x)\n",
        ),
        (
            "ops/strict.py",
            "import torch.nn as nn\nfrom ._C import fused_gelu\n\n\nclass Strict(nn.Module):\n    def forward(self, x):\n        return fused_gelu(x)\n",
        ),
    ]);
    let p = ok_program(&rows, "Gelu");
    assert!(
        p.contains("    fused_gelu = None; raise ImportError("),
        "{p}"
    );
    compiles(&[p]);
    assert_eq!(
        row(&rows, "Strict").reason.as_deref(),
        Some("unresolved_import: from ._C import fused_gelu")
    );
}

#[test]
fn type_checking_imports_never_run_and_do_not_reject() {
    let src = r#"from __future__ import annotations

from typing import TYPE_CHECKING

import torch.nn as nn

if TYPE_CHECKING:
    from transformers import PreTrainedModel


class Head(nn.Module):
    def forward(self, x, model: PreTrainedModel | None = None):
        return x * 2
"#;
    let rows = extract(&[("head.py", src)]);
    let p = ok_program(&rows, "Head");
    assert!(
        p.contains("if TYPE_CHECKING:\n    from transformers import PreTrainedModel\n"),
        "{p}"
    );
    assert!(p.starts_with("from __future__ import annotations\n"), "{p}");
    compiles(&[p]);
}

const PRETRAINED: &str = r#"import torch
import torch.nn as nn


def load_weights(path):
    import safetensors.torch
    return safetensors.torch.load_file(path)


class Encoder(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        return self.proj(x)

    @classmethod
    def from_pretrained(cls, name):
        from transformers import AutoModel
        hf = AutoModel.from_pretrained(name)
        model = cls(hf.config.hidden_size)
        model.load_state_dict(cls._download(name))
        return model

    @staticmethod
    def _download(name):
        return load_weights(name)

    def describe(self):
        return f"Encoder({self.proj.in_features})"

    def resize(self, dim):
        self.proj = resample(self.proj, dim)


def resample(layer, dim):
    return nn.Linear(layer.in_features, dim)


class Tokenizing(nn.Module):
    def forward(self, x):
        return self.encode(x)

    def encode(self, x):
        from transformers import AutoTokenizer
        return AutoTokenizer(x)
"#;

#[test]
fn lazy_imports_in_methods_nothing_calls_do_not_reject_the_class() {
    let rows = extract(&[("enc.py", PRETRAINED)]);
    let p = ok_program(&rows, "Encoder");
    assert!(
        p.contains("    def from_pretrained(cls, name):\n        raise NotImplementedError(\"removed by ksmith: import_not_allowed: transformers\")\n"),
        "{p}"
    );
    assert!(
        p.contains("    def _download(name):\n        raise NotImplementedError(\"removed by ksmith: import_not_allowed: safetensors\")\n"),
        "{p}"
    );
    // What only the removed methods needed is not inlined; a harmless unused method stays.
    assert!(!p.contains("def load_weights"), "{p}");
    assert!(
        p.contains("        return f\"Encoder({self.proj.in_features})\"\n"),
        "{p}"
    );
    // A method nothing calls does not pull in what only it needs.
    assert!(
        p.contains("    def resize(self, dim):\n        raise NotImplementedError(\"removed by ksmith: not called by __init__ or forward, it needs 1 more definitions\")\n"),
        "{p}"
    );
    assert!(!p.contains("def resample"), "{p}");
    compiles(&[p]);
    // A method forward calls is needed: its import still rejects, naming the package.
    assert_eq!(
        row(&rows, "Tokenizing").reason.as_deref(),
        Some("import_not_allowed: transformers")
    );
}

#[test]
fn methods_named_only_indirectly_are_still_needed() {
    let src = r#"import torch.nn as nn


class ByGetattr(nn.Module):
    def forward(self, x):
        return getattr(self, "act")(x)

    def act(self, x):
        import scipy
        return x


class ByAssignment(nn.Module):
    def _impl(self, x):
        import scipy
        return x

    forward = _impl
"#;
    let rows = extract(&[("ind.py", src)]);
    for name in ["ByGetattr", "ByAssignment"] {
        assert_eq!(
            row(&rows, name).reason.as_deref(),
            Some("import_not_allowed: scipy"),
            "{name}"
        );
    }
}

const OS_SYS: &str = r#"import os
import sys
from os.path import join as pjoin

import torch
import torch.nn as nn

USE_FUSED = os.environ.get("USE_FUSED", "0") == "1"
NEW_PYTHON = sys.version_info >= (3, 8)


def cache_dir():
    return pjoin(os.path.expanduser("~"), os.getenv("CACHE", "cache"))


class Reads(nn.Module):
    def forward(self, x):
        if USE_FUSED and NEW_PYTHON and "DEBUG" in os.environ:
            return x * 2
        return x + len(cache_dir())


class Writes(nn.Module):
    def forward(self, x):
        os.makedirs("out", exist_ok=True)
        return x


class SetsEnv(nn.Module):
    def forward(self, x):
        os.environ["MODE"] = "fast"
        return x


class Exits(nn.Module):
    def forward(self, x):
        if x is None:
            sys.exit(1)
        return x


class SavesLater(nn.Module):
    def forward(self, x):
        return x

    def save(self, path):
        os.makedirs(path, exist_ok=True)
        torch.save(self.state_dict(), os.path.join(path, "w.pt"))
"#;

#[test]
fn os_and_sys_are_allowed_for_reading_only() {
    let rows = extract(&[("env.py", OS_SYS)]);
    let p = ok_program(&rows, "Reads");
    for line in [
        "import os\n",
        "import sys\n",
        "from os.path import join as pjoin\n",
    ] {
        assert!(p.contains(line), "{line}{p}");
    }
    compiles(&[p]);
    for (name, package) in [("Writes", "os"), ("SetsEnv", "os"), ("Exits", "sys")] {
        assert_eq!(
            row(&rows, name).reason.as_deref(),
            Some(format!("import_not_allowed: {package}").as_str()),
            "{name}"
        );
    }
    let later = ok_program(&rows, "SavesLater");
    assert!(
        later.contains("raise NotImplementedError(\"removed by ksmith: import_not_allowed: os\")"),
        "{later}"
    );
    // Read-only packages can be switched off.
    let strict = ksmith_extract::ExtractConfig {
        read_only_imports: Vec::new(),
        ..Default::default()
    };
    let rows = extract_with(&[("env.py", OS_SYS)], &strict);
    assert_eq!(
        row(&rows, "Reads").reason.as_deref(),
        Some("import_not_allowed: os")
    );
}

#[test]
fn einops_and_harmless_standard_modules_are_allowed() {
    let src = r#"import contextlib
import dataclasses
from collections import OrderedDict
from einops import rearrange
from einops.layers.torch import Rearrange

import torch.nn as nn


@dataclasses.dataclass
class Cfg:
    heads: int = 2


class Mix(nn.Module):
    def __init__(self):
        super().__init__()
        self.cfg = Cfg()
        self.to_seq = Rearrange("b c h w -> b (h w) c")
        self.names = OrderedDict()

    def forward(self, x):
        with contextlib.nullcontext():
            y = self.to_seq(x)
        return rearrange(y, "b n (h d) -> b h n d", h=self.cfg.heads)
"#;
    let rows = extract(&[("mix.py", src)]);
    let p = ok_program(&rows, "Mix");
    assert!(p.contains("from einops import rearrange\n"), "{p}");
    compiles(&[p]);
    assert_eq!(
        rows.iter().filter(|r| r.status != ModuleStatus::Ok).count(),
        0,
        "{rows:#?}"
    );
}

#[test]
fn string_annotations_name_what_they_need_and_type_checking_imports_stay_uninlined() {
    let rows = extract(&[
        ("pkg/__init__.py", ""),
        (
            "pkg/state.py",
            "import torch\n\n\nclass State:\n    def __init__(self):\n        self.cache = {}\n",
        ),
        (
            "pkg/attention.py",
            "import torch.nn as nn\n\n\nclass Attention(nn.Module):\n    def forward(self, x):\n        return x\n",
        ),
        (
            "pkg/model.py",
            r#"from typing import TYPE_CHECKING, Literal, Optional

import torch.nn as nn

from .state import State

if TYPE_CHECKING:
    from .attention import Attention


def lookup(module: "Attention", state: "Optional[State]", mode: Optional[Literal["fast", "slow"]] = "fast"):
    return state


class Encoder(nn.Module):
    def clone(self) -> "Encoder":
        return Encoder()

    def forward(self, x):
        lookup(self, State())
        return x
"#,
        ),
    ]);
    let p = ok_program(&rows, "Encoder");
    // The entry's old name is bound for its own annotation.
    assert!(p.contains("Encoder = Model\n"), "{p}");
    assert!(p.contains("class State:"), "{p}");
    // The TYPE_CHECKING import is kept as written and nothing of it is inlined.
    assert!(
        p.contains("if TYPE_CHECKING:\n    from .attention import Attention\n"),
        "{p}"
    );
    assert!(!p.contains("class Attention"), "{p}");
    compiles(&[p]);
}

/// A helper imported from an installed package given as a library is inlined like the
/// repository's own code, named in `deps` with the package and version; the library's own classes
/// get no rows, and a repository that does not import it does not read it.
#[test]
fn a_library_helper_is_inlined_with_its_package_and_version() {
    use ksmith_extract::{ExtractConfig, Library, SourceFile, extract_repo_with_libraries};

    let library = Library {
        package: "zoo".into(),
        version: "1.2".into(),
        files: vec![
            SourceFile::new("zoo/__init__.py", "from .layers import *\n"),
            SourceFile::new(
                "zoo/layers/__init__.py",
                "from .drop import DropPath\nfrom .helpers import to_2tuple\n",
            ),
            SourceFile::new(
                "zoo/layers/drop.py",
                "import torch\nimport torch.nn as nn\nimport scipy\n\n\ndef drop_path(x, p: float = 0.0, training: bool = False):\n    if p == 0.0 or not training:\n        return x\n    keep = torch.rand(x.shape[0], 1) > p\n    return x * keep / (1 - p)\n\n\nclass DropPath(nn.Module):\n    def __init__(self, p=0.0):\n        super().__init__()\n        self.p = p\n\n    def forward(self, x):\n        return drop_path(x, self.p, self.training)\n\n\ndef unused():\n    return scipy.special.erf(1.0)\n",
            ),
            SourceFile::new(
                "zoo/layers/helpers.py",
                "import collections.abc\nfrom itertools import repeat\n\n\ndef _ntuple(n):\n    def parse(x):\n        if isinstance(x, collections.abc.Iterable):\n            return tuple(x)\n        return tuple(repeat(x, n))\n    return parse\n\n\nto_2tuple = _ntuple(2)\n",
            ),
        ],
    };
    let files = [SourceFile::new(
        "net.py",
        "import torch.nn as nn\nfrom zoo.layers import DropPath, to_2tuple\n\n\nclass Block(nn.Module):\n    def __init__(self, dim, drop_path=0.0):\n        super().__init__()\n        self.size = to_2tuple(dim)\n        self.fc = nn.Linear(dim, dim)\n        self.drop_path = DropPath(drop_path)\n\n    def forward(self, x):\n        return x + self.drop_path(self.fc(x))\n",
    )];
    let rows = extract_repo_with_libraries(
        &crate::common::info(),
        &files,
        &ExtractConfig::default(),
        std::slice::from_ref(&library),
    )
    .0;
    assert_eq!(names(&rows), vec!["Block"]);
    let block = row(&rows, "Block");
    let p = ok_program(&rows, "Block");
    assert!(p.contains("class DropPath(nn.Module):"), "{p}");
    assert!(p.contains("def drop_path(x, p: float = 0.0"), "{p}");
    assert!(p.contains("to_2tuple = _ntuple(2)"), "{p}");
    assert!(!p.contains("scipy"), "{p}");
    assert!(
        block
            .deps
            .contains(&"zoo==1.2:zoo/layers/drop.py::DropPath".to_string()),
        "{:?}",
        block.deps
    );
    assert_eq!(crate::common::cpython::run_verdicts(&[p]), vec![None]);
    // Without the library the import is refused as before.
    let without = extract(&[(
        "net.py",
        std::str::from_utf8(&files[0].bytes).unwrap_or_default(),
    )]);
    assert_eq!(
        row(&without, "Block").reason.as_deref(),
        Some("import_not_allowed: zoo")
    );
}
