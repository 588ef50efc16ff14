//! Functional family and difficulty level of a module, each with the rule that decided it, and
//! whether it is too trivial to be a task.
//!
//! [`label_with_ops`] decides from what the module actually ran: the ATen operators one forward
//! call dispatched (recorded by probe, [`ksmith_embed::aten`]), with the operators its code calls
//! (static, on the entry class and the code it reaches) only for what ATen cannot tell: an
//! `nn.Linear` from a bare product, a recurrent layer the CPU decomposes into products, a skip
//! connection, a loss by its class name. Rules start with `aten:` or `static:`. The family is
//! checked in a fixed order from the most specific to the most generic. The level is 1 for one
//! compute operator (or one library call that dispatches a few, or one activation, loss or norm
//! written as arithmetic, as KernelBench's level 1 counts them), 2 for a fused sequence (one or
//! two layers with their epilogue: a GEMM and its activation, an MLP, conv-BN-ReLU), 3 for a
//! block or network (a transformer or residual block, three or more layers, norms not counted:
//! they fuse with the layer they feed). A forward that dispatched nothing is `data_movement`
//! whatever its code mentions. Without recorded operators, [`label`] decides from the program
//! text alone.

use ksmith_core::tables::OpCount;
use ksmith_embed::ops::{ProgramSummary, summarize};
use ksmith_embed::{Program, Slice};

use ksmith_embed::aten::{Kind, Profile, kind};

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
    /// Why the module is not a task by default (`no_compute`: views, copies and data movement
    /// only; `wrapper_of_argument`: it mostly calls a module given to its constructor); `None`
    /// for a real task.
    pub trivial: Option<String>,
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
    } else if is_loss_name(&class_lower) {
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
        trivial: compute.is_empty().then(|| "no_compute".to_string()),
        family,
        family_rule,
        level,
        level_rule,
    }
}

/// Labels a module from the ATen operators its forward dispatched (see the module
/// documentation); without any, the same as [`label`].
pub fn label_with_ops(program: &str, class_name: &str, aten: Option<&[OpCount]>) -> Label {
    let Some(aten) = aten else {
        let mut l = label(program, class_name);
        l.family_rule = format!("static:{}", l.family_rule);
        l.level_rule = format!("static:{}", l.level_rule);
        return l;
    };
    let p = Program::parse(program);
    let slice = Slice::of(&p);
    let view = p.view(slice.ranges().flat_map(|r| p.tokens[r].to_vec()).collect());
    let s = summarize(&view);
    let statics: Vec<&str> = s
        .ops
        .iter()
        .map(|o| o.name.as_str())
        .filter(|n| !NOT_COMPUTE.contains(n))
        .collect();
    let prof = Profile::of(aten.iter().map(|o| (o.op.as_str(), o.count)));
    let named = |names: &[&str]| aten.iter().any(|o| names.contains(&short(&o.op)));
    let first = |k: Kind| {
        aten.iter()
            .find(|o| kind(&o.op) == k)
            .map_or("?", |o| o.op.as_str())
            .to_string()
    };
    let ran = |k: Kind| prof.count(k) > 0;
    // Scores times values: batched products, or plain ones the code writes as products.
    let products = named(&["bmm", "baddbmm", "matmul"])
        || (prof.count(Kind::Matmul) >= 2
            && named(&["mm"])
            && statics
                .iter()
                .any(|n| matches!(*n, "@" | "matmul" | "einsum" | "bmm")));
    let attention = ran(Kind::Attention) || (ran(Kind::Softmax) && products);
    let linear = named(&["addmm", "linear"]) || has(&statics, LINEAR).is_some();
    let static_recurrent = has(&statics, RECURRENT);
    let skip = adds_its_input(&p, &slice);
    let handwritten_norm = named(&["mean", "var", "std", "var_mean"]) && named(&["rsqrt", "sqrt"]);
    let class_lower = class_name.to_ascii_lowercase();
    let (family, family_rule): (&'static str, String) = if aten.is_empty() {
        // Nothing ran (an identity, or a container left empty): the code's own calls would
        // describe what it might have run, not what it did.
        ("data_movement", "aten:nothing_dispatched".into())
    } else if attention && ran(Kind::Normalization) && linear && (ran(Kind::Activation) || skip) {
        // Attention with norms and an MLP (its nonlinearity) or a skip connection: a block.
        // Attention alone, even with its pre-norm and projections, is attention.
        (
            "transformer_block",
            "aten:attention+norm+linear+mlp_or_skip".into(),
        )
    } else if ran(Kind::Attention) {
        ("attention", format!("aten:{}", first(Kind::Attention)))
    } else if attention {
        ("attention", "aten:softmax+batched_matmul".into())
    } else if ran(Kind::Recurrent) {
        ("recurrent", format!("aten:{}", first(Kind::Recurrent)))
    } else if let Some(op) = static_recurrent.as_ref() {
        ("recurrent", format!("static:op:{op}"))
    } else if ran(Kind::Loss) {
        ("loss", format!("aten:{}", first(Kind::Loss)))
    } else if is_loss_name(&class_lower) {
        ("loss", "static:class_name:loss".into())
    } else if skip && prof.heavy >= 2 {
        ("residual_block", "static:skip_add+aten:heavy_ops".into())
    } else if ran(Kind::Convolution) {
        ("convolution", format!("aten:{}", first(Kind::Convolution)))
    } else if ran(Kind::Embedding) {
        ("embedding", format!("aten:{}", first(Kind::Embedding)))
    } else if ran(Kind::Matmul) && linear {
        // Before normalization: a norm next to linear layers is part of an MLP.
        ("linear_mlp", format!("aten:{}", first(Kind::Matmul)))
    } else if ran(Kind::Matmul) {
        ("matmul", format!("aten:{}", first(Kind::Matmul)))
    } else if ran(Kind::Normalization) {
        (
            "normalization",
            format!("aten:{}", first(Kind::Normalization)),
        )
    } else if ran(Kind::VectorNorm) && named(&["div"]) {
        (
            "normalization",
            format!("aten:{}+div", first(Kind::VectorNorm)),
        )
    } else if handwritten_norm {
        // A hand-written norm: statistics, then a scale by their inverse root.
        ("normalization", "aten:mean_or_var+rsqrt".into())
    } else if ran(Kind::Pooling) {
        ("pooling", format!("aten:{}", first(Kind::Pooling)))
    } else if let Some(op) = has(&statics, POOL) {
        ("pooling", format!("static:op:{op}"))
    } else if ran(Kind::Upsampling) {
        ("upsampling", format!("aten:{}", first(Kind::Upsampling)))
    } else if ran(Kind::Softmax) {
        ("softmax", format!("aten:{}", first(Kind::Softmax)))
    } else if ran(Kind::Activation) {
        ("activation", format!("aten:{}", first(Kind::Activation)))
    } else if ran(Kind::Elementwise)
        && prof.compute == prof.count(Kind::Elementwise)
        && ACTIVATION_NAMES.iter().any(|a| class_lower.contains(a))
    {
        // An activation written with arithmetic (HardMish, QuickGELU): named for what it is.
        ("activation", "static:class_name:activation".into())
    } else if ran(Kind::Dropout) {
        ("dropout", format!("aten:{}", first(Kind::Dropout)))
    } else if ran(Kind::Distance) {
        ("distance", format!("aten:{}", first(Kind::Distance)))
    } else if let Some(op) = has(&statics, DISTANCE) {
        ("distance", format!("static:op:{op}"))
    } else if ran(Kind::Reduction) || ran(Kind::VectorNorm) {
        let k = if ran(Kind::Reduction) {
            Kind::Reduction
        } else {
            Kind::VectorNorm
        };
        ("reduction", format!("aten:{}", first(k)))
    } else if ran(Kind::Elementwise) {
        (
            "elementwise_fusion",
            format!("aten:{}", first(Kind::Elementwise)),
        )
    } else if ran(Kind::Other) {
        ("other", format!("aten:{}", first(Kind::Other)))
    } else if ran(Kind::Padding) {
        ("padding", format!("aten:{}", first(Kind::Padding)))
    } else if ran(Kind::Movement) {
        ("data_movement", format!("aten:{}", first(Kind::Movement)))
    } else {
        ("data_movement", "aten:views_and_copies_only".into())
    };

    let compute = prof.compute;
    // Layers: the heavy operators but normalizations, which fuse with the layer they follow
    // (a conv, batch norm and ReLU are one short sequence).
    // The two products of an attention core with nothing around them (softmax(q k^T) v)
    // are one fused kernel, not two layers.
    let layers = match prof.heavy - prof.count(Kind::Normalization) {
        n if attention && n <= 2 && n == prof.count(Kind::Matmul) => n.min(1),
        n => n,
    };
    let single_call = statics.len() == 1 && !SYMBOLS.contains(&statics[0]);
    let (level, level_rule): (u8, String) =
        if matches!(family, "transformer_block" | "residual_block") {
            (3, format!("family:{family}"))
        } else if family == "recurrent" && static_recurrent.is_some() {
            // The CPU may run a recurrent layer as many products: count its layers instead.
            let layers = statics
                .iter()
                .filter(|n| HEAVY.iter().any(|set| set.contains(n)))
                .count();
            match layers {
                0 | 1 => (1, "static:single_recurrent_layer".to_string()),
                2 => (2, "static:heavy_layers:2".to_string()),
                n => (3, format!("static:heavy_layers:{n}")),
            }
        } else if compute == 0 {
            (1, "aten:no_compute_op".to_string())
        } else if compute == 1 {
            (1, format!("aten:single_op:{}", prof.distinct_compute[0]))
        } else if prof.distinct_compute.len() == 1 && prof.heavy <= 1 {
            (
                1,
                format!("aten:repeated_single_op:{}", prof.distinct_compute[0]),
            )
        } else if single_call && prof.heavy <= 1 {
            (
                1,
                format!(
                    "static:single_call:{}+aten:compute_ops:{compute}",
                    statics[0]
                ),
            )
        } else if prof.heavy == 0 && matches!(family, "activation" | "loss" | "normalization") {
            // One activation, loss or norm written as arithmetic (QuickGELU, StarReLU, a soft
            // cross-entropy, a hand-written layer norm): one operator's kernel, as KernelBench
            // counts them (level 1).
            (1, format!("aten:one_{family}:compute_ops:{compute}"))
        } else if layers >= 3 {
            // Three layers or more (GEMMs, convolutions, products) are a block or a network;
            // one or two with their epilogues (an MLP, conv-BN-ReLU twice), however long the
            // arithmetic around them, a fused sequence.
            (3, format!("aten:layers:{layers}"))
        } else {
            (2, format!("aten:fused_ops:{compute}"))
        };
    let trivial = if compute == 0 {
        Some("no_compute".to_string())
    } else if compute <= 2 && wraps_an_argument(&p, &slice) {
        Some("wrapper_of_argument".to_string())
    } else {
        None
    };
    Label {
        trivial,
        family,
        family_rule,
        level,
        level_rule,
    }
}

/// Whether a class name names a loss (`FocalLoss`, `BinaryFocalLossWithLogits`,
/// `SoftTargetCrossEntropy`, `DiceCriterion`).
fn is_loss_name(class_lower: &str) -> bool {
    class_lower.contains("loss")
        || class_lower.contains("crossentropy")
        || class_lower.ends_with("criterion")
}

/// Parts of class names of activation functions written with arithmetic.
const ACTIVATION_NAMES: &[&str] = &[
    "gelu", "relu", "silu", "swish", "mish", "sigmoid", "tanh", "softplus", "elu", "glu", "act",
];

/// Whether the entry class's `forward` adds its input (or a name it saved the input in, or a
/// projection of either, `self.shortcut(x)`) to something: a skip connection (`out + identity`,
/// `x = x + self.mlp(self.norm(x))`, `h + self.res_conv(x)`).
fn adds_its_input(p: &Program<'_>, slice: &Slice) -> bool {
    use ksmith_embed::lexer::TokenKind;
    let Some(entry) = slice.entry.clone() else {
        return false;
    };
    let t = &p.tokens[entry];
    let Some(start) = (0..t.len().saturating_sub(4))
        .find(|&i| t[i].text == "def" && t[i + 1].text == "forward" && t[i + 2].is_op("("))
    else {
        return false;
    };
    // The first parameter after self, and the names the body saves it in.
    let Some(input) = t[start + 3..]
        .iter()
        .filter(|x| x.kind == TokenKind::Name && x.text != "self")
        .map(|x| x.text)
        .next()
    else {
        return false;
    };
    let end = (start + 1..t.len())
        .find(|&i| t[i].text == "def" && i > 0 && t[i - 1].is_layout())
        .unwrap_or(t.len());
    // Line by line: a name holds the input until it is assigned something else (a saved
    // shortcut, `identity = self.downsample(x)`, still holds it).
    let mut live = vec![input];
    for line in t[start..end].split(|x| x.is_layout()).skip(1) {
        let whole = |i: usize| {
            line.get(i)
                .is_some_and(|x| x.kind == TokenKind::Name && live.contains(&x.text))
                && (i == 0 || !line[i - 1].is_op("."))
                && line
                    .get(i + 1)
                    .is_none_or(|n| !n.is_op("(") && !n.is_op(".") && !n.is_op("["))
        };
        let added = (1..line.len()).any(|i| {
            (line[i].is_op("+") || line[i].is_op("+="))
                && (whole(i - 1)
                    || whole(i + 1)
                    || projection(line, i + 1, &live)
                    || i.checked_sub(6).is_some_and(|j| projection(line, j, &live)))
        });
        if added {
            return true;
        }
        if let [target, eq, rest @ ..] = line
            && target.kind == TokenKind::Name
            && eq.is_op("=")
        {
            let keeps = target.text != input
                && live.contains(&target.text)
                && rest.len() == 6
                && projection(rest, 0, &live);
            if rest.len() == 1 && live.contains(&rest[0].text) {
                live.push(target.text);
            } else if !keeps {
                live.retain(|n| *n != target.text);
            }
        }
    }
    false
}

/// Whether `line[at..at + 6]` is `self.NAME(LIVE)`: a projection of a name holding the input.
fn projection(line: &[ksmith_embed::lexer::Token<'_>], at: usize, live: &[&str]) -> bool {
    let Some(w) = line.get(at..at + 6) else {
        return false;
    };
    w[0].text == "self"
        && w[1].is_op(".")
        && w[2].kind == ksmith_embed::lexer::TokenKind::Name
        && w[3].is_op("(")
        && live.contains(&w[4].text)
        && w[5].is_op(")")
}

/// Arithmetic symbols among static operator names.
const SYMBOLS: &[&str] = &["+", "-", "*", "/", "**", "@"];

/// An operator's name without namespace and in-place suffix (`aten::relu_` -> `relu`).
fn short(op: &str) -> &str {
    let name = op.rsplit("::").next().unwrap_or(op);
    name.strip_suffix('_').unwrap_or(name)
}

/// True when the entry class keeps a constructor argument as an attribute (`self.fn = fn`)
/// and calls it (`self.fn(...)`): what it computes is mostly what it was given.
fn wraps_an_argument(p: &Program<'_>, slice: &Slice) -> bool {
    use ksmith_embed::lexer::TokenKind;
    let Some(entry) = slice.entry.clone() else {
        return false;
    };
    let t = &p.tokens[entry];
    // Parameters of __init__.
    let mut params: Vec<&str> = Vec::new();
    if let Some(i) =
        (0..t.len().saturating_sub(1)).find(|&i| t[i].text == "def" && t[i + 1].text == "__init__")
    {
        let mut depth = 0i32;
        for tok in &t[i + 2..] {
            match tok.text {
                "(" => depth += 1,
                ")" => {
                    depth -= 1;
                    if depth == 0 {
                        break;
                    }
                }
                _ if tok.kind == TokenKind::Name && depth == 1 && tok.text != "self" => {
                    params.push(tok.text)
                }
                _ => {}
            }
        }
    }
    // self.X = P, with P a parameter, alone on its line.
    let mut held: Vec<&str> = Vec::new();
    for w in t.windows(7) {
        if w[0].is_layout()
            && w[1].text == "self"
            && w[2].is_op(".")
            && w[4].is_op("=")
            && params.contains(&w[5].text)
            && w[6].is_layout()
        {
            held.push(w[3].text);
        }
    }
    held.retain(|name| {
        t.windows(4).any(|w| {
            w[0].text == "self" && w[1].is_op(".") && w[2].text == *name && w[3].is_op("(")
        })
    });
    !held.is_empty()
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

    fn ops(list: &[(&str, u64)]) -> Vec<OpCount> {
        list.iter()
            .map(|(op, count)| OpCount {
                op: format!("aten::{op}"),
                count: *count,
            })
            .collect()
    }

    #[test]
    fn aten_operators_decide_family_and_level() {
        // (program, class, operators, family, level, level rule)
        type Case<'a> = (String, &'a str, Vec<OpCount>, &'a str, u8, &'a str);
        let cases: Vec<Case<'_>> = vec![
            (
                module(&[], &["return torch.relu(x)"]),
                "M",
                ops(&[("relu", 1)]),
                "activation",
                1,
                "aten:single_op:aten::relu",
            ),
            // A loss made of a few operators is one loss, as KernelBench counts it (level 1:
            // HingeLoss), not a fused sequence.
            (
                module(&[], &["return torch.mean(torch.clamp(1 - x * y, min=0))"]),
                "HingeLoss",
                ops(&[("mul", 1), ("rsub", 1), ("clamp", 1), ("mean", 1)]),
                "loss",
                1,
                "aten:one_loss:compute_ops:4",
            ),
            // One library call that dispatches several operators is still one operator.
            (
                module(&[], &["return F.cross_entropy(x, y)"]),
                "M",
                ops(&[("_log_softmax", 1), ("nll_loss_forward", 1)]),
                "loss",
                1,
                "static:single_call:cross_entropy+aten:compute_ops:2",
            ),
            (
                module(
                    &["self.c = nn.Conv2d(3, 8, 3)", "self.b = nn.BatchNorm2d(8)"],
                    &["return F.relu(self.b(self.c(x)))"],
                ),
                "ConvBNReLU",
                ops(&[
                    ("convolution", 1),
                    ("native_batch_norm", 1),
                    ("empty", 1),
                    ("relu", 1),
                ]),
                "convolution",
                2,
                "aten:fused_ops:3",
            ),
            (
                module(
                    &["self.a = nn.Linear(8, 8)", "self.b = nn.Linear(8, 8)"],
                    &["return self.b(F.gelu(self.a(x)))"],
                ),
                "Mlp",
                ops(&[("t", 2), ("addmm", 2), ("gelu", 1), ("view", 2)]),
                "linear_mlp",
                2,
                "aten:fused_ops:3",
            ),
            (
                module(&[], &["return x @ y"]),
                "M",
                ops(&[("expand", 2), ("view", 2), ("bmm", 1), ("_unsafe_view", 1)]),
                "matmul",
                1,
                "aten:single_op:aten::bmm",
            ),
            (
                module(
                    &[
                        "self.m = nn.MultiheadAttention(8, 2)",
                        "self.n = nn.LayerNorm(8)",
                    ],
                    &["return self.n(self.m(x, x, x)[0] + x)"],
                ),
                "Block",
                ops(&[
                    ("addmm", 4),
                    ("bmm", 2),
                    ("_softmax", 1),
                    ("native_layer_norm", 1),
                    ("add", 1),
                    ("view", 8),
                ]),
                "transformer_block",
                3,
                "family:transformer_block",
            ),
            // A GRU the CPU runs as products is one recurrent layer.
            (
                module(&["self.r = nn.GRU(8, 8)"], &["return self.r(x)[0]"]),
                "M",
                ops(&[
                    ("addmm", 4),
                    ("sigmoid_", 6),
                    ("tanh_", 3),
                    ("add_", 9),
                    ("mul_", 6),
                    ("stack", 2),
                ]),
                "recurrent",
                1,
                "static:single_recurrent_layer",
            ),
            (
                module(&[], &["return x.view(x.size(0), -1)"]),
                "Flatten",
                ops(&[("view", 1)]),
                "data_movement",
                1,
                "aten:no_compute_op",
            ),
            (
                module(&[], &["return F.normalize(x, dim=1)"]),
                "L2Norm",
                ops(&[
                    ("linalg_vector_norm", 1),
                    ("clamp_min", 1),
                    ("expand", 1),
                    ("div", 1),
                ]),
                "normalization",
                1,
                "static:single_call:normalize+aten:compute_ops:3",
            ),
        ];
        for (src, class, aten, family, level, rule) in cases {
            let l = label_with_ops(&src, class, Some(&aten));
            assert_eq!((l.family, l.level), (family, level), "{class}: {l:?}");
            assert_eq!(l.level_rule, rule, "{class}: {l:?}");
            assert!(l.family_rule.starts_with("aten:") || l.family_rule.starts_with("static:"));
        }
    }

    #[test]
    fn trivial_modules_are_marked_and_operators_missing_fall_back_to_static_rules() {
        let flatten = label_with_ops(
            &module(&[], &["return x.view(x.size(0), -1)"]),
            "Flatten",
            Some(&ops(&[("view", 1)])),
        );
        assert_eq!(flatten.trivial.as_deref(), Some("no_compute"));
        let wrapper = "import torch\nimport torch.nn as nn\n\nclass Model(nn.Module):\n    def __init__(self, fn):\n        super().__init__()\n        self.fn = fn\n\n    def forward(self, x):\n        return self.fn(x) + x\n";
        let l = label_with_ops(wrapper, "Residual", Some(&ops(&[("add", 1)])));
        assert_eq!(l.trivial.as_deref(), Some("wrapper_of_argument"));
        let real = label_with_ops(
            &module(&[], &["return torch.relu(x)"]),
            "M",
            Some(&ops(&[("relu", 1)])),
        );
        assert_eq!(real.trivial, None);
        let fallback = label_with_ops(&module(&[], &["return torch.relu(x)"]), "M", None);
        assert_eq!(fallback.level_rule, "static:single_op:relu");
        assert_eq!(fallback.family_rule, "static:op:relu");
    }

    #[test]
    fn refinements_measured_on_real_modules() {
        // (program, class, operators, family, level, family rule)
        type Case<'a> = (String, &'a str, Vec<OpCount>, &'a str, u8, &'a str);
        let cases: Vec<Case<'_>> = vec![
            // A norm next to linear layers is an MLP (two layers, the norm fusing with the one it
            // feeds: level 2, as the plain Mlp).
            (
                module(
                    &[
                        "self.n = nn.LayerNorm(8)",
                        "self.a = nn.Linear(8, 8)",
                        "self.b = nn.Linear(8, 8)",
                    ],
                    &["return self.b(F.gelu(self.a(self.n(x))))"],
                ),
                "NormMlp",
                ops(&[
                    ("native_layer_norm", 1),
                    ("addmm", 2),
                    ("gelu", 1),
                    ("t", 2),
                ]),
                "linear_mlp",
                2,
                "aten:aten::addmm",
            ),
            // A hand-written layer norm.
            (
                module(
                    &[],
                    &[
                        "m = x.mean(1, keepdim=True)",
                        "v = x.var(1, keepdim=True)",
                        "return (x - m) * (v + 1e-5).rsqrt()",
                    ],
                ),
                "ChanLayerNorm",
                ops(&[
                    ("mean", 1),
                    ("var", 1),
                    ("sub", 1),
                    ("add", 1),
                    ("rsqrt", 1),
                    ("mul", 1),
                ]),
                "normalization",
                1,
                "aten:mean_or_var+rsqrt",
            ),
            // An activation written with arithmetic.
            (
                module(&[], &["return 0.5 * x * (x + 2).clamp(min=0, max=2)"]),
                "HardMish",
                ops(&[("mul", 2), ("add", 1), ("clamp", 1)]),
                "activation",
                1,
                "static:class_name:activation",
            ),
            // A skip connection written as x = x + f(x).
            (
                module(
                    &["self.n = nn.LayerNorm(8)", "self.a = nn.Linear(8, 8)"],
                    &["x = x + self.a(self.n(x))", "return x"],
                ),
                "MixerBlock",
                ops(&[("native_layer_norm", 1), ("addmm", 1), ("add", 1)]),
                "residual_block",
                3,
                "static:skip_add+aten:heavy_ops",
            ),
            // x is reassigned before the add: no skip connection.
            (
                module(
                    &["self.c = nn.Conv2d(3, 8, 3)", "self.b = nn.BatchNorm2d(8)"],
                    &["x = self.c(x)", "x = self.b(x)", "return x + 1.0"],
                ),
                "ConvBN",
                ops(&[("convolution", 1), ("native_batch_norm", 1), ("add", 1)]),
                "convolution",
                2,
                "aten:aten::convolution",
            ),
            // A long chain of arithmetic is one fused sequence.
            (
                module(
                    &[],
                    &["return torch.log(torch.exp(x * 2).mean((2, 3)) + 1) * 0.5"],
                ),
                "LsePool",
                ops(&[("mul", 4), ("exp", 2), ("log", 1), ("add", 2), ("mean", 1)]),
                "reduction",
                2,
                "aten:aten::mean",
            ),
            // Attention on 2-D operands: plain products the code writes with @.
            (
                module(&[], &["return torch.softmax(x @ y.t(), dim=-1) @ y"]),
                "Attn2d",
                ops(&[("mm", 2), ("_softmax", 1), ("t", 1)]),
                "attention",
                2,
                "aten:softmax+batched_matmul",
            ),
            // Attention with its pre-norm and projections but no MLP or skip: attention, and a
            // block of layers (level 3).
            (
                module(
                    &[
                        "self.n = nn.LayerNorm(8)",
                        "self.qkv = nn.Linear(8, 24)",
                        "self.o = nn.Linear(8, 8)",
                    ],
                    &[
                        "q, k, v = self.qkv(self.n(x)).chunk(3, dim=-1)",
                        "a = torch.softmax(q @ k.transpose(-1, -2), dim=-1)",
                        "return self.o(a @ v)",
                    ],
                ),
                "Attention",
                ops(&[
                    ("native_layer_norm", 1),
                    ("addmm", 2),
                    ("bmm", 2),
                    ("_softmax", 1),
                ]),
                "attention",
                3,
                "aten:softmax+batched_matmul",
            ),
            // A loss named for what it is, without a loss operator: one loss (level 1).
            (
                module(
                    &[],
                    &["return torch.sum(-y * F.log_softmax(x, dim=-1), dim=-1).mean()"],
                ),
                "SoftTargetCrossEntropy",
                ops(&[
                    ("_log_softmax", 1),
                    ("neg", 1),
                    ("mul", 1),
                    ("sum", 1),
                    ("mean", 1),
                ]),
                "loss",
                1,
                "static:class_name:loss",
            ),
            // An activation with its learned affine: one activation (level 1).
            (
                module(&[], &["return 0.8 * F.relu(x) ** 2 - 0.4"]),
                "StarReLU",
                ops(&[("relu", 1), ("pow", 1), ("mul", 1), ("sub", 1)]),
                "activation",
                1,
                "aten:aten::relu",
            ),
            // A skip through a projection of the input.
            (
                module(
                    &[
                        "self.c1 = nn.Conv2d(8, 16, 3, padding=1)",
                        "self.c2 = nn.Conv2d(16, 16, 3, padding=1)",
                        "self.res_conv = nn.Conv2d(8, 16, 1)",
                    ],
                    &[
                        "h = self.c2(F.silu(self.c1(x)))",
                        "return h + self.res_conv(x)",
                    ],
                ),
                "ResnetBlock",
                ops(&[("convolution", 3), ("silu", 1), ("add", 1)]),
                "residual_block",
                3,
                "static:skip_add+aten:heavy_ops",
            ),
            // A saved input replaced by its downsampled projection is still the shortcut.
            (
                module(
                    &[
                        "self.c = nn.Conv2d(8, 8, 3, padding=1)",
                        "self.b = nn.BatchNorm2d(8)",
                        "self.down = None",
                    ],
                    &[
                        "identity = x",
                        "out = self.b(self.c(x))",
                        "if self.down is not None:",
                        "    identity = self.down(x)",
                        "out += identity",
                        "return F.relu(out)",
                    ],
                ),
                "Bottleneck",
                ops(&[
                    ("convolution", 1),
                    ("native_batch_norm", 1),
                    ("add_", 1),
                    ("relu", 1),
                ]),
                "residual_block",
                3,
                "static:skip_add+aten:heavy_ops",
            ),
            // One layer with a long epilogue is one fused sequence (level 2), not a block.
            (
                module(
                    &["self.p = nn.Linear(8, 16)"],
                    &[
                        "m, v = self.p(x).chunk(2, dim=-1)",
                        "s = (0.5 * v).exp()",
                        "z = m + s * torch.randn_like(m)",
                        "kl = 0.5 * (v.exp() + m * m - v - 1.0)",
                        "return z, kl.sum(-1).mean()",
                    ],
                ),
                "Bottleneck",
                ops(&[
                    ("addmm", 1),
                    ("mul", 4),
                    ("exp", 2),
                    ("add", 3),
                    ("sub", 2),
                    ("sum", 1),
                    ("mean", 1),
                ]),
                "linear_mlp",
                2,
                "aten:aten::addmm",
            ),
            // Attention whose projections are convolutions: a block of layers, not an attention
            // core alone.
            (
                module(
                    &[
                        "self.qkv = nn.Conv2d(8, 24, 1)",
                        "self.o = nn.Conv2d(8, 8, 1)",
                    ],
                    &[
                        "q, k, v = self.qkv(x).flatten(2).chunk(3, dim=1)",
                        "a = torch.softmax(q.transpose(1, 2) @ k, dim=-1)",
                        "return self.o((v @ a).view_as(x))",
                    ],
                ),
                "LinearAttention",
                ops(&[("convolution", 2), ("bmm", 2), ("_softmax", 1)]),
                "attention",
                3,
                "aten:softmax+batched_matmul",
            ),
            // A loss whose name does not end in "loss".
            (
                module(
                    &[],
                    &["return -(y * F.logsigmoid(x) * (1 - torch.sigmoid(x)) ** 2).mean()"],
                ),
                "BinaryFocalLossWithLogits",
                ops(&[
                    ("log_sigmoid_forward", 1),
                    ("sigmoid", 1),
                    ("rsub", 1),
                    ("pow", 1),
                    ("mul", 2),
                    ("mean", 1),
                    ("neg", 1),
                ]),
                "loss",
                1,
                "static:class_name:loss",
            ),
            // A container left empty dispatched nothing: not the pooling its code mentions.
            (
                module(
                    &[
                        "self.blocks = nn.ModuleList([])",
                        "self.pool = nn.AvgPool2d(2)",
                    ],
                    &[
                        "for b in self.blocks:",
                        "    x = self.pool(b(x))",
                        "return x",
                    ],
                ),
                "Stage",
                vec![],
                "data_movement",
                1,
                "aten:nothing_dispatched",
            ),
            // Ran, and dispatched nothing: an identity.
            (
                module(&[], &["return x"]),
                "Identity",
                vec![],
                "data_movement",
                1,
                "aten:nothing_dispatched",
            ),
        ];
        for (src, class, aten, family, level, rule) in cases {
            let l = label_with_ops(&src, class, Some(&aten));
            assert_eq!((l.family, l.level), (family, level), "{class}: {l:?}");
            assert_eq!(l.family_rule, rule, "{class}: {l:?}");
        }
        let identity = label_with_ops(&module(&[], &["return x"]), "Identity", Some(&[]));
        assert_eq!(identity.trivial.as_deref(), Some("no_compute"));
    }
}
