//! The row types of every table: the API between stages.
//!
//! One file per table. A row type is a plain struct with public fields; its Arrow schema is
//! traced from the type (see [`crate::table`]). Changing a field means bumping the table's
//! `SCHEMA_VERSION`.

mod annotations;
mod chains;
mod clusters;
mod dedup;
mod grpo;
mod labels;
mod modules;
mod probes;
mod repos;
mod sft;
mod steps;
mod tasks;

pub use annotations::{AnnotationRow, ReviewVerdict};
pub use chains::{ChainRow, ChainTurn};
pub use clusters::ClusterRow;
pub use dedup::{DedupMethod, DedupPairRow, DedupRow};
pub use grpo::{ENV_FILE, GrpoRow, GrpoSelection, env_path_in};
pub use labels::SpeedLabels;
pub use modules::{ModuleReason, ModuleRow, ModuleStatus};
pub use probes::{OpCount, ProbeRow, ProbeStatus, SizeReason, SizeStatus, SubmoduleConfig};
pub use repos::{RepoReason, RepoRow, RepoStatus, SkipReason, SkippedFile, SourceKind};
pub use sft::{SftKind, SftRow, Split};
pub use steps::{EditFormat, EditOutcome, StepKind, StepRow, stored_text};
pub use tasks::TaskRow;
