//! Plain folders: walked with `symlink_metadata` semantics, never following a symbolic link.
//!
//! Entries are classified from `DirEntry::file_type`, which does not follow links. A regular
//! file is opened only after the walk saw it as a regular file, and after opening, its device
//! and inode are compared with what the walk saw, so a file swapped for a symlink in between
//! is skipped (`changed_during_crawl`) instead of read. FIFOs, sockets and devices are never
//! opened. The folder given in the configuration may itself be a link; nothing below it is
//! followed.

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

use ksmith_core::tables::SkipReason;

use crate::config::CrawlConfig;
use crate::error::Error;
use crate::file_rules::{FileRules, is_safe_component};
use crate::license::{MAX_LICENSE_BYTES, license_file_rank};
use crate::snapshot::{Candidate, Handle, LoadError, Rejection, Walk};

/// The identity of a file as seen by `lstat`.
fn identity(meta: &std::fs::Metadata) -> (u64, u64) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        (meta.dev(), meta.ino())
    }
    #[cfg(not(unix))]
    {
        (0, meta.len())
    }
}

/// Checks that `root` is a readable folder.
pub fn check_root(repo: &str, root: &Path) -> Result<(), Error> {
    let meta = std::fs::metadata(root).map_err(|e| Error::io(root, e))?;
    if !meta.is_dir() {
        return Err(Error::Git {
            repo: repo.to_string(),
            action: "open".into(),
            message: format!("{} is not a folder", root.display()),
        });
    }
    Ok(())
}

/// The license files at the root (regular files only, not links), as (name, text).
pub fn license_files(root: &Path) -> Result<Vec<(String, String)>, Error> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(root).map_err(|e| Error::io(root, e))? {
        let entry = entry.map_err(|e| Error::io(root, e))?;
        let Ok(name) = entry.file_name().into_string() else {
            continue;
        };
        if license_file_rank(&name).is_none() {
            continue;
        }
        let path = entry.path();
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        if !meta.file_type().is_file() || meta.len() > MAX_LICENSE_BYTES {
            continue;
        }
        let c = Candidate {
            path: name.clone(),
            size: meta.len(),
            handle: handle(&path, &meta),
        };
        if let Ok(bytes) = read_checked(&c, MAX_LICENSE_BYTES) {
            out.push((name, String::from_utf8_lossy(&bytes).into_owned()));
        }
    }
    out.sort();
    Ok(out)
}

fn handle(path: &Path, meta: &std::fs::Metadata) -> Handle {
    let (dev, ino) = identity(meta);
    Handle::File {
        abs: path.to_path_buf(),
        dev,
        ino,
    }
}

/// Walks the folder: Python candidates and skipped entries.
///
/// Returns `Ok(Err(reason))` when it has more than `max_tree_entries` entries.
pub fn walk(root: &Path, cfg: &CrawlConfig) -> Result<Result<Walk, Rejection>, Error> {
    let rules = FileRules::new(cfg);
    let mut walk = Walk::default();
    let mut entries: u64 = 0;
    let mut stack: Vec<(PathBuf, String)> = vec![(root.to_path_buf(), String::new())];
    while let Some((dir, prefix)) = stack.pop() {
        let listing = match std::fs::read_dir(&dir) {
            Ok(l) => l,
            Err(e) if prefix.is_empty() => return Err(Error::io(&dir, e)),
            Err(_) => {
                walk.skip(prefix.clone(), SkipReason::Unreadable);
                continue;
            }
        };
        for entry in listing {
            let entry = entry.map_err(|e| Error::io(&dir, e))?;
            entries += 1;
            if entries > cfg.max_tree_entries {
                return Ok(Err(Rejection::tree_too_large(cfg.max_tree_entries)));
            }
            let os_name = entry.file_name();
            let Some(name) = os_name.to_str() else {
                walk.skip(
                    format!("{prefix}{}", os_name.to_string_lossy()),
                    SkipReason::NotUtf8Path,
                );
                continue;
            };
            if !is_safe_component(name.as_bytes()) && name != ".git" {
                walk.skip(format!("{prefix}{name}"), SkipReason::UnsafePath);
                continue;
            }
            let path = format!("{prefix}{name}");
            let file_type = entry.file_type().map_err(|e| Error::io(entry.path(), e))?;
            if file_type.is_symlink() {
                walk.skip(path, SkipReason::Symlink);
            } else if file_type.is_dir() {
                if rules.skips_dir(name) || name.eq_ignore_ascii_case(".git") {
                    walk.skip(format!("{path}/"), SkipReason::Vendored);
                } else {
                    stack.push((entry.path(), format!("{path}/")));
                }
            } else if !file_type.is_file() {
                walk.skip(path, SkipReason::NotRegularFile);
            } else if rules.is_python(name) {
                if rules.is_generated(name) {
                    walk.skip(path, SkipReason::Generated);
                    continue;
                }
                let abs = entry.path();
                let meta = match std::fs::symlink_metadata(&abs) {
                    Ok(m) => m,
                    Err(_) => {
                        walk.skip(path, SkipReason::Unreadable);
                        continue;
                    }
                };
                if !meta.file_type().is_file() {
                    walk.skip(path, SkipReason::ChangedDuringCrawl);
                } else if rules.too_large(meta.len()) {
                    walk.skip(path, SkipReason::TooLarge);
                } else {
                    walk.candidates.push(Candidate {
                        path,
                        size: meta.len(),
                        handle: handle(&abs, &meta),
                    });
                }
            }
        }
    }
    Ok(Ok(walk))
}

/// Reads a candidate file, at most `max_bytes + 1` bytes, checking it is still the file the
/// walk saw.
pub fn read_checked(c: &Candidate, max_bytes: u64) -> Result<Vec<u8>, LoadError> {
    let Handle::File { abs, dev, ino } = &c.handle else {
        return Err(LoadError::Skip(SkipReason::Unreadable));
    };
    let file = File::open(abs).map_err(|_| LoadError::Skip(SkipReason::Unreadable))?;
    let meta = file
        .metadata()
        .map_err(|_| LoadError::Skip(SkipReason::Unreadable))?;
    if !meta.file_type().is_file() || identity(&meta) != (*dev, *ino) {
        return Err(LoadError::Skip(SkipReason::ChangedDuringCrawl));
    }
    let mut bytes = Vec::with_capacity(c.size.min(max_bytes) as usize);
    file.take(max_bytes + 1)
        .read_to_end(&mut bytes)
        .map_err(|_| LoadError::Skip(SkipReason::Unreadable))?;
    Ok(bytes)
}
