//! Errors of the cluster stage: environment and configuration failures only.

use std::path::PathBuf;

/// What can stop the cluster stage.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    /// The `[cluster]` section is invalid.
    #[error("config: {0}")]
    Config(String),
    /// Reading or writing a table failed.
    #[error(transparent)]
    Core(#[from] ksmith_core::Error),
    /// An input table is missing.
    #[error("{table} not found at {}: run `ksmith {stage}` first", path.display())]
    MissingInput {
        /// The table's name.
        table: &'static str,
        /// Where it was expected.
        path: PathBuf,
        /// The stage that writes it.
        stage: &'static str,
    },
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
    /// The thread pool could not be built.
    #[error("thread pool: {0}")]
    Threads(String),
}
