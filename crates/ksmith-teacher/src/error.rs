//! Errors raised when a teacher client cannot be built.

use std::path::PathBuf;

/// Why a [`crate::Teacher`] could not be set up. Failures of single requests are
/// [`ksmith_core::chat::ChatError`]s instead.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TeacherError {
    /// A `[teacher]` key holds an invalid value.
    #[error("[teacher] {0}")]
    Config(String),
    /// The environment variable holding an endpoint's API key is not set.
    #[error("[teacher] endpoint `{endpoint}`: environment variable {var} (api_key_env) is not set")]
    MissingApiKey {
        /// The endpoint's name.
        endpoint: String,
        /// The variable.
        var: String,
    },
    /// The cache directory cannot be created.
    #[error("teacher cache {}: {source}", path.display())]
    Cache {
        /// The directory.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
}
