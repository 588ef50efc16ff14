//! The error type of discover. Every variant names the file, search or request it concerns;
//! none carries the API token.

use std::path::PathBuf;

/// What can stop a discover run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The `[discover]` table holds an invalid value.
    #[error("{message}")]
    Config {
        /// What is wrong, naming the key.
        message: String,
    },
    /// Reading or writing a file failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file concerned.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A line of the existing manifest cannot be read; the manifest is left as it is.
    #[error("manifest {}, line {line}: {message}", path.display())]
    Manifest {
        /// The manifest file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// GitHub refused a request for good (a 4xx answer that is not a rate limit).
    #[error("{what}: HTTP {status}: {message}")]
    Refused {
        /// The request (`search repositories "q" page 2`).
        what: String,
        /// HTTP status.
        status: u16,
        /// GitHub's message.
        message: String,
    },
    /// A request still failed after every retry (server errors, dropped connections, malformed
    /// answers, secondary rate limits).
    #[error("{what}: gave up after {attempts} attempts: {message}")]
    Unreachable {
        /// The request.
        what: String,
        /// Attempts made.
        attempts: u32,
        /// The last failure.
        message: String,
    },
    /// A rate limit asks for a longer wait than `max_wait_secs` allows.
    #[error(
        "{what}: the {resource} rate limit asks to wait {wait_secs} s, more than max_wait_secs = {max_wait_secs}; run again later"
    )]
    RateLimited {
        /// The request.
        what: String,
        /// GitHub's rate-limit resource (`search`, `code_search`, `core`).
        resource: String,
        /// The wait asked for.
        wait_secs: u64,
        /// The configured limit.
        max_wait_secs: u64,
    },
    /// Some searches failed; what the others found is in the manifest, and the next run
    /// repeats only the failed slices.
    #[error(
        "{} of the searches failed (the manifest {} holds everything found; run again to retry them): {}",
        failed.len(),
        manifest.display(),
        failed.join("; ")
    )]
    Incomplete {
        /// One message per failed slice.
        failed: Vec<String>,
        /// The manifest written.
        manifest: PathBuf,
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

    /// True when the error concerns one search slice and the run can go on with the others
    /// (as opposed to a rate-limit wait that is too long, or the disk).
    pub fn is_per_search(&self) -> bool {
        matches!(self, Error::Refused { .. } | Error::Unreachable { .. })
    }
}

impl From<ksmith_core::Error> for Error {
    fn from(e: ksmith_core::Error) -> Self {
        match e {
            ksmith_core::Error::Io { path, source } => Error::Io { path, source },
            other => Error::Config {
                message: other.to_string(),
            },
        }
    }
}
