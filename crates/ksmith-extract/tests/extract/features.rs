//! One test per extraction feature, on small repositories written inline.
#![allow(clippy::unwrap_used)] // Tests may unwrap.

use crate::common::*;
use ksmith_core::tables::ModuleStatus;
use ksmith_extract::ExtractConfig;

const LINEAR: &str = "    def __init__(self, dim):\n        super().__init__()\n        self.lin = nn.Linear(dim, dim)\n\n    def forward(self, x):\n        return self.lin(x)\n";

#[test]
fn every_alias_of_nn_module_is_found() {
    let src = r#"import torch
import torch.nn as tnn
from torch import nn as N
from torch.nn import Module
from torch.nn import Module as M
import torch.nn


class A(torch.nn.Module):
    def forward(self, x):
        return x + 1


class B(tnn.Module):
    def forward(self, x):
        return x * 2


class C(N.Module):
    def forward(self, x):
        return x - 1


class D(Module):
    def forward(self, x):
        return x / 2


class E(M):
    def forward(self, x):
        return -x


class F(N.Conv2d):
    def forward(self, x):
        return super().forward(x)


class NotAModule(object):
    def forward(self, x):
        return x


class AlsoNot(dict):
    pass
"#;
    let rows = extract(&[("m.py", src)]);
    assert_eq!(names(&rows), vec!["A", "B", "C", "D", "E", "F"]);
    for name in ["A", "B", "C", "D", "E", "F"] {
        ok_program(&rows, name);
    }
    let b = ok_program(&rows, "B");
    assert!(b.contains("import torch.nn as tnn\n"), "{b}");
    assert!(b.contains("class Model(tnn.Module):"), "{b}");
    assert!(
        !b.contains("from torch import nn as N"),
        "unused import kept:\n{b}"
    );
    let c = ok_program(&rows, "C");
    assert!(c.contains("from torch import nn as N\n"), "{c}");
    let e = ok_program(&rows, "E");
    assert!(e.contains("from torch.nn import Module as M\n"), "{e}");
    assert!(e.contains("class Model(M):"), "{e}");
    let f = ok_program(&rows, "F");
    assert!(
        f.contains("def get_init_inputs():\n    return [4, 4, 3]"),
        "{f}"
    );
}

#[test]
fn indirect_bases_across_files_absolute_and_relative() {
    let rows = extract(&[
        ("lib/__init__.py", ""),
        (
            "lib/base.py",
            &format!("import torch.nn as nn\n\n\nclass Base(nn.Module):\n{LINEAR}"),
        ),
        (
            "lib/mid.py",
            "from .base import Base\n\n\nclass Mid(Base):\n    pass\n",
        ),
        (
            "app/model.py",
            "from lib.mid import Mid\nfrom lib import base as b\n\n\nclass Top(Mid):\n    def forward(self, x):\n        return super().forward(x) * 2\n\n\nclass Other(b.Base):\n    pass\n",
        ),
    ]);
    assert_eq!(names(&rows), vec!["Top", "Other", "Base", "Mid"]);
    let top = ok_program(&rows, "Top");
    let base_at = top.find("class Base(nn.Module):").expect(top);
    let mid_at = top.find("class Mid(Base):").expect(top);
    let top_at = top.find("class Model(Mid):").expect(top);
    assert!(base_at < mid_at && mid_at < top_at, "{top}");
    assert!(
        top.contains("return [4]"),
        "init inherited from Base:\n{top}"
    );
    let other = ok_program(&rows, "Other");
    assert!(other.contains("class Model(Base):"), "{other}");
    assert_eq!(
        row(&rows, "Top").deps,
        vec!["lib/base.py::Base", "lib/mid.py::Mid"]
    );
}

#[test]
fn relative_imports_of_every_depth() {
    let rows = extract(&[
        ("pkg/__init__.py", ""),
        ("pkg/consts.py", "WIDTH = 4\n"),
        ("pkg/ops/__init__.py", "from .act import swish\n"),
        (
            "pkg/ops/act.py",
            "import torch\nfrom ..consts import WIDTH\n\n\ndef swish(x):\n    return x * torch.sigmoid(x) * WIDTH\n",
        ),
        (
            "pkg/ops/block.py",
            "import torch.nn as nn\nfrom . import swish\nfrom .act import swish as sw\n\n\nclass Block(nn.Module):\n    def forward(self, x):\n        return swish(x) + sw(x)\n",
        ),
    ]);
    let p = ok_program(&rows, "Block");
    assert!(p.contains("WIDTH = 4\n"), "{p}");
    assert!(p.contains("def swish(x):"), "{p}");
    assert!(p.contains("sw = swish\n"), "{p}");
    assert!(p.find("WIDTH = 4").unwrap() < p.find("def swish").unwrap());
    assert!(!p.contains("from ."), "relative import left:\n{p}");
}

#[test]
fn constants_defaults_decorators_and_class_bodies_are_in_the_closure() {
    let src = r#"import functools
import math
import torch
import torch.nn as nn

EPS = 1e-6
SCALE = math.sqrt(2.0)
UNUSED = 123
ACTS = {"relu": torch.relu}


def traced(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return fn(*args, **kwargs)
    return wrapper


def default_gain():
    return SCALE


class Norm(nn.Module):
    kind = "relu"
    table = ACTS

    def __init__(self, dim, eps=EPS, gain=default_gain()):
        super().__init__()
        self.eps = eps
        self.gain = gain

    @traced
    def forward(self, x):
        y = self.table[self.kind](x)
        return y / (y.norm() + self.eps) * self.gain
"#;
    let rows = extract(&[("norm.py", src)]);
    let p = ok_program(&rows, "Norm");
    for needed in [
        "EPS = 1e-6",
        "SCALE = math.sqrt(2.0)",
        "ACTS = {",
        "def traced(fn):",
        "def default_gain():",
        "import functools",
        "import math",
    ] {
        assert!(p.contains(needed), "missing {needed}:\n{p}");
    }
    assert!(!p.contains("UNUSED"), "{p}");
    // Eager needs come first: SCALE before default_gain() is called in a default.
    assert!(p.find("SCALE =").unwrap() < p.find("class Model").unwrap());
    assert!(p.find("def default_gain").unwrap() < p.find("class Model").unwrap());
}

#[test]
fn locally_bound_names_are_not_pulled_as_globals() {
    let src = r#"import torch
import torch.nn as nn

x = "global x"
scale = 3
helper = None
item = 0
counter = 0


def helper2(v):
    return v


class Scoped(nn.Module):
    def forward(self, x, scale=2):
        helper = lambda t: t * scale
        ys = [item * 2 for item in range(3)]
        def inner(counter):
            return counter + 1
        global tally
        tally = inner(1)
        return helper(x) + sum(ys) + helper2(x)
"#;
    let rows = extract(&[("s.py", src)]);
    let p = ok_program(&rows, "Scoped");
    assert!(p.contains("def helper2"), "{p}");
    for unwanted in [
        "x = \"global x\"",
        "scale = 3",
        "helper = None",
        "item = 0",
        "counter = 0",
    ] {
        assert!(!p.contains(unwanted), "pulled {unwanted}:\n{p}");
    }
}

#[test]
fn imports_are_pruned_to_the_used_names() {
    let src = r#"import os
import sys
import numpy as np
import scipy
from typing import Optional, List
import torch
import torch.nn as nn
import torch.nn.functional as F


class Act(nn.Module):
    def forward(self, x: torch.Tensor) -> Optional[torch.Tensor]:
        return F.gelu(x) + float(np.pi)
"#;
    let rows = extract(&[("a.py", src)]);
    let r = row(&rows, "Act");
    ok_program(&rows, "Act");
    assert_eq!(
        r.imports,
        vec![
            "from typing import Optional",
            "import numpy as np",
            "import torch",
            "import torch.nn as nn",
            "import torch.nn.functional as F",
        ]
    );
}

#[test]
fn packages_off_the_allow_list_reject_the_module_naming_the_package() {
    let src = r#"import scipy.signal
import torch.nn as nn
from sklearn.preprocessing import scale


class Smooth(nn.Module):
    def forward(self, x):
        return scipy.signal.medfilt(x)


class Scaled(nn.Module):
    def forward(self, x):
        return scale(x)


class Fine(nn.Module):
    def forward(self, x):
        return x
"#;
    let rows = extract(&[("f.py", src)]);
    let smooth = row(&rows, "Smooth");
    assert_eq!(smooth.status, ModuleStatus::Rejected);
    assert_eq!(smooth.reason.as_deref(), Some("import_not_allowed: scipy"));
    assert_eq!(smooth.program, None);
    let scaled = row(&rows, "Scaled");
    assert_eq!(
        scaled.reason.as_deref(),
        Some("import_not_allowed: sklearn")
    );
    ok_program(&rows, "Fine");
    // The allow-list is configurable.
    let cfg = ExtractConfig {
        allowed_imports: vec!["torch".into(), "scipy".into()],
        ..Default::default()
    };
    let rows = extract_with(&[("f.py", src)], &cfg);
    let p = ok_program(&rows, "Smooth");
    assert!(p.contains("import scipy.signal\n"), "{p}");
}

#[test]
fn nested_imports_are_checked_and_local_ones_inlined() {
    let rows = extract(&[
        ("util.py", "def double(x):\n    return x * 2\n"),
        (
            "m.py",
            "import torch.nn as nn\n\n\nclass Lazy(nn.Module):\n    def forward(self, x):\n        from util import double as dbl\n        import math\n        return dbl(x) * math.pi\n\n\nclass Bad(nn.Module):\n    def forward(self, x):\n        import pandas\n        return x\n",
        ),
    ]);
    let p = ok_program(&rows, "Lazy");
    assert!(p.contains("def double(x):"), "{p}");
    assert!(p.contains("dbl = double"), "{p}");
    assert!(!p.contains("from util"), "{p}");
    assert!(p.contains("        import math\n"), "{p}");
    assert_eq!(
        row(&rows, "Bad").reason.as_deref(),
        Some("import_not_allowed: pandas")
    );
}

#[test]
fn module_attribute_chains_are_flattened() {
    let rows = extract(&[
        ("pkg/__init__.py", ""),
        (
            "pkg/ops.py",
            "import torch\nimport torch.nn.functional as F\n\n\ndef mish(x):\n    return x * torch.tanh(F.softplus(x))\n",
        ),
        (
            "pkg/net.py",
            "import torch.nn as nn\nimport pkg.ops as o\nimport pkg.ops\n\n\nclass Net(nn.Module):\n    def forward(self, x):\n        return o.mish(x) + pkg.ops.mish(x) + o.F.relu(x)\n",
        ),
    ]);
    let p = ok_program(&rows, "Net");
    assert!(p.contains("return mish(x) + mish(x) + F.relu(x)"), "{p}");
    assert!(p.contains("import torch.nn.functional as F"), "{p}");
}

#[test]
fn a_module_object_used_as_a_value_fails_clearly() {
    let rows = extract(&[
        ("ops.py", "def relu(x):\n    return x\n"),
        (
            "net.py",
            "import torch.nn as nn\nimport ops\n\n\nclass Net(nn.Module):\n    def forward(self, x):\n        return getattr(ops, 'relu')(x)\n",
        ),
    ]);
    let r = row(&rows, "Net");
    assert_eq!(r.status, ModuleStatus::Failed);
    assert_eq!(r.reason.as_deref(), Some("module_reference: ops"));
}

#[test]
fn star_imports_from_the_repository_resolve() {
    let rows = extract(&[
        (
            "layers.py",
            "import torch\n\n\ndef gelu(x):\n    return torch.nn.functional.gelu(x)\n",
        ),
        (
            "net.py",
            "import torch.nn as nn\nfrom layers import *\n\n\nclass Net(nn.Module):\n    def forward(self, x):\n        return gelu(x)\n",
        ),
    ]);
    let p = ok_program(&rows, "Net");
    assert!(p.contains("def gelu(x):"), "{p}");
    assert!(!p.contains("from layers"), "{p}");
}

#[test]
fn a_class_with_a_syntax_error_fails_and_its_neighbours_still_extract() {
    let src = "import torch.nn as nn\n\n\nclass Good(nn.Module):\n    def forward(self, x):\n        return x + 1\n\n\nclass Broken(nn.Module):\n    def forward(self, x):\n        return (x +\n\n\nclass AlsoGood(nn.Module):\n    def forward(self, x):\n        return x * 3\n";
    let rows = extract(&[("mixed.py", src)]);
    ok_program(&rows, "Good");
    let broken = row(&rows, "Broken");
    assert_eq!(broken.status, ModuleStatus::Failed);
    let reason = broken.reason.as_deref().unwrap();
    assert!(reason.starts_with("syntax_error at mixed.py:"), "{reason}");
    // The file has errors: whatever becomes of AlsoGood, it is a row with a clear status.
    let also = row(&rows, "AlsoGood");
    assert!(
        also.status == ModuleStatus::Ok
            || also.reason.as_deref().unwrap().starts_with("syntax_error"),
        "{also:?}"
    );
}

#[test]
fn a_dependency_with_a_syntax_error_fails_the_module() {
    let rows = extract(&[
        (
            "helpers.py",
            "def ok(x):\n    return x\n\ndef broken(x):\n    return [x,\n",
        ),
        (
            "net.py",
            "import torch.nn as nn\nfrom helpers import broken\n\n\nclass Net(nn.Module):\n    def forward(self, x):\n        return broken(x)\n",
        ),
    ]);
    let r = row(&rows, "Net");
    assert_eq!(r.status, ModuleStatus::Failed);
    assert!(
        r.reason
            .as_deref()
            .unwrap()
            .starts_with("syntax_error at helpers.py:"),
        "{r:?}"
    );
}

#[test]
fn undefined_names_fail_with_the_name() {
    let src = "import torch.nn as nn\n\n\nclass Net(nn.Module):\n    def forward(self, x):\n        return undefined_helper(x)\n";
    let rows = extract(&[("n.py", src)]);
    let r = row(&rows, "Net");
    assert_eq!(r.status, ModuleStatus::Failed);
    assert_eq!(
        r.reason.as_deref(),
        Some("undefined_name: undefined_helper")
    );
    let rows = extract(&[(
        "n.py",
        "import torch.nn as nn\nfrom .missing import thing\n\n\nclass Net(nn.Module):\n    def forward(self, x):\n        return thing(x)\n",
    )]);
    let r = row(&rows, "Net");
    assert_eq!(r.status, ModuleStatus::Failed);
    assert!(
        r.reason
            .as_deref()
            .unwrap()
            .starts_with("unresolved_import: "),
        "{r:?}"
    );
}

#[test]
fn abstract_and_forwardless_classes_are_rejected() {
    let src = r#"import abc
import torch.nn as nn


class NoForward(nn.Module):
    def __init__(self):
        super().__init__()


class Abstract(nn.Module):
    def forward(self, x):
        raise NotImplementedError("subclasses")


class WithAbc(nn.Module, abc.ABC):
    @abc.abstractmethod
    def forward(self, x):
        pass


class Concrete(Abstract):
    def forward(self, x):
        return x
"#;
    let rows = extract(&[("a.py", src)]);
    for name in ["NoForward", "Abstract", "WithAbc"] {
        let r = row(&rows, name);
        assert_eq!(r.status, ModuleStatus::Rejected, "{name}");
        assert_eq!(r.reason.as_deref(), Some("no_forward"), "{name}");
    }
    ok_program(&rows, "Concrete");
}

#[test]
fn programs_over_the_line_limit_are_rejected() {
    let body: String = (0..60).map(|i| format!("        x = x + {i}\n")).collect();
    let src = format!(
        "import torch.nn as nn\n\n\nclass Long(nn.Module):\n    def forward(self, x):\n{body}        return x\n"
    );
    let cfg = ExtractConfig {
        max_lines: 40,
        ..Default::default()
    };
    let rows = extract_with(&[("l.py", &src)], &cfg);
    let r = row(&rows, "Long");
    assert_eq!(r.status, ModuleStatus::Rejected);
    assert!(
        r.reason.as_deref().unwrap().starts_with("too_large"),
        "{r:?}"
    );
    assert!(r.lines > 40);
    ok_program(&extract(&[("l.py", &src)]), "Long");
}

#[test]
fn the_entry_becomes_model_and_its_old_name_keeps_working() {
    let src = "import torch.nn as nn\n\n\nclass Block(nn.Module):\n    def __init__(self, dim):\n        super(Block, self).__init__()\n        self.dim = dim\n\n    def forward(self, x):\n        return x * self.dim\n\n\nclass Model(nn.Module):\n    def forward(self, x):\n        return x\n";
    let rows = extract(&[("b.py", src)]);
    let p = ok_program(&rows, "Block");
    assert!(p.contains("class Model(nn.Module):"), "{p}");
    assert!(p.contains("super(Block, self).__init__()"), "{p}");
    assert!(p.contains("\nBlock = Model\n"), "{p}");
    let p = ok_program(&rows, "Model");
    assert!(p.contains("class Model(nn.Module):"), "{p}");
    assert!(!p.contains("Model = Model"), "{p}");
}

/// Two files each define their own `act`: the second file's (by path) is renamed with every
/// read of it, in its own file and in the files that import it, and the program runs with each
/// helper calling its own `act`.
#[test]
fn same_name_from_two_files_is_renamed_with_its_uses() {
    let files = [
        (
            "a.py",
            "def act(x):\n    return x\n\n\ndef helper_a(x):\n    return act(x)\n",
        ),
        (
            "b.py",
            "def act(x):\n    return -x if x.sum() > 0 else act(-x)\n\n\nSCALE = 2\n\n\ndef helper_b(x):\n    return act(x) * SCALE\n",
        ),
        (
            "net.py",
            "import torch.nn as nn\nimport b\nfrom a import helper_a\nfrom b import helper_b, act as b_act\n\n\nclass Net(nn.Module):\n    def forward(self, x):\n        return helper_a(x) + helper_b(x) + b.act(x) + b_act(x)\n",
        ),
    ];
    let rows = extract(&files);
    let p = ok_program(&rows, "Net");
    assert!(p.contains("def act(x):\n    return x\n"), "{p}");
    assert!(
        p.contains("def act_b(x):\n    return -x if x.sum() > 0 else act_b(-x)\n"),
        "{p}"
    );
    assert!(p.contains("return act_b(x) * SCALE"), "{p}");
    assert!(p.contains("return act(x)\n"), "{p}");
    assert!(p.contains("b_act = act_b\n"), "{p}");
    assert!(p.contains("helper_b(x) + act_b(x) + b_act(x)"), "{p}");
    // Deterministic: the same files in another order give the same program.
    let mut reversed = files;
    reversed.reverse();
    assert_eq!(ok_program(&extract(&reversed), "Net"), p);
    // It runs, each helper with its own `act`: x - 2x - x - x.
    let mut program = p.to_string();
    program.push_str("\nx = get_inputs()[0]\nassert torch.allclose(Model()(x), -3 * x)\n");
    assert_eq!(
        crate::common::cpython::run_verdicts(&[&program]),
        vec![None]
    );
}

/// A definition named like a function the program generates gives way too.
#[test]
fn a_definition_named_like_a_generated_function_is_renamed() {
    let rows = extract(&[(
        "net.py",
        "import torch.nn as nn\n\n\ndef get_init_inputs():\n    return 3\n\n\nclass Net(nn.Module):\n    def forward(self, x):\n        return x * get_init_inputs()\n",
    )]);
    let p = ok_program(&rows, "Net");
    assert!(
        p.contains("def get_init_inputs_net():\n    return 3\n"),
        "{p}"
    );
    assert!(p.contains("return x * get_init_inputs_net()"), "{p}");
}

#[test]
fn mutually_recursive_functions_are_tolerated() {
    let src = "import torch.nn as nn\n\n\ndef even(n):\n    return True if n == 0 else odd(n - 1)\n\n\ndef odd(n):\n    return False if n == 0 else even(n - 1)\n\n\nclass Parity(nn.Module):\n    def forward(self, x):\n        return x * float(even(4))\n";
    let rows = extract(&[("p.py", src)]);
    let p = ok_program(&rows, "Parity");
    assert!(
        p.contains("def even(n):") && p.contains("def odd(n):"),
        "{p}"
    );
}

#[test]
fn guessed_arguments_follow_the_signatures() {
    let src = r#"import torch
import torch.nn as nn


class Conv(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, dropout, use_bn, bias=True):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, stride, padding=kernel_size // 2)

    def forward(self, x):
        return self.conv(x)


class Seq(nn.Module):
    def __init__(self, hidden_size):
        super().__init__()
        self.rnn = nn.GRU(hidden_size, hidden_size, batch_first=True)

    def forward(self, x, h=None):
        return self.rnn(x, h)[0]


class Attn(nn.Module):
    def forward(self, query, key, value, mask):
        b, n, d = query.shape
        return torch.softmax(query @ key.transpose(-1, -2), -1) @ value
"#;
    let rows = extract(&[("g.py", src)]);
    let p = ok_program(&rows, "Conv");
    assert!(p.ends_with("def get_inputs():\n    return [torch.rand([4, 4, 4, 4])]\n\n\ndef get_init_inputs():\n    return [4, 4, 3, 1, 0.0, False]\n"), "{p}");
    let p = ok_program(&rows, "Seq");
    assert!(p.contains("return [torch.rand([4, 4, 4])]"), "{p}");
    let p = ok_program(&rows, "Attn");
    assert!(
        p.contains("return [torch.rand([4, 4, 4]), torch.rand([4, 4, 4]), torch.rand([4, 4, 4]), torch.ones([4, 4])]"),
        "{p}"
    );
}

#[test]
fn extraction_is_deterministic_and_independent_of_file_order() {
    let files = [
        ("pkg/__init__.py", ""),
        (
            "pkg/a.py",
            &format!("import torch.nn as nn\nK = 3\n\n\nclass A(nn.Module):\n{LINEAR}") as &str,
        ),
        (
            "pkg/b.py",
            "from .a import A, K\n\n\nclass B(A):\n    def forward(self, x):\n        return super().forward(x) * K\n",
        ),
    ];
    let first = extract(&files);
    let again = extract(&files);
    assert_eq!(first, again);
    let mut reversed = files.to_vec();
    reversed.reverse();
    assert_eq!(first, extract(&reversed));
}

#[test]
fn ids_are_content_hashes_and_unique() {
    // Two identical classes under different names give the same program.
    let body = "    def forward(self, x):\n        return x * 2\n";
    let src = format!(
        "import torch.nn as nn\n\n\nclass One(nn.Module):\n{body}\n\nclass Two(nn.Module):\n{body}"
    );
    let rows = extract(&[("d.py", &src)]);
    let one = row(&rows, "One");
    let two = row(&rows, "Two");
    assert_eq!(one.program, two.program);
    assert_eq!(
        one.id,
        ksmith_core::ids::content_id(one.program.as_deref().unwrap())
    );
    assert_ne!(one.id, two.id);
    assert_eq!(one.id.len(), 32);
}

#[test]
fn required_keyword_only_constructor_arguments_are_taken_positionally() {
    let src = r#"import torch
import torch.nn as nn


class ViT(nn.Module):
    def __init__(self, *, image_size, dim, depth, heads=2, channels=3):
        super().__init__()
        self.embed = nn.Linear(image_size, dim)
        self.blocks = nn.Sequential(*[nn.Linear(dim, dim) for _ in range(depth)])

    def forward(self, img):
        return self.blocks(self.embed(img))


class Deep(ViT):
    pass


class Mixed(nn.Module):
    def __init__(self, in_channels, *layers, out_channels, act=None):
        super().__init__()
        self.proj = nn.Linear(in_channels, out_channels)

    def forward(self, x):
        return self.proj(x)


class Model(nn.Module):
    def __init__(self, *, dim):
        super().__init__()
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        return self.proj(x)
"#;
    let rows = extract(&[("vit.py", src)]);
    let vit = ok_program(&rows, "ViT");
    assert!(vit.contains("class ViT(nn.Module):"), "{vit}");
    assert!(
        vit.contains("class Model(ViT):\n    def __init__(self, image_size, dim, depth):\n        super().__init__(image_size=image_size, dim=dim, depth=depth)\n"),
        "{vit}"
    );
    assert!(
        vit.ends_with("def get_init_inputs():\n    return [4, 4, 1]\n"),
        "{vit}"
    );
    let deep = ok_program(&rows, "Deep");
    assert!(deep.contains("class Model(Deep):"), "{deep}");
    let mixed = ok_program(&rows, "Mixed");
    assert!(
        mixed.contains("    def __init__(self, in_channels, out_channels):\n        super().__init__(in_channels, out_channels=out_channels)\n"),
        "{mixed}"
    );
    let model = ok_program(&rows, "Model");
    assert!(model.contains("class Model(Model):"), "{model}");
    // KernelBench's `Model(*get_init_inputs())(*get_inputs())` works unchanged.
    let programs = [vit, deep, mixed, model];
    assert_eq!(
        crate::common::cpython::run_verdicts(&programs),
        vec![None; programs.len()]
    );
}

#[test]
fn base_classes_through_aliases_and_assignment_chains() {
    let rows = extract(&[
        (
            "compat.py",
            "import torch\nimport torch.nn as nn\n\nBase = nn.Module\nModuleBase = Base\ntnn = torch.nn\n",
        ),
        (
            "m.py",
            "import torch.nn as nn\nfrom compat import ModuleBase, tnn\n\nLayer = nn.Linear\n\n\nclass Direct(ModuleBase):\n    def forward(self, x):\n        return x * 2\n\n\nclass ViaModule(tnn.Module):\n    def forward(self, x):\n        return x + 1\n\n\nclass Lin(Layer):\n    pass\n\n\nA = B\nB = A\n\n\nclass Looped(A):\n    def forward(self, x):\n        return x\n\n\nclass Mixed(nn.Module, A):\n    def forward(self, x):\n        return x\n",
        ),
    ]);
    let direct = ok_program(&rows, "Direct");
    assert!(direct.contains("Base = nn.Module\n"), "{direct}");
    assert!(direct.contains("ModuleBase = Base\n"), "{direct}");
    assert!(direct.contains("class Model(ModuleBase):"), "{direct}");
    ok_program(&rows, "ViaModule");
    let lin = ok_program(&rows, "Lin");
    assert!(
        lin.ends_with("return [4, 4]\n"),
        "a Linear subclass:\n{lin}"
    );
    // A cycle of aliases is no module by itself, and a reason (not a hang) when needed.
    assert!(rows.iter().all(|r| r.class_name != "Looped"), "{rows:#?}");
    assert!(
        row(&rows, "Mixed")
            .reason
            .as_deref()
            .is_some_and(|r| r.starts_with("dependency_cycle: m.py::A, m.py::B")),
        "{:?}",
        row(&rows, "Mixed").reason
    );
}

/// A bare `except:` around an optional fused-kernel import (Swin Transformer's window process,
/// with a `sys.path.append` before it) takes the fallback like `except ImportError:` does.
#[test]
fn a_bare_except_around_an_optional_import_takes_the_fallback() {
    let rows = extract(&[
        (
            "kernels/window_process/window_process.py",
            "import torch\nimport swin_window_process\n\n\nclass WindowProcess(torch.autograd.Function):\n    @staticmethod\n    def forward(ctx, x):\n        return swin_window_process.roll_and_window_partition_forward(x)\n",
        ),
        (
            "models/swin.py",
            "import torch\nimport torch.nn as nn\n\ntry:\n    import os, sys\n\n    kernel_path = os.path.abspath(os.path.join('..'))\n    sys.path.append(kernel_path)\n    from kernels.window_process.window_process import WindowProcess\n\nexcept:\n    WindowProcess = None\n    fused_available = False\n\n\nclass Block(nn.Module):\n    def __init__(self, dim, fused=False):\n        super().__init__()\n        self.fc = nn.Linear(dim, dim)\n        self.fused = fused\n\n    def forward(self, x):\n        if self.fused:\n            x = WindowProcess.apply(x)\n        return self.fc(x)\n",
        ),
    ]);
    let p = ok_program(&rows, "Block");
    assert!(p.contains("raise ImportError("), "{p}");
    assert!(p.contains("WindowProcess = None"), "{p}");
    assert!(!p.contains("import swin_window_process"), "{p}");
    assert_eq!(crate::common::cpython::run_verdicts(&[p]), vec![None]);
}

/// Constructor arguments come from the repository's own calls when it has them (literals, or
/// the literal defaults of the enclosing function's parameters), with where each came from.
#[test]
fn constructor_arguments_come_from_the_repositorys_call_sites() {
    let rows = extract(&[
        (
            "net.py",
            "import torch.nn as nn\n\n\nclass Attention(nn.Module):\n    def __init__(self, dim, heads, dim_head=32, scale=None):\n        super().__init__()\n        self.qkv = nn.Linear(dim, heads * dim_head)\n\n    def forward(self, x):\n        return self.qkv(x)\n\n\nclass Block(nn.Module):\n    def __init__(self, dim=64, depth=2):\n        super().__init__()\n        self.attn = Attention(dim, heads=8)\n        self.mlp = nn.Sequential(*[nn.Linear(dim, dim) for _ in range(depth)])\n\n    def forward(self, x):\n        return self.mlp(self.attn(x))\n\n\nclass ConvNet(nn.Module):\n    def __init__(self, in_chans=3, num_classes=1000, depths=(3, 3), dims=(8, 16), act=nn.GELU, drop_path_rate=0.1):\n        super().__init__()\n        self.stem = nn.Conv2d(in_chans, dims[0], 4)\n\n    def forward(self, x):\n        return self.stem(x)\n\n\ndef convnet_tiny(**kwargs):\n    return ConvNet(depths=[3, 3, 9, 3], dims=[96, 192, 384, 768], **kwargs)\n",
        ),
        (
            "tests/test_net.py",
            "from net import Attention\n\n\ndef test_attention():\n    Attention(16, 2)\n",
        ),
    ]);
    let attention = row(&rows, "Attention");
    let p = ok_program(&rows, "Attention");
    assert!(
        p.ends_with("def get_init_inputs():\n    return [64, 8]\n"),
        "{p}"
    );
    assert_eq!(
        attention.arg_sources,
        vec![
            "dim=64: call net.py:16 (default of dim)",
            "heads=8: call net.py:16"
        ]
    );
    let p = ok_program(&rows, "ConvNet");
    assert!(
        p.ends_with(
            "def get_init_inputs():\n    return [3, 1000, [3, 3, 9, 3], [96, 192, 384, 768]]\n"
        ),
        "{p}"
    );
    assert_eq!(
        row(&rows, "ConvNet").arg_sources,
        vec![
            "in_chans=3: default",
            "num_classes=1000: default",
            "depths=[3, 3, 9, 3]: call net.py:33",
            "dims=[96, 192, 384, 768]: call net.py:33"
        ]
    );
    // Nothing builds Block: its required parameters (none) and nothing else.
    let p = ok_program(&rows, "Block");
    assert!(
        p.ends_with("def get_init_inputs():\n    return []\n"),
        "{p}"
    );
    assert!(row(&rows, "Block").arg_sources.is_empty());
}

/// Call-site arguments given as expressions are evaluated: a module constant, a local constant, a
/// loop variable over `range` (its first iteration) indexing a parameter's list default, and
/// arithmetic over them; a caller's parameter whose default is `None` is unknown (the caller
/// resolves it later), so the callee's argument is guessed, saying what it stands for.
#[test]
fn call_site_expressions_and_constants_are_evaluated() {
    let rows = extract(&[(
        "net.py",
        "import torch.nn as nn\n\nHEADS = 4\n\n\nclass Attention(nn.Module):\n    def __init__(self, dim, heads):\n        super().__init__()\n        self.qkv = nn.Linear(dim, dim * 3)\n\n    def forward(self, x):\n        return self.qkv(x)\n\n\nclass Stage(nn.Module):\n    def __init__(self, dim, depth, heads, shift):\n        super().__init__()\n        self.fc = nn.Linear(dim, dim)\n\n    def forward(self, x):\n        return self.fc(x)\n\n\nclass Head(nn.Module):\n    def __init__(self, dim, dim_out):\n        super().__init__()\n        self.fc = nn.Linear(dim, dim_out)\n\n    def forward(self, x):\n        return self.fc(x)\n\n\nclass Net(nn.Module):\n    def __init__(self, embed_dim=96, depths=[2, 2, 6, 2], num_heads=[3, 6, 12, 24], window=7, dim_out=None):\n        super().__init__()\n        self.stages = nn.ModuleList()\n        for i in range(len(depths)):\n            self.stages.append(Stage(int(embed_dim * 2 ** i), depths[i], heads=num_heads[i], shift=0 if i % 2 == 0 else window // 2))\n        self.head = Head(embed_dim * 8, dim_out)\n\n    def forward(self, x):\n        return self.head(x)\n\n\ndef build():\n    prompt_dim = 256\n    return Attention(prompt_dim, HEADS)\n",
    )]);
    assert_eq!(
        row(&rows, "Attention").arg_sources,
        vec![
            "dim=256: call net.py:47 (local prompt_dim)",
            "heads=4: call net.py:47 (constant HEADS)"
        ]
    );
    assert_eq!(
        row(&rows, "Stage").arg_sources,
        vec![
            "dim=96: call net.py:38 (`int(embed_dim * 2 ** i)`)",
            "depth=2: call net.py:38 (`depths[i]`)",
            "heads=3: call net.py:38 (`num_heads[i]`)",
            "shift=0: call net.py:38 (`0 if i % 2 == 0 else window // 2`)"
        ]
    );
    assert!(
        ok_program(&rows, "Stage").ends_with("def get_init_inputs():\n    return [96, 2, 3, 0]\n")
    );
    // `dim_out` defaults to None in Net: unknown, so Head's `dim_out` is guessed, not None.
    assert_eq!(
        row(&rows, "Head").arg_sources,
        vec![
            "dim=768: call net.py:39 (`embed_dim * 8`)",
            "dim_out=4: guess (`dim_out` is not constant at call net.py:39)"
        ]
    );
}

/// `nn.Conv2d(...)` builds torch's class: it is no call site of the repository's own `Conv2d`,
/// whose arguments stay guessed rather than taken from torch's signature.
#[test]
fn a_call_of_a_package_class_is_no_call_site_of_a_same_named_class() {
    let rows = extract(&[
        (
            "layers.py",
            "import torch\nimport torch.nn as nn\n\n\nclass Conv2d(nn.Module):\n    def __init__(self, dim_in, dim_out, kernel_size, eps=1e-4):\n        super().__init__()\n        self.weight = nn.Parameter(torch.randn(dim_out, dim_in, kernel_size, kernel_size))\n\n    def forward(self, x):\n        return torch.nn.functional.conv2d(x, self.weight, padding='same')\n",
        ),
        (
            "unet.py",
            "import torch.nn as nn\n\n\nclass Unet(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.stem = nn.Conv2d(3, 64, 7)\n\n    def forward(self, x):\n        return self.stem(x)\n",
        ),
        (
            "model.py",
            "import torch.nn as nn\nimport layers\n\n\nclass Block(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.conv = layers.Conv2d(8, 16, 3)\n\n    def forward(self, x):\n        return self.conv(x)\n",
        ),
    ]);
    // The one call of the repository's class is `layers.Conv2d(8, 16, 3)`, not `nn.Conv2d(3, 64, 7)`.
    assert_eq!(
        row(&rows, "Conv2d").arg_sources,
        vec![
            "dim_in=8: call model.py:8",
            "dim_out=16: call model.py:8",
            "kernel_size=3: call model.py:8"
        ]
    );
}

/// An argument that passes on a parameter of the enclosing class's `__init__` takes the value
/// that class is built with at its own call site (two classes up here), with the chain recorded;
/// a parameter the enclosing class gets no value for stays a guess.
#[test]
fn arguments_passed_on_from_the_enclosing_constructor_take_its_call_sites_values() {
    let rows = extract(&[(
        "net.py",
        "import torch.nn as nn\n\n\nclass Block(nn.Module):\n    def __init__(self, dim, heads, width):\n        super().__init__()\n        self.fc = nn.Linear(dim, dim)\n\n    def forward(self, x):\n        return self.fc(x)\n\n\nclass Stage(nn.Module):\n    def __init__(self, dim, num_heads, width):\n        super().__init__()\n        self.block = Block(dim, heads=num_heads, width=width)\n\n    def forward(self, x):\n        return self.block(x)\n\n\nclass Net(nn.Module):\n    def __init__(self, embed_dim=96, heads=(3, 6)):\n        super().__init__()\n        self.stage = Stage(embed_dim * 2, heads[0], None if embed_dim else 1)\n\n    def forward(self, x):\n        return self.stage(x)\n",
    )]);
    assert_eq!(
        row(&rows, "Block").arg_sources,
        vec![
            "dim=192: call net.py:16 (dim of Stage: call net.py:25 (`embed_dim * 2`))",
            "heads=3: call net.py:16 (num_heads of Stage: call net.py:25 (`heads[0]`))",
            "width=None: call net.py:16 (width of Stage: call net.py:25 (`None if embed_dim else 1`))"
        ]
    );
}
