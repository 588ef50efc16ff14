//! The deduplication engine: features per program, matched pairs per method, decontamination
//! and the decision for every module, with the pairs behind each decision. Pure computation
//! (no files), used by [`crate::run`] and the benchmark.

use std::collections::{BTreeMap, HashSet};

use ksmith_core::tables::{DedupMethod, DedupPairRow, DedupRow};
use ksmith_embed::Embedder;
use ksmith_embed::calls::Run;
use ndarray::Array2;
use rayon::prelude::*;

use crate::config::DedupConfig;
use crate::contamination::{BenchmarkProblem, Hit, ProblemIndex};
use crate::error::DedupError;
use crate::features::{Features, Wanted, features};
use crate::groups::{
    Classes, Edge, Outcome, SurvivorKey, contain, license_rank, method_priority, resolve,
};
use crate::pairs::{kernel_pairs, near_pairs, semantic_pairs};

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
    /// What its forward ran on the sized program (probe's `aten_calls`); none when nothing was
    /// recorded.
    pub run: Option<Run>,
    /// The arithmetic intensity of its sized work ([`ksmith_embed::calls::intensity`]); none
    /// when not estimated.
    pub intensity: Option<f64>,
}

/// Counts of what the engine found.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DedupStats {
    /// Matched pairs per method (before grouping).
    pub pairs: BTreeMap<DedupMethod, u64>,
    /// Dropped modules per method.
    pub dropped: BTreeMap<DedupMethod, u64>,
}

/// What the engine decided.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Decision {
    /// One row per item, in the order of the items.
    pub rows: Vec<DedupRow>,
    /// The matched pairs: the one that decided each dropped row, and the others found.
    pub pairs: Vec<DedupPairRow>,
    /// Counts.
    pub stats: DedupStats,
}

/// Deduplicates `items` (call inside the rayon pool that should do the work).
///
/// `embedder` is used when semantic dedup is on. Items matching a benchmark problem are
/// dropped as contamination, and so is every item grouped with one.
pub fn deduplicate(
    items: &[Candidate],
    problems: &[BenchmarkProblem],
    embedder: Option<&dyn Embedder>,
    cfg: &DedupConfig,
) -> Result<Decision, DedupError> {
    let programs: Vec<&str> = items.iter().map(|c| c.program.as_str()).collect();
    let hashed = if cfg.semantic {
        embedder.and_then(|e| e.as_hashed())
    } else {
        None
    };
    let wanted = Wanted {
        near: cfg.near,
        structural: cfg.structural,
        contamination: !problems.is_empty(),
    };
    let feats = features(&programs, cfg, wanted, hashed);
    let mut stats = DedupStats::default();

    let hits: Vec<Option<Hit>> = if problems.is_empty() {
        vec![None; items.len()]
    } else {
        let index = ProblemIndex::new(problems, cfg);
        feats
            .par_iter()
            .map(|f| f.contamination.as_ref().and_then(|c| index.find(c, cfg)))
            .collect()
    };

    let mut classes = Vec::new();
    // Programs without code (nothing but imports) are nobody's duplicates. The same code runs
    // other kernels with other constructor arguments (a norm's data format, a convolution's
    // groups), and a structural hash forgets literals (`mean(1)` and `mean(-1)`): code classes
    // also need the same kernel-deciding calls.
    let kernels: Vec<Option<u64>> = items
        .iter()
        .map(|c| c.run.as_ref().map(|r| r.kernels))
        .collect();
    if cfg.exact {
        let keys: Vec<Option<([u8; 16], Option<u64>)>> = feats
            .iter()
            .zip(&kernels)
            .map(|(f, k)| f.has_code.then_some((f.exact, *k)))
            .collect();
        classes.push(Classes::from_keys(DedupMethod::Exact, &keys));
    }
    if cfg.structural {
        let keys: Vec<Option<(u128, Option<u64>)>> = feats
            .iter()
            .zip(&kernels)
            .map(|(f, k)| f.has_code.then_some((f.structural, *k)))
            .collect();
        classes.push(Classes::from_keys(DedupMethod::Structural, &keys));
    }
    let mut late = Vec::new();
    if cfg.kernel {
        // The same calls in the same order at sizes of the same regime.
        let sequences: Vec<Option<(u128, Option<f64>)>> = items
            .iter()
            .map(|c| Some((c.run.as_ref()?.sequence?, c.intensity)))
            .collect();
        let keys = ksmith_embed::calls::regimes(&sequences);
        late.push(Classes::from_keys(DedupMethod::Kernel, &keys));
    }
    for c in classes.iter().chain(&late) {
        let pairs: usize = c.members.iter().map(|m| m.len() - 1).sum();
        stats.pairs.insert(c.method, pairs as u64);
    }
    let mut edges: Vec<Edge> = Vec::new();
    let runs: Vec<Option<&Run>> = items.iter().map(|c| c.run.as_ref()).collect();
    if cfg.near {
        let found = near_pairs(&feats, &runs, cfg);
        stats.pairs.insert(DedupMethod::Near, found.len() as u64);
        edges.extend(found);
    }
    if cfg.kernel {
        let intensities: Vec<Option<f64>> = items.iter().map(|c| c.intensity).collect();
        let found = kernel_pairs(&runs, &intensities, cfg);
        *stats.pairs.entry(DedupMethod::Kernel).or_default() += found.len() as u64;
        edges.extend(found);
    }
    if cfg.semantic {
        let embedder = embedder.ok_or_else(|| {
            DedupError::Config("semantic dedup is on but no embedder was given".into())
        })?;
        let (entry, slice) = embeddings(&feats, &programs, hashed.is_some(), embedder)?;
        let found = semantic_pairs(&feats, &entry, &slice, &runs, cfg);
        stats
            .pairs
            .insert(DedupMethod::Semantic, found.len() as u64);
        edges.extend(found);
    }

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
    let mut outcomes = resolve(&keys, &classes, &edges, &late);
    let copies: Vec<bool> = hits.iter().map(Option::is_some).collect();
    let via = contain(&keys, &mut outcomes, &copies, &late);
    // What taints each module: its own copy of a problem, or the copy it goes with.
    let taints: Vec<Option<Taint<'_>>> = (0..items.len())
        .map(|i| match (&hits[i], via[i]) {
            (Some(h), _) => Some((h, None)),
            (None, Some(v)) => hits[v].as_ref().map(|h| (h, Some(v))),
            (None, None) => None,
        })
        .collect();
    classes.extend(late);
    let decision = decide(items, problems, &taints, &outcomes, &classes, &edges, stats);
    Ok(decision)
}

/// The entry and slice embeddings of every item: from the features when the embedder is the
/// hashed one (already computed while parsing), else from the embedder on the views' text.
fn embeddings(
    feats: &[Features],
    programs: &[&str],
    hashed: bool,
    embedder: &dyn Embedder,
) -> Result<(Array2<f32>, Array2<f32>), DedupError> {
    if hashed {
        let dim = feats
            .iter()
            .map(|f| f.entry_embedding.len())
            .max()
            .unwrap_or(0);
        let stack = |pick: &dyn Fn(&Features) -> &Vec<f32>| {
            let mut m = Array2::<f32>::zeros((feats.len(), dim));
            for (mut row, f) in m.outer_iter_mut().zip(feats) {
                let v = pick(f);
                if v.len() == dim {
                    row.assign(&ndarray::ArrayView1::from(&v[..]));
                }
            }
            m
        };
        return Ok((
            stack(&|f| &f.entry_embedding),
            stack(&|f| &f.slice_embedding),
        ));
    }
    let texts: Vec<ksmith_embed::slice::SliceText> = programs
        .par_iter()
        .map(|p| ksmith_embed::slice::slice_texts(p))
        .collect();
    let entry: Vec<&str> = texts.iter().map(|t| t.entry.as_str()).collect();
    let slice: Vec<&str> = texts.iter().map(|t| t.all.as_str()).collect();
    Ok((embedder.embed(&entry)?, embedder.embed(&slice)?))
}

/// A module's contamination: the problem its copy matched, and the copy it goes with when it
/// is not one itself ([`contain`]).
type Taint<'a> = (&'a Hit, Option<usize>);

/// The rows and pairs from the groups and the contamination of each module.
fn decide(
    items: &[Candidate],
    problems: &[BenchmarkProblem],
    taints: &[Option<Taint<'_>>],
    outcomes: &[Outcome],
    classes: &[Classes],
    edges: &[Edge],
    mut stats: DedupStats,
) -> Decision {
    let problem_path = |h: &Hit| problems[h.problem as usize].path.clone();
    let mut rows = Vec::with_capacity(items.len());
    let mut pairs = Vec::new();
    let mut decided: HashSet<(usize, usize, u8)> = HashSet::new();
    for (i, c) in items.iter().enumerate() {
        let o = &outcomes[i];
        // A copy of a problem (`via` none), or a member of a copy's group (`via` the copy).
        let mut contaminated = |h: &Hit, via: Option<usize>| {
            let similarity = if via.is_none() { h.similarity } else { None };
            pairs.push(DedupPairRow {
                module_id: c.id.clone(),
                other: via.map_or_else(|| problem_path(h), |v| items[v].id.clone()),
                method: DedupMethod::Contamination,
                similarity,
                evidence: Some(via.map_or(h.evidence.name(), |_| "group").to_string()),
                decided: true,
            });
            DedupRow {
                module_id: c.id.clone(),
                kept: false,
                method: Some(DedupMethod::Contamination),
                duplicate_of: Some(problem_path(h)),
                similarity,
                contaminated_via: via.map(|v| items[v].id.clone()),
            }
        };
        let row = if let Some((h, via)) = taints[i] {
            contaminated(h, via)
        } else if o.survivor as usize == i {
            DedupRow {
                module_id: c.id.clone(),
                kept: true,
                method: None,
                duplicate_of: None,
                similarity: None,
                contaminated_via: None,
            }
        } else {
            let s = o.survivor as usize;
            if let Some(m) = o.method {
                decided.insert((i.min(s), i.max(s), method_priority(m)));
            }
            pairs.push(DedupPairRow {
                module_id: c.id.clone(),
                other: items[s].id.clone(),
                method: o.method.unwrap_or(DedupMethod::Near),
                similarity: o.similarity,
                evidence: None,
                decided: true,
            });
            DedupRow {
                module_id: c.id.clone(),
                kept: false,
                method: o.method,
                duplicate_of: Some(items[s].id.clone()),
                similarity: o.similarity,
                contaminated_via: None,
            }
        };
        if let Some(m) = row.method {
            *stats.dropped.entry(m).or_default() += 1;
        }
        rows.push(row);
    }
    // The other pairs found, for audit: every near and semantic pair, and each class member
    // with the class's first member.
    let mut evidence: Vec<(usize, usize, DedupMethod, Option<f64>)> = edges
        .iter()
        .map(|e| (e.a as usize, e.b as usize, e.method, e.similarity))
        .collect();
    for c in classes {
        let similarity =
            matches!(c.method, DedupMethod::Exact | DedupMethod::Kernel).then_some(1.0);
        for m in &c.members {
            for &other in &m[1..] {
                evidence.push((m[0] as usize, other as usize, c.method, similarity));
            }
        }
    }
    for (a, b, method, similarity) in evidence {
        let (a, b) = (a.min(b), a.max(b));
        if decided.contains(&(a, b, method_priority(method))) {
            continue;
        }
        pairs.push(DedupPairRow {
            module_id: items[a].id.clone(),
            other: items[b].id.clone(),
            method,
            similarity,
            evidence: None,
            decided: false,
        });
    }
    pairs.sort_by(|x, y| {
        (&x.module_id, &x.other, x.method.as_str())
            .cmp(&(&y.module_id, &y.other, y.method.as_str()))
            .then(y.decided.cmp(&x.decided))
    });
    Decision { rows, pairs, stats }
}
