//! Publishing a dataset folder atomically.
//!
//! A dataset is written into a hidden sibling folder (`.<name>.tmp-<pid>`) and renamed into
//! place only when every file is complete, so a reader (or a trainer started mid-export) sees
//! either the previous dataset or the new one, never a mix. An existing dataset is moved aside
//! first and removed after the swap; if the swap fails it is moved back.

use std::path::{Path, PathBuf};

/// The temporary folder a dataset named `name` is written into.
pub fn staging_dir(datasets: &Path, name: &str) -> PathBuf {
    datasets.join(format!(".{name}.tmp-{}", std::process::id()))
}

/// Removes folders left by an interrupted export of dataset `name` (`.<name>.tmp-*`,
/// `.<name>.old-*`); returns how many were removed.
pub fn remove_leftovers(datasets: &Path, name: &str) -> std::io::Result<usize> {
    let tmp = format!(".{name}.tmp-");
    let old = format!(".{name}.old-");
    let mut removed = 0;
    let entries = match std::fs::read_dir(datasets) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(e),
    };
    for entry in entries {
        let entry = entry?;
        let file_name = entry.file_name().to_string_lossy().into_owned();
        if file_name.starts_with(&tmp) || file_name.starts_with(&old) {
            std::fs::remove_dir_all(entry.path())?;
            removed += 1;
        }
    }
    Ok(removed)
}

/// Replaces `target` with `staged` (both in the same parent folder).
pub fn publish(staged: &Path, target: &Path) -> std::io::Result<()> {
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "dataset".to_string());
    let parent = target.parent().unwrap_or_else(|| Path::new("."));
    let old = parent.join(format!(".{name}.old-{}", std::process::id()));
    if old.exists() {
        std::fs::remove_dir_all(&old)?;
    }
    let had_old = target.exists();
    if had_old {
        std::fs::rename(target, &old)?;
    }
    if let Err(e) = std::fs::rename(staged, target) {
        if had_old {
            let _ = std::fs::rename(&old, target);
        }
        return Err(e);
    }
    if had_old {
        std::fs::remove_dir_all(&old)?;
    }
    if let Ok(d) = std::fs::File::open(parent) {
        let _ = d.sync_all();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn publish_replaces_the_old_folder_and_leaves_nothing_behind() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("verl-rl");
        std::fs::create_dir_all(target.join("data")).unwrap();
        std::fs::write(target.join("data/old.parquet"), b"old").unwrap();
        let staged = staging_dir(dir.path(), "verl-rl");
        std::fs::create_dir_all(staged.join("data")).unwrap();
        std::fs::write(staged.join("data/new.parquet"), b"new").unwrap();
        publish(&staged, &target).unwrap();
        assert!(target.join("data/new.parquet").exists());
        assert!(!target.join("data/old.parquet").exists());
        let names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, vec!["verl-rl".to_string()]);
    }

    #[test]
    fn leftovers_of_interrupted_runs_are_removed_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        for name in [
            ".verl-rl.tmp-123",
            ".verl-rl.old-9",
            ".verl-sft.tmp-1",
            "verl-rl",
        ] {
            std::fs::create_dir_all(dir.path().join(name)).unwrap();
        }
        assert_eq!(remove_leftovers(dir.path(), "verl-rl").unwrap(), 2);
        let mut names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(
            names,
            vec![".verl-sft.tmp-1".to_string(), "verl-rl".to_string()]
        );
        assert_eq!(remove_leftovers(&dir.path().join("none"), "x").unwrap(), 0);
    }

    #[test]
    fn a_failed_swap_keeps_the_old_dataset() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("verl-rl");
        std::fs::create_dir_all(&target).unwrap();
        std::fs::write(target.join("README.md"), b"old").unwrap();
        // The staged folder does not exist: the rename fails.
        let staged = dir.path().join(".missing");
        assert!(publish(&staged, &target).is_err());
        assert_eq!(std::fs::read(target.join("README.md")).unwrap(), b"old");
    }
}
