//! The private folder a stage's workers run from, written at start and removed at the end: the
//! embedded Python files on `PYTHONPATH` (`py/`: the stage's own package and [`PYTHON_FILES`])
//! and the workers' scratch folder (`scratch/`, a tmpfs at that path inside their sandbox).
//!
//! The folder is `<base>/<prefix><pid>-<nanos>` (mode 0700); a `kill -9` leaves it behind, and
//! the next folder made with the same prefix under the same base removes it once its process is
//! gone.
//!
//! [`PYTHON_FILES`]: crate::PYTHON_FILES

use std::path::{Path, PathBuf};

/// A runtime folder that cannot be made or written.
#[derive(Debug, thiserror::Error)]
#[error("runtime folder {}: {source}", path.display())]
pub struct RuntimeError {
    /// The path concerned.
    pub path: PathBuf,
    /// The underlying error.
    #[source]
    pub source: std::io::Error,
}

/// A private folder holding a stage's embedded Python files and its workers' scratch folder;
/// removed on drop.
#[derive(Debug)]
pub struct RuntimeFolder {
    root: PathBuf,
}

impl RuntimeFolder {
    /// Makes a fresh folder under `base` (default: the system temporary folder) named after
    /// `prefix` and this process, after removing the folders of `prefix` under `base` whose
    /// process is gone, and writes `files` (paths under `py/` and their text) into it.
    pub fn create<'a>(
        prefix: &str,
        base: Option<&Path>,
        files: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<RuntimeFolder, RuntimeError> {
        let base = base.map_or_else(std::env::temp_dir, Path::to_path_buf);
        remove_stale(&base, prefix);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        let root = base.join(format!("{prefix}{}-{nanos}", std::process::id()));
        make_private_dir(&root)?;
        let folder = RuntimeFolder { root };
        for (rel, text) in files {
            let path = folder.python_path().join(rel);
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent).map_err(|source| RuntimeError {
                    path: parent.to_path_buf(),
                    source,
                })?;
            }
            std::fs::write(&path, text).map_err(|source| RuntimeError { path, source })?;
        }
        let scratch = folder.scratch();
        std::fs::create_dir_all(&scratch).map_err(|source| RuntimeError {
            path: scratch,
            source,
        })?;
        Ok(folder)
    }

    /// The folder to put on `PYTHONPATH`.
    pub fn python_path(&self) -> PathBuf {
        self.root.join("py")
    }

    /// The workers' scratch folder (a tmpfs at this path inside their sandbox).
    pub fn scratch(&self) -> PathBuf {
        self.root.join("scratch")
    }

    /// The folder itself (a stage may keep its workers' logs there).
    pub fn root(&self) -> &Path {
        &self.root
    }
}

impl Drop for RuntimeFolder {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

/// The process that made a runtime folder, from its name (`<prefix><pid>-<nanos>`).
fn owner(name: &str, prefix: &str) -> Option<u32> {
    name.strip_prefix(prefix)?.split('-').next()?.parse().ok()
}

/// Removes the runtime folders of `prefix` under `base` whose process is gone.
fn remove_stale(base: &Path, prefix: &str) {
    let Ok(entries) = std::fs::read_dir(base) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if let Some(pid) = owner(&name, prefix)
            && !Path::new(&format!("/proc/{pid}")).exists()
        {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

fn make_private_dir(path: &Path) -> Result<(), RuntimeError> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(path)
        .map_err(|source| RuntimeError {
            path: path.to_path_buf(),
            source,
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn writes_the_files_privately_and_removes_them_on_drop() {
        let base = tempfile::tempdir().unwrap();
        let files = [("ksmith/a.py", "A = 1\n"), ("ksmith/sub/b.json", "{}")];
        let folder = RuntimeFolder::create("ksmith-test-", Some(base.path()), files).unwrap();
        let root = folder.root().to_path_buf();
        for (rel, text) in files {
            assert_eq!(
                std::fs::read_to_string(folder.python_path().join(rel)).unwrap(),
                text
            );
        }
        assert!(folder.scratch().is_dir());
        let mode = std::fs::metadata(&root).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
        let name = root.file_name().unwrap().to_string_lossy().into_owned();
        assert_eq!(owner(&name, "ksmith-test-"), Some(std::process::id()));
        drop(folder);
        assert!(!root.exists());
    }

    #[test]
    fn folders_of_dead_processes_are_removed() {
        let base = tempfile::tempdir().unwrap();
        // A pid above the kernel's maximum (4194304) never runs.
        let dead = base.path().join("ksmith-test-4194305-1");
        let alive = base
            .path()
            .join(format!("ksmith-test-{}-1", std::process::id()));
        let other_stage = base.path().join("ksmith-other-4194305-1");
        let other = base.path().join("something-else");
        for d in [&dead, &alive, &other_stage, &other] {
            std::fs::create_dir_all(d.join("py")).unwrap();
        }
        let folder = RuntimeFolder::create("ksmith-test-", Some(base.path()), []).unwrap();
        assert!(!dead.exists());
        assert!(alive.exists() && other_stage.exists() && other.exists());
        assert_eq!(owner("ksmith-test-12-34", "ksmith-test-"), Some(12));
        assert_eq!(owner("ksmith-bench-12", "ksmith-test-"), None);
        drop(folder);
    }
}
