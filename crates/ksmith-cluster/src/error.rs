//! Errors of the cluster stage: environment and configuration failures only.

/// What can stop the cluster stage.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    /// The `[cluster]` section is invalid.
    #[error("config: {0}")]
    Config(String),
    /// A missing input, a thread pool that cannot start, or table or report I/O (the stage
    /// contract's errors).
    #[error(transparent)]
    Core(#[from] ksmith_core::Error),
    /// A kept module of `dedup.parquet` has no program in modules/probes.
    #[error(
        "module {module_id} is kept in dedup.parquet but has no program in modules.parquet or probes.parquet; re-run `ksmith dedup`"
    )]
    MissingProgram {
        /// The module.
        module_id: String,
    },
    /// The embedder failed.
    #[error(transparent)]
    Embed(#[from] ksmith_embed::EmbedError),
    /// HDBSCAN refused the data.
    #[error("hdbscan: {0}")]
    Hdbscan(String),
}
