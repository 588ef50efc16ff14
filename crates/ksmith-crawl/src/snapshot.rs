//! Choosing the accepted files of a repository, writing them into its snapshot folder, and
//! the stamps that let an unchanged repository be reused without any work.
//!
//! Layout inside the work directory:
//!
//! ```text
//! snapshots/<repo-key>/<commit>/<path>.py   accepted Python files
//! snapshots/<repo-key>/<commit>.json        stamp: rules hash + the row that was written
//! ```
//!
//! A snapshot is written into a temporary sibling folder and renamed into place, so a crash
//! never leaves a half-written snapshot under its final name. A stamp is written last; a stamp
//! without its snapshot folder (or with a file missing) is not trusted.

use std::path::{Path, PathBuf};

use ksmith_core::tables::{RepoReason, RepoRow, RepoStatus, SkipReason, SkippedFile};
use serde::{Deserialize, Serialize};

use crate::config::{CrawlConfig, LimitPolicy};
use crate::error::Error;
use crate::file_rules::{FileRules, is_safe_component};

/// Folder of all snapshots inside a work directory.
pub const SNAPSHOTS_DIR: &str = "snapshots";

/// A Python file found by a walk, not yet read.
#[derive(Debug, Clone)]
pub struct Candidate {
    /// Path relative to the repository root, `/`-separated, every component safe.
    pub path: String,
    /// Size announced by the walk (object header or `lstat`).
    pub size: u64,
    /// How to read it.
    pub handle: Handle,
}

/// Where a candidate's bytes are.
#[derive(Debug, Clone)]
pub enum Handle {
    /// A git blob.
    Blob(git2::Oid),
    /// A regular file; `dev` and `ino` from `lstat` at walk time, checked again after open.
    File {
        /// Absolute path.
        abs: PathBuf,
        /// Device id at walk time.
        dev: u64,
        /// Inode at walk time.
        ino: u64,
    },
}

/// Why a candidate could not be read.
#[derive(Debug)]
pub enum LoadError {
    /// The file is skipped with this reason; the repository goes on.
    Skip(SkipReason),
    /// The repository cannot be read (a missing or corrupt object).
    Fatal(Error),
}

/// What a walk found: candidates to read, and files skipped already.
#[derive(Debug, Default)]
pub struct Walk {
    /// Python files to read.
    pub candidates: Vec<Candidate>,
    /// Entries skipped by path, mode or size.
    pub skipped: Vec<SkippedFile>,
}

impl Walk {
    /// Records a skipped entry.
    pub fn skip(&mut self, path: impl Into<String>, why: SkipReason) {
        self.skipped.push(SkippedFile {
            path: path.into(),
            reason: why,
        });
    }
}

/// Why a whole repository is rejected: the code and, in words, the detail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejection {
    /// The code.
    pub code: RepoReason,
    /// The detail (the license, the limit), if any.
    pub detail: Option<String>,
}

impl Rejection {
    /// A rejection for `code` with `detail`.
    pub fn new(code: RepoReason, detail: Option<String>) -> Self {
        Rejection { code, detail }
    }

    /// A tree with more than `max_tree_entries` entries.
    pub fn tree_too_large(max_tree_entries: u64) -> Self {
        let detail = format!("more than max_tree_entries = {max_tree_entries} entries");
        Rejection::new(RepoReason::TreeTooLarge, Some(detail))
    }
}

/// The files of a repository after reading and applying the limits.
#[derive(Debug, Default)]
pub struct Selection {
    /// Accepted files (path, content), sorted by path.
    pub accepted: Vec<(String, Vec<u8>)>,
    /// Skipped entries, sorted by path.
    pub skipped: Vec<SkippedFile>,
    /// Bytes of the accepted files.
    pub python_bytes: u64,
    /// Set when the repository is rejected by a limit (`on_limit = "reject"`).
    pub rejected: Option<Rejection>,
}

/// Reads candidates in path order, checks their content and applies the repository limits.
pub fn select(
    walk: Walk,
    cfg: &CrawlConfig,
    mut load: impl FnMut(&Candidate) -> Result<Vec<u8>, LoadError>,
) -> Result<Selection, Error> {
    let rules = FileRules::new(cfg);
    let Walk {
        mut candidates,
        skipped,
    } = walk;
    candidates.sort_by(|a, b| a.path.cmp(&b.path));
    let mut sel = Selection {
        skipped,
        ..Default::default()
    };
    let mut limit_hit: Option<SkipReason> = None;
    for c in candidates {
        if let Some(why) = limit_hit {
            sel.skipped.push(skipped_file(&c.path, why));
            continue;
        }
        let bytes = match load(&c) {
            Ok(b) => b,
            Err(LoadError::Skip(why)) => {
                sel.skipped.push(skipped_file(&c.path, why));
                continue;
            }
            Err(LoadError::Fatal(e)) => return Err(e),
        };
        if let Err(why) = rules.check_content(&bytes) {
            sel.skipped.push(skipped_file(&c.path, why));
            continue;
        }
        let size = bytes.len() as u64;
        let over = if sel.accepted.len() >= cfg.max_files {
            Some(SkipReason::TooManyFiles)
        } else if sel.python_bytes + size > cfg.max_repo_python_bytes {
            Some(SkipReason::RepoTooLarge)
        } else {
            None
        };
        if let Some(why) = over {
            match cfg.on_limit {
                LimitPolicy::Reject => {
                    sel.rejected = Some(match why {
                        SkipReason::TooManyFiles => Rejection::new(
                            RepoReason::TooManyFiles,
                            Some(format!(
                                "more than max_files = {} Python files",
                                cfg.max_files
                            )),
                        ),
                        _ => Rejection::new(
                            RepoReason::RepoTooLarge,
                            Some(format!(
                                "more than max_repo_python_bytes = {} bytes of Python",
                                cfg.max_repo_python_bytes
                            )),
                        ),
                    });
                    sel.accepted.clear();
                    sel.python_bytes = 0;
                    break;
                }
                LimitPolicy::Truncate => {
                    limit_hit = Some(why);
                    sel.skipped.push(skipped_file(&c.path, why));
                    continue;
                }
            }
        }
        sel.python_bytes += size;
        sel.accepted.push((c.path, bytes));
    }
    sel.skipped.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(sel)
}

fn skipped_file(path: &str, why: SkipReason) -> SkippedFile {
    SkippedFile {
        path: path.to_string(),
        reason: why,
    }
}

/// The content hash of a set of accepted files: the `commit` of a plain folder.
pub fn content_commit(accepted: &[(String, Vec<u8>)]) -> String {
    let mut h = ksmith_core::ids::IdHasher::new();
    h.part("ksmith-folder-snapshot");
    for (path, bytes) in accepted {
        h.part(path).part(bytes);
    }
    h.finish()
}

/// The snapshot folder of `key` at `commit`, relative to the work directory.
pub fn relative_dir(key: &str, commit: &str) -> String {
    format!("{SNAPSHOTS_DIR}/{key}/{commit}")
}

fn stamp_path(workdir: &Path, key: &str, commit: &str) -> PathBuf {
    workdir
        .join(SNAPSHOTS_DIR)
        .join(key)
        .join(format!("{commit}.json"))
}

/// What is stored next to a snapshot so that an unchanged repository is reused.
#[derive(Debug, Serialize, Deserialize)]
struct Stamp {
    rules: String,
    row: RepoRow,
}

/// The row of a previous crawl of `key` at `commit` under the same `rules`, when its snapshot
/// is complete.
pub fn reusable(workdir: &Path, key: &str, commit: &str, rules: &str) -> Option<RepoRow> {
    let text = std::fs::read(stamp_path(workdir, key, commit)).ok()?;
    let stamp: Stamp = serde_json::from_slice(&text).ok()?;
    if stamp.rules != rules || stamp.row.commit.as_deref() != Some(commit) {
        return None;
    }
    if stamp.row.status == RepoStatus::Ok {
        let dir = workdir.join(stamp.row.snapshot.as_deref()?);
        let complete =
            stamp.row.files.iter().all(|f| {
                std::fs::symlink_metadata(dir.join(f)).is_ok_and(|m| m.file_type().is_file())
            });
        if !complete {
            return None;
        }
    }
    Some(stamp.row)
}

/// Records that `row` was produced for `key` at `commit` under `rules`.
pub fn write_stamp(
    workdir: &Path,
    key: &str,
    commit: &str,
    rules: &str,
    row: &RepoRow,
) -> Result<(), Error> {
    let stamp = Stamp {
        rules: rules.to_string(),
        row: row.clone(),
    };
    let json = serde_json::to_vec_pretty(&stamp).map_err(|e| Error::Config {
        message: format!("cannot encode snapshot stamp: {e}"),
    })?;
    ksmith_core::table::write_bytes_atomically(&stamp_path(workdir, key, commit), &json)?;
    Ok(())
}

/// Writes the accepted files into `snapshots/<key>/<commit>/`, replacing any earlier copy.
pub fn write(
    workdir: &Path,
    key: &str,
    commit: &str,
    accepted: &[(String, Vec<u8>)],
) -> Result<(), Error> {
    let parent = workdir.join(SNAPSHOTS_DIR).join(key);
    std::fs::create_dir_all(&parent).map_err(|e| Error::io(&parent, e))?;
    let tmp = parent.join(format!(".tmp-{commit}-{}", std::process::id()));
    if tmp.exists() {
        std::fs::remove_dir_all(&tmp).map_err(|e| Error::io(&tmp, e))?;
    }
    let result = fill(&tmp, accepted).and_then(|()| {
        let dest = parent.join(commit);
        if dest.exists() {
            std::fs::remove_dir_all(&dest).map_err(|e| Error::io(&dest, e))?;
        }
        std::fs::rename(&tmp, &dest).map_err(|e| Error::io(&dest, e))
    });
    if result.is_err() {
        let _ = std::fs::remove_dir_all(&tmp);
    }
    result
}

fn fill(root: &Path, accepted: &[(String, Vec<u8>)]) -> Result<(), Error> {
    std::fs::create_dir_all(root).map_err(|e| Error::io(root, e))?;
    for (path, bytes) in accepted {
        // Walks only produce safe components; checked again because this is where a bad one
        // would escape the snapshot.
        if !path.split('/').all(|c| is_safe_component(c.as_bytes())) {
            return Err(Error::Config {
                message: format!("refusing to write unsafe snapshot path `{path}`"),
            });
        }
        let dest = root.join(path);
        if let Some(dir) = dest.parent() {
            std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        }
        std::fs::write(&dest, bytes).map_err(|e| Error::io(&dest, e))?;
    }
    Ok(())
}

/// Removes every earlier snapshot and stamp of `key` except those of `commit`.
pub fn remove_others(workdir: &Path, key: &str, commit: &str) -> Result<(), Error> {
    let parent = workdir.join(SNAPSHOTS_DIR).join(key);
    let Ok(entries) = std::fs::read_dir(&parent) else {
        return Ok(());
    };
    let keep_stamp = format!("{commit}.json");
    for entry in entries.flatten() {
        let name = entry.file_name();
        if name == commit || name == keep_stamp.as_str() {
            continue;
        }
        let path = entry.path();
        let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
        let res = if is_dir {
            std::fs::remove_dir_all(&path)
        } else {
            std::fs::remove_file(&path)
        };
        res.map_err(|e| Error::io(&path, e))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn walk(files: &[(&str, &[u8])]) -> (Walk, Vec<Vec<u8>>) {
        let mut w = Walk::default();
        let mut contents = Vec::new();
        for (i, (path, bytes)) in files.iter().enumerate() {
            w.candidates.push(Candidate {
                path: path.to_string(),
                size: bytes.len() as u64,
                handle: Handle::File {
                    abs: PathBuf::from(i.to_string()),
                    dev: 0,
                    ino: 0,
                },
            });
            contents.push(bytes.to_vec());
        }
        (w, contents)
    }

    fn run(files: &[(&str, &[u8])], cfg: &CrawlConfig) -> Selection {
        let (w, contents) = walk(files);
        select(w, cfg, |c| match &c.handle {
            Handle::File { abs, .. } => {
                let i: usize = abs.to_str().unwrap().parse().unwrap();
                Ok(contents[i].clone())
            }
            Handle::Blob(_) => unreachable!(),
        })
        .unwrap()
    }

    const FILES: &[(&str, &[u8])] = &[
        ("c.py", b"c = 3\n"),
        ("a.py", b"a = 1\n"),
        ("bin.py", b"\0\0"),
        ("b.py", b"b = 2\n"),
    ];

    #[test]
    fn accepts_in_path_order_and_skips_bad_content() {
        let sel = run(FILES, &CrawlConfig::default());
        let paths: Vec<&str> = sel.accepted.iter().map(|(p, _)| p.as_str()).collect();
        assert_eq!(paths, ["a.py", "b.py", "c.py"]);
        assert_eq!(sel.python_bytes, 18);
        assert_eq!(
            sel.skipped,
            vec![skipped_file("bin.py", SkipReason::Binary)]
        );
        assert!(sel.rejected.is_none());
    }

    #[test]
    fn reject_policy_rejects_the_repository() {
        let cfg = CrawlConfig {
            max_files: 2,
            ..Default::default()
        };
        let sel = run(FILES, &cfg);
        assert!(sel.accepted.is_empty());
        assert_eq!(sel.rejected.map(|r| r.code), Some(RepoReason::TooManyFiles));
        let cfg = CrawlConfig {
            max_repo_python_bytes: 10,
            ..Default::default()
        };
        let sel = run(FILES, &cfg);
        assert_eq!(sel.rejected.map(|r| r.code), Some(RepoReason::RepoTooLarge));
        assert_eq!(sel.python_bytes, 0);
    }

    #[test]
    fn truncate_policy_keeps_a_deterministic_prefix() {
        let cfg = CrawlConfig {
            max_files: 2,
            on_limit: LimitPolicy::Truncate,
            ..Default::default()
        };
        let sel = run(FILES, &cfg);
        let paths: Vec<&str> = sel.accepted.iter().map(|(p, _)| p.as_str()).collect();
        assert_eq!(paths, ["a.py", "b.py"]);
        assert!(sel.rejected.is_none());
        assert!(
            sel.skipped
                .contains(&skipped_file("c.py", SkipReason::TooManyFiles))
        );
        let cfg = CrawlConfig {
            max_repo_python_bytes: 13,
            on_limit: LimitPolicy::Truncate,
            ..Default::default()
        };
        let sel = run(FILES, &cfg);
        assert_eq!(sel.accepted.len(), 2);
        assert!(
            sel.skipped
                .contains(&skipped_file("c.py", SkipReason::RepoTooLarge))
        );
    }

    #[test]
    fn content_commit_depends_on_paths_and_bytes() {
        let a = vec![("a.py".to_string(), b"x".to_vec())];
        let b = vec![("b.py".to_string(), b"x".to_vec())];
        let c = vec![("a.py".to_string(), b"y".to_vec())];
        assert_ne!(content_commit(&a), content_commit(&b));
        assert_ne!(content_commit(&a), content_commit(&c));
        assert_eq!(content_commit(&a), content_commit(&a.clone()));
    }

    #[test]
    fn write_refuses_unsafe_paths_and_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let bad = vec![("../escape.py".to_string(), b"x".to_vec())];
        assert!(write(dir.path(), "k", "c1", &bad).is_err());
        assert!(!dir.path().join("snapshots/escape.py").exists());
        assert!(!dir.path().join("snapshots/k/c1").exists());
        let leftovers: Vec<_> = std::fs::read_dir(dir.path().join("snapshots/k"))
            .unwrap()
            .collect();
        assert!(leftovers.is_empty());
    }

    #[test]
    fn stamps_need_a_complete_snapshot_and_the_same_rules() {
        let dir = tempfile::tempdir().unwrap();
        let files = vec![("pkg/m.py".to_string(), b"x = 1\n".to_vec())];
        write(dir.path(), "k", "c1", &files).unwrap();
        let mut row = RepoRow::failed("r", "u", "x");
        row.status = RepoStatus::Ok;
        row.reason = None;
        row.reason_code = None;
        row.commit = Some("c1".into());
        row.snapshot = Some(relative_dir("k", "c1"));
        row.files = vec!["pkg/m.py".into()];
        write_stamp(dir.path(), "k", "c1", "rules", &row).unwrap();
        assert_eq!(reusable(dir.path(), "k", "c1", "rules"), Some(row.clone()));
        assert_eq!(reusable(dir.path(), "k", "c1", "other"), None);
        assert_eq!(reusable(dir.path(), "k", "c2", "rules"), None);
        std::fs::remove_file(dir.path().join("snapshots/k/c1/pkg/m.py")).unwrap();
        assert_eq!(reusable(dir.path(), "k", "c1", "rules"), None);
    }

    #[test]
    fn remove_others_keeps_only_the_current_commit() {
        let dir = tempfile::tempdir().unwrap();
        let files = vec![("m.py".to_string(), b"x".to_vec())];
        write(dir.path(), "k", "old", &files).unwrap();
        write(dir.path(), "k", "new", &files).unwrap();
        std::fs::write(dir.path().join("snapshots/k/old.json"), "{}").unwrap();
        remove_others(dir.path(), "k", "new").unwrap();
        assert!(dir.path().join("snapshots/k/new/m.py").exists());
        assert!(!dir.path().join("snapshots/k/old").exists());
        assert!(!dir.path().join("snapshots/k/old.json").exists());
    }
}
