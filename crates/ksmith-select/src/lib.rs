//! Select: chooses SFT samples and GRPO prompts from the rollout's steps.
//!
//! Input: `steps.parquet` (`StepRow`) and `tasks.parquet` (`TaskRow`: family, level, cluster).
//! Output: `sft.parquet` ([`SftRow`]), `grpo.parquet` ([`GrpoRow`]) and `selection.json`
//! ([`SelectionManifest`], the rules in words for the dataset cards).
//!
//! The rules (see [`rules`]): correctness SFT = every correct first step; performance SFT =
//! correct Triton-to-Triton steps faster than eager and than their parent; GRPO = prompts whose
//! current program is a best-so-far of its trajectory, correct and faster than eager
//! (`all_steps` and `first_steps` are selectable for ablations). Samples over the token budget
//! are dropped ([`tokens`]), each set is balanced across levels and families ([`balance`]) and
//! split into train and validation by cluster ([`split`]).
//!
//! Invariants: deterministic (same inputs and config give the same rows, in the same order);
//! every step that does not become a sample is counted under a reason in the report; no task
//! has samples on both sides of the split. Entry point: [`run`].
#![deny(missing_docs)]

pub mod balance;
pub mod config;
pub mod error;
pub mod manifest;
pub mod rules;
pub mod selection;
pub mod split;
pub mod tokens;
pub mod trajectory;

pub use config::{BestScope, GrpoRule, SelectConfig};
pub use error::Error;
pub use ksmith_core::tables::{GrpoRow, SftRow};
pub use manifest::SelectionManifest;
pub use selection::{Selection, select};
pub use trajectory::StepView;

/// The stage's name.
pub const STAGE: &str = "select";
/// Bumped when the output for the same input changes.
pub const CODE_VERSION: u32 = 1;
