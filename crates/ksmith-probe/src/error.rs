//! The error type of `ksmith-probe`: environment and configuration failures only.
//!
//! A module that fails, hangs or crashes is a row with a status, never an [`Error`].

use std::path::PathBuf;

/// What stops the probe stage.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A `[probe]` value is invalid.
    #[error("config [probe].{key}: {message}")]
    Config {
        /// The key.
        key: &'static str,
        /// What is wrong with it.
        message: String,
    },
    /// The Python environment is missing or broken.
    #[error("{0}")]
    Python(String),
    /// A worker process could not be started or did not say hello.
    #[error(
        "probe worker ({python}) failed to start: {message}. Check the environment with `make venv` \
         (scripts/setup-python.sh), or set KSMITH_PYTHON / [probe].python to an interpreter with torch"
    )]
    WorkerStart {
        /// The interpreter.
        python: PathBuf,
        /// What happened, with the end of the worker's stderr.
        message: String,
    },
    /// The sandbox is incomplete and `[sandbox] require` (the default) refuses to run crawled
    /// code without it: what is missing and how to fix it, in one line.
    #[error("probe: {0}")]
    Sandbox(#[from] ksmith_sandbox::Refused),
    /// The Ray driver (`[probe] ray_address`) could not start or stopped answering.
    #[error(
        "probe on Ray (ray_address = {address:?}): {message}. Check that the cluster is up (`ray \
         status`) and that its nodes have this Python environment, or unset [probe].ray_address"
    )]
    Ray {
        /// The configured address.
        address: String,
        /// What happened, with the end of the driver's stderr.
        message: String,
    },
    /// The private runtime directory (embedded runner files, temporary directories) failed.
    #[error("probe runtime directory {}: {source}", path.display())]
    Runtime {
        /// The path concerned.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// The journal of finished rows (`probes.partial.jsonl`) cannot be read or written.
    #[error("probe journal {}: {source}", path.display())]
    Journal {
        /// The journal.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A line of the journal that is not a row (and not the last one, which a kill may cut).
    #[error("probe journal {} line {line}: {message}; remove the file to probe its modules again", path.display())]
    JournalLine {
        /// The journal.
        path: PathBuf,
        /// The line number (1 is the header).
        line: usize,
        /// The parse error.
        message: String,
    },
    /// A missing `modules.parquet`, or table or report I/O (the stage contract's errors).
    #[error(transparent)]
    Core(#[from] ksmith_core::Error),
}
