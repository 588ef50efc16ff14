//! Errors of the embedders.

/// What can go wrong when building or calling an embedder.
#[derive(Debug, thiserror::Error)]
pub enum EmbedError {
    /// The embedder's configuration is invalid.
    #[error("embedder config: {0}")]
    Config(String),
    /// The embeddings endpoint failed or answered something unusable.
    #[error("embeddings endpoint {endpoint}: {message}")]
    Http {
        /// The URL that was called.
        endpoint: String,
        /// What went wrong.
        message: String,
    },
}
