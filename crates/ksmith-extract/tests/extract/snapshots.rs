//! Snapshots of emitted programs for a few classes of input, so that any change to emission
//! (order, renaming, imports, inlining, guessed inputs) shows in review as a diff of these
//! texts. After an intended change, refresh them with `UPDATE_EXPECT=1 cargo test -p
//! ksmith-extract snapshots` and read the diff.
#![allow(clippy::unwrap_used)] // Tests may unwrap.

use crate::common::*;
use expect_test::{Expect, expect};

/// Checks the program of class `name` extracted from `files`.
fn check(files: &[(&str, &str)], name: &str, expected: Expect) {
    let rows = extract(files);
    expected.assert_eq(ok_program(&rows, name));
}

/// The base class through an alias of `torch.nn`, a constant default and a helper function.
#[test]
fn a_module_with_a_helper_and_a_constant() {
    check(
        &[(
            "net.py",
            "import torch\nimport torch.nn as tnn\n\nSCALE = 0.5\n\n\ndef act(x):\n    return torch.tanh(x) * SCALE\n\n\nclass Head(tnn.Module):\n    def __init__(self, dim=16, classes=10):\n        super().__init__()\n        self.fc = tnn.Linear(dim, classes)\n\n    def forward(self, x):\n        return act(self.fc(x))\n",
        )],
        "Head",
        expect![[r#"
            import torch
            import torch.nn as tnn


            SCALE = 0.5


            def act(x):
                return torch.tanh(x) * SCALE


            class Model(tnn.Module):
                def __init__(self, dim=16, classes=10):
                    super().__init__()
                    self.fc = tnn.Linear(dim, classes)

                def forward(self, x):
                    return act(self.fc(x))


            def get_inputs():
                return [torch.rand([4, 4, 4, 4])]


            def get_init_inputs():
                return []
        "#]],
    );
}

/// An indirect subclass across files: its base, the base's helper and a relative import.
#[test]
fn an_indirect_subclass_across_files() {
    check(
        &[
            ("pkg/__init__.py", ""),
            (
                "pkg/layers.py",
                "import torch\nfrom torch import nn\n\n\ndef gelu(x):\n    return 0.5 * x * (1.0 + torch.erf(x / 1.4142135623730951))\n\n\nclass Block(nn.Module):\n    def __init__(self, dim):\n        super().__init__()\n        self.proj = nn.Linear(dim, dim)\n\n    def forward(self, x):\n        return gelu(self.proj(x))\n",
            ),
            (
                "pkg/models.py",
                "from .layers import Block\n\n\nclass Residual(Block):\n    def forward(self, x):\n        return x + super().forward(x)\n",
            ),
        ],
        "Residual",
        expect![[r#"
            from torch import nn
            import torch


            def gelu(x):
                return 0.5 * x * (1.0 + torch.erf(x / 1.4142135623730951))


            class Block(nn.Module):
                def __init__(self, dim):
                    super().__init__()
                    self.proj = nn.Linear(dim, dim)

                def forward(self, x):
                    return gelu(self.proj(x))


            class Model(Block):
                def forward(self, x):
                    return x + super().forward(x)


            def get_inputs():
                return [torch.rand([4, 4, 4, 4])]


            def get_init_inputs():
                return [4]
        "#]],
    );
}

/// A repository module used as `module.attr` is flattened to `attr`; the class keeps its name
/// under `Original = Model` because its body names it.
#[test]
fn module_attributes_are_flattened_and_self_references_kept() {
    check(
        &[
            (
                "ops.py",
                "import torch\n\n\ndef double(x):\n    return x * 2\n",
            ),
            (
                "model.py",
                "import torch.nn as nn\nimport ops\n\n\nclass Twice(nn.Module):\n    def __init__(self, depth=2):\n        super().__init__()\n        self.depth = depth\n\n    def clone(self):\n        return Twice(self.depth)\n\n    def forward(self, x):\n        for _ in range(self.depth):\n            x = ops.double(x)\n        return x\n",
            ),
        ],
        "Twice",
        expect![[r#"
            import torch
            import torch.nn as nn


            def double(x):
                return x * 2


            class Model(nn.Module):
                def __init__(self, depth=2):
                    super().__init__()
                    self.depth = depth

                def clone(self):
                    return Twice(self.depth)

                def forward(self, x):
                    for _ in range(self.depth):
                        x = double(x)
                    return x
            Twice = Model


            def get_inputs():
                return [torch.rand([4, 4, 4, 4])]


            def get_init_inputs():
                return []
        "#]],
    );
}

/// Guessed inputs from names and shape hints (`b, c, h, w = x.shape`, a Conv2d).
#[test]
fn guessed_inputs_for_a_convolution() {
    check(
        &[(
            "conv.py",
            "import torch.nn as nn\n\n\nclass ConvBlock(nn.Module):\n    def __init__(self, in_channels, out_channels, kernel_size=3, stride=1):\n        super().__init__()\n        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, stride, padding=1)\n        self.norm = nn.BatchNorm2d(out_channels)\n\n    def forward(self, x):\n        b, c, h, w = x.shape\n        return self.norm(self.conv(x)).relu()\n",
        )],
        "ConvBlock",
        expect![[r#"
            import torch
            import torch.nn as nn


            class Model(nn.Module):
                def __init__(self, in_channels, out_channels, kernel_size=3, stride=1):
                    super().__init__()
                    self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, stride, padding=1)
                    self.norm = nn.BatchNorm2d(out_channels)

                def forward(self, x):
                    b, c, h, w = x.shape
                    return self.norm(self.conv(x)).relu()


            def get_inputs():
                return [torch.rand([4, 4, 4, 4])]


            def get_init_inputs():
                return [4, 4]
        "#]],
    );
}
