//! `repos.parquet`: one row per crawled repository.

use serde::{Deserialize, Serialize};

use crate::table::Table;

crate::vocabulary! {
    /// How a repository was reached.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
    pub enum SourceKind {
        /// Cloned from a URL (`https://`, `file://`) into the mirror cache.
        Git = "git",
        /// A git repository on this machine, read in place.
        LocalGit = "local_git",
        /// A plain folder, read as it is.
        Folder = "folder",
    }
}

crate::vocabulary! {
    /// Whether a repository goes downstream.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
    pub enum RepoStatus {
        /// Fetched and accepted; its files go to extract.
        Ok = "ok",
        /// Fetched but refused by a rule (license, size, file count); `reason` says which.
        Rejected = "rejected",
        /// Could not be fetched or read; `reason` holds the error.
        Failed = "failed",
    }
}

/// A file crawl did not pass downstream, with the reason.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SkippedFile {
    /// Path relative to the repository root.
    pub path: String,
    /// Why: `too_large`, `binary`, `not_utf8`, `symlink`, `vendored`, `too_many_files`, ...
    pub reason: String,
}

/// One crawled repository with its provenance.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RepoRow {
    /// Unique name of the repository in all tables (`owner/name` or the configured name).
    pub repo: String,
    /// Where it came from: URL or local path.
    pub url: String,
    /// How it was reached.
    pub source_kind: SourceKind,
    /// The branch, tag or commit that was asked for, if any.
    pub rev: Option<String>,
    /// The pinned commit id; for a plain folder, the content hash of its accepted files.
    pub commit: Option<String>,
    /// SPDX license id, when known.
    pub license: Option<String>,
    /// Where the license came from: `file:<path>`, `config` or `manifest`.
    pub license_source: Option<String>,
    /// Star count, when known.
    pub stars: Option<i64>,
    /// When it was fetched, RFC 3339 UTC.
    pub fetched_at: String,
    /// Whether it goes downstream.
    pub status: RepoStatus,
    /// Why it was rejected or failed.
    pub reason: Option<String>,
    /// True when the pinned commit differs from the previous crawl (or it is new).
    pub changed: bool,
    /// Folder holding the accepted Python files, relative to the work directory.
    pub snapshot: Option<String>,
    /// Accepted Python files, relative to the snapshot folder, sorted.
    pub files: Vec<String>,
    /// Files that were not accepted, with the reason.
    pub skipped: Vec<SkippedFile>,
    /// Total bytes of the accepted Python files.
    pub python_bytes: u64,
}

impl RepoRow {
    /// A row for a repository that could not be fetched.
    pub fn failed(repo: &str, url: &str, reason: &str) -> Self {
        RepoRow {
            repo: repo.to_string(),
            url: url.to_string(),
            source_kind: SourceKind::Git,
            rev: None,
            commit: None,
            license: None,
            license_source: None,
            stars: None,
            fetched_at: String::new(),
            status: RepoStatus::Failed,
            reason: Some(reason.to_string()),
            changed: false,
            snapshot: None,
            files: Vec::new(),
            skipped: Vec::new(),
            python_bytes: 0,
        }
    }
}

impl Table for RepoRow {
    const NAME: &'static str = "repos";
    const SCHEMA_VERSION: u32 = 1;
}
