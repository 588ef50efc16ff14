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

crate::vocabulary! {
    /// Why a repository is not `ok`.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
    pub enum RepoReason {
        /// It could not be fetched or read (`failed`; the `reason` text is the error).
        Failed = "failed",
        /// No license file was found (and `accept_unlicensed` is off).
        NoLicense = "no_license",
        /// A license file was found but not recognized.
        UnknownLicense = "unknown_license",
        /// The license is not on `allowed_licenses`.
        LicenseNotAllowed = "license_not_allowed",
        /// The tree has more entries than `max_tree_entries`.
        TreeTooLarge = "tree_too_large",
        /// More Python files than `max_files` (under `on_limit = "reject"`).
        TooManyFiles = "too_many_files",
        /// More Python bytes than `max_repo_python_bytes` (under `on_limit = "reject"`).
        RepoTooLarge = "repo_too_large",
        /// No Python file was accepted.
        NoPythonFiles = "no_python_files",
    }
}

crate::vocabulary! {
    /// Why crawl did not pass a file downstream.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
    pub enum SkipReason {
        /// A Python file larger than `max_file_bytes`.
        TooLarge = "too_large",
        /// A file containing a NUL byte.
        Binary = "binary",
        /// A file that is not valid UTF-8.
        NotUtf8 = "not_utf8",
        /// A file or folder name that is not valid UTF-8.
        NotUtf8Path = "not_utf8_path",
        /// A name that could escape the snapshot (`..`, `.`, `.git`, a separator, NUL).
        UnsafePath = "unsafe_path",
        /// A symbolic link; never followed.
        Symlink = "symlink",
        /// A git submodule; never fetched.
        Submodule = "submodule",
        /// A folder on the `skip_dirs` list.
        Vendored = "vendored",
        /// A file whose name ends with one of `skip_file_suffixes`.
        Generated = "generated",
        /// A FIFO, socket or device file.
        NotRegularFile = "not_regular_file",
        /// A tree entry with a mode git does not define.
        UnknownMode = "unknown_mode",
        /// The file could not be read.
        Unreadable = "unreadable",
        /// The file was replaced while it was being read (for example by a symlink).
        ChangedDuringCrawl = "changed_during_crawl",
        /// Beyond `max_files` under `on_limit = "truncate"`.
        TooManyFiles = "too_many_files",
        /// Beyond `max_repo_python_bytes` under `on_limit = "truncate"`.
        RepoTooLarge = "repo_too_large",
    }
}

/// A file crawl did not pass downstream, with the reason.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SkippedFile {
    /// Path relative to the repository root.
    pub path: String,
    /// Why.
    pub reason: SkipReason,
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
    /// Why it was rejected or failed, in words (`license_not_allowed: GPL-3.0`, or the error).
    pub reason: Option<String>,
    /// Why it was rejected or failed, as a code (set with [`RepoRow::set_reason`]).
    #[serde(default)]
    pub reason_code: Option<RepoReason>,
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
        let mut row = RepoRow {
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
            reason: None,
            reason_code: None,
            changed: false,
            snapshot: None,
            files: Vec::new(),
            skipped: Vec::new(),
            python_bytes: 0,
        };
        row.set_reason(RepoReason::Failed, Some(reason));
        row
    }

    /// Records why the repository is not `ok`: `reason_code`, and `reason` in words, which is
    /// the code followed by `: detail` (for [`RepoReason::Failed`], the detail alone: the error).
    pub fn set_reason(&mut self, code: RepoReason, detail: Option<&str>) {
        self.reason_code = Some(code);
        self.reason = Some(match (code, detail) {
            (RepoReason::Failed, Some(error)) => error.to_string(),
            (code, Some(detail)) => format!("{code}: {detail}"),
            (code, None) => code.to_string(),
        });
    }
}

impl Table for RepoRow {
    const NAME: &'static str = "repos";
    const SCHEMA_VERSION: u32 = 2;
}
