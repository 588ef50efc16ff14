//! The errors of the export stage: environment failures only (missing inputs, disk, config).

use std::path::PathBuf;

/// What can stop the export stage.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An `[export]` value is invalid.
    #[error("[export] {key}: {message}")]
    Config {
        /// The key.
        key: String,
        /// What is wrong.
        message: String,
    },
    /// An input is missing.
    #[error("{}: missing input; run `ksmith select` first", path.display())]
    MissingInput {
        /// The file.
        path: PathBuf,
    },
    /// `selection.json` cannot be read.
    #[error("{}: cannot read the selection manifest: {message}", path.display())]
    Manifest {
        /// The file.
        path: PathBuf,
        /// Why.
        message: String,
    },
    /// A dataset file could not be written.
    #[error("dataset {dataset}: {}: {message}", path.display())]
    Write {
        /// The dataset (folder name).
        dataset: String,
        /// The file or folder.
        path: PathBuf,
        /// What went wrong.
        message: String,
    },
    /// The thread pool could not start.
    #[error("cannot start {threads} worker threads: {message}")]
    Threads {
        /// Threads asked for.
        threads: usize,
        /// Why.
        message: String,
    },
    /// Reading a table or writing a side file failed.
    #[error(transparent)]
    Core(#[from] ksmith_core::Error),
}
