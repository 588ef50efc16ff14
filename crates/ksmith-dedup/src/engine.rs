//! The deduplication engine: features per program, matched pairs per method, decontamination
//! and the decision for every module. Pure computation (no files), used by [`crate::run`] and
//! the benchmark.

use std::collections::{BTreeMap, HashMap};

use ksmith_core::tables::{DedupMethod, DedupRow};
use ksmith_embed::hashing::SplitMix;
use ksmith_embed::{Embedder, HashedEmbedder, Program, SyntaxTree};
use ndarray::{Array2, Axis};
use rayon::prelude::*;

use crate::buckets::{bucket_pairs, equal_key_pairs};
use crate::config::DedupConfig;
use crate::error::DedupError;
use crate::groups::{Edge, Outcome, SurvivorKey, license_rank, resolve};
use crate::minhash::{MinHasher, band_key, estimated_jaccard, shingle_hashes};

/// A runnable module offered to dedup.
#[derive(Debug, Clone, PartialEq)]
pub struct Candidate {
    /// Module id.
    pub id: String,
    /// Its program (the probe's repaired one when there is one).
    pub program: String,
    /// SPDX license of its repository.
    pub license: Option<String>,
    /// Stars of its repository.
    pub stars: Option<i64>,
    /// Lines of the program.
    pub lines: u32,
}

/// An evaluation problem to decontaminate against.
#[derive(Debug, Clone, PartialEq)]
pub struct Problem {
    /// Its path relative to the benchmark folder (`level1/19_ReLU.py`).
    pub path: String,
    /// Its source.
    pub source: String,
}

/// The features of one program.
#[derive(Debug, Clone)]
pub struct Features {
    /// Key of exact dedup.
    pub exact: [u8; 16],
    /// MinHash signature (empty when near dedup and decontamination are off).
    pub signature: Vec<u32>,
    /// Structural hash (0 when structural matching is off).
    pub structural: u128,
    /// Number of shingles.
    pub shingles: usize,
    /// The hashed embedding, when an embedder was given to [`features`] (empty otherwise).
    pub embedding: Vec<f32>,
}

/// Computes features of programs, in parallel (in the current rayon pool): the MinHash
/// signature when `need_signature`, the structural hash when `need_structural`, the embedding
/// when `embedder` is given (parsing each program once for all of them).
pub fn features(
    programs: &[&str],
    cfg: &DedupConfig,
    need_signature: bool,
    need_structural: bool,
    embedder: Option<&HashedEmbedder>,
) -> Vec<Features> {
    let hasher = MinHasher::new(cfg.num_perm, cfg.seed);
    programs
        .par_iter()
        .map(|src| {
            let p = Program::parse(src);
            let shingles = if need_signature {
                shingle_hashes(&p, cfg.shingle_size)
            } else {
                Vec::new()
            };
            let tree = (need_structural || embedder.is_some()).then(|| SyntaxTree::build(&p));
            let embedding = match (embedder, &tree) {
                (Some(e), Some(t)) => {
                    let mut row = ndarray::Array1::<f32>::zeros(e.dim());
                    e.embed_parsed(&p, t, row.view_mut());
                    row.to_vec()
                }
                _ => Vec::new(),
            };
            Features {
                exact: p.exact_key(),
                signature: if need_signature {
                    hasher.signature(&shingles)
                } else {
                    Vec::new()
                },
                structural: match (&tree, need_structural) {
                    (Some(t), true) => t.wl_hash(cfg.wl_iterations),
                    _ => 0,
                },
                shingles: shingles.len(),
                embedding,
            }
        })
        .collect()
}

/// Near-duplicate pairs by MinHash LSH, verified against `threshold` on the signatures.
pub fn near_pairs(feats: &[Features], cfg: &DedupConfig) -> Vec<Edge> {
    let (bands, rows) = cfg.bands_rows();
    let entries: Vec<(u64, u32)> = feats
        .par_iter()
        .enumerate()
        .filter(|(_, f)| f.shingles > 0)
        .flat_map_iter(|(i, f)| {
            (0..bands).map(move |b| (band_key(&f.signature, b, rows), i as u32))
        })
        .collect();
    let candidates = bucket_pairs(entries, cfg.max_bucket_pairs);
    candidates
        .par_iter()
        .filter_map(|&(a, b)| {
            let j = estimated_jaccard(&feats[a as usize].signature, &feats[b as usize].signature);
            (j >= cfg.near_threshold).then_some(Edge {
                a,
                b,
                method: DedupMethod::Near,
                similarity: Some(j),
            })
        })
        .collect()
}

/// Semantic pairs: cosine at or above the threshold among candidates sharing a random-hyperplane
/// hash of the mean-centered embedding in at least one of `simhash_tables` tables. `emb` rows
/// must be unit length.
pub fn semantic_pairs(emb: &Array2<f32>, cfg: &DedupConfig) -> Vec<Edge> {
    let (n, dim) = emb.dim();
    if n == 0 || dim == 0 {
        return Vec::new();
    }
    let planes_n = cfg.simhash_tables * cfg.simhash_bits;
    let mut rng = SplitMix::new(cfg.seed ^ 0x7369_6d68_6173_6821);
    let planes = Array2::from_shape_fn((dim, planes_n), |_| rng.normal() as f32);
    // Hash the centered vectors: every program shares boilerplate (imports, class, forward),
    // so raw embeddings sit in a narrow cone where random hyperplanes separate little and
    // buckets fill with unrelated modules. Centering keeps near-identical vectors together and
    // spreads the rest. (The cosine check below uses the raw vectors.)
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
    let candidates = bucket_pairs(blocks.concat(), cfg.max_bucket_pairs);
    candidates
        .par_iter()
        .filter_map(|&(a, b)| {
            let cos: f32 = emb.row(a as usize).dot(&emb.row(b as usize));
            let cos = f64::from(cos).min(1.0);
            (cos >= cfg.semantic_threshold).then_some(Edge {
                a,
                b,
                method: DedupMethod::Semantic,
                similarity: Some(cos),
            })
        })
        .collect()
}

/// A contamination match of one module.
#[derive(Debug, Clone, PartialEq)]
pub struct Contamination {
    /// The problem's path.
    pub problem: String,
    /// The Jaccard estimate for a near match; `None` for a structural match.
    pub similarity: Option<f64>,
}

/// Matches modules against evaluation problems: near (LSH + signature Jaccard at or above
/// `contamination_threshold`) first, structural (equal WL hash) second.
pub fn contamination(
    feats: &[Features],
    problems: &[Problem],
    problem_feats: &[Features],
    cfg: &DedupConfig,
) -> Vec<Option<Contamination>> {
    let (bands, rows) = crate::minhash::optimal_bands(cfg.contamination_threshold, cfg.num_perm);
    let mut index: HashMap<u64, Vec<u32>> = HashMap::new();
    let mut structural: BTreeMap<u128, u32> = BTreeMap::new();
    for (i, f) in problem_feats.iter().enumerate() {
        if f.shingles > 0 {
            for b in 0..bands {
                index
                    .entry(band_key(&f.signature, b, rows))
                    .or_default()
                    .push(i as u32);
            }
        }
        structural.entry(f.structural).or_insert(i as u32);
    }
    feats
        .par_iter()
        .map(|f| {
            let mut best: Option<(f64, u32)> = None;
            if f.shingles > 0 {
                let mut seen: Vec<u32> = (0..bands)
                    .filter_map(|b| index.get(&band_key(&f.signature, b, rows)))
                    .flatten()
                    .copied()
                    .collect();
                seen.sort_unstable();
                seen.dedup();
                for p in seen {
                    let j = estimated_jaccard(&f.signature, &problem_feats[p as usize].signature);
                    if j >= cfg.contamination_threshold
                        && best.is_none_or(|(bj, bp)| j > bj || (j == bj && p < bp))
                    {
                        best = Some((j, p));
                    }
                }
            }
            if let Some((j, p)) = best {
                return Some(Contamination {
                    problem: problems[p as usize].path.clone(),
                    similarity: Some(j),
                });
            }
            if cfg.contamination_structural
                && let Some(&p) = structural.get(&f.structural)
            {
                return Some(Contamination {
                    problem: problems[p as usize].path.clone(),
                    similarity: None,
                });
            }
            None
        })
        .collect()
}

/// Counts of what the engine found.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DedupStats {
    /// Matched pairs per method (before grouping).
    pub pairs: BTreeMap<DedupMethod, u64>,
    /// Dropped modules per method.
    pub dropped: BTreeMap<DedupMethod, u64>,
}

/// Deduplicates `items` (call inside the rayon pool that should do the work).
///
/// Returns one row per item, in the order of `items`, and the counts. `embedder` is used when
/// semantic dedup is on. Contaminated items are dropped first and take no part in the groups.
/// Phases: features, decontamination, matched pairs per method (`matched_pairs`), union-find
/// groups with their survivors (`resolve`), one row per item (`dedup_row`).
pub fn deduplicate(
    items: &[Candidate],
    problems: &[Problem],
    embedder: Option<&dyn Embedder>,
    cfg: &DedupConfig,
) -> Result<(Vec<DedupRow>, DedupStats), DedupError> {
    let need_sig = cfg.near || !problems.is_empty();
    let programs: Vec<&str> = items.iter().map(|c| c.program.as_str()).collect();
    let need_structural = cfg.structural || (!problems.is_empty() && cfg.contamination_structural);
    let hashed = if cfg.semantic {
        embedder.and_then(|e| e.as_hashed())
    } else {
        None
    };
    let feats = features(&programs, cfg, need_sig, need_structural, hashed);
    let mut stats = DedupStats::default();

    let contaminated: Vec<Option<Contamination>> = if problems.is_empty() {
        vec![None; items.len()]
    } else {
        let sources: Vec<&str> = problems.iter().map(|p| p.source.as_str()).collect();
        let pf = features(&sources, cfg, true, cfg.contamination_structural, None);
        contamination(&feats, problems, &pf, cfg)
    };
    let edges = matched_pairs(&feats, &programs, &contaminated, embedder, cfg, &mut stats)?;
    let keys: Vec<SurvivorKey> = items
        .iter()
        .map(|c| SurvivorKey {
            license_rank: license_rank(c.license.as_deref()),
            stars: c.stars.unwrap_or(0),
            runs: true,
            lines: c.lines,
            id: c.id.clone(),
        })
        .collect();
    let outcomes = resolve(&keys, &edges);
    let rows: Vec<DedupRow> = (0..items.len())
        .map(|i| dedup_row(items, i, contaminated[i].as_ref(), &outcomes[i]))
        .collect();
    for r in &rows {
        if let Some(m) = r.method {
            *stats.dropped.entry(m).or_default() += 1;
        }
    }
    Ok((rows, stats))
}

/// The pairs every enabled method matches among the items that are not contaminated, counted
/// per method in `stats`.
fn matched_pairs(
    feats: &[Features],
    programs: &[&str],
    contaminated: &[Option<Contamination>],
    embedder: Option<&dyn Embedder>,
    cfg: &DedupConfig,
    stats: &mut DedupStats,
) -> Result<Vec<Edge>, DedupError> {
    let mut edges: Vec<Edge> = Vec::new();
    let clean =
        |e: &Edge| contaminated[e.a as usize].is_none() && contaminated[e.b as usize].is_none();
    let mut add = |found: Vec<Edge>, method: DedupMethod| {
        let found: Vec<Edge> = found.into_iter().filter(clean).collect();
        stats.pairs.insert(method, found.len() as u64);
        edges.extend(found);
    };
    if cfg.exact {
        let keys: Vec<([u8; 16], u32)> = feats
            .iter()
            .enumerate()
            .map(|(i, f)| (f.exact, i as u32))
            .collect();
        add(
            equal_edges(&keys, DedupMethod::Exact, Some(1.0)),
            DedupMethod::Exact,
        );
    }
    if cfg.structural {
        let keys: Vec<(u128, u32)> = feats
            .iter()
            .enumerate()
            .map(|(i, f)| (f.structural, i as u32))
            .collect();
        let method = DedupMethod::Structural;
        add(equal_edges(&keys, method, None), method);
    }
    if cfg.near {
        add(near_pairs(feats, cfg), DedupMethod::Near);
    }
    if cfg.semantic {
        let embedder = embedder.ok_or_else(|| {
            DedupError::Config("semantic dedup is on but no embedder was given".into())
        })?;
        let emb = match embedder.as_hashed() {
            Some(h) => {
                let mut m = Array2::<f32>::zeros((feats.len(), h.dim()));
                for (mut row, f) in m.outer_iter_mut().zip(feats) {
                    row.assign(&ndarray::ArrayView1::from(&f.embedding[..]));
                }
                m
            }
            None => embedder.embed(programs)?,
        };
        add(semantic_pairs(&emb, cfg), DedupMethod::Semantic);
    }
    Ok(edges)
}

/// Pairs of items with equal keys, matched by `method`.
fn equal_edges<K: Ord + Copy>(
    keys: &[(K, u32)],
    method: DedupMethod,
    similarity: Option<f64>,
) -> Vec<Edge> {
    equal_key_pairs(keys)
        .into_iter()
        .map(|(a, b)| Edge {
            a,
            b,
            method,
            similarity,
        })
        .collect()
}

/// The row of item `i`: dropped as contaminated, kept as its group's survivor, or dropped as a
/// duplicate of the survivor.
fn dedup_row(
    items: &[Candidate],
    i: usize,
    contaminated: Option<&Contamination>,
    outcome: &Outcome,
) -> DedupRow {
    let c = &items[i];
    if let Some(hit) = contaminated {
        return DedupRow {
            module_id: c.id.clone(),
            kept: false,
            method: Some(DedupMethod::Contamination),
            duplicate_of: Some(hit.problem.clone()),
            similarity: hit.similarity,
        };
    }
    if outcome.survivor as usize == i {
        DedupRow {
            module_id: c.id.clone(),
            kept: true,
            method: None,
            duplicate_of: None,
            similarity: None,
        }
    } else {
        DedupRow {
            module_id: c.id.clone(),
            kept: false,
            method: outcome.method,
            duplicate_of: Some(items[outcome.survivor as usize].id.clone()),
            similarity: outcome.similarity,
        }
    }
}
