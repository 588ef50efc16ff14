//! What the calls a module's forward made (probe's `aten_calls`, recorded on the sized program)
//! say about the kernel problem it is.
//!
//! A recorded call is `aten::name(attrs)@dtype` (`python/ksmith/probe/aten_calls.py` defines the
//! attributes: the dimensions a reduction or norm works along in memory order, a convolution's
//! kernel, stride and grouping, a matrix product's factors' roles...). [`canonical`] keeps the
//! calls that do work, written one way whatever way the author wrote them: views are left out
//! (their layout shows in the calls that read them), copies too unless they move data across a
//! layout or cast it (`aten::copy(m=021)`), and fused calls are split into their parts
//! (`addmm(a,w)` is `mm(a,w)` then the bias added along the last dimension, `add(b=KR)`, as
//! `x @ w.t() + b` runs). A [`Run`] holds what dedup and cluster compare: the calls and their
//! consecutive pairs with counts (for
//! [`crate::aten::agreement`]), the set of kernel-deciding calls (two modules whose
//! convolutions, norms, reductions or layouts differ are different kernels however alike they
//! look), the whole sequence (the same computation) and the distinct calls and pairs without
//! counts (the same computation repeated a different number of times). [`regimes`] splits the
//! modules of one computation by the arithmetic intensity of their sized programs: the same
//! computation at sizes of another regime is another kernel problem.

use crate::aten::{Kind, kind};
use crate::hashing::{hash_str, mix};

/// Mixed into the first hash of a pair, so that a pair is no call.
const PAIR: u64 = 0x7061_6972;

/// Sorted by arithmetic intensity, the modules of one computation change regime where one's
/// intensity is more than this factor above the previous one's ([`regimes`]).
pub const REGIME_RATIO: f64 = 4.0;

/// Arithmetic intensities below this (FLOPs per byte) are one regime: every kernel there is
/// bound by memory, however few FLOPs it does (an element-wise scale and a squeeze-excite
/// block whose channels and image sizes differ).
pub const MEMORY_BOUND: f64 = 1.0;

/// True when two intensities (none: not estimated) are within [`REGIME_RATIO`] of each other,
/// intensities below [`MEMORY_BOUND`] counting as it; two unknowns are alike, one unknown is not.
pub fn regime_alike(a: Option<f64>, b: Option<f64>) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(x), Some(y)) => {
            let (x, y) = (x.max(MEMORY_BOUND), y.max(MEMORY_BOUND));
            x.max(y) <= x.min(y) * REGIME_RATIO
        }
        _ => false,
    }
}

/// One recorded call, split into its parts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Call<'a> {
    /// The operator with its namespace, without the in-place `_` (`aten::relu`).
    pub op: &'a str,
    /// The attributes between the parentheses (`2d,k3x3,s1,p1,d1,dw`; empty when none).
    pub attrs: &'a str,
    /// The dtype of the first tensor input when it is not float32 (`bf16`; empty otherwise).
    pub dtype: &'a str,
}

impl<'a> Call<'a> {
    /// Splits a recorded call (`aten::convolution(2d,k3x3,s1,p1,d1,dw)@f16`).
    pub fn parse(call: &'a str) -> Call<'a> {
        let (head, dtype) = match call.rfind('@') {
            Some(i) if !call[i..].contains(')') => (&call[..i], &call[i + 1..]),
            _ => (call, ""),
        };
        let (op, attrs) = match head.find('(') {
            Some(i) => (
                &head[..i],
                head[i + 1..].strip_suffix(')').unwrap_or(&head[i + 1..]),
            ),
            None => (head, ""),
        };
        let op = match op.strip_suffix('_') {
            Some(stripped) if !stripped.ends_with(':') => stripped,
            _ => op,
        };
        Call { op, attrs, dtype }
    }

    /// The call written back (`op(attrs)@dtype`), with another operator name.
    fn written(&self, op: &str, attrs: &str) -> String {
        let mut out = op.to_string();
        if !attrs.is_empty() {
            out.push('(');
            out.push_str(attrs);
            out.push(')');
        }
        if !self.dtype.is_empty() {
            out.push('@');
            out.push_str(self.dtype);
        }
        out
    }

    /// The name without namespace (`relu`).
    fn base(&self) -> &'a str {
        self.op.rsplit("::").next().unwrap_or(self.op)
    }
}

/// The calls that do work, each written one way (see the module's documentation).
pub fn canonical<S: AsRef<str>>(calls: &[S]) -> Vec<String> {
    let mut out = Vec::with_capacity(calls.len());
    for raw in calls {
        let c = Call::parse(raw.as_ref());
        match kind(c.op) {
            Kind::View => continue,
            Kind::Copy => {
                let moves = c
                    .attrs
                    .split(',')
                    .any(|a| a.starts_with("m=") || a.starts_with("to="));
                let copies = matches!(
                    c.base(),
                    "clone" | "contiguous" | "copy" | "_to_copy" | "to" | "_copy_from"
                );
                if moves && copies {
                    out.push(c.written("aten::copy", c.attrs));
                }
                continue;
            }
            _ => {}
        }
        let fused = |product: &str, out: &mut Vec<String>| {
            let roles: Vec<&str> = c
                .attrs
                .split(',')
                .filter(|a| matches!(*a, "a" | "w"))
                .collect();
            out.push(c.written(product, &roles.join(",")));
            out.push(c.written("aten::add", "b=KR"));
        };
        match c.base() {
            "addmm" => fused("aten::mm", &mut out),
            "baddbmm" => fused("aten::bmm", &mut out),
            "addmv" => fused("aten::mv", &mut out),
            "_addmm_activation" => {
                fused("aten::mm", &mut out);
                let act = if c.attrs.split(',').any(|a| a == "gelu") {
                    "aten::gelu"
                } else {
                    "aten::relu"
                };
                out.push(c.written(act, ""));
            }
            _ => out.push(c.written(c.op, c.attrs)),
        }
    }
    out
}

/// True for the calls whose attributes decide which kernel runs: convolutions, matrix
/// products, attention, recurrences, norms, reductions, softmax, pooling, resampling,
/// embeddings, losses, data movement and transposing copies (not element-wise arithmetic and
/// activations, whose differences [`crate::aten::agreement`] weighs).
pub fn decides_kernel(call: &str) -> bool {
    let c = Call::parse(call);
    c.op == "aten::copy"
        || matches!(
            kind(c.op),
            Kind::Convolution
                | Kind::Matmul
                | Kind::Attention
                | Kind::Recurrent
                | Kind::Normalization
                | Kind::VectorNorm
                | Kind::Reduction
                | Kind::Softmax
                | Kind::Pooling
                | Kind::Upsampling
                | Kind::Embedding
                | Kind::Loss
                | Kind::Movement
        )
}

/// What dedup and cluster compare of one recorded forward pass.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Run {
    /// The canonical calls and each consecutive pair of them, each as its hash (a call's
    /// [`crate::hashing::hash_str`], a pair's the [`crate::hashing::mix`] of its calls') with its
    /// count, sorted by hash: what [`crate::aten::agreement`] compares.
    pub features: Vec<(u64, u64)>,
    /// The sum of the counts of `features`.
    pub weight: u64,
    /// A hash of the distinct kernel-deciding calls ([`decides_kernel`]); two runs whose
    /// hashes differ run a different kernel somewhere.
    pub kernels: u64,
    /// A hash of the whole canonical sequence: the same computation. None when nothing in it
    /// computes (views, copies and data movement only).
    pub sequence: Option<u128>,
    /// A hash of the distinct canonical calls and consecutive pairs, the last call paired with
    /// the first, without counts: the same computation repeated any number of times (one
    /// block, or a stack of it at depth 2 or 12). None when nothing computes.
    pub computation: Option<u128>,
}

impl Run {
    /// The run of recorded calls (`aten_calls`); `ops` are the recorded counts by operator
    /// (`aten_ops`), which cover the whole forward pass when the calls were cut at the
    /// recording's limit: the sequence then includes them.
    pub fn of<'a, S: AsRef<str>>(
        calls: &[S],
        ops: impl IntoIterator<Item = (&'a str, u64)>,
    ) -> Run {
        let seq = canonical(calls);
        // Each call and each consecutive pair as a hash (a pair: the mix of its calls' hashes).
        let unigrams: Vec<u64> = seq.iter().map(|c| hash_str(c)).collect();
        let pair = |a: u64, b: u64| mix(a ^ PAIR, b);
        let mut all: Vec<u64> = unigrams.clone();
        all.extend(unigrams.windows(2).map(|w| pair(w[0], w[1])));
        all.sort_unstable();
        let mut features: Vec<(u64, u64)> = Vec::new();
        for h in &all {
            match features.last_mut() {
                Some((last, n)) if last == h => *n += 1,
                _ => features.push((*h, 1)),
            }
        }
        let mut kernels: Vec<&str> = seq
            .iter()
            .map(String::as_str)
            .filter(|c| decides_kernel(c))
            .collect();
        kernels.sort_unstable();
        kernels.dedup();
        let computes = seq.iter().any(|c| kind(c).computes());
        let (sequence, computation) = if computes {
            let mut h = blake3::Hasher::new();
            for c in &seq {
                h.update(c.as_bytes());
                h.update(b"\n");
            }
            let ops: Vec<(&str, u64)> = ops.into_iter().collect();
            if ops.iter().map(|(_, n)| n).sum::<u64>() > calls.len() as u64 {
                h.update(b"\0counts\n");
                for (op, n) in &ops {
                    h.update(op.as_bytes());
                    h.update(&n.to_le_bytes());
                }
            }
            // The distinct calls and pairs, and the last call paired with the first.
            let mut distinct: Vec<u64> = features.iter().map(|f| f.0).collect();
            if let (Some(&last), Some(&first)) = (unigrams.last(), unigrams.first()) {
                distinct.push(pair(last, first));
            }
            distinct.sort_unstable();
            distinct.dedup();
            let mut set = blake3::Hasher::new();
            for f in distinct {
                set.update(&f.to_le_bytes());
            }
            (Some(digest(&h)), Some(digest(&set)))
        } else {
            (None, None)
        };
        let mut kh = blake3::Hasher::new();
        for k in &kernels {
            kh.update(k.as_bytes());
            kh.update(b"\n");
        }
        Run {
            weight: features.iter().map(|f| f.1).sum(),
            features,
            kernels: digest(&kh) as u64,
            sequence,
            computation,
        }
    }
}

fn digest(h: &blake3::Hasher) -> u128 {
    let mut b = [0u8; 16];
    b.copy_from_slice(&h.finalize().as_bytes()[..16]);
    u128::from_le_bytes(b)
}

/// The arithmetic intensity of a sized program's work: FLOPs per byte moved (the probe's
/// `est_flops` / `est_bytes` at the chosen sizes; 0 for work without FLOPs); none when either
/// estimate is missing, not finite or negative, or no byte moves.
pub fn intensity(flops: Option<f64>, bytes: Option<f64>) -> Option<f64> {
    let (f, b) = (flops?, bytes?);
    (f.is_finite() && b.is_finite() && f >= 0.0 && b > 0.0).then(|| f / b)
}

/// The regimes of keyed items (`(key, intensity)`, none for an item without a key): items of one
/// key, sorted by intensity, are one regime while each is within [`REGIME_RATIO`] of the
/// previous one (so no fixed bucket boundary splits two close intensities; intensities below
/// [`MEMORY_BOUND`] count as it), numbered from 0 upwards within the key; items of the key
/// without an intensity are one more regime (`u32::MAX`). The result is the item's
/// `(key, regime)`, none without a key.
pub fn regimes<K: Ord + Copy>(items: &[Option<(K, Option<f64>)>]) -> Vec<Option<(K, u32)>> {
    let mut order: Vec<(K, f64, usize)> = items
        .iter()
        .enumerate()
        .filter_map(|(i, it)| {
            let (k, x) = (*it)?;
            Some((k, x.map_or(f64::NAN, |x| x.max(MEMORY_BOUND)), i))
        })
        .collect();
    // By key, then intensity (NaN, no intensity, last), then index.
    order.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.total_cmp(&b.1).then(a.2.cmp(&b.2))));
    let mut out = vec![None; items.len()];
    let mut prev: Option<(K, f64, u32)> = None;
    for (k, x, i) in order {
        let regime = match prev {
            _ if x.is_nan() => u32::MAX,
            Some((pk, px, pr)) if pk == k && !px.is_nan() => {
                if x > px * REGIME_RATIO {
                    pr + 1
                } else {
                    pr
                }
            }
            _ => 0,
        };
        out[i] = Some((k, regime));
        prev = Some((k, x, regime));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_split_into_operator_attributes_and_dtype() {
        let c = Call::parse("aten::convolution(2d,k3x3,s1,p1,d1,dw)@f16");
        assert_eq!(
            (c.op, c.attrs, c.dtype),
            ("aten::convolution", "2d,k3x3,s1,p1,d1,dw", "f16")
        );
        let c = Call::parse("aten::relu_");
        assert_eq!((c.op, c.attrs, c.dtype), ("aten::relu", "", ""));
        let c = Call::parse("aten::_to_copy(to=bf16)");
        assert_eq!((c.op, c.attrs, c.dtype), ("aten::_to_copy", "to=bf16", ""));
    }

    #[test]
    fn a_linear_layer_is_one_sequence_however_it_runs() {
        // nn.Linear on a 3-D input, and x @ w.t() + b.
        let module = [
            "aten::view",
            "aten::t(w)",
            "aten::addmm(a,w)",
            "aten::_unsafe_view",
        ];
        let written = [
            "aten::t(w)",
            "aten::view",
            "aten::mm(a,w)",
            "aten::_unsafe_view",
            "aten::add(b=KR)",
        ];
        assert_eq!(canonical(&module), ["aten::mm(a,w)", "aten::add(b=KR)"]);
        assert_eq!(canonical(&module), canonical(&written));
        let none: [(&str, u64); 0] = [];
        assert_eq!(Run::of(&module, none), Run::of(&written, none));
    }

    #[test]
    fn layout_copies_and_casts_stay_other_copies_and_views_go() {
        let calls = [
            "aten::permute(p=021)",
            "aten::clone(m=021)",
            "aten::native_layer_norm(KR)",
            "aten::clone",
            "aten::empty",
            "aten::_to_copy(to=bf16)",
            "aten::relu_@bf16",
        ];
        assert_eq!(
            canonical(&calls),
            [
                "aten::copy(m=021)",
                "aten::native_layer_norm(KR)",
                "aten::copy(to=bf16)",
                "aten::relu@bf16"
            ]
        );
    }

    #[test]
    fn kernels_tell_layouts_and_convolution_kinds_apart() {
        let none = || std::iter::empty::<(&str, u64)>();
        let run = |calls: &[&str]| Run::of(calls, none());
        let last = run(&["aten::native_layer_norm(KR)", "aten::gelu"]);
        let first = run(&["aten::native_layer_norm(KRK)", "aten::gelu"]);
        let tanh = run(&["aten::native_layer_norm(KR)", "aten::gelu(tanh)"]);
        assert_ne!(last.kernels, first.kernels);
        assert_ne!(last.sequence, first.sequence);
        // An activation's variant is no kernel-deciding call, but another sequence.
        assert_eq!(last.kernels, tanh.kernels);
        assert_ne!(last.sequence, tanh.sequence);
        let dw = run(&["aten::convolution(2d,k3x3,s1,p1,d1,dw)"]);
        let dense = run(&["aten::convolution(2d,k3x3,s1,p1,d1,dense)"]);
        assert_ne!(dw.kernels, dense.kernels);
        // Nothing that computes: no sequence.
        assert_eq!(run(&["aten::view", "aten::clone"]).sequence, None);
    }

    #[test]
    fn the_computation_forgets_repetition_the_sequence_does_not() {
        let none = || std::iter::empty::<(&str, u64)>();
        let block = ["aten::mm(a,w)", "aten::gelu", "aten::mm(a,w)"];
        let twice: Vec<&str> = block.iter().chain(block.iter()).copied().collect();
        let thrice: Vec<&str> = twice.iter().chain(block.iter()).copied().collect();
        let (a, b) = (Run::of(&twice, none()), Run::of(&thrice, none()));
        assert_ne!(a.sequence, b.sequence);
        assert_eq!(a.computation, b.computation);
        assert_eq!(a.kernels, b.kernels);
        // One block is the same computation too (its last call feeds its first in a stack).
        assert_eq!(Run::of(&block, none()).computation, a.computation);
        let other = ["aten::mm(a,w)", "aten::relu", "aten::mm(a,w)"];
        assert_ne!(Run::of(&other, none()).computation, a.computation);
    }

    #[test]
    fn a_cut_recording_includes_the_counts() {
        let calls = ["aten::relu"; 3];
        let short = Run::of(&calls, [("aten::relu", 3)]);
        let cut_a = Run::of(&calls, [("aten::relu", 5)]);
        let cut_b = Run::of(&calls, [("aten::relu", 9)]);
        assert_eq!(
            short.sequence,
            Run::of(&calls, [("aten::relu", 3)]).sequence
        );
        assert_ne!(cut_a.sequence, cut_b.sequence);
        assert_ne!(short.sequence, cut_a.sequence);
    }

    #[test]
    fn regimes_split_one_computation_where_its_intensities_jump() {
        assert_eq!(intensity(Some(8e9), Some(2e9)), Some(4.0));
        assert_eq!(intensity(Some(0.0), Some(1e6)), Some(0.0));
        assert_eq!(intensity(None, Some(1.0)), None);
        assert_eq!(intensity(Some(1.0), Some(0.0)), None);
        // Key 1: 10, 30, 100 chain within a factor of 4; 1000 jumps; 0 and 0.001 are bound by
        // memory alike, 10 is not; none apart. Key 2 starts again. An item without a key has
        // no regime.
        let items = [
            Some((1u8, Some(100.0))),
            Some((1, Some(10.0))),
            Some((2, Some(5000.0))),
            Some((1, Some(1000.0))),
            Some((1, Some(30.0))),
            Some((1, Some(0.0))),
            Some((1, None)),
            None,
            Some((1, Some(0.001))),
        ];
        let r = regimes(&items);
        let regime = |i: usize| r[i].map(|(_, g)| g);
        assert_eq!(regime(1), regime(4));
        assert_eq!(regime(1), regime(0));
        assert_ne!(regime(0), regime(3));
        assert_eq!(regime(5), regime(8));
        assert_ne!(regime(5), regime(1));
        assert_eq!(regime(6), Some(u32::MAX));
        assert_eq!(r[2], Some((2, 0)));
        assert_eq!(r[7], None);
        assert!(regime_alike(Some(0.0001), Some(0.9)) && regime_alike(None, None));
        assert!(!regime_alike(Some(0.5), Some(5.0)) && !regime_alike(Some(1.0), None));
        // 124 and 189 are one regime, wherever a fixed bucket boundary would fall.
        let close = regimes(&[Some((0u8, Some(124.0))), Some((0, Some(189.0)))]);
        assert_eq!(close[0], close[1]);
    }
}
