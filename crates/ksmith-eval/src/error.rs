//! Errors of setting up the evaluator client (evaluations themselves answer
//! [`ksmith_core::evaluation::EvalError`]).

use std::path::PathBuf;

/// Why the evaluator client could not be set up.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EvalClientError {
    /// An `[eval]` value is invalid.
    #[error("[eval] config: {0}")]
    Config(String),
    /// The Python interpreter was not found.
    #[error("{0}")]
    Python(String),
    /// Writing the worker's sources failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or folder concerned.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// The sandbox is incomplete and `[sandbox] require` (the default) refuses to run
    /// generated kernels without it: what is missing and how to fix it, in one line.
    #[error("eval: {0}")]
    Sandbox(#[from] ksmith_sandbox::Refused),
    /// A worker did not start or did not greet with protocol version 1.
    #[error("evaluator worker for device {device} did not start: {message}")]
    WorkerStart {
        /// The device of the worker.
        device: String,
        /// What happened, with the end of the worker's log.
        message: String,
    },
}
