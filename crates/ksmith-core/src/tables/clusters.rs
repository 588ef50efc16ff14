//! `clusters.parquet`: one row per unique module with its cluster, family and level.

use serde::{Deserialize, Serialize};

use crate::table::Table;

/// A unique module's place in the clustering.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClusterRow {
    /// The module's id.
    pub module_id: String,
    /// HDBSCAN cluster label; -1 is noise.
    pub cluster: i32,
    /// True for the medoid of its cluster.
    pub is_center: bool,
    /// Functional family (activation, normalization, attention, convolution, ...).
    pub family: String,
    /// The rule that decided the family.
    pub family_rule: String,
    /// Difficulty level: 1 one compute operator, 2 a short fused sequence, 3 a block or network.
    pub level: u8,
    /// The rule that decided the level.
    pub level_rule: String,
    /// Why the module is not a task by default (`no_compute`, `wrapper_of_argument`); none
    /// for a real task.
    pub trivial: Option<String>,
}

impl Table for ClusterRow {
    const NAME: &'static str = "clusters";
    const SCHEMA_VERSION: u32 = 2;
}
