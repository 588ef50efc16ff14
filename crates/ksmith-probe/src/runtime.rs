//! The embedded Python runner, written to a private runtime directory at start.
//!
//! The runner's source is compiled into the binary, so `ksmith` does not depend on where the
//! checkout is; the sandbox launcher (`ksmith.confine`) comes from `ksmith-sandbox`. The
//! directory (mode 0700) also holds the folder that is the workers' scratch tmpfs inside the
//! sandbox, and is removed when the [`Runtime`] is dropped.

use std::path::{Path, PathBuf};

use crate::error::Error;

/// The start of a runtime directory's name; the creating process id follows.
const PREFIX: &str = "ksmith-probe-";

/// The runner's files, relative to the runtime directory.
pub const FILES: &[(&str, &str)] = &[
    (
        "ksmith/__init__.py",
        include_str!("../../../python/ksmith/__init__.py"),
    ),
    (
        "ksmith/probe/__init__.py",
        include_str!("../../../python/ksmith/probe/__init__.py"),
    ),
    (
        "ksmith/probe/guesses.py",
        include_str!("../../../python/ksmith/probe/guesses.py"),
    ),
    (
        "ksmith/probe/rules.py",
        include_str!("../../../python/ksmith/probe/rules.py"),
    ),
    (
        "ksmith/probe/program.py",
        include_str!("../../../python/ksmith/probe/program.py"),
    ),
    (
        "ksmith/probe/result.py",
        include_str!("../../../python/ksmith/probe/result.py"),
    ),
    (
        "ksmith/probe/execute.py",
        include_str!("../../../python/ksmith/probe/execute.py"),
    ),
    (
        "ksmith/probe/sandbox.py",
        include_str!("../../../python/ksmith/probe/sandbox.py"),
    ),
    (
        "ksmith/probe/worker.py",
        include_str!("../../../python/ksmith/probe/worker.py"),
    ),
    (
        "ksmith/probe/work.py",
        include_str!("../../../python/ksmith/probe/work.py"),
    ),
    (
        "ksmith/probe/sizing.py",
        include_str!("../../../python/ksmith/probe/sizing.py"),
    ),
    (
        "ksmith/probe/constants.py",
        include_str!("../../../python/ksmith/probe/constants.py"),
    ),
    (
        "ksmith/probe/degenerate.py",
        include_str!("../../../python/ksmith/probe/degenerate.py"),
    ),
];

/// The Ray driver (`python -m ksmith.probe_ray`): it runs outside the sandbox, decides nothing
/// about a module's row and so is not part of [`runner_hash`].
pub const RAY_DRIVER: (&str, &str) = (
    "ksmith/probe_ray.py",
    include_str!("../../../python/ksmith/probe_ray.py"),
);

/// Every file of the runner written to the runtime directory: the runner's and the sandbox's.
pub fn all_files() -> impl Iterator<Item = &'static (&'static str, &'static str)> {
    FILES.iter().chain(ksmith_sandbox::PYTHON_FILES)
}

/// A hash of the embedded runner's and sandbox's source: part of the stage fingerprint, so a
/// changed repair rule or sandbox re-probes every module.
pub fn runner_hash() -> String {
    let mut h = ksmith_core::ids::IdHasher::new();
    for (rel, text) in all_files() {
        h.part(rel).part(text);
    }
    h.finish()
}

/// A private directory holding the runner (`PYTHONPATH`) and the modules' temporary dirs.
#[derive(Debug)]
pub struct Runtime {
    root: PathBuf,
}

impl Runtime {
    /// Creates a fresh runtime directory under the system temporary directory holding the
    /// embedded runner and the Ray driver, after removing those of probe processes that no longer run (killed
    /// before they could clean up).
    pub fn create() -> Result<Runtime, Error> {
        Runtime::with_files(
            all_files()
                .chain(std::iter::once(&RAY_DRIVER))
                .map(|(rel, text)| (*rel, *text)),
        )
    }

    /// [`Runtime::create`] with other runner files (`ksmith/...` paths and their text): the
    /// benchmark runs the runner of an older commit with them.
    pub fn with_files<'a>(
        files: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<Runtime, Error> {
        let base = std::env::temp_dir();
        remove_stale(&base);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        let root = base.join(format!("{PREFIX}{}-{nanos}", std::process::id()));
        make_private_dir(&root)?;
        let runtime = Runtime { root };
        for (rel, text) in files {
            let path = runtime.python_path().join(rel);
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent).map_err(|source| Error::Runtime {
                    path: parent.to_path_buf(),
                    source,
                })?;
            }
            std::fs::write(&path, text).map_err(|source| Error::Runtime { path, source })?;
        }
        let tmp = runtime.tmp_root();
        std::fs::create_dir_all(&tmp).map_err(|source| Error::Runtime { path: tmp, source })?;
        Ok(runtime)
    }

    /// The folder to put on `PYTHONPATH`.
    pub fn python_path(&self) -> PathBuf {
        self.root.join("py")
    }

    /// The workers' scratch folder (a tmpfs at this path inside their sandbox), which holds
    /// the per-module workspaces.
    pub fn tmp_root(&self) -> PathBuf {
        self.root.join("tmp")
    }

    /// The runtime directory.
    pub fn root(&self) -> &Path {
        &self.root
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

/// The process that made a runtime directory, from its name (`ksmith-probe-<pid>-<nanos>`).
fn owner(name: &str) -> Option<u32> {
    name.strip_prefix(PREFIX)?.split('-').next()?.parse().ok()
}

/// Removes the runtime directories under `base` whose process is gone (a `kill -9` leaves its
/// directory behind; the next run cleans it).
fn remove_stale(base: &Path) {
    let Ok(entries) = std::fs::read_dir(base) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if let Some(pid) = owner(&name)
            && !Path::new(&format!("/proc/{pid}")).exists()
        {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

fn make_private_dir(path: &Path) -> Result<(), Error> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(path)
        .map_err(|source| Error::Runtime {
            path: path.to_path_buf(),
            source,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_every_file_and_cleans_up() {
        let rt = Runtime::create().unwrap();
        let root = rt.root().to_path_buf();
        for (rel, text) in all_files() {
            let on_disk = std::fs::read_to_string(rt.python_path().join(rel)).unwrap();
            assert_eq!(&on_disk, text);
        }
        assert!(rt.tmp_root().is_dir());
        drop(rt);
        assert!(!root.exists());
    }

    #[test]
    fn directories_of_dead_processes_are_removed() {
        let base = tempfile::tempdir().unwrap();
        // A pid above the kernel's maximum (4194304) never runs.
        let dead = base.path().join(format!("{PREFIX}4194305-1"));
        let alive = base
            .path()
            .join(format!("{PREFIX}{}-1", std::process::id()));
        let other = base.path().join("something-else");
        for d in [&dead, &alive, &other] {
            std::fs::create_dir_all(d.join("py")).unwrap();
        }
        remove_stale(base.path());
        assert!(!dead.exists());
        assert!(alive.exists() && other.exists());
        assert_eq!(owner("ksmith-probe-12-34"), Some(12));
        assert_eq!(owner("ksmith-bench-12"), None);
    }

    /// A module added to the runner package but not embedded would only fail at run time.
    #[test]
    fn every_file_of_the_runner_package_is_embedded() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../python/ksmith/probe");
        for entry in std::fs::read_dir(dir).unwrap() {
            let name = entry.unwrap().file_name().to_string_lossy().into_owned();
            if name.ends_with(".py") {
                let rel = format!("ksmith/probe/{name}");
                assert!(
                    FILES.iter().any(|(r, _)| *r == rel),
                    "{rel} is not embedded"
                );
            }
        }
    }
}
