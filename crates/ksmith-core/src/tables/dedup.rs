//! `dedup.parquet`: one row per runnable module, kept or dropped.

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
        /// Near or structural duplicate of an evaluation benchmark problem.
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
    /// The method that matched, for dropped modules.
    pub method: Option<DedupMethod>,
    /// What it duplicates: a module id, or a benchmark problem's path for contamination.
    pub duplicate_of: Option<String>,
    /// The similarity that matched (Jaccard estimate or cosine), when the method has one.
    pub similarity: Option<f64>,
}

impl Table for DedupRow {
    const NAME: &'static str = "dedup";
    const SCHEMA_VERSION: u32 = 1;
}
