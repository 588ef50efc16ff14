//! `dedup.parquet`: one row per runnable module, kept or dropped; `dedup_pairs.parquet`: the
//! matched pairs behind those decisions, for audit.

use serde::{Deserialize, Serialize};

use crate::table::Table;

crate::vocabulary! {
    /// The method that matched a dropped module.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
    pub enum DedupMethod {
        /// Same normalized program text.
        Exact = "exact",
        /// MinHash LSH over token shingles, above the Jaccard threshold.
        Near = "near",
        /// Embedding cosine similarity above the threshold.
        Semantic = "semantic",
        /// Same structural (Weisfeiler-Lehman) hash.
        Structural = "structural",
        /// Same calls, with the attributes that decide their kernels, in the same order, on the
        /// sized programs (probe's `aten_calls`), at sizes of one regime of arithmetic
        /// intensity: the same computation however it is written.
        Kernel = "kernel",
        /// A copy of an evaluation benchmark problem (exact, structural or near, entry class against
        /// entry class), or grouped by dedup with such a copy.
        Contamination = "contamination",
    }
}

/// One runnable module and whether it survived deduplication.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DedupRow {
    /// The module's id.
    pub module_id: String,
    /// True when the module survives.
    pub kept: bool,
    /// The method that matched, for dropped modules: always a direct match with
    /// `duplicate_of` (groups never chain).
    pub method: Option<DedupMethod>,
    /// What it duplicates: the surviving module's id, or a benchmark problem's path for
    /// contamination.
    pub duplicate_of: Option<String>,
    /// The similarity of the direct match with `duplicate_of` (Jaccard estimate or cosine), when
    /// the method has one; none for a module dropped only for its group's contamination.
    pub similarity: Option<f64>,
    /// For a module dropped as contamination because dedup grouped it with a copy of a
    /// benchmark problem (and not itself a copy): the id of that copy.
    pub contaminated_via: Option<String>,
}

impl Table for DedupRow {
    const NAME: &'static str = "dedup";
    const SCHEMA_VERSION: u32 = 2;
}

/// One matched pair, so that a person can audit any dedup decision.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DedupPairRow {
    /// A module id.
    pub module_id: String,
    /// The other side: a module id, or a benchmark problem's path for contamination.
    pub other: String,
    /// How they matched.
    pub method: DedupMethod,
    /// Their similarity, when the method has one.
    pub similarity: Option<f64>,
    /// For contamination: which comparison matched (`exact`, `structural`, `near` or
    /// `canonical`, the last being near on names and literals forgotten).
    pub evidence: Option<String>,
    /// True when this pair decided `module_id`'s row (it was dropped as a duplicate of
    /// `other`); false for the other pairs found.
    pub decided: bool,
}

impl Table for DedupPairRow {
    const NAME: &'static str = "dedup_pairs";
    const SCHEMA_VERSION: u32 = 1;
}
