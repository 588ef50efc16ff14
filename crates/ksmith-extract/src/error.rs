//! Errors of the extract stage: only environment failures. A bad file or class is a row.

use std::path::PathBuf;

/// What can stop the extract stage.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The `[extract]` section holds an invalid value.
    #[error("config {0}")]
    Config(String),
    /// The input table is missing: crawl has not run in this work directory.
    #[error("{}: not found; run `ksmith crawl` with this --workdir first", path.display())]
    MissingInput {
        /// The expected `repos.parquet`.
        path: PathBuf,
    },
    /// Reading or writing a table or report failed.
    #[error(transparent)]
    Core(#[from] ksmith_core::Error),
    /// The worker thread pool could not be started.
    #[error("cannot start {threads} worker threads: {message}")]
    ThreadPool {
        /// Threads asked for.
        threads: usize,
        /// The error.
        message: String,
    },
}
