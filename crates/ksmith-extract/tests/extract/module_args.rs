//! Constructor arguments that are modules (a call of a repository class at the call site) and
//! forward arguments that are bools.
#![allow(clippy::unwrap_used)] // Tests may unwrap.

use crate::common::*;
use ksmith_core::tables::ModuleStatus;

/// A two-layer transformer with a helper class of its own file, as SAM's `TwoWayTransformer`.
const TRANSFORMER: &str = "import torch\nimport torch.nn as nn\n\n\nclass Layer(nn.Module):\n    def __init__(self, dim):\n        super().__init__()\n        self.fc = nn.Linear(dim, dim)\n\n    def forward(self, x):\n        return self.fc(x)\n\n\nclass Transformer(nn.Module):\n    def __init__(self, depth, embedding_dim):\n        super().__init__()\n        self.layers = nn.ModuleList([Layer(embedding_dim) for _ in range(depth)])\n\n    def forward(self, x):\n        for layer in self.layers:\n            x = layer(x)\n        return x\n";

/// A decoder taking the transformer as a constructor argument and a bool forward flag (a
/// tensor flag in `if` raises), as SAM's `MaskDecoder`.
const DECODER: &str = "import torch\nimport torch.nn as nn\n\n\nclass Layer(nn.Module):\n    def __init__(self):\n        super().__init__()\n\n    def forward(self, x):\n        return x * 2\n\n\nclass Decoder(nn.Module):\n    def __init__(self, *, transformer_dim: int, transformer: nn.Module, num_outputs: int = 3):\n        super().__init__()\n        self.dim = transformer_dim\n        self.transformer = transformer\n        self.twice = Layer()\n        self.head = nn.Linear(transformer_dim, num_outputs)\n\n    def forward(self, x, multimask_output: bool):\n        h = self.transformer(x.mean() * torch.ones(2, self.dim))\n        out = self.head(self.twice(h))\n        if multimask_output:\n            return out\n        return out[:, :1]\n";

const BUILD: &str = "from decoder import Decoder\nfrom transformer import Transformer\n\n\ndef build():\n    prompt_embed_dim = 16\n    return Decoder(\n        transformer_dim=prompt_embed_dim,\n        transformer=Transformer(depth=2, embedding_dim=prompt_embed_dim),\n    )\n";

/// `transformer=Transformer(depth=2, embedding_dim=prompt_embed_dim)` at the call site becomes
/// that call in `get_init_inputs()`, its local folded, the class (and its own `Layer`, renamed
/// beside the decoder's `Layer`) inlined; `multimask_output: bool` gets `False`. The program
/// runs as KernelBench runs it.
#[test]
fn a_constructor_call_argument_builds_the_repository_class() {
    let rows = extract(&[
        ("transformer.py", TRANSFORMER),
        ("decoder.py", DECODER),
        ("build.py", BUILD),
    ]);
    let decoder = row(&rows, "Decoder");
    assert_eq!(
        decoder.arg_sources,
        vec![
            "transformer_dim=16: call build.py:7 (local prompt_embed_dim)",
            "transformer=Transformer(depth=2, embedding_dim=16): call build.py:7",
        ]
    );
    let p = ok_program(&rows, "Decoder");
    assert!(p.contains("\nclass Transformer(nn.Module):"), "{p}");
    assert!(p.contains("\nclass Layer_transformer(nn.Module):"), "{p}");
    assert!(p.contains("Layer_transformer(embedding_dim)"), "{p}");
    assert!(
        p.ends_with(
            "def get_inputs():\n    return [torch.rand([4, 4, 4, 4]), False]\n\n\ndef get_init_inputs():\n    return [16, Transformer(depth=2, embedding_dim=16)]\n"
        ),
        "{p}"
    );
    assert!(
        decoder
            .deps
            .iter()
            .any(|d| d == "transformer.py::Transformer"),
        "{:?}",
        decoder.deps
    );
    assert_eq!(crate::common::cpython::run_verdicts(&[p]), vec![None]);
}

/// The built class keeps the name the program gives it when a definition of the entry's file
/// takes its own: `get_init_inputs()` calls it by the new name.
#[test]
fn a_renamed_argument_class_is_called_by_its_program_name() {
    let decoder = DECODER.replace("Layer", "Transformer");
    let rows = extract(&[
        ("transformer.py", TRANSFORMER),
        ("decoder.py", &decoder),
        ("build.py", BUILD),
    ]);
    let p = ok_program(&rows, "Decoder");
    assert!(
        p.contains("\nclass Transformer_transformer(nn.Module):"),
        "{p}"
    );
    assert!(
        p.ends_with("return [16, Transformer_transformer(depth=2, embedding_dim=16)]\n"),
        "{p}"
    );
    assert_eq!(crate::common::cpython::run_verdicts(&[p]), vec![None]);
}

/// A class built at the call site that cannot be inlined (it needs a package off the
/// allow-list) leaves its argument guessed, the provenance saying why; a call of a class that
/// is not the repository's (torch's `GELU` imported bare) is no constructor argument either.
#[test]
fn an_argument_class_that_cannot_be_inlined_is_guessed_with_the_reason() {
    let heavy = "import torch.nn as nn\nimport fancy_kernels\n\n\nclass Heavy(nn.Module):\n    def __init__(self, dim):\n        super().__init__()\n\n    def forward(self, x):\n        return fancy_kernels.run(x)\n";
    let wrapper = "import torch.nn as nn\nfrom torch.nn import GELU\nfrom heavy import Heavy\n\n\nclass Wrapper(nn.Module):\n    def __init__(self, dim, inner, act):\n        super().__init__()\n        self.fc = nn.Linear(dim, dim)\n\n    def forward(self, x):\n        return self.fc(x)\n\n\ndef build():\n    return Wrapper(8, Heavy(dim=8), GELU())\n";
    let rows = extract(&[("heavy.py", heavy), ("wrapper.py", wrapper)]);
    let w = row(&rows, "Wrapper");
    assert_eq!(w.status, ModuleStatus::Ok, "{:?}", w.reason);
    assert_eq!(
        w.arg_sources,
        vec![
            "dim=8: call wrapper.py:16",
            "inner=4: guess (Heavy(dim=8) not inlined: import_not_allowed: fancy_kernels)",
            "act=torch.nn.ReLU(): guess (`GELU()` is not constant at call wrapper.py:16)",
        ]
    );
    let p = w.program.as_deref().unwrap();
    assert!(!p.contains("class Heavy"), "{p}");
}

/// A program that the built class makes too large is made without it, the argument guessed
/// with the reason.
#[test]
fn an_argument_class_that_makes_the_program_too_large_is_guessed() {
    let files = [
        ("transformer.py", TRANSFORMER),
        ("decoder.py", DECODER),
        ("build.py", BUILD),
    ];
    let full = row(&extract(&files), "Decoder").lines;
    let cfg = ksmith_extract::ExtractConfig {
        max_lines: full - 1,
        ..Default::default()
    };
    let rows = extract_with(&files, &cfg);
    let decoder = row(&rows, "Decoder");
    assert_eq!(decoder.status, ModuleStatus::Ok, "{:?}", decoder.reason);
    assert_eq!(
        decoder.arg_sources[1],
        format!(
            "transformer=4: guess (Transformer(depth=2, embedding_dim=16) not inlined: too_large: {full} lines > {})",
            full - 1
        )
    );
    assert!(
        !decoder
            .program
            .as_deref()
            .unwrap()
            .contains("class Transformer")
    );
}

/// A model built from a configuration dataclass, as Whisper's `Whisper(dims: ModelDimensions)`;
/// its `__main__` block builds it with literal values.
const CONFIGURED: &str = "import torch\nimport torch.nn as nn\nfrom dataclasses import dataclass\n\n\n@dataclass\nclass Dims:\n    width: int\n    depth: int = 2\n\n\nclass Net(nn.Module):\n    def __init__(self, dims: Dims):\n        super().__init__()\n        self.layers = nn.Sequential(*[nn.Linear(dims.width, dims.width) for _ in range(dims.depth)])\n\n    def forward(self, x):\n        return self.layers(x)\n\n\nif __name__ == \"__main__\":\n    net = Net(Dims(width=64, depth=3))\n";

/// `Net(Dims(width=64, depth=3))` at a call site is a configuration object the repository
/// gives: that call in `get_init_inputs()` (the probe takes it apart into its fields), the
/// dataclass inlined.
#[test]
fn a_configuration_object_at_a_call_site_is_that_call() {
    let rows = extract(&[("net.py", CONFIGURED)]);
    let net = row(&rows, "Net");
    assert_eq!(
        net.arg_sources,
        vec!["dims=Dims(width=64, depth=3): call net.py:22"]
    );
    let p = ok_program(&rows, "Net");
    assert!(p.contains("@dataclass\nclass Dims:\n"), "{p}");
    // (the guessed input is the probe's to repair: 4 wide against a width of 64)
    assert!(p.ends_with("return [Dims(width=64, depth=3)]\n"), "{p}");
}

/// A configuration class of another file that the model names only in an annotation is
/// inlined all the same (the probe builds it from its fields).
#[test]
fn a_configuration_class_named_only_in_an_annotation_is_inlined() {
    let (dims, net) = CONFIGURED.split_at(CONFIGURED.find("class Net").unwrap());
    let net = net.split("\n\nif __name__").next().unwrap();
    let net = format!("import torch\nimport torch.nn as nn\nfrom dims import Dims\n\n\n{net}\n");
    let rows = extract(&[("dims.py", dims), ("net.py", &net)]);
    let p = ok_program(&rows, "Net");
    assert!(p.contains("@dataclass\nclass Dims:\n"), "{p}");
    assert_eq!(row(&rows, "Net").arg_sources, vec!["dims=[4, 4]: guess"]);
}
