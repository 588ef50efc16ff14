//! The `[dedup]` section of the configuration.

use std::path::PathBuf;

use ksmith_embed::EmbedderConfig;
use serde::{Deserialize, Serialize};

use crate::error::DedupError;

/// Settings of the dedup stage. Every method can be switched off.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DedupConfig {
    /// Drop modules whose normalized program (no whitespace, comments, docstrings) is identical.
    pub exact: bool,
    /// Drop near duplicates found by MinHash LSH over token shingles.
    pub near: bool,
    /// Jaccard similarity (estimated from the signatures) at or above which two modules are
    /// near duplicates.
    pub near_threshold: f64,
    /// Tokens per shingle.
    pub shingle_size: usize,
    /// MinHash permutations (signature length).
    pub num_perm: usize,
    /// LSH bands; 0 chooses bands and rows like datasketch's `optimal_param` (which weighs
    /// missed pairs and extra candidates equally: it misses half the pairs at the threshold).
    pub bands: usize,
    /// LSH rows per band; 0 chooses them with `bands`.
    pub rows: usize,
    /// Drop modules whose embeddings have a cosine similarity at or above `semantic_threshold`.
    pub semantic: bool,
    /// Cosine similarity at or above which two modules are semantic duplicates.
    pub semantic_threshold: f64,
    /// Random-hyperplane hash tables used to find semantic candidates.
    pub simhash_tables: usize,
    /// Hyperplanes (bits) per table.
    pub simhash_bits: usize,
    /// Two modules with recorded calls run alike when they make the same kernel-deciding calls
    /// (convolutions, norms, reductions, layouts, ...) and the weighted Jaccard of the calls
    /// that do work and of their consecutive pairs, in the order they ran, is at or above this
    /// (1.0: the same calls, in the same order). Near and semantic pairs must run alike; with
    /// `kernel`, modules that run alike match however their code is written.
    pub aten_threshold: f64,
    /// Drop modules whose sized programs ran alike (see `aten_threshold`) at sizes of one
    /// regime: one class per sequence of calls (arithmetic intensities chained within a factor
    /// of 4), and pairs whose calls agree (intensities within a factor of 4): the same
    /// computation however it is written.
    pub kernel: bool,
    /// Drop modules with the same structural hash (Weisfeiler-Lehman hash of the syntax tree
    /// with identifier names and literal values forgotten).
    pub structural: bool,
    /// Weisfeiler-Lehman iterations.
    pub wl_iterations: usize,
    /// In an LSH bucket larger than this, each member is compared with the next
    /// `max_bucket_pairs` members only (bounds the work on huge buckets).
    pub max_bucket_pairs: usize,
    /// Evaluation benchmarks to decontaminate against: `"kernelbench"` (KernelBench at
    /// `kernelbench_commit`) or paths of local folders of problems (every `.py` file under one
    /// is a problem). A module whose entry class copies a problem's entry class is dropped as
    /// `contamination`, and so is every module dedup grouped with it. Empty: no
    /// decontamination.
    pub contamination: Vec<String>,
    /// Where KernelBench is fetched from when it is not in the cache.
    pub kernelbench_url: String,
    /// The pinned KernelBench commit (40 hex digits).
    pub kernelbench_commit: String,
    /// Where KernelBench's problems come from: `auto` (a cached checkout, else the committed
    /// signatures when they are of `kernelbench_commit`, else a fetch), `git` (the checkout,
    /// fetched when missing) or `signatures` (the committed signatures only).
    pub kernelbench_from: String,
    /// Cache of fetched benchmarks; `~/.cache/ksmith/benchmarks` when unset.
    pub benchmark_cache: Option<PathBuf>,
    /// Jaccard (text shingles of the entry class and what it reaches, headers included) at or
    /// above which a module copies a problem.
    pub contamination_threshold: f64,
    /// The same on canonical labels (names and literal values forgotten): copies with renamed
    /// variables and small edits.
    pub contamination_canonical_threshold: f64,
    /// Also count an equal structural hash (renamed copies) as contamination.
    pub contamination_structural: bool,
    /// Seed of the MinHash permutations and the hyperplanes.
    pub seed: u64,
    /// The embedder of semantic dedup.
    pub embedder: EmbedderConfig,
}

impl Default for DedupConfig {
    fn default() -> Self {
        DedupConfig {
            exact: true,
            near: true,
            near_threshold: 0.7,
            shingle_size: 5,
            num_perm: 256,
            bands: 42,
            rows: 6,
            semantic: true,
            semantic_threshold: 0.97,
            simhash_tables: 16,
            simhash_bits: 16,
            aten_threshold: 0.9,
            kernel: true,
            structural: true,
            wl_iterations: 4,
            max_bucket_pairs: 64,
            contamination: vec![crate::benchmark::KERNELBENCH.to_string()],
            kernelbench_url: "https://github.com/ScalingIntelligence/KernelBench".to_string(),
            kernelbench_commit: "423217d9fda91e0c2d67e4a43bf62f96f6d104f1".to_string(),
            kernelbench_from: "auto".to_string(),
            benchmark_cache: None,
            contamination_threshold: 0.7,
            contamination_canonical_threshold: 0.9,
            contamination_structural: true,
            seed: 42,
            embedder: EmbedderConfig::default(),
        }
    }
}

impl DedupConfig {
    /// Checks the values (no I/O).
    pub fn validate(&self) -> Result<(), DedupError> {
        let bad = |m: String| Err(DedupError::Config(m));
        for (name, v) in [
            ("near_threshold", self.near_threshold),
            ("semantic_threshold", self.semantic_threshold),
            ("aten_threshold", self.aten_threshold),
            ("contamination_threshold", self.contamination_threshold),
            (
                "contamination_canonical_threshold",
                self.contamination_canonical_threshold,
            ),
        ] {
            if !(v > 0.0 && v <= 1.0) {
                return bad(format!("[dedup] {name} must be in (0, 1] (got {v})"));
            }
        }
        if self.shingle_size == 0 {
            return bad("[dedup] shingle_size must be at least 1".into());
        }
        if !(8..=4096).contains(&self.num_perm) {
            return bad(format!(
                "[dedup] num_perm must be in 8..=4096 (got {})",
                self.num_perm
            ));
        }
        if (self.bands == 0) != (self.rows == 0) {
            return bad("[dedup] set both bands and rows, or neither (0 = optimal)".into());
        }
        if self.bands * self.rows > self.num_perm {
            return bad(format!(
                "[dedup] bands * rows = {} exceeds num_perm = {}",
                self.bands * self.rows,
                self.num_perm
            ));
        }
        if self.simhash_tables == 0 || !(1..=64).contains(&self.simhash_bits) {
            return bad("[dedup] simhash_tables must be >= 1 and simhash_bits in 1..=64".into());
        }
        if self.max_bucket_pairs == 0 {
            return bad("[dedup] max_bucket_pairs must be at least 1".into());
        }
        if !matches!(
            self.kernelbench_from.as_str(),
            "auto" | "git" | "signatures"
        ) {
            return bad(format!(
                "[dedup] kernelbench_from must be \"auto\", \"git\" or \"signatures\" (got {:?})",
                self.kernelbench_from
            ));
        }
        if self.kernelbench_commit.len() != 40
            || !self
                .kernelbench_commit
                .bytes()
                .all(|b| b.is_ascii_hexdigit())
        {
            return bad(format!(
                "[dedup] kernelbench_commit must be a full commit id (40 hex digits; got {:?})",
                self.kernelbench_commit
            ));
        }
        if let Some(e) = self.contamination.iter().find(|e| e.trim().is_empty()) {
            return bad(format!("[dedup] contamination has an empty entry ({e:?})"));
        }
        if self.semantic {
            self.embedder
                .validate()
                .map_err(|e| DedupError::Config(format!("[dedup.embedder] {e}")))?;
        }
        Ok(())
    }

    /// The LSH bands and rows in use.
    pub fn bands_rows(&self) -> (usize, usize) {
        if self.bands > 0 {
            (self.bands, self.rows)
        } else {
            crate::minhash::optimal_bands(self.near_threshold, self.num_perm)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_bad_values_are_named() {
        DedupConfig::default().validate().unwrap();
        let c = DedupConfig {
            near_threshold: 1.5,
            ..Default::default()
        };
        assert!(
            c.validate()
                .unwrap_err()
                .to_string()
                .contains("near_threshold")
        );
        let c = DedupConfig {
            bands: 30,
            rows: 10,
            ..Default::default()
        };
        assert!(c.validate().unwrap_err().to_string().contains("exceeds"));
        let c = DedupConfig {
            bands: 3,
            rows: 0,
            ..Default::default()
        };
        assert!(c.validate().is_err());
        let optimal = DedupConfig {
            bands: 0,
            rows: 0,
            ..Default::default()
        };
        assert_eq!(optimal.bands_rows(), (25, 10));
        assert_eq!(DedupConfig::default().bands_rows(), (42, 6));
    }
}
