//! Functional family and difficulty level of a module, each with the rule that decided it.
//!
//! The family comes from the operators the program calls (canonical names: `conv2d`, `relu`,
//! `@`, ...), checked in a fixed order from the most specific to the most generic, and from the
//! class name for losses. The level is 1 for a single operator, 2 for a fused sequence, 3 for a
//! block or network (a transformer or residual block, recurrent layers with more around them,
//! several heavy layers, loops over layers, several classes, or many operators).

use ksmith_embed::Program;
use ksmith_embed::ops::{ProgramSummary, summarize};

/// The families, in the order their rules are tried.
pub const FAMILIES: &[&str] = &[
    "transformer_block",
    "attention",
    "recurrent",
    "loss",
    "residual_block",
    "convolution",
    "embedding",
    "normalization",
    "pooling",
    "upsampling",
    "linear_mlp",
    "matmul",
    "softmax",
    "activation",
    "dropout",
    "distance",
    "reduction",
    "padding",
    "data_movement",
    "elementwise_fusion",
    "other",
];

const ATTENTION: &[&str] = &["multiheadattention", "scaled_dot_product_attention"];
const TRANSFORMER: &[&str] = &[
    "transformer",
    "transformerencoderlayer",
    "transformerdecoderlayer",
    "transformerencoder",
    "transformerdecoder",
];
const RECURRENT: &[&str] = &["lstm", "gru", "rnn", "lstmcell", "grucell", "rnncell"];
const CONV: &[&str] = &[
    "conv1d",
    "conv2d",
    "conv3d",
    "convtranspose1d",
    "convtranspose2d",
    "convtranspose3d",
    "conv_transpose1d",
    "conv_transpose2d",
    "conv_transpose3d",
    "lazyconv2d",
    "unfold",
    "fold",
];
const EMBEDDING: &[&str] = &["embedding", "embeddingbag"];
const NORM: &[&str] = &[
    "batchnorm1d",
    "batchnorm2d",
    "batchnorm3d",
    "layernorm",
    "groupnorm",
    "instancenorm1d",
    "instancenorm2d",
    "instancenorm3d",
    "rmsnorm",
    "localresponsenorm",
    "layer_norm",
    "batch_norm",
    "group_norm",
    "instance_norm",
    "rms_norm",
    "normalize",
    "syncbatchnorm",
];
const POOL: &[&str] = &[
    "maxpool1d",
    "maxpool2d",
    "maxpool3d",
    "avgpool1d",
    "avgpool2d",
    "avgpool3d",
    "adaptiveavgpool1d",
    "adaptiveavgpool2d",
    "adaptiveavgpool3d",
    "adaptivemaxpool1d",
    "adaptivemaxpool2d",
    "adaptivemaxpool3d",
    "max_pool1d",
    "max_pool2d",
    "max_pool3d",
    "avg_pool1d",
    "avg_pool2d",
    "avg_pool3d",
    "adaptive_avg_pool1d",
    "adaptive_avg_pool2d",
    "adaptive_max_pool2d",
    "lppool2d",
];
const UPSAMPLE: &[&str] = &[
    "upsample",
    "interpolate",
    "pixelshuffle",
    "pixel_shuffle",
    "pixelunshuffle",
    "pixel_unshuffle",
    "upsamplingbilinear2d",
    "upsamplingnearest2d",
    "grid_sample",
];
const LINEAR: &[&str] = &["linear", "bilinear", "lazylinear"];
const MATMUL: &[&str] = &[
    "matmul", "bmm", "mm", "einsum", "@", "baddbmm", "addmm", "mv", "outer",
];
const SOFTMAX: &[&str] = &["softmax", "log_softmax", "softmin", "logsoftmax"];
const ACTIVATION: &[&str] = &[
    "relu",
    "relu6",
    "gelu",
    "sigmoid",
    "tanh",
    "silu",
    "swish",
    "leakyrelu",
    "leaky_relu",
    "elu",
    "selu",
    "celu",
    "softplus",
    "mish",
    "hardswish",
    "hardsigmoid",
    "hardtanh",
    "prelu",
    "rrelu",
    "glu",
    "logsigmoid",
    "softsign",
    "tanhshrink",
    "threshold",
    "hardshrink",
    "softshrink",
];
const DROPOUT: &[&str] = &[
    "dropout",
    "dropout1d",
    "dropout2d",
    "dropout3d",
    "alphadropout",
    "featurealphadropout",
];
const REDUCTION: &[&str] = &[
    "sum",
    "mean",
    "max",
    "min",
    "prod",
    "argmax",
    "argmin",
    "norm",
    "logsumexp",
    "cumsum",
    "cumprod",
    "var",
    "std",
    "amax",
    "amin",
    "all",
    "any",
    "median",
];
const DISTANCE: &[&str] = &[
    "cosine_similarity",
    "pairwise_distance",
    "cdist",
    "cosinesimilarity",
    "pairwisedistance",
];
const PADDING: &[&str] = &[
    "pad",
    "zeropad2d",
    "reflectionpad1d",
    "reflectionpad2d",
    "replicationpad1d",
    "replicationpad2d",
    "constantpad1d",
    "constantpad2d",
    "circularpad2d",
];
const DATA_MOVEMENT: &[&str] = &[
    "view",
    "reshape",
    "permute",
    "transpose",
    "flatten",
    "unflatten",
    "cat",
    "stack",
    "split",
    "chunk",
    "gather",
    "scatter",
    "index_select",
    "squeeze",
    "unsqueeze",
    "expand",
    "repeat",
    "roll",
    "flip",
    "narrow",
    "contiguous",
    "t",
    "movedim",
    "tile",
];
const ELEMENTWISE: &[&str] = &[
    "+",
    "-",
    "*",
    "/",
    "**",
    "add",
    "sub",
    "mul",
    "div",
    "exp",
    "log",
    "sqrt",
    "rsqrt",
    "abs",
    "pow",
    "clamp",
    "clip",
    "where",
    "neg",
    "reciprocal",
    "sin",
    "cos",
    "square",
    "sign",
    "floor",
    "ceil",
    "round",
    "erf",
    "log1p",
    "expm1",
    "maximum",
    "minimum",
    "lerp",
    "addcmul",
    "addcdiv",
];
/// Calls that compute nothing (shape queries, conversions, containers, constructors).
const NOT_COMPUTE: &[&str] = &[
    "size",
    "dim",
    "to",
    "float",
    "double",
    "half",
    "long",
    "int",
    "bool",
    "item",
    "detach",
    "clone",
    "cpu",
    "cuda",
    "type",
    "numel",
    "sequential",
    "modulelist",
    "moduledict",
    "parameter",
    "identity",
    "register_buffer",
    "zeros",
    "ones",
    "randn",
    "rand",
    "empty",
    "arange",
    "tensor",
    "zeros_like",
    "ones_like",
    "new_zeros",
    "full",
    "eye",
    "linspace",
    "apply",
    "children",
    "modules",
    "parameters",
    "append",
    "extend",
    "items",
    "keys",
    "values",
    "format",
    "init",
    "kaiming_normal_",
    "xavier_uniform_",
    "normal_",
    "zero_",
    "fill_",
    "uniform_",
    "constant_",
    "copy_",
    "data",
    "shape",
];
const HEAVY: &[&[&str]] = &[
    CONV,
    LINEAR,
    ATTENTION,
    RECURRENT,
    NORM,
    EMBEDDING,
    TRANSFORMER,
];

fn is_loss(name: &str) -> bool {
    name.ends_with("loss")
        || matches!(
            name,
            "cross_entropy"
                | "mse_loss"
                | "l1_loss"
                | "nll_loss"
                | "binary_cross_entropy"
                | "binary_cross_entropy_with_logits"
                | "kl_div"
                | "smooth_l1_loss"
                | "huber_loss"
                | "margin_ranking_loss"
                | "triplet_margin_loss"
                | "cosine_embedding_loss"
                | "hinge_embedding_loss"
                | "ctc_loss"
                | "poisson_nll_loss"
        )
}

/// The family and level of one module, with their rules.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Label {
    /// The family (one of [`FAMILIES`]).
    pub family: &'static str,
    /// The rule that decided it (e.g. `op:conv2d`, `class_name:loss`).
    pub family_rule: String,
    /// 1, 2 or 3.
    pub level: u8,
    /// The rule that decided it (e.g. `single_op:relu`, `heavy_layers:3`).
    pub level_rule: String,
}

/// Labels a program given its class name in the repository.
pub fn label(program: &str, class_name: &str) -> Label {
    let p = Program::parse(program);
    let s = summarize(&p);
    label_summary(&s, class_name, &p)
}

fn has(names: &[&str], set: &[&str]) -> Option<String> {
    names
        .iter()
        .find(|n| set.contains(n))
        .map(|n| n.to_string())
}

/// Whether the forward adds a saved input back (`x + identity`, `out += residual`): a binary
/// `+`/`+=` whose operands are names, and at least two heavy layers.
fn residual(p: &Program<'_>) -> bool {
    use ksmith_embed::lexer::TokenKind;
    let t = &p.tokens;
    (1..t.len().saturating_sub(1)).any(|i| {
        (t[i].is_op("+") || t[i].is_op("+="))
            && t[i - 1].kind == TokenKind::Name
            && t[i + 1].kind == TokenKind::Name
            && !p.is_external(t[i + 1].text)
            && t.get(i + 2).is_none_or(|n| !n.is_op("(") && !n.is_op("."))
    })
}

fn label_summary(s: &ProgramSummary, class_name: &str, p: &Program<'_>) -> Label {
    let names: Vec<&str> = s.ops.iter().map(|o| o.name.as_str()).collect();
    let compute: Vec<&str> = names
        .iter()
        .copied()
        .filter(|n| !NOT_COMPUTE.contains(n))
        .collect();
    let mut distinct = compute.clone();
    distinct.sort_unstable();
    distinct.dedup();
    let heavy = compute
        .iter()
        .filter(|n| HEAVY.iter().any(|set| set.contains(n)))
        .count();
    let has_attention_pattern =
        compute.iter().any(|n| SOFTMAX.contains(n)) && compute.iter().any(|n| MATMUL.contains(n));
    let is_residual = residual(p) && heavy >= 2;
    let class_lower = class_name.to_ascii_lowercase();

    let (family, family_rule): (&'static str, String) = if let Some(op) = has(&compute, TRANSFORMER)
    {
        ("transformer_block", format!("op:{op}"))
    } else if (has(&compute, ATTENTION).is_some() || has_attention_pattern)
        && has(&compute, NORM).is_some()
        && has(&compute, LINEAR).is_some()
    {
        ("transformer_block", "attention+norm+linear".into())
    } else if let Some(op) = has(&compute, ATTENTION) {
        ("attention", format!("op:{op}"))
    } else if has_attention_pattern {
        ("attention", "softmax+matmul".into())
    } else if let Some(op) = has(&compute, RECURRENT) {
        ("recurrent", format!("op:{op}"))
    } else if let Some(op) = compute.iter().find(|n| is_loss(n)) {
        ("loss", format!("op:{op}"))
    } else if class_lower.ends_with("loss") {
        ("loss", "class_name:loss".into())
    } else if is_residual {
        ("residual_block", "skip_add+heavy_layers".into())
    } else if let Some(op) = has(&compute, CONV) {
        ("convolution", format!("op:{op}"))
    } else if let Some(op) = has(&compute, EMBEDDING) {
        ("embedding", format!("op:{op}"))
    } else if let Some(op) = has(&compute, NORM) {
        ("normalization", format!("op:{op}"))
    } else if let Some(op) = has(&compute, POOL) {
        ("pooling", format!("op:{op}"))
    } else if let Some(op) = has(&compute, UPSAMPLE) {
        ("upsampling", format!("op:{op}"))
    } else if let Some(op) = has(&compute, LINEAR) {
        ("linear_mlp", format!("op:{op}"))
    } else if let Some(op) = has(&compute, MATMUL) {
        ("matmul", format!("op:{op}"))
    } else if let Some(op) = has(&compute, SOFTMAX) {
        ("softmax", format!("op:{op}"))
    } else if let Some(op) = has(&compute, ACTIVATION) {
        ("activation", format!("op:{op}"))
    } else if let Some(op) = has(&compute, DROPOUT) {
        ("dropout", format!("op:{op}"))
    } else if let Some(op) = has(&compute, DISTANCE) {
        ("distance", format!("op:{op}"))
    } else if let Some(op) = has(&compute, REDUCTION) {
        ("reduction", format!("op:{op}"))
    } else if let Some(op) = has(&compute, PADDING) {
        ("padding", format!("op:{op}"))
    } else if let Some(op) = has(&compute, DATA_MOVEMENT) {
        ("data_movement", format!("op:{op}"))
    } else if let Some(op) = has(&compute, ELEMENTWISE) {
        ("elementwise_fusion", format!("op:{op}"))
    } else {
        ("other", "no_known_op".into())
    };

    let (level, level_rule): (u8, String) =
        if matches!(family, "transformer_block" | "residual_block") {
            (3, format!("family:{family}"))
        } else if s.classes >= 2 {
            (3, format!("classes:{}", s.classes))
        } else if heavy >= 3 {
            (3, format!("heavy_layers:{heavy}"))
        } else if s.loops > 0 && heavy >= 1 {
            (3, "loop_over_layers".into())
        } else if compute.len() >= 8 {
            (3, format!("ops:{}", compute.len()))
        } else if compute.len() <= 1 {
            match compute.first() {
                Some(op) => (1, format!("single_op:{op}")),
                None => (1, "no_compute_op".into()),
            }
        } else if distinct.len() == 1 {
            (1, format!("repeated_single_op:{}", distinct[0]))
        } else {
            (2, format!("fused_ops:{}", compute.len()))
        };
    Label {
        family,
        family_rule,
        level,
        level_rule,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn module(init: &[&str], forward: &[&str]) -> String {
        let mut s = String::from(
            "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\nclass Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n",
        );
        for l in init {
            s.push_str(&format!("        {l}\n"));
        }
        s.push_str("    def forward(self, x, y=None):\n");
        for l in forward {
            s.push_str(&format!("        {l}\n"));
        }
        s.push_str("\ndef get_inputs():\n    return [torch.randn(2, 3, 8, 8)]\n\ndef get_init_inputs():\n    return []\n");
        s
    }

    #[test]
    fn single_operators_are_level_one_with_their_family() {
        let cases = [
            (
                module(&[], &["return torch.relu(x)"]),
                "activation",
                "single_op:relu",
            ),
            (
                module(&["self.c = nn.Conv2d(3, 8, 3)"], &["return self.c(x)"]),
                "convolution",
                "single_op:conv2d",
            ),
            (
                module(&[], &["return torch.softmax(x, dim=-1)"]),
                "softmax",
                "single_op:softmax",
            ),
            (
                module(&[], &["return x.sum(dim=1)"]),
                "reduction",
                "single_op:sum",
            ),
            (
                module(&["self.p = nn.MaxPool2d(2)"], &["return self.p(x)"]),
                "pooling",
                "single_op:maxpool2d",
            ),
            (
                module(&[], &["return F.interpolate(x, scale_factor=2)"]),
                "upsampling",
                "single_op:interpolate",
            ),
            (module(&[], &["return x @ y"]), "matmul", "single_op:@"),
            (
                module(&["self.e = nn.Embedding(10, 4)"], &["return self.e(x)"]),
                "embedding",
                "single_op:embedding",
            ),
            (
                module(&[], &["return F.dropout(x, 0.1)"]),
                "dropout",
                "single_op:dropout",
            ),
            (
                module(&[], &["return F.pad(x, (1, 1))"]),
                "padding",
                "single_op:pad",
            ),
            (
                module(&[], &["return x.permute(0, 2, 1)"]),
                "data_movement",
                "single_op:permute",
            ),
            (
                module(&[], &["return F.cosine_similarity(x, y)"]),
                "distance",
                "single_op:cosine_similarity",
            ),
            (
                module(&["self.l = nn.LayerNorm(8)"], &["return self.l(x)"]),
                "normalization",
                "single_op:layernorm",
            ),
        ];
        for (src, family, rule) in cases {
            let l = label(&src, "Model");
            assert_eq!(l.family, family, "{src}");
            assert_eq!(l.level, 1, "{l:?}");
            assert_eq!(l.level_rule, rule);
            assert!(l.family_rule.starts_with("op:"), "{l:?}");
        }
    }

    #[test]
    fn fused_sequences_are_level_two() {
        let l = label(
            &module(
                &["self.c = nn.Conv2d(3, 8, 3)"],
                &["x = self.c(x)", "x = F.relu(x)", "return x * 2.0"],
            ),
            "M",
        );
        assert_eq!((l.family, l.level), ("convolution", 2));
        assert_eq!(l.level_rule, "fused_ops:3");
        let l = label(&module(&[], &["x = torch.exp(x)", "return x + 1.0"]), "M");
        assert_eq!((l.family, l.level), ("elementwise_fusion", 2));
        let l = label(
            &module(
                &["self.a = nn.Linear(4, 4)", "self.b = nn.Linear(4, 4)"],
                &["return self.b(F.gelu(self.a(x)))"],
            ),
            "M",
        );
        assert_eq!((l.family, l.level), ("linear_mlp", 2));
    }

    #[test]
    fn blocks_and_networks_are_level_three() {
        let attn = module(
            &["self.q = nn.Linear(8, 8)", "self.n = nn.LayerNorm(8)"],
            &[
                "a = torch.softmax(self.q(x) @ x.transpose(-1, -2), dim=-1)",
                "return self.n(a @ x)",
            ],
        );
        let l = label(&attn, "Block");
        assert_eq!((l.family, l.level), ("transformer_block", 3));
        assert_eq!(l.family_rule, "attention+norm+linear");
        let res = module(
            &[
                "self.c1 = nn.Conv2d(8, 8, 3)",
                "self.c2 = nn.Conv2d(8, 8, 3)",
            ],
            &[
                "identity = x",
                "out = self.c2(F.relu(self.c1(x)))",
                "return out + identity",
            ],
        );
        let l = label(&res, "BasicBlock");
        assert_eq!((l.family, l.level), ("residual_block", 3));
        let rnn = module(
            &[
                "self.r = nn.LSTM(8, 8)",
                "self.o = nn.Linear(8, 2)",
                "self.e = nn.Embedding(9, 8)",
            ],
            &["h, _ = self.r(self.e(x))", "return self.o(h)"],
        );
        let l = label(&rnn, "Tagger");
        assert_eq!((l.family, l.level), ("recurrent", 3));
        assert_eq!(l.level_rule, "heavy_layers:3");
        let two = format!(
            "{}\nclass Helper(nn.Module):\n    pass\n",
            module(&[], &["return torch.relu(x)"])
        );
        assert_eq!(label(&two, "M").level_rule, "classes:2");
    }

    #[test]
    fn losses_by_operator_or_class_name() {
        let l = label(&module(&[], &["return F.mse_loss(x, y)"]), "M");
        assert_eq!((l.family, l.family_rule.as_str()), ("loss", "op:mse_loss"));
        let l = label(&module(&[], &["return ((x - y) ** 2).mean()"]), "FocalLoss");
        assert_eq!(
            (l.family, l.family_rule.as_str()),
            ("loss", "class_name:loss")
        );
        let l = label(&module(&[], &["return x"]), "M");
        assert_eq!(
            (l.family, l.level, l.level_rule.as_str()),
            ("other", 1, "no_compute_op")
        );
    }
}
