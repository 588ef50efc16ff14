//! The errors of the select stage: only environment failures (unreadable tables, disk, config);
//! a step that does not qualify is a counted drop, never an error.

use std::path::PathBuf;

/// What can stop the select stage.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A `[select]` value is invalid.
    #[error("[select] {key}: {message}")]
    Config {
        /// The key.
        key: String,
        /// What is wrong.
        message: String,
    },
    /// An input table is missing.
    #[error("{}: missing input table; run `ksmith {stage}` first", path.display())]
    MissingInput {
        /// The table.
        path: PathBuf,
        /// The stage that writes it.
        stage: &'static str,
    },
    /// Reading or writing a table or side file failed.
    #[error(transparent)]
    Core(#[from] ksmith_core::Error),
    /// The thread pool could not start.
    #[error("cannot start {threads} worker threads: {message}")]
    Threads {
        /// Threads asked for.
        threads: usize,
        /// Why.
        message: String,
    },
}
