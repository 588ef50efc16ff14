//! `tasks.parquet`: the programs rollouts start from.

use serde::{Deserialize, Serialize};

use crate::table::Table;

/// One task: a runnable, unique KernelBench-format program.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskRow {
    /// Stable task id (the module id).
    pub task_id: String,
    /// The module's repository.
    pub repo: String,
    /// The module's class name in its repository.
    pub class_name: String,
    /// The reference program (`Model`, `get_inputs()`, `get_init_inputs()`).
    pub program: String,
    /// Functional family.
    pub family: String,
    /// Difficulty level (1 to 3).
    pub level: u8,
    /// Cluster label (-1 is noise).
    pub cluster: i32,
    /// License of the repository (SPDX), for provenance.
    pub license: Option<String>,
    /// Why it was chosen: `center` (a cluster medoid: the expert-seeded set), `balanced` (the
    /// cold-start set balanced across family and level), `all`, `noise` or `imported`.
    pub selected_as: String,
    /// Other size sets of `program`'s module-level constants that run (a JSON list of objects
    /// such as `{"batch_size": 8, "dim": 2048}`, `[]` when none), for the evaluator's
    /// hidden-shape check: the probe's `alt_sizes`.
    pub alt_sizes: String,
}

impl Table for TaskRow {
    const NAME: &'static str = "tasks";
    const SCHEMA_VERSION: u32 = 2;
}
