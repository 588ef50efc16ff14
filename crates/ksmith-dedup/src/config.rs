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
    /// LSH bands; 0 chooses bands and rows like datasketch's `optimal_param`.
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
    /// Drop modules with the same structural hash (Weisfeiler-Lehman hash of the syntax tree
    /// with identifier names and literal values forgotten).
    pub structural: bool,
    /// Weisfeiler-Lehman iterations.
    pub wl_iterations: usize,
    /// In an LSH bucket larger than this, each member is compared with the next
    /// `max_bucket_pairs` members only (bounds the work on huge buckets).
    pub max_bucket_pairs: usize,
    /// Folder of evaluation problems (e.g. a KernelBench checkout); every `.py` file under it is
    /// a problem. Modules that are near or structural duplicates of one are dropped as
    /// `contamination`. Unset: no decontamination.
    pub contamination_dir: Option<PathBuf>,
    /// Jaccard threshold of a near match against an evaluation problem.
    pub contamination_threshold: f64,
    /// Also count a structural (WL hash) match against an evaluation problem as contamination.
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
            bands: 0,
            rows: 0,
            semantic: true,
            semantic_threshold: 0.97,
            simhash_tables: 16,
            simhash_bits: 16,
            structural: true,
            wl_iterations: 4,
            max_bucket_pairs: 64,
            contamination_dir: None,
            contamination_threshold: 0.7,
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
            ("contamination_threshold", self.contamination_threshold),
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
            ..Default::default()
        };
        assert!(c.validate().is_err());
        assert_eq!(DedupConfig::default().bands_rows(), (25, 10));
    }
}
