//! The error type of `ksmith-core`.
//!
//! Errors carry the file they concern, so that the CLI can print a message that names it.

use std::path::PathBuf;

/// A `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What can go wrong in configuration handling and table I/O.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Reading or writing a file failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or directory concerned.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// The configuration file is malformed or holds an invalid value.
    #[error("config {origin}: {message}")]
    Config {
        /// Where the configuration came from (a path or "embedded default").
        origin: String,
        /// What is wrong, naming the key.
        message: String,
    },
    /// A Parquet table could not be written or read.
    #[error("table {}: {message}", path.display())]
    Table {
        /// The table file.
        path: PathBuf,
        /// What went wrong.
        message: String,
    },
    /// A table exists but was written with another schema version.
    #[error(
        "table {}: written with schema version {found}, this ksmith reads version {expected}; re-run the stage that writes it",
        path.display()
    )]
    SchemaVersion {
        /// The table file.
        path: PathBuf,
        /// Version found in the file metadata.
        found: String,
        /// Version this build expects.
        expected: u32,
    },
    /// A file a stage reads is missing: the stage that writes it has not run in this work
    /// directory.
    #[error("{}: not found; run `ksmith {writer}` with this --workdir first", path.display())]
    MissingInput {
        /// The expected file.
        path: PathBuf,
        /// The stage that writes it.
        writer: &'static str,
    },
    /// A stage's worker threads could not be started.
    #[error("{stage}: cannot start {threads} worker threads: {message}")]
    ThreadPool {
        /// The stage.
        stage: String,
        /// Threads asked for.
        threads: usize,
        /// Why.
        message: String,
    },
}

impl Error {
    /// Wraps an I/O error with the path it concerns.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
    }

    /// A table error with a message.
    pub fn table(path: impl Into<PathBuf>, message: impl std::fmt::Display) -> Self {
        Error::Table {
            path: path.into(),
            message: message.to_string(),
        }
    }
}
