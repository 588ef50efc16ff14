//! Errors of the rollout stage. Bad candidates and bad answers are never errors (they are
//! recorded steps); these are the failures of the environment and of the stored state.

use std::path::PathBuf;

/// What can stop the rollout stage.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A `[rollout]` key holds an invalid value.
    #[error("[rollout] {0}")]
    Config(String),
    /// A prompt template is missing a placeholder or uses an unknown one.
    #[error("prompt template {name} ({origin}): {message}")]
    Template {
        /// Template name (`system.md`, ...).
        name: String,
        /// Embedded default or the file it was read from.
        origin: String,
        /// What is wrong.
        message: String,
    },
    /// Table or file I/O of ksmith-core failed.
    #[error(transparent)]
    Core(#[from] ksmith_core::Error),
    /// Reading or writing a rollout file failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A task's step journal or checkpoint cannot be read back.
    #[error("task {task}: {} is corrupt: {message}", path.display())]
    Corrupt {
        /// The task.
        task: String,
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// Replaying a task's journal did not retrace the recorded steps (the stored state was made
    /// by another configuration or version).
    #[error(
        "task {task}: resuming from {} failed at iteration {iteration}: {message}; rerun with --force to start this rollout over",
        path.display()
    )]
    Replay {
        /// The task.
        task: String,
        /// The journal.
        path: PathBuf,
        /// The first step that differs.
        iteration: u32,
        /// What differs.
        message: String,
    },
    /// Another rollout holds the work directory's lock.
    #[error("{}: another rollout is running on this work directory", path.display())]
    Locked {
        /// The lock file.
        path: PathBuf,
    },
    /// Some tasks could not finish because the teacher or the evaluator is unavailable; their
    /// completed steps are kept and a rerun resumes them.
    #[error("rollout incomplete: {0}")]
    Incomplete(String),
}

impl Error {
    /// An I/O error on `path`.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
    }
}
