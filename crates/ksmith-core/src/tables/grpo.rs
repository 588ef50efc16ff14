//! `grpo.parquet`: GRPO prompts chosen by select, with what the reward needs to score answers;
//! and `env.parquet`: the same rows for the starts of agent episodes (the `[select] env_rule`),
//! where the evaluator is a tool the model calls over several turns.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::chat::ChatMessage;
use crate::evaluation::{Backend, Stamp};
use crate::table::Table;
use crate::tables::{SpeedLabels, Split};

crate::vocabulary! {
    /// Which rule chose a GRPO prompt.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
    pub enum GrpoSelection {
        /// The prompt's current program was a best-so-far of its trajectory, correct and faster
        /// than eager (the paper's choice).
        BestSteps = "best_steps",
        /// Any step whose current program is correct (ablation).
        AllSteps = "all_steps",
        /// First steps only: the current program is the PyTorch reference (ablation).
        FirstSteps = "first_steps",
    }
}

/// One GRPO prompt. The answer to it is scored by its speedup relative to the current
/// (parent) program, gated on correctness against the reference.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GrpoRow {
    /// Stable id: content hash of (selection, step id).
    pub sample_id: String,
    /// The rule that chose it.
    pub selection: GrpoSelection,
    /// The kernel language the answer must be written in (the reward evaluates it so).
    pub backend: Backend,
    /// Train or validation.
    pub split: Split,
    /// The task (reference module).
    pub task_id: String,
    /// The step whose prompt this is.
    pub step_id: String,
    /// The step holding the current (parent) program; `None` when it is the reference.
    pub parent_step_id: Option<String>,
    /// Iteration of the step whose prompt this is.
    pub iteration: u32,
    /// Island of that step.
    pub island: u32,
    /// Functional family of the task.
    pub family: String,
    /// Difficulty level of the task (1 to 3).
    pub level: u8,
    /// Cluster of the task (-1 is noise).
    pub cluster: i32,
    /// The prompt messages (system, user) exactly as the teacher saw them.
    pub prompt: Vec<ChatMessage>,
    /// Tokens of the prompt, counted by `token_counter`.
    pub prompt_tokens: u64,
    /// How tokens were counted (e.g. `approx_chars_div_4`).
    pub token_counter: String,
    /// The PyTorch reference program (`Model`, `get_inputs()`, `get_init_inputs()`).
    pub reference_program: String,
    /// The current program the answer must improve, exactly as the prompt showed it (for first
    /// steps, the seed: the reference with its editable block marked).
    pub parent_program: String,
    /// Speedup of the parent over eager as measured during the rollout (`None` untimed).
    pub parent_speedup: Option<f64>,
    /// Median runtime of the parent in milliseconds during the rollout, when timed.
    pub parent_runtime_ms: Option<f64>,
    /// Median runtime of PyTorch eager in milliseconds during the rollout, when timed.
    pub eager_runtime_ms: Option<f64>,
    /// The device the rollout timings were taken on.
    pub hardware: String,
    /// The current (parent) program's speedup over eager with its confidence interval
    /// (`over_parent` is not set: the answer is what is scored against this program).
    pub parent_labels: SpeedLabels,
    /// What the current program's evaluation ran on and how it was timed (for first steps, the
    /// evaluation that timed the task's eager reference).
    pub stamp: Stamp,
    /// The task's source repository (provenance).
    pub repo: String,
    /// The repository's license (SPDX), when known.
    pub license: Option<String>,
}

impl Table for GrpoRow {
    const NAME: &'static str = "grpo";
    const SCHEMA_VERSION: u32 = 4;
}

/// The file of the agent environments' starts in a work directory: [`GrpoRow`]s chosen by
/// `[select] env_rule` (a second table of the same row type, so every GRPO column reaches the
/// environment datasets too).
pub const ENV_FILE: &str = "env.parquet";

/// The path of [`ENV_FILE`] in `workdir`.
pub fn env_path_in(workdir: &Path) -> PathBuf {
    workdir.join(ENV_FILE)
}
