//! Errors of the extract stage: only environment failures. A bad file or class is a row.

/// What can stop the extract stage.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The `[extract]` section holds an invalid value.
    #[error("config {0}")]
    Config(String),
    /// A missing input, a thread pool that cannot start, or table or report I/O (the stage
    /// contract's errors, [`ksmith_core::Error`]).
    #[error(transparent)]
    Core(#[from] ksmith_core::Error),
}
