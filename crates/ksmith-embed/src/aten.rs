//! What the ATen operators a module's forward dispatched (recorded by probe) say it computes.
//!
//! Each operator falls in one [`Kind`]: the compute kinds (a convolution, a matrix product, a
//! normalization, an activation, ...) and the kinds that compute nothing (views, copies and
//! tensor creation) or only move data (`cat`, `gather`, padding). Names are matched without the
//! `aten::` namespace and without the trailing `_` of in-place variants. Operators come as
//! `(name, calls)` pairs. Cluster labels modules from a [`Profile`]; dedup asks two modules that
//! look alike to also run alike, in the same order ([`agreement`]).

use std::sync::LazyLock;

/// What an operator does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    /// A view of the same memory (`view`, `permute`, `expand`, `select`).
    View,
    /// A copy or a new tensor (`clone`, `_to_copy`, `zeros`, `empty_like`, `fill_`).
    Copy,
    /// Data moved without arithmetic (`cat`, `gather`, `index_select`, `flip`, `repeat`).
    Movement,
    /// A check of the values, not a result (`_assert_async`, and the `all`/`any` that feed it).
    Check,
    /// Padding (`constant_pad_nd`, `reflection_pad2d`).
    Padding,
    /// A convolution.
    Convolution,
    /// A matrix product (`addmm`, `mm`, `bmm`, `baddbmm`).
    Matmul,
    /// Fused attention (`_scaled_dot_product_*`).
    Attention,
    /// A recurrent layer (`mkldnn_rnn_layer`, `lstm`, `gru_cell`).
    Recurrent,
    /// A normalization (`native_layer_norm`, `native_batch_norm`, `native_group_norm`).
    Normalization,
    /// A vector norm (`linalg_vector_norm`): a normalization when divided by, else a reduction.
    VectorNorm,
    /// An embedding lookup.
    Embedding,
    /// Pooling.
    Pooling,
    /// Upsampling and resampling.
    Upsampling,
    /// Softmax and log-softmax.
    Softmax,
    /// A loss.
    Loss,
    /// Dropout's random mask (`bernoulli_`, `native_dropout`).
    Dropout,
    /// A distance (`_cdist_forward`, `_euclidean_dist`).
    Distance,
    /// A reduction (`sum`, `mean`, `amax`, `cumsum`, `logsumexp`).
    Reduction,
    /// An activation function.
    Activation,
    /// Element-wise arithmetic and comparisons.
    Elementwise,
    /// Any other operator (counted as compute).
    Other,
}

impl Kind {
    /// False for views, copies, creation, checks, data movement and padding.
    pub fn computes(self) -> bool {
        !matches!(
            self,
            Kind::View | Kind::Copy | Kind::Check | Kind::Movement | Kind::Padding
        )
    }

    /// The heavy kinds: one of them is a layer worth a kernel on its own.
    pub fn heavy(self) -> bool {
        matches!(
            self,
            Kind::Convolution
                | Kind::Matmul
                | Kind::Attention
                | Kind::Recurrent
                | Kind::Normalization
                | Kind::Embedding
        )
    }
}

/// The view operators, written once for the probe's Python side and this one.
const VIEWS_JSON: &str = include_str!("../../../python/ksmith/probe/aten_views.json");

/// Every operator of `aten_views.json` (its `reshape`, `permute` and `other` lists): the
/// [`Kind::View`] operators.
static VIEW: LazyLock<Vec<String>> = LazyLock::new(|| {
    let lists: serde_json::Value =
        serde_json::from_str(VIEWS_JSON).expect("the embedded aten_views.json parses (tested)");
    ["reshape", "permute", "other"]
        .iter()
        .flat_map(|key| {
            lists[key]
                .as_array()
                .unwrap_or_else(|| panic!("aten_views.json: `{key}` is a list (tested)"))
                .iter()
                .map(|v| {
                    v.as_str()
                        .expect("aten_views.json: names are strings (tested)")
                        .to_string()
                })
        })
        .collect()
});

const COPY: &[&str] = &[
    "clone",
    "contiguous",
    "copy",
    "_to_copy",
    "to",
    "empty",
    "empty_like",
    "empty_strided",
    "zeros",
    "zeros_like",
    "ones",
    "ones_like",
    "full",
    "full_like",
    "arange",
    "fill",
    "zero",
    "scalar_tensor",
    "_local_scalar_dense",
    "new_zeros",
    "new_ones",
    "new_empty",
    "new_full",
    "lift_fresh_copy",
    "eye",
    "linspace",
    "logspace",
    "rand",
    "randn",
    "randint",
    "rand_like",
    "randn_like",
    "normal",
    "uniform",
    "resize",
    "set",
    "_copy_from",
    "tensor",
    "detach_copy",
];
/// Input validation (`kornia`'s `KORNIA_CHECK`, `torch._assert_async`): boolean reductions and
/// assertions, which compute nothing the module returns.
const CHECK: &[&str] = &[
    "_assert_async",
    "_assert_scalar",
    "_assert_tensor_metadata",
    "_functional_assert_async",
    "is_nonzero",
    "all",
    "any",
];
const MOVEMENT: &[&str] = &[
    "cat",
    "stack",
    "gather",
    "scatter",
    "scatter_add",
    "scatter_reduce",
    "index",
    "index_select",
    "index_put",
    "index_add",
    "index_copy",
    "index_fill",
    "flip",
    "roll",
    "repeat",
    "repeat_interleave",
    "tile",
    "masked_select",
    "masked_scatter",
    "take",
    "put",
    "nonzero",
    "sort",
    "argsort",
    "topk",
    "tril_indices",
    "triu_indices",
    "im2col",
    "col2im",
    "unfold_backward",
    "hstack",
    "vstack",
    "dstack",
    "meshgrid",
    "where_self_out",
];
const ACTIVATION: &[&str] = &[
    "relu",
    "relu6",
    "gelu",
    "silu",
    "sigmoid",
    "tanh",
    "elu",
    "selu",
    "celu",
    "leaky_relu",
    "hardswish",
    "hardsigmoid",
    "hardtanh",
    "softplus",
    "mish",
    "prelu",
    "_prelu_kernel",
    "rrelu",
    "rrelu_with_noise",
    "glu",
    "log_sigmoid_forward",
    "log_sigmoid",
    "softshrink",
    "hardshrink",
    "threshold",
    "logit",
];
const ELEMENTWISE: &[&str] = &[
    "add",
    "sub",
    "rsub",
    "mul",
    "div",
    "pow",
    "exp",
    "exp2",
    "log",
    "log2",
    "log10",
    "sqrt",
    "rsqrt",
    "abs",
    "neg",
    "clamp",
    "clamp_min",
    "clamp_max",
    "clip",
    "where",
    "reciprocal",
    "sin",
    "cos",
    "tan",
    "asin",
    "acos",
    "atan",
    "atan2",
    "sinh",
    "cosh",
    "sign",
    "sgn",
    "floor",
    "ceil",
    "round",
    "trunc",
    "frac",
    "erf",
    "erfc",
    "erfinv",
    "log1p",
    "expm1",
    "maximum",
    "minimum",
    "fmax",
    "fmin",
    "lerp",
    "addcmul",
    "addcdiv",
    "remainder",
    "fmod",
    "eq",
    "ne",
    "gt",
    "lt",
    "ge",
    "le",
    "logical_and",
    "logical_or",
    "logical_not",
    "logical_xor",
    "bitwise_and",
    "bitwise_or",
    "bitwise_not",
    "bitwise_xor",
    "masked_fill",
    "square",
    "tril",
    "triu",
    "floor_divide",
    "true_divide",
    "heaviside",
    "hypot",
    "nan_to_num",
    "isnan",
    "isinf",
    "xlogy",
    "sigmoid_backward",
    "polar",
    "angle",
    "bucketize",
    "searchsorted",
    "lgamma",
    "digamma",
];
const REDUCTION: &[&str] = &[
    "sum",
    "mean",
    "amax",
    "amin",
    "max",
    "min",
    "prod",
    "argmax",
    "argmin",
    "cumsum",
    "cumprod",
    "logsumexp",
    "var",
    "std",
    "var_mean",
    "std_mean",
    "norm",
    "median",
    "nanmedian",
    "mode",
    "aminmax",
    "logcumsumexp",
    "cummax",
    "cummin",
    "nansum",
    "count_nonzero",
];
const LOSS: &[&str] = &[
    "mse_loss",
    "l1_loss",
    "nll_loss",
    "nll_loss_forward",
    "nll_loss2d_forward",
    "nll_loss_nd",
    "binary_cross_entropy",
    "binary_cross_entropy_with_logits",
    "smooth_l1_loss",
    "huber_loss",
    "kl_div",
    "soft_margin_loss",
    "multilabel_margin_loss_forward",
    "multi_margin_loss",
    "hinge_embedding_loss",
    "margin_ranking_loss",
    "cosine_embedding_loss",
    "triplet_margin_loss",
    "poisson_nll_loss",
    "ctc_loss",
    "_ctc_loss",
    "cross_entropy_loss",
];

/// The kind of an operator (`aten::addmm`, `aten.relu_`, `relu`, or a recorded call with its
/// attributes, `aten::addmm(a,w)@bf16`).
pub fn kind(op: &str) -> Kind {
    let op = op.split(['(', '@']).next().unwrap_or(op);
    let name = op
        .rsplit("::")
        .next()
        .unwrap_or(op)
        .rsplit('.')
        .next()
        .unwrap_or(op);
    let name = name.strip_suffix('_').unwrap_or(name);
    let in_set = |set: &[&str]| set.contains(&name);
    if VIEW.iter().any(|v| v == name) {
        Kind::View
    } else if in_set(COPY) {
        Kind::Copy
    } else if in_set(CHECK) {
        Kind::Check
    } else if in_set(MOVEMENT) {
        Kind::Movement
    } else if name.contains("pad") {
        Kind::Padding
    } else if name.contains("convolution") || name.starts_with("conv") {
        Kind::Convolution
    } else if matches!(
        name,
        "addmm"
            | "mm"
            | "bmm"
            | "baddbmm"
            | "matmul"
            | "addmv"
            | "mv"
            | "dot"
            | "addbmm"
            | "linear"
            | "einsum"
            | "outer"
            | "ger"
            | "vdot"
            | "_addmm_activation"
    ) {
        Kind::Matmul
    } else if name.starts_with("_scaled_dot_product") || name == "scaled_dot_product_attention" {
        Kind::Attention
    } else if name.contains("rnn") || name.contains("lstm") || name.contains("gru") {
        Kind::Recurrent
    } else if name.contains("batch_norm")
        || name.contains("layer_norm")
        || name.contains("group_norm")
        || name.contains("instance_norm")
        || name.contains("rms_norm")
    {
        Kind::Normalization
    } else if name == "linalg_vector_norm" || name == "frobenius_norm" {
        Kind::VectorNorm
    } else if name.starts_with("embedding") || name.starts_with("_embedding") {
        Kind::Embedding
    } else if name.contains("pool") {
        Kind::Pooling
    } else if name.starts_with("upsample")
        || name.starts_with("_upsample")
        || name.starts_with("grid_sampler")
        || name.contains("pixel_shuffle")
        || name.contains("pixel_unshuffle")
    {
        Kind::Upsampling
    } else if name.contains("softmax") {
        Kind::Softmax
    } else if in_set(LOSS) {
        Kind::Loss
    } else if matches!(
        name,
        "bernoulli" | "native_dropout" | "dropout" | "feature_dropout" | "alpha_dropout"
    ) {
        Kind::Dropout
    } else if name.starts_with("_cdist") || name == "cdist" || name == "_euclidean_dist" {
        Kind::Distance
    } else if in_set(ACTIVATION) {
        Kind::Activation
    } else if in_set(REDUCTION) {
        Kind::Reduction
    } else if in_set(ELEMENTWISE) {
        Kind::Elementwise
    } else {
        Kind::Other
    }
}

/// A forward pass's operators, grouped.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Profile {
    /// Calls per kind.
    pub calls: std::collections::BTreeMap<Kind, u64>,
    /// Compute calls (kinds that compute).
    pub compute: u64,
    /// Calls of heavy kinds.
    pub heavy: u64,
    /// Distinct compute operators.
    pub distinct_compute: Vec<String>,
}

impl Profile {
    /// The profile of recorded `(operator, calls)` pairs.
    pub fn of<'a>(ops: impl IntoIterator<Item = (&'a str, u64)>) -> Self {
        let mut p = Profile::default();
        for (op, count) in ops {
            let k = kind(op);
            *p.calls.entry(k).or_default() += count;
            if k.computes() {
                p.compute += count;
                p.distinct_compute.push(op.to_string());
            }
            if k.heavy() {
                p.heavy += count;
            }
        }
        p.distinct_compute.sort();
        p.distinct_compute.dedup();
        p
    }

    /// Calls of a kind.
    pub fn count(&self, k: Kind) -> u64 {
        self.calls.get(&k).copied().unwrap_or(0)
    }
}

/// How alike two forward passes are: the weighted Jaccard of their features
/// ([`crate::calls::Run::features`]: sum of the smaller counts over sum of the larger), 1.0 when
/// they make the same calls the same number of times in the same order. `None` when either
/// recorded nothing (nothing to compare).
pub fn agreement<K: Ord>(a: &[(K, u64)], b: &[(K, u64)]) -> Option<f64> {
    if a.is_empty() || b.is_empty() {
        return None;
    }
    // Both lists are sorted by feature: a merge, taking from the side whose feature comes
    // first (both sides when it is the same).
    let (mut min, mut max) = (0u64, 0u64);
    let (mut i, mut j) = (0, 0);
    while let Some(order) = match (a.get(i), b.get(j)) {
        (Some(x), Some(y)) => Some(x.0.cmp(&y.0)),
        (Some(_), None) => Some(std::cmp::Ordering::Less),
        (None, Some(_)) => Some(std::cmp::Ordering::Greater),
        (None, None) => None,
    } {
        let x = (order != std::cmp::Ordering::Greater).then(|| a[i].1);
        let y = (order != std::cmp::Ordering::Less).then(|| b[j].1);
        min += x.unwrap_or(0).min(y.unwrap_or(0));
        max += x.unwrap_or(0).max(y.unwrap_or(0));
        i += usize::from(x.is_some());
        j += usize::from(y.is_some());
    }
    Some(if max == 0 {
        1.0
    } else {
        min as f64 / max as f64
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operators_fall_in_their_kind() {
        for (op, k) in [
            ("aten::convolution", Kind::Convolution),
            ("aten::addmm", Kind::Matmul),
            ("aten::t", Kind::View),
            ("aten::_unsafe_view", Kind::View),
            ("aten::native_layer_norm", Kind::Normalization),
            (
                "aten::_native_batch_norm_legit_no_training",
                Kind::Normalization,
            ),
            (
                "aten::_scaled_dot_product_flash_attention_for_cpu",
                Kind::Attention,
            ),
            ("aten::mkldnn_rnn_layer", Kind::Recurrent),
            ("aten::relu_", Kind::Activation),
            ("aten::add_", Kind::Elementwise),
            ("aten::_softmax", Kind::Softmax),
            ("aten::_log_softmax", Kind::Softmax),
            ("aten::nll_loss_forward", Kind::Loss),
            ("aten::max_pool2d_with_indices", Kind::Pooling),
            ("aten::upsample_nearest2d", Kind::Upsampling),
            ("aten::bernoulli_", Kind::Dropout),
            ("aten::constant_pad_nd", Kind::Padding),
            ("aten::cat", Kind::Movement),
            ("aten::empty_like", Kind::Copy),
            ("aten::mean", Kind::Reduction),
            ("aten::linalg_vector_norm", Kind::VectorNorm),
            ("aten::embedding", Kind::Embedding),
            ("aten::something_new", Kind::Other),
            ("aten::_assert_async", Kind::Check),
            ("aten::all", Kind::Check),
        ] {
            assert_eq!(kind(op), k, "{op}");
        }
        // Input checks compute nothing the module returns.
        let p = Profile::of([
            ("aten::all", 2),
            ("aten::_assert_async", 2),
            ("aten::pow", 1),
        ]);
        assert_eq!(p.compute, 1);
    }

    /// The view operators are the probe's list (`python/ksmith/probe/aten_views.json`, which
    /// `python/tests/test_probe_aten_calls.py` reads too): every one of them, however recorded,
    /// is a view, and no other list here names one.
    #[test]
    fn the_view_operators_are_the_shared_list() {
        let lists: serde_json::Value = serde_json::from_str(VIEWS_JSON).unwrap();
        let mut names = Vec::new();
        for key in ["reshape", "permute", "other"] {
            let list = lists[key].as_array().unwrap();
            assert!(!list.is_empty(), "{key}");
            names.extend(list.iter().map(|v| v.as_str().unwrap()));
        }
        assert_eq!(VIEW.len(), names.len());
        for name in names {
            for op in [
                format!("aten::{name}"),
                format!("aten::{name}_"),
                format!("aten::{name}(w)@bf16"),
            ] {
                assert_eq!(kind(&op), Kind::View, "{op}");
            }
            for other in [
                COPY,
                CHECK,
                MOVEMENT,
                LOSS,
                ACTIVATION,
                REDUCTION,
                ELEMENTWISE,
            ] {
                assert!(!other.contains(&name), "{name} is also listed elsewhere");
            }
        }
        assert_eq!(kind("aten::swapaxes"), Kind::View);
    }

    #[test]
    fn profile_counts_compute_and_heavy_calls() {
        let ops = [
            ("aten::addmm", 2),
            ("aten::t", 2),
            ("aten::gelu", 1),
            ("aten::view", 3),
        ];
        let p = Profile::of(ops);
        assert_eq!((p.compute, p.heavy), (3, 2));
        assert_eq!(p.distinct_compute, vec!["aten::addmm", "aten::gelu"]);
    }

    #[test]
    fn recorded_calls_fall_in_their_operator_s_kind() {
        assert_eq!(kind("aten::mean(KRK)"), Kind::Reduction);
        assert_eq!(kind("aten::addmm(a,w)@bf16"), Kind::Matmul);
        assert_eq!(kind("aten::relu@f16"), Kind::Activation);
    }

    #[test]
    fn agreement_is_the_weighted_jaccard_of_the_work_done() {
        let f = |calls: &[&str]| crate::calls::Run::of(calls, std::iter::empty()).features;
        let pre = f(&[
            "aten::native_batch_norm(RKR,train)",
            "aten::relu",
            "aten::convolution(2d,k3x3,s1,p1,d1,dense)",
            "aten::view",
        ]);
        let post = f(&[
            "aten::convolution(2d,k3x3,s1,p1,d1,dense)",
            "aten::native_batch_norm(RKR,train)",
            "aten::relu_",
        ]);
        assert_eq!(pre.len(), 5, "3 calls (the view is none) and 2 pairs");
        // Same operators, other order: the operators agree, their pairs do not.
        assert_eq!(agreement(&pre, &post), Some(4.0 / 6.0));
        assert_eq!(agreement(&pre, &pre), Some(1.0));
        assert_eq!(agreement(&pre, &[]), None);
        // Counts weigh: two linear layers against one.
        let one = f(&["aten::mm(a,w)"]);
        let two = f(&["aten::mm(a,w)", "aten::mm(a,w)"]);
        // min: mm 1; max: mm 2 + pair mm>mm 1.
        assert_eq!(agreement(&one, &two), Some(1.0 / 3.0));
    }
}
