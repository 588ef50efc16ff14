//! `sft.parquet`: supervised fine-tuning samples chosen by select from the rollout steps.

use serde::{Deserialize, Serialize};

use crate::chat::ChatMessage;
use crate::evaluation::{Backend, Stamp};
use crate::table::Table;
use crate::tables::SpeedLabels;

crate::vocabulary! {
    /// Which side of the train/validation split a sample is on (decided per cluster, so a task and
    /// its near duplicates are always on the same side).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
    pub enum Split {
        /// Training data.
        Train = "train",
        /// Held-out validation data.
        Validation = "validation",
    }
}

crate::vocabulary! {
    /// Why a step became an SFT sample.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
    pub enum SftKind {
        /// A first step (PyTorch reference to Triton) whose program is correct.
        Correctness = "correctness",
        /// A Triton-to-Triton step whose program is correct and faster than eager and its parent.
        Performance = "performance",
    }
}

/// One SFT sample: the step's prompt and the teacher's answer, with its lineage and metrics.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SftRow {
    /// Stable id: content hash of (kind, step id).
    pub sample_id: String,
    /// The kernel language of the sample's program.
    pub backend: Backend,
    /// Why it was selected.
    pub kind: SftKind,
    /// Train or validation.
    pub split: Split,
    /// The task (reference module) the step belongs to.
    pub task_id: String,
    /// The step whose prompt and answer this is.
    pub step_id: String,
    /// The step's parent program; `None` when the parent is the PyTorch reference.
    pub parent_step_id: Option<String>,
    /// Iteration of the step in its task's rollout (0 is the first step).
    pub iteration: u32,
    /// Island of the step.
    pub island: u32,
    /// Functional family of the task.
    pub family: String,
    /// Difficulty level of the task (1 to 3).
    pub level: u8,
    /// Cluster of the task (-1 is noise).
    pub cluster: i32,
    /// The conversation: the step's prompt messages (system, user) and the teacher's answer as
    /// the last, `assistant`, message.
    pub messages: Vec<ChatMessage>,
    /// Tokens of the whole conversation, counted by `token_counter`.
    pub tokens: u64,
    /// How tokens were counted (e.g. `approx_chars_div_4`).
    pub token_counter: String,
    /// Speedup of the step's program over PyTorch eager, when timed.
    pub speedup: Option<f64>,
    /// Speedup of the parent program over eager, when timed (`None` for the reference).
    pub parent_speedup: Option<f64>,
    /// The step's speedups over eager and over its parent with their confidence intervals.
    pub labels: SpeedLabels,
    /// What the step's evaluation ran on and how it was timed.
    pub stamp: Stamp,
    /// The teacher model that answered.
    pub teacher: String,
    /// The task's source repository (provenance).
    pub repo: String,
    /// The repository's license (SPDX), when known.
    pub license: Option<String>,
}

impl Table for SftRow {
    const NAME: &'static str = "sft";
    const SCHEMA_VERSION: u32 = 4;
}
