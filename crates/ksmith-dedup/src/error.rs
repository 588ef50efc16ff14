//! Errors of the dedup stage: only environment and configuration failures; a bad module is a
//! row, never an error.

use std::path::PathBuf;

/// What can stop the dedup stage.
#[derive(Debug, thiserror::Error)]
pub enum DedupError {
    /// The `[dedup]` section is invalid.
    #[error("config: {0}")]
    Config(String),
    /// A missing input, a thread pool that cannot start, or table or report I/O (the stage
    /// contract's errors).
    #[error(transparent)]
    Core(#[from] ksmith_core::Error),
    /// A folder of evaluation problems cannot be read.
    #[error("benchmark folder {}: {message}", path.display())]
    Benchmark {
        /// The folder or file.
        path: PathBuf,
        /// What went wrong.
        message: String,
    },
    /// A benchmark of `[dedup] contamination` cannot be had.
    #[error("decontamination against {name}: {message}")]
    BenchmarkUnavailable {
        /// `kernelbench@<commit>`.
        name: String,
        /// Why, and what to do about it.
        message: String,
    },
    /// The embedder failed.
    #[error(transparent)]
    Embed(#[from] ksmith_embed::EmbedError),
}
