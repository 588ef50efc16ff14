//! The GRPO ground truth: everything the reward function needs to score one answer, as a JSON
//! string (verl `reward_model.ground_truth`, OpenRLHF `label`, TRL `ground_truth` column).
//!
//! A JSON string rather than a nested struct keeps the Parquet schema fixed while the reward's
//! needs grow (and verl's own code-execution rewards take JSON strings the same way). The
//! reward function (`python/ksmith/reward.py`) reads exactly these keys.

use std::collections::BTreeMap;

use ksmith_core::evaluation::Backend;
use ksmith_core::evolve_block::ENTRY_POINT;
use ksmith_core::tables::GrpoRow;
use serde::{Deserialize, Serialize};

/// Version of the ground-truth JSON; the reward function refuses versions it does not know.
pub use ksmith_core::versions::GROUND_TRUTH as GROUND_TRUTH_VERSION;

/// The ground truth of one GRPO prompt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GroundTruth {
    /// [`GROUND_TRUTH_VERSION`].
    pub version: u32,
    /// The task (the evaluator caches the reference per task).
    pub task_id: String,
    /// The class the answer must define.
    pub entry_point: String,
    /// The kernel language the answer is evaluated as (the evaluator's backend; version 2 on).
    pub backend: Backend,
    /// The PyTorch reference program (`Model`, `get_inputs()`, `get_init_inputs()`).
    pub reference_program: String,
    /// The current program the answer improves; the reward re-times it in the same session.
    pub parent_program: String,
    /// True when the current program is the reference itself (first steps).
    pub parent_is_reference: bool,
    /// The parent's speedup over eager during the rollout (informative; the reward re-times).
    pub parent_speedup: Option<f64>,
    /// The parent's median runtime in ms during the rollout.
    pub parent_runtime_ms: Option<f64>,
    /// Eager PyTorch's median runtime in ms during the rollout.
    pub eager_runtime_ms: Option<f64>,
    /// The device of the rollout timings.
    pub hardware: String,
    /// Correctness tolerances `[atol, rtol]` per output dtype.
    pub tolerances: BTreeMap<String, [f64; 2]>,
}

impl GroundTruth {
    /// The ground truth of `row` with `tolerances`.
    pub fn of(row: &GrpoRow, tolerances: &BTreeMap<String, [f64; 2]>) -> Self {
        GroundTruth {
            version: GROUND_TRUTH_VERSION,
            task_id: row.task_id.clone(),
            entry_point: ENTRY_POINT.to_string(),
            backend: row.backend,
            reference_program: row.reference_program.clone(),
            parent_program: row.parent_program.clone(),
            parent_is_reference: row.parent_step_id.is_none(),
            parent_speedup: row.parent_speedup,
            parent_runtime_ms: row.parent_runtime_ms,
            eager_runtime_ms: row.eager_runtime_ms,
            hardware: row.hardware.clone(),
            tolerances: tolerances.clone(),
        }
    }

    /// The JSON string stored in the datasets.
    pub fn to_json(&self) -> String {
        // Serializing plain strings, numbers and maps with string keys cannot fail.
        serde_json::to_string(self).unwrap_or_default()
    }
}
