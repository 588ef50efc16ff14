//! Errors of the dedup stage: only environment and configuration failures; a bad module is a
//! row, never an error.

use std::path::PathBuf;

/// What can stop the dedup stage.
#[derive(Debug, thiserror::Error)]
pub enum DedupError {
    /// The `[dedup]` section is invalid.
    #[error("config: {0}")]
    Config(String),
    /// Reading or writing a table failed.
    #[error(transparent)]
    Core(#[from] ksmith_core::Error),
    /// An input table is missing.
    #[error("{table} not found at {}: run `ksmith {stage}` first", path.display())]
    MissingInput {
        /// The table's name.
        table: &'static str,
        /// Where it was expected.
        path: PathBuf,
        /// The stage that writes it.
        stage: &'static str,
    },
    /// The folder of evaluation problems cannot be read.
    #[error("contamination_dir {}: {message}", path.display())]
    Benchmark {
        /// The folder or file.
        path: PathBuf,
        /// What went wrong.
        message: String,
    },
    /// The embedder failed.
    #[error(transparent)]
    Embed(#[from] ksmith_embed::EmbedError),
    /// The thread pool could not be built.
    #[error("thread pool: {0}")]
    Threads(String),
}
