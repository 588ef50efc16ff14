//! Decontamination: a module whose entry class is a copy of a benchmark problem's entry class.
//!
//! Both sides are reduced to the same view ([`ContaminationFeatures`]: the entry class and the
//! code it reaches, headers included, without imports, inputs or constants), so a leaked
//! problem matches however its file was dressed: reformatted, its class renamed, its constants
//! changed, pasted into a larger file or stripped to the class. The comparisons, in order: the
//! exact key, the structural hash (names and literals forgotten: renamed variables), near on
//! text shingles, near on canonical-label shingles (renamed variables plus small edits).

use std::collections::HashMap;

use crate::config::DedupConfig;
use crate::features::{CONTAMINATION_PERMS, ContaminationFeatures};
use crate::minhash::{band_key, estimated_jaccard, optimal_bands};

/// One benchmark problem.
#[derive(Debug, Clone, PartialEq)]
pub struct BenchmarkProblem {
    /// Its path in the benchmark (`level1/19_ReLU.py`).
    pub path: String,
    /// Its features.
    pub features: ContaminationFeatures,
}

/// Which comparison matched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Evidence {
    /// Same exact key.
    Exact,
    /// Same structural hash.
    Structural,
    /// Text shingles' Jaccard at or above `contamination_threshold`.
    Near,
    /// Canonical-label shingles' Jaccard at or above `contamination_canonical_threshold`.
    Canonical,
}

impl Evidence {
    /// Its name in `dedup_pairs.parquet`.
    pub fn name(self) -> &'static str {
        match self {
            Evidence::Exact => "exact",
            Evidence::Structural => "structural",
            Evidence::Near => "near",
            Evidence::Canonical => "canonical",
        }
    }
}

/// A module's match with a problem.
#[derive(Debug, Clone, PartialEq)]
pub struct Hit {
    /// Index of the problem.
    pub problem: u32,
    /// The similarity (1.0 for an exact match, none for a structural one).
    pub similarity: Option<f64>,
    /// How it matched.
    pub evidence: Evidence,
}

/// The problems, indexed for lookups.
pub struct ProblemIndex<'p> {
    problems: &'p [BenchmarkProblem],
    exact: HashMap<[u8; 16], u32>,
    structural: HashMap<u128, u32>,
    text: HashMap<u64, Vec<u32>>,
    canonical: HashMap<u64, Vec<u32>>,
    text_bands: (usize, usize),
    canonical_bands: (usize, usize),
}

impl<'p> ProblemIndex<'p> {
    /// Indexes `problems` (the first of equal keys wins).
    pub fn new(problems: &'p [BenchmarkProblem], cfg: &DedupConfig) -> Self {
        let text_bands = optimal_bands(cfg.contamination_threshold, CONTAMINATION_PERMS);
        let canonical_bands =
            optimal_bands(cfg.contamination_canonical_threshold, CONTAMINATION_PERMS);
        let mut idx = ProblemIndex {
            problems,
            exact: HashMap::new(),
            structural: HashMap::new(),
            text: HashMap::new(),
            canonical: HashMap::new(),
            text_bands,
            canonical_bands,
        };
        for (i, p) in problems.iter().enumerate() {
            let f = &p.features;
            let i = i as u32;
            idx.exact.entry(f.exact).or_insert(i);
            idx.structural.entry(f.structural).or_insert(i);
            if f.shingles == 0 {
                continue;
            }
            for (sig, (b, r), map) in [
                (&f.text, text_bands, &mut idx.text),
                (&f.canonical, canonical_bands, &mut idx.canonical),
            ] {
                for band in 0..b {
                    map.entry(band_key(sig, band, r)).or_default().push(i);
                }
            }
        }
        idx
    }

    /// The problem of index `i`.
    pub fn problem(&self, i: u32) -> &BenchmarkProblem {
        &self.problems[i as usize]
    }

    /// The best match of a module, if any (see the module documentation for the order).
    pub fn find(&self, f: &ContaminationFeatures, cfg: &DedupConfig) -> Option<Hit> {
        if let Some(&p) = self.exact.get(&f.exact) {
            return Some(Hit {
                problem: p,
                similarity: Some(1.0),
                evidence: Evidence::Exact,
            });
        }
        if cfg.contamination_structural
            && let Some(&p) = self.structural.get(&f.structural)
        {
            return Some(Hit {
                problem: p,
                similarity: None,
                evidence: Evidence::Structural,
            });
        }
        if f.shingles == 0 {
            return None;
        }
        let near = [
            (
                &f.text,
                self.text_bands,
                &self.text,
                cfg.contamination_threshold,
                Evidence::Near,
            ),
            (
                &f.canonical,
                self.canonical_bands,
                &self.canonical,
                cfg.contamination_canonical_threshold,
                Evidence::Canonical,
            ),
        ];
        for (sig, (b, r), map, threshold, evidence) in near {
            let mut seen: Vec<u32> = (0..b)
                .filter_map(|band| map.get(&band_key(sig, band, r)))
                .flatten()
                .copied()
                .collect();
            seen.sort_unstable();
            seen.dedup();
            let mut best: Option<(f64, u32)> = None;
            for p in seen {
                let other = &self.problems[p as usize].features;
                let theirs = match evidence {
                    Evidence::Canonical => &other.canonical,
                    _ => &other.text,
                };
                let j = estimated_jaccard(sig, theirs);
                if best.is_none_or(|(bj, _)| j > bj) {
                    best = Some((j, p));
                }
            }
            if let Some((j, p)) = best
                && j >= threshold
            {
                return Some(Hit {
                    problem: p,
                    similarity: Some(j),
                    evidence,
                });
            }
        }
        None
    }
}
