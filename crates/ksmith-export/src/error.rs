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
    /// The configured tokenizer cannot be loaded.
    #[error("[export] tokenizer: {}: cannot load the tokenizer: {message}", path.display())]
    Tokenizer {
        /// The `tokenizer.json` file.
        path: PathBuf,
        /// Why.
        message: String,
    },
    /// A format listed in `required_formats` has no rows.
    #[error("dataset {dataset}: required (`[export] required_formats`) but has no rows: {reason}")]
    RequiredFormatEmpty {
        /// The dataset (folder name).
        dataset: String,
        /// Which rule gave nothing, and why.
        reason: String,
    },
    /// A missing input, a thread pool that cannot start, or table, side file or report I/O
    /// (the stage contract's errors).
    #[error(transparent)]
    Core(#[from] ksmith_core::Error),
}
