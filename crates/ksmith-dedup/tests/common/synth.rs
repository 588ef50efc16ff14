//! A generator of synthetic KernelBench-format modules with planted duplicates, for the dedup
//! tests and benchmark. Everything here is written for this project.

#![allow(dead_code)]

use ksmith_embed::hashing::SplitMix;

/// How a planted copy differs from its original.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Variant {
    /// The original.
    Original,
    /// Character-for-character copy.
    Exact,
    /// Whitespace, line breaks, comments and docstrings changed.
    Reformatted,
    /// Identifiers renamed and literal values changed.
    Renamed,
    /// One literal changed and one statement added.
    Edited,
}

/// One generated module.
#[derive(Debug, Clone)]
pub(crate) struct Generated {
    /// Index of its family (original and copies share it).
    pub family: usize,
    /// How it was made.
    pub variant: Variant,
    /// The program.
    pub program: String,
}

const NAMES: &[&str] = &[
    "x", "h", "out", "y", "z", "feat", "act", "hidden", "t", "v", "res", "tmp", "u", "emb", "sig",
];
const ATTRS: &[&str] = &[
    "proj", "conv", "norm", "fc", "lin", "layer", "block", "mix", "gate", "head", "enc", "dec",
    "pool", "drop", "bn", "ln", "up", "down", "inner", "outer", "mlp", "attn", "core",
];

/// A layer: text of the `__init__` line (with `{a}` for the attribute and `{c}` for channels)
/// and of the forward line (with `{a}`, `{x}`).
struct Layer {
    init: &'static str,
    fwd: &'static str,
}

const LAYERS: &[Layer] = &[
    Layer {
        init: "self.{a} = nn.Linear({c}, {c}, bias={b})",
        fwd: "{x} = self.{a}({x})",
    },
    Layer {
        init: "self.{a} = nn.Conv1d({c}, {c}, kernel_size={k}, padding={p})",
        fwd: "{x} = self.{a}({x})",
    },
    Layer {
        init: "self.{a} = nn.Conv2d({c}, {c}, {k}, stride=1, padding={p})",
        fwd: "{x} = self.{a}({x})",
    },
    Layer {
        init: "self.{a} = nn.BatchNorm2d({c}, eps={e})",
        fwd: "{x} = self.{a}({x})",
    },
    Layer {
        init: "self.{a} = nn.LayerNorm({c})",
        fwd: "{x} = self.{a}({x})",
    },
    Layer {
        init: "self.{a} = nn.GroupNorm({g}, {c})",
        fwd: "{x} = self.{a}({x})",
    },
    Layer {
        init: "self.{a} = nn.Dropout(p={e})",
        fwd: "{x} = self.{a}({x})",
    },
    Layer {
        init: "self.{a} = nn.MaxPool2d({k}, stride={s})",
        fwd: "{x} = self.{a}({x})",
    },
    Layer {
        init: "self.{a} = nn.AvgPool1d({k})",
        fwd: "{x} = self.{a}({x})",
    },
    Layer {
        init: "self.{a} = nn.Embedding({c}, {c})",
        fwd: "{x} = self.{a}({x}.long().clamp(0, {c1}))",
    },
    Layer {
        init: "self.{a} = nn.GRU({c}, {c}, batch_first=True)",
        fwd: "{x}, _ = self.{a}({x})",
    },
    Layer {
        init: "self.{a} = nn.LSTM({c}, {c}, num_layers={g})",
        fwd: "{x}, _ = self.{a}({x})",
    },
    Layer {
        init: "self.{a} = nn.Upsample(scale_factor={s}, mode='nearest')",
        fwd: "{x} = self.{a}({x})",
    },
    Layer {
        init: "self.{a} = nn.Parameter(torch.randn({c}, {c}) * {e})",
        fwd: "{x} = torch.matmul({x}, self.{a})",
    },
    Layer {
        init: "self.{a} = nn.Parameter(torch.ones({c}))",
        fwd: "{x} = {x} * self.{a} + {e}",
    },
    Layer {
        init: "self.{a} = nn.PReLU({c})",
        fwd: "{x} = self.{a}({x})",
    },
    Layer {
        init: "self.{a} = nn.ConvTranspose2d({c}, {c}, {k}, stride={s})",
        fwd: "{x} = self.{a}({x})",
    },
    Layer {
        init: "self.{a} = nn.InstanceNorm2d({c}, affine=True)",
        fwd: "{x} = self.{a}({x})",
    },
];

const FUNCS: &[&str] = &[
    "{x} = F.relu({x})",
    "{x} = F.gelu({x})",
    "{x} = torch.sigmoid({x}) * {x}",
    "{x} = torch.tanh({x})",
    "{x} = F.silu({x})",
    "{x} = F.leaky_relu({x}, negative_slope={e})",
    "{x} = torch.softmax({x}, dim={d})",
    "{x} = F.log_softmax({x}, dim={d})",
    "{x} = torch.clamp({x}, min=-{s}, max={s})",
    "{x} = {x} * {e} + {s}",
    "{x} = {x}.transpose({d}, -1).contiguous()",
    "{x} = torch.logsumexp({x}, dim={d}, keepdim=True)",
    "{x} = {x}.mean(dim={d}, keepdim=True)",
    "{x} = torch.exp(-{x}.abs())",
    "{x} = F.normalize({x}, p=2.0, dim={d})",
    "{x} = F.hardtanh({x}, -{s}.0, {s}.0)",
    "{x} = {x} @ {x}.transpose(-1, -2)",
    "{x} = torch.cumsum({x}, dim={d})",
    "{x} = F.dropout({x}, p={e}, training=self.training)",
    "{x} = torch.where({x} > 0, {x}, {x} * {e})",
    "{x} = F.interpolate({x}, scale_factor={s}, mode='nearest')",
    "{x} = torch.cat([{x}, {x} * {e}], dim={d})",
    "{x} = F.softplus({x}, beta={s})",
    "{x} = {x} - {x}.max(dim={d}, keepdim=True)[0]",
    "{x} = F.elu({x}, alpha={e})",
    "{x} = torch.flatten({x}, 1)",
    "{x} = F.mish({x})",
    "{x} = torch.einsum('bij,bjk->bik', {x}, {x})",
];

fn pick<'a>(rng: &mut SplitMix, xs: &'a [&'a str]) -> &'a str {
    xs[rng.below(xs.len())]
}

/// A random original module.
pub(crate) fn original(rng: &mut SplitMix) -> String {
    let n_layers = 2 + rng.below(5);
    let n_funcs = 2 + rng.below(6);
    let c = 8 * (1 + rng.below(16));
    let mut init = Vec::new();
    let mut fwd = Vec::new();
    let mut used = Vec::new();
    let var = pick(rng, NAMES);
    for i in 0..n_layers {
        let l = &LAYERS[rng.below(LAYERS.len())];
        let mut a = pick(rng, ATTRS).to_string();
        if used.contains(&a) {
            a = format!("{a}{i}");
        }
        used.push(a.clone());
        init.push(fill(l.init, &a, var, c, rng));
        fwd.push((rng.below(100), fill(l.fwd, &a, var, c, rng)));
    }
    for _ in 0..n_funcs {
        let f = pick(rng, FUNCS);
        fwd.push((rng.below(100), fill(f, "", var, c, rng)));
    }
    fwd.sort_by_key(|f| f.0);
    let arg = pick(
        rng,
        &["in_features", "channels", "dim", "width", "n_hidden"],
    );
    let mut s = String::new();
    s.push_str("import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n\n");
    s.push_str(&format!(
        "class Model(nn.Module):\n    def __init__(self, {arg}={c}):\n        super().__init__()\n"
    ));
    for l in &init {
        s.push_str(&format!("        {l}\n"));
    }
    s.push_str(&format!("\n    def forward(self, {var}):\n"));
    for (_, l) in &fwd {
        s.push_str(&format!("        {l}\n"));
    }
    s.push_str(&format!("        return {var}\n\n\n"));
    let b = 1 + rng.below(16);
    s.push_str(&format!(
        "def get_inputs():\n    return [torch.randn({b}, {c}, {c})]\n\n\ndef get_init_inputs():\n    return [{c}]\n"
    ));
    s
}

fn fill(t: &str, a: &str, x: &str, c: usize, rng: &mut SplitMix) -> String {
    t.replace("{a}", a)
        .replace("{x}", x)
        .replace("{c1}", &(c - 1).to_string())
        .replace("{c}", &c.to_string())
        .replace("{k}", &(1 + 2 * rng.below(3)).to_string())
        .replace("{p}", &rng.below(3).to_string())
        .replace("{s}", &(1 + rng.below(4)).to_string())
        .replace("{g}", &(1 + rng.below(4)).to_string())
        .replace("{d}", &(rng.below(3) as i64 - 1).to_string())
        .replace("{e}", &format!("0.{}", 1 + rng.below(9)))
        .replace("{b}", if rng.below(2) == 0 { "True" } else { "False" })
}

/// Whitespace, comments and a docstring changed; same tokens.
pub(crate) fn reformatted(src: &str, rng: &mut SplitMix) -> String {
    let mut out = String::new();
    for line in src.lines() {
        if line.trim_start().starts_with("class Model") {
            out.push_str(&format!(
                "{line}\n  \"\"\"Generated module {}.\"\"\"\n",
                rng.below(1000)
            ));
            continue;
        }
        let indent = line.len() - line.trim_start().len();
        // 4-space indent -> 2-space indent, spaces around commas changed, a comment added.
        let body = line.trim_start().replace(", ", " ,  ");
        out.push_str(&" ".repeat(indent / 2));
        out.push_str(&body);
        if !body.is_empty() && rng.below(3) == 0 {
            out.push_str("   # tweak");
        }
        out.push('\n');
        if rng.below(4) == 0 {
            out.push('\n');
        }
    }
    out
}

/// Identifiers renamed and literal values changed; same structure.
pub(crate) fn renamed(src: &str, rng: &mut SplitMix) -> String {
    let suffix = format!("_{}", rng.below(100));
    let mut out = src.to_string();
    for a in ATTRS {
        out = out.replace(&format!("self.{a}"), &format!("self.m_{a}{suffix}"));
    }
    let toks = ksmith_embed::lexer::tokenize(&out);
    let mut res = String::new();
    let mut last = 0;
    for t in toks {
        if t.text.is_empty() {
            continue;
        }
        let start = t.text.as_ptr() as usize - out.as_ptr() as usize;
        res.push_str(&out[last..start]);
        let replaced = match t.kind {
            ksmith_embed::lexer::TokenKind::Name if NAMES.contains(&t.text) => {
                format!("v_{}", t.text)
            }
            ksmith_embed::lexer::TokenKind::Number if !t.text.contains('.') => {
                let v: u64 = t.text.parse().unwrap_or(1);
                (v + 2).to_string()
            }
            _ => t.text.to_string(),
        };
        res.push_str(&replaced);
        last = start + t.text.len();
    }
    res.push_str(&out[last..]);
    res
}

/// One literal changed and one statement added to the forward pass.
pub(crate) fn edited(src: &str, rng: &mut SplitMix) -> String {
    let mut out = String::new();
    let mut done_literal = false;
    let mut lines: Vec<String> = src.lines().map(str::to_string).collect();
    if let Some(pos) = lines
        .iter()
        .position(|l| l.trim_start().starts_with("return") && l.starts_with("        "))
    {
        let var = lines[pos]
            .trim_start()
            .trim_start_matches("return ")
            .to_string();
        let stmt = format!("        {var} = {var} * {}.5", 1 + rng.below(3));
        lines.insert(pos, stmt);
    }
    for l in lines {
        if !done_literal && l.contains("nn.") && l.contains(", ") {
            out.push_str(&l.replacen(", ", ", 1 + ", 1));
            done_literal = true;
        } else {
            out.push_str(&l);
        }
        out.push('\n');
    }
    out
}

/// `n` modules: originals and planted copies (about `dup_share` of all modules are copies,
/// split evenly over the four kinds), shuffled deterministically by `seed`.
pub(crate) fn corpus(n: usize, dup_share: f64, seed: u64) -> Vec<Generated> {
    let mut rng = SplitMix::new(seed);
    let n_dups = (n as f64 * dup_share) as usize;
    let n_orig = n - n_dups;
    let mut out: Vec<Generated> = (0..n_orig)
        .map(|f| Generated {
            family: f,
            variant: Variant::Original,
            program: original(&mut rng),
        })
        .collect();
    let kinds = [
        Variant::Exact,
        Variant::Reformatted,
        Variant::Renamed,
        Variant::Edited,
    ];
    for d in 0..n_dups {
        let family = rng.below(n_orig);
        let kind = kinds[d % kinds.len()];
        let src = out[family].program.clone();
        let program = match kind {
            Variant::Exact => src,
            Variant::Reformatted => reformatted(&src, &mut rng),
            Variant::Renamed => renamed(&src, &mut rng),
            _ => edited(&src, &mut rng),
        };
        out.push(Generated {
            family,
            variant: kind,
            program,
        });
    }
    // Deterministic shuffle.
    for i in (1..out.len()).rev() {
        let j = rng.below(i + 1);
        out.swap(i, j);
    }
    out
}
