//! The errors of the select stage: only environment failures (unreadable tables, disk, config);
//! a step that does not qualify is a counted drop, never an error.

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
    /// A missing input, a thread pool that cannot start, or table, side file or report I/O
    /// (the stage contract's errors).
    #[error(transparent)]
    Core(#[from] ksmith_core::Error),
}
