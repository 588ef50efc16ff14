//! The error type of the crawl stage.
//!
//! Only problems of the environment or the configuration become an [`Error`] returned by
//! [`crate::run`]; a repository that cannot be fetched or read becomes a `failed` row whose
//! `reason` is the text of the error raised while crawling it.

use std::path::PathBuf;

/// What can stop the crawl stage, or fail one repository.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The `[crawl]` table or a `[[source]]` entry is invalid.
    #[error("config: {message}")]
    Config {
        /// What is wrong, naming the key.
        message: String,
    },
    /// A line of a JSONL manifest is malformed.
    #[error("manifest {}, line {line}: {message}", path.display())]
    Manifest {
        /// The manifest file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// What is wrong with it.
        message: String,
    },
    /// Reading or writing a file failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or folder concerned.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A git operation on one repository failed.
    #[error("{repo}: {action}: {message}")]
    Git {
        /// The repository's name.
        repo: String,
        /// What was being done (`fetch`, `open`, `resolve rev main`, ...).
        action: String,
        /// libgit2's message.
        message: String,
    },
    /// Table or report I/O of `ksmith-core` failed.
    #[error(transparent)]
    Core(#[from] ksmith_core::Error),
}

impl Error {
    /// Wraps an I/O error with the path it concerns.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
    }

    /// A git error on `repo` while doing `action`.
    pub fn git(repo: &str, action: impl Into<String>, err: git2::Error) -> Self {
        Error::Git {
            repo: repo.to_string(),
            action: action.into(),
            message: err.message().to_string(),
        }
    }
}
