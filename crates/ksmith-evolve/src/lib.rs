//! Rollout: evolve Triton kernels for every task with a teacher LLM and an evaluator.
//! Input: `tasks.parquet` (`TaskRow`). Output: `steps.parquet` (`StepRow`), plus per-task
//! journals and checkpoints under `<workdir>/rollout/tasks/<task>/`.
//!
//! For each task the engine keeps an [`archive::Archive`]: several islands, each a MAP-Elites
//! grid over (kernel complexity, log2 speedup) on fixed scales ([`features`]), failed programs
//! kept for feedback and repair, a task-wide elite archive and ring migration. Each step
//! ([`engine::TaskRun::step`]) plans an island, parent and context ([`select`]), builds the
//! prompt from editable templates within a token budget ([`prompt`]), asks the teacher
//! ([`ksmith_core::chat::ChatClient`]), applies its answer to the editable block
//! ([`ksmith_core::answer`]; the seed program is [`seed`]), evaluates the candidate
//! ([`ksmith_core::evaluation::Evaluator`]), appends the step to the task's journal ([`journal`])
//! and only then updates the archive. Tasks run on as many threads as [`in_flight`] derives from
//! the evaluator's capacity and the teacher's concurrency (or `parallel_tasks`); the report adds
//! the time steps waited on each and the evaluator's own counters (per device, by phase).
//!
//! Invariants: the engine is generic over the teacher and the evaluator (the CLI wires the real
//! ones); a task's state is a pure function of the configuration, the seed and its journal, so a
//! run killed at any moment resumes with no lost and no duplicated step and the same random
//! choices; bad answers and bad candidates are recorded steps, never errors. Entry point:
//! [`run`].
#![deny(missing_docs)]

pub mod archive;
pub mod config;
pub mod engine;
pub mod error;
pub mod features;
pub mod in_flight;
pub mod journal;
pub mod preflight;
pub mod prompt;
pub mod seed;
pub mod select;
mod stage;

pub use config::RolloutConfig;
pub use error::Error;
pub use stage::{
    ACCUMULATED, RunCounters, TaskEnding, TaskHeadroom, endings_path, headroom_path, run,
    run_with_identity, tasks_root,
};

/// The stage's name.
pub const STAGE: &str = "rollout";
/// Bumped when the output for the same input changes.
pub const CODE_VERSION: u32 = 3;
