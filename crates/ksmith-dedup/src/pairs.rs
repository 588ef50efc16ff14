//! Matched pairs of the similarity methods: near (MinHash LSH) and semantic (embedding cosine).
//!
//! Both find candidates on the entry view (the code of the class itself) and verify a pair on
//! both views: its similarity is the smaller of the entry view's and the slice view's, and it
//! matches when that is at or above the method's threshold (see [`crate::features`]). Code that
//! looks alike can still compute something else (a recall metric next to an accuracy metric
//! sharing their helpers, a loss wrapper around another loss, a pre-activation block next to a
//! post-activation one): when both modules have recorded calls, a pair also needs the same
//! kernel-deciding calls ([`Run::kernels`]: a channels-first norm is no last-dim norm, a
//! depthwise convolution no dense one, however alike their code) and the [`agreement`] of their
//! calls and their order at or above `aten_threshold`. And the 2-D and 3-D versions of a module
//! are told apart by their library calls of a fixed dimensionality ([`Features::dims`]), which
//! must be the same, recorded or not.

use ksmith_core::tables::DedupMethod;
use ksmith_embed::aten::agreement;
use ksmith_embed::calls::{Run, regime_alike};
use ksmith_embed::hashing::SplitMix;
use ndarray::{Array2, ArrayView2, Axis};
use rayon::prelude::*;

use crate::buckets::bucket_pairs;
use crate::config::DedupConfig;
use crate::features::Features;
use crate::groups::Edge;
use crate::minhash::estimated_jaccard;

/// True when items `a` and `b` make the same library calls of a fixed dimensionality and,
/// unless one recorded no calls, the same kernel-deciding calls, with calls that agree at
/// `aten_threshold` or above.
fn run_alike(feats: &[Features], runs: &[Option<&Run>], a: u32, b: u32, cfg: &DedupConfig) -> bool {
    if feats[a as usize].dims != feats[b as usize].dims {
        return false;
    }
    let (Some(Some(x)), Some(Some(y))) = (runs.get(a as usize), runs.get(b as usize)) else {
        return true;
    };
    x.kernels == y.kernels
        && agreement(&x.features, &y.features).is_none_or(|g| g >= cfg.aten_threshold)
}

/// Near-duplicate pairs: LSH over the entry signatures, then both views' Jaccard estimates at
/// or above `near_threshold`, and runs alike (`runs`, one per item, none when not recorded).
pub fn near_pairs(feats: &[Features], runs: &[Option<&Run>], cfg: &DedupConfig) -> Vec<Edge> {
    let entries: Vec<(u64, u32)> = feats
        .par_iter()
        .enumerate()
        .flat_map_iter(|(i, f)| f.bands.iter().map(move |&k| (k, i as u32)))
        .collect();
    let candidates = bucket_pairs(entries, cfg.max_bucket_pairs);
    candidates
        .par_iter()
        .filter_map(|&(a, b)| {
            let (fa, fb) = (&feats[a as usize], &feats[b as usize]);
            let entry = estimated_jaccard(&fa.entry_sig, &fb.entry_sig);
            if entry < cfg.near_threshold {
                return None;
            }
            let j = entry.min(estimated_jaccard(&fa.slice_sig, &fb.slice_sig));
            (j >= cfg.near_threshold && run_alike(feats, runs, a, b, cfg)).then_some(Edge {
                a,
                b,
                method: DedupMethod::Near,
                similarity: Some(j),
            })
        })
        .collect()
}

/// Kernel pairs: modules whose sized programs ran alike however their code differs: the same
/// kernel-deciding calls ([`Run::kernels`]), calls that agree at `aten_threshold` or above and
/// arithmetic intensities ([`ksmith_embed::calls::intensity`], one per item) of one regime
/// ([`regime_alike`]). Candidates share their kernel-deciding calls; sorted by the weight of
/// their calls, each is compared with the following ones while
/// the weights allow the threshold (a weighted Jaccard of `t` needs weights within a factor of
/// `t`), at most `max_bucket_pairs` of them. Pairs that ran the same sequence are left to the
/// kernel class. The similarity is the agreement.
pub fn kernel_pairs(
    runs: &[Option<&Run>],
    intensities: &[Option<f64>],
    cfg: &DedupConfig,
) -> Vec<Edge> {
    let mut order: Vec<(u64, u64, u32, &Run)> = runs
        .iter()
        .enumerate()
        .filter_map(|(i, r)| {
            let r = (*r)?;
            r.sequence?;
            Some((r.kernels, r.weight, i as u32, r))
        })
        .collect();
    order.sort_unstable_by_key(|&(k, w, i, _)| (k, w, i));
    let t = cfg.aten_threshold;
    (0..order.len())
        .into_par_iter()
        .flat_map_iter(|k| {
            let (kernels, weight, a, ra) = order[k];
            order[k + 1..]
                .iter()
                .take_while(move |&&(kb, wb, _, _)| kb == kernels && weight as f64 >= t * wb as f64)
                .take(cfg.max_bucket_pairs)
                .filter_map(move |&(_, _, b, rb)| {
                    if ra.sequence == rb.sequence
                        || !regime_alike(intensities[a as usize], intensities[b as usize])
                    {
                        return None;
                    }
                    let g = agreement(&ra.features, &rb.features)?;
                    (g >= t).then_some(Edge {
                        a: a.min(b),
                        b: a.max(b),
                        method: DedupMethod::Kernel,
                        similarity: Some(g),
                    })
                })
        })
        .collect()
}

/// Semantic pairs: candidates share a random-hyperplane hash of the mean-centered entry
/// embedding in at least one of `simhash_tables` tables; a pair matches when the cosine of both
/// views is at or above `semantic_threshold` and their operators agree. Rows must be unit
/// length (or zero).
pub fn semantic_pairs(
    feats: &[Features],
    entry: &Array2<f32>,
    slice: &Array2<f32>,
    runs: &[Option<&Run>],
    cfg: &DedupConfig,
) -> Vec<Edge> {
    let (n, dim) = entry.dim();
    if n == 0 || dim == 0 {
        return Vec::new();
    }
    let candidates = hyperplane_candidates(entry.view(), cfg);
    candidates
        .par_iter()
        .filter_map(|&(a, b)| {
            let cos =
                |m: &Array2<f32>| f64::from(m.row(a as usize).dot(&m.row(b as usize))).min(1.0);
            let c = cos(entry).min(cos(slice));
            (c >= cfg.semantic_threshold && run_alike(feats, runs, a, b, cfg)).then_some(Edge {
                a,
                b,
                method: DedupMethod::Semantic,
                similarity: Some(c),
            })
        })
        .collect()
}

/// Pairs of rows sharing a bucket of random-hyperplane hashes of the centered vectors.
fn hyperplane_candidates(emb: ArrayView2<'_, f32>, cfg: &DedupConfig) -> Vec<(u32, u32)> {
    let (n, dim) = emb.dim();
    let planes_n = cfg.simhash_tables * cfg.simhash_bits;
    let mut rng = SplitMix::new(cfg.seed ^ 0x7369_6d68_6173_6821);
    let planes = Array2::from_shape_fn((dim, planes_n), |_| rng.normal() as f32);
    // Hash the centered vectors: every program shares boilerplate (class, forward, self), so
    // raw embeddings sit in a narrow cone where random hyperplanes separate little and buckets
    // fill with unrelated modules. Centering keeps near-identical vectors together and spreads
    // the rest. (The cosine check uses the raw vectors.)
    let mut mean = vec![0f64; dim];
    for row in emb.outer_iter() {
        for (m, v) in mean.iter_mut().zip(row) {
            *m += f64::from(*v);
        }
    }
    let mean = ndarray::Array1::from_iter(mean.into_iter().map(|m| (m / n as f64) as f32));
    let offset = mean.dot(&planes);
    let blocks: Vec<Vec<(u64, u32)>> = emb
        .axis_chunks_iter(Axis(0), 2048)
        .enumerate()
        .collect::<Vec<_>>()
        .into_par_iter()
        .map(|(c, block)| {
            let proj = block.dot(&planes);
            let mut out = Vec::with_capacity(block.nrows() * cfg.simhash_tables);
            for (r, row) in proj.outer_iter().enumerate() {
                let id = (c * 2048 + r) as u32;
                if block.row(r).iter().all(|v| *v == 0.0) {
                    continue;
                }
                for t in 0..cfg.simhash_tables {
                    let mut key: u64 = t as u64;
                    for b in 0..cfg.simhash_bits {
                        let j = t * cfg.simhash_bits + b;
                        key = key.wrapping_mul(2) ^ u64::from(row[j] > offset[j]);
                    }
                    out.push((ksmith_embed::hashing::mix(t as u64 + 1, key), id));
                }
            }
            out
        })
        .collect();
    bucket_pairs(blocks.concat(), cfg.max_bucket_pairs)
}
