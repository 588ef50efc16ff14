//! The `[crawl]` table of the configuration.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::error::Error;
use crate::license;

/// What to do with a repository whose accepted Python files exceed `max_files` or
/// `max_repo_python_bytes`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LimitPolicy {
    /// Reject the whole repository (`status = rejected`, no files), naming the limit.
    Reject,
    /// Keep files in sorted path order while they fit; the rest are skipped with the reason
    /// `too_many_files` or `repo_too_large`.
    Truncate,
}

/// Settings of the crawl stage.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CrawlConfig {
    /// Bare mirrors of git URLs are kept here; `<workdir>/mirrors` when absent.
    pub mirror_dir: Option<PathBuf>,
    /// SPDX ids of the licenses a repository may carry (compared case-insensitively). A
    /// `A OR B` license passes when any part passes. MPL-2.0 and the GPL family are left out
    /// by default: their terms follow derived files.
    pub allowed_licenses: Vec<String>,
    /// Accept repositories without a license file or with one the classifier does not know.
    pub accept_unlicensed: bool,
    /// Python files larger than this many bytes are skipped (`too_large`).
    pub max_file_bytes: u64,
    /// Most Python files accepted from one repository.
    pub max_files: usize,
    /// Most bytes of Python accepted from one repository.
    pub max_repo_python_bytes: u64,
    /// What happens when `max_files` or `max_repo_python_bytes` is exceeded.
    pub on_limit: LimitPolicy,
    /// A repository whose tree has more entries (files, folders, links) than this is rejected
    /// before any file is read (`tree_too_large`).
    pub max_tree_entries: u64,
    /// Folder names skipped wherever they appear (`vendored`); exact, case-sensitive match of
    /// one path component.
    pub skip_dirs: Vec<String>,
    /// File name endings of generated Python that is skipped (`generated`).
    pub skip_file_suffixes: Vec<String>,
    /// A fetch of one git URL that takes longer than this many seconds is aborted.
    pub fetch_timeout_secs: u64,
    /// A fetch of one git URL that receives more than this many bytes is aborted.
    pub max_fetch_bytes: u64,
}

/// The default license allow-list: permissive licenses only.
pub const DEFAULT_ALLOWED_LICENSES: &[&str] = &[
    "MIT",
    "MIT-0",
    "Apache-2.0",
    "BSD-2-Clause",
    "BSD-3-Clause",
    "0BSD",
    "ISC",
    "Unlicense",
    "CC0-1.0",
    "BSL-1.0",
    "Zlib",
    "PSF-2.0",
];

/// Folder names skipped by default: vendored code, virtual environments, build output,
/// caches and generated code.
pub const DEFAULT_SKIP_DIRS: &[&str] = &[
    ".git",
    ".hg",
    ".svn",
    "vendor",
    "vendored",
    "_vendor",
    "third_party",
    "third-party",
    "thirdparty",
    "site-packages",
    "node_modules",
    "__pycache__",
    "build",
    "dist",
    "venv",
    ".venv",
    ".tox",
    ".nox",
    ".eggs",
    ".mypy_cache",
    ".pytest_cache",
    ".ipynb_checkpoints",
    "generated",
    "_generated",
];

/// File name endings skipped by default (protobuf and gRPC generated modules).
pub const DEFAULT_SKIP_FILE_SUFFIXES: &[&str] = &["_pb2.py", "_pb2_grpc.py"];

impl Default for CrawlConfig {
    fn default() -> Self {
        CrawlConfig {
            mirror_dir: None,
            allowed_licenses: strings(DEFAULT_ALLOWED_LICENSES),
            accept_unlicensed: false,
            max_file_bytes: 1 << 20,
            max_files: 10_000,
            max_repo_python_bytes: 128 << 20,
            on_limit: LimitPolicy::Reject,
            max_tree_entries: 500_000,
            skip_dirs: strings(DEFAULT_SKIP_DIRS),
            skip_file_suffixes: strings(DEFAULT_SKIP_FILE_SUFFIXES),
            fetch_timeout_secs: 600,
            max_fetch_bytes: 4 << 30,
        }
    }
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

impl CrawlConfig {
    /// Checks the values without touching the file system.
    pub fn validate(&self) -> Result<(), Error> {
        let bad = |message: String| Err(Error::Config { message });
        if self.max_file_bytes == 0 {
            return bad("[crawl] max_file_bytes must be at least 1".into());
        }
        if self.max_files == 0 {
            return bad("[crawl] max_files must be at least 1".into());
        }
        if self.max_repo_python_bytes == 0 {
            return bad("[crawl] max_repo_python_bytes must be at least 1".into());
        }
        if self.max_tree_entries == 0 {
            return bad("[crawl] max_tree_entries must be at least 1".into());
        }
        if self.fetch_timeout_secs == 0 {
            return bad("[crawl] fetch_timeout_secs must be at least 1".into());
        }
        if self.max_fetch_bytes == 0 {
            return bad("[crawl] max_fetch_bytes must be at least 1".into());
        }
        for id in &self.allowed_licenses {
            if !license::is_plausible_spdx_id(id) {
                return bad(format!(
                    "[crawl] allowed_licenses: `{id}` is not an SPDX license id (letters, digits, `.`, `-`, `+`)"
                ));
            }
        }
        for dir in &self.skip_dirs {
            if dir.is_empty() || dir.contains('/') || dir.contains('\\') {
                return bad(format!(
                    "[crawl] skip_dirs: `{dir}` must be one folder name, not a path"
                ));
            }
        }
        if self.skip_file_suffixes.iter().any(|s| s.is_empty()) {
            return bad("[crawl] skip_file_suffixes: an empty suffix would skip every file".into());
        }
        Ok(())
    }

    /// The part of the configuration that decides what a snapshot holds (everything except
    /// where mirrors live and how fetches are bounded), hashed for snapshot reuse.
    pub(crate) fn rules_hash(&self) -> String {
        let rules = CrawlConfig {
            mirror_dir: None,
            fetch_timeout_secs: 0,
            max_fetch_bytes: 0,
            ..self.clone()
        };
        ksmith_core::config::section_hash(&rules)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_permissive() {
        let cfg = CrawlConfig::default();
        cfg.validate().unwrap();
        assert!(cfg.allowed_licenses.iter().any(|l| l == "MIT"));
        assert!(!cfg.allowed_licenses.iter().any(|l| l.starts_with("GPL")));
        assert!(!cfg.allowed_licenses.iter().any(|l| l == "MPL-2.0"));
    }

    #[test]
    fn bad_values_name_the_key() {
        let cfg = CrawlConfig {
            max_files: 0,
            ..Default::default()
        };
        assert!(
            cfg.validate()
                .unwrap_err()
                .to_string()
                .contains("max_files")
        );
        let cfg = CrawlConfig {
            allowed_licenses: vec!["MIT License".into()],
            ..Default::default()
        };
        assert!(
            cfg.validate()
                .unwrap_err()
                .to_string()
                .contains("allowed_licenses")
        );
        let cfg = CrawlConfig {
            skip_dirs: vec!["a/b".into()],
            ..Default::default()
        };
        assert!(
            cfg.validate()
                .unwrap_err()
                .to_string()
                .contains("skip_dirs")
        );
    }

    #[test]
    fn parses_from_toml_and_rejects_typos() {
        let c = ksmith_core::config::Config::parse(
            "[crawl]\nmax_files = 3\non_limit = \"truncate\"\n",
            "t",
        )
        .unwrap();
        let cfg: CrawlConfig = c.section("crawl").unwrap();
        assert_eq!(cfg.max_files, 3);
        assert_eq!(cfg.on_limit, LimitPolicy::Truncate);
        let c = ksmith_core::config::Config::parse("[crawl]\nmax_file = 3\n", "t").unwrap();
        assert!(c.section::<CrawlConfig>("crawl").is_err());
    }

    #[test]
    fn rules_hash_ignores_where_mirrors_live() {
        let a = CrawlConfig::default();
        let b = CrawlConfig {
            mirror_dir: Some("/elsewhere".into()),
            fetch_timeout_secs: 5,
            ..Default::default()
        };
        assert_eq!(a.rules_hash(), b.rules_hash());
        let c = CrawlConfig {
            max_files: 5,
            ..Default::default()
        };
        assert_ne!(a.rules_hash(), c.rules_hash());
    }
}
