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

mod vocabulary;

pub use vocabulary::FAMILIES;
use vocabulary::{
    ACTIVATION, ATTENTION, CONV, DATA_MOVEMENT, DISTANCE, DROPOUT, ELEMENTWISE, EMBEDDING, HEAVY,
    LINEAR, MATMUL, NORM, NOT_COMPUTE, PADDING, POOL, RECURRENT, REDUCTION, SOFTMAX, TRANSFORMER,
    UPSAMPLE, is_loss,
};

/// The family and level of one module, with their rules.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Label {
    /// Why the module is not a task by default (`no_compute`: views, copies and data movement
    /// only; `wrapper_of_argument`: it mostly calls a module given to its constructor;
    /// `single_op:<op>`: its forward runs one compute operator and no data movement or
    /// padding, views, permutes, casts and copies aside, so a candidate has nothing to fuse:
    /// [`SINGLE_OP`]); `None` for a real task.
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

/// How the `trivial` reason of a module whose forward runs one compute operator begins (the
/// operator follows: `single_op:aten::convolution`); `[cluster] single_op_tasks` decides.
pub const SINGLE_OP: &str = "single_op:";

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
    } else if compute == 1 && prof.count(Kind::Movement) + prof.count(Kind::Padding) == 0 {
        // One compute call (one conv, one GEMM with its casts and views): at best the
        // candidate calls the same library. Data movement (a concatenation, a gather, a pad)
        // around it is a second operation to fuse.
        Some(format!("{SINGLE_OP}{}", prof.distinct_compute[0]))
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
mod tests;
