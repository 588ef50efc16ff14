//! The embedded Python runner, written to a private runtime folder at start.
//!
//! The runner's source is compiled into the binary, so `ksmith` does not depend on where the
//! checkout is; the sandbox launcher (`ksmith.confine`) and the shared layer (`ksmith.shared`)
//! come from `ksmith-sandbox`, which also makes the folder ([`ksmith_sandbox::RuntimeFolder`]).

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
        "ksmith/probe/defaults.json",
        include_str!("../../../python/ksmith/probe/defaults.json"),
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
        "ksmith/probe/loading.py",
        include_str!("../../../python/ksmith/probe/loading.py"),
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
        "ksmith/probe/slots.py",
        include_str!("../../../python/ksmith/probe/slots.py"),
    ),
    (
        "ksmith/probe/provenance.py",
        include_str!("../../../python/ksmith/probe/provenance.py"),
    ),
    (
        "ksmith/probe/sized_program.py",
        include_str!("../../../python/ksmith/probe/sized_program.py"),
    ),
    (
        "ksmith/probe/observe.py",
        include_str!("../../../python/ksmith/probe/observe.py"),
    ),
    (
        "ksmith/probe/host_tensors.py",
        include_str!("../../../python/ksmith/probe/host_tensors.py"),
    ),
    (
        "ksmith/probe/aten_calls.py",
        include_str!("../../../python/ksmith/probe/aten_calls.py"),
    ),
    (
        "ksmith/probe/aten_views.json",
        include_str!("../../../python/ksmith/probe/aten_views.json"),
    ),
    (
        "ksmith/probe/degenerate.py",
        include_str!("../../../python/ksmith/probe/degenerate.py"),
    ),
    (
        "ksmith/probe/eval_mode.py",
        include_str!("../../../python/ksmith/probe/eval_mode.py"),
    ),
    (
        "ksmith/probe/doc_shapes.py",
        include_str!("../../../python/ksmith/probe/doc_shapes.py"),
    ),
    (
        "ksmith/probe/config_args.py",
        include_str!("../../../python/ksmith/probe/config_args.py"),
    ),
    (
        "ksmith/probe/uninitialized.py",
        include_str!("../../../python/ksmith/probe/uninitialized.py"),
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

/// The runtime folder of the probe ([`ksmith_sandbox::RuntimeFolder`]): the runner on
/// `PYTHONPATH` and the workers' scratch folder holding the modules' workspaces.
#[derive(Debug)]
pub struct Runtime {
    folder: ksmith_sandbox::RuntimeFolder,
}

impl Runtime {
    /// Creates a fresh runtime folder under the system temporary folder holding the embedded
    /// runner and the Ray driver (removing those of probe processes that no longer run).
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
        let folder = ksmith_sandbox::RuntimeFolder::create(PREFIX, None, files).map_err(|e| {
            Error::Runtime {
                path: e.path,
                source: e.source,
            }
        })?;
        Ok(Runtime { folder })
    }

    /// The folder to put on `PYTHONPATH`.
    pub fn python_path(&self) -> PathBuf {
        self.folder.python_path()
    }

    /// The workers' scratch folder (a tmpfs at this path inside their sandbox), which holds
    /// the per-module workspaces.
    pub fn tmp_root(&self) -> PathBuf {
        self.folder.scratch()
    }

    /// The runtime folder.
    pub fn root(&self) -> &Path {
        self.folder.root()
    }
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

    /// A module added to the runner package but not embedded would only fail at run time.
    #[test]
    fn every_file_of_the_runner_package_is_embedded() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../python/ksmith/probe");
        for entry in std::fs::read_dir(dir).unwrap() {
            let name = entry.unwrap().file_name().to_string_lossy().into_owned();
            if name.ends_with(".py") || name.ends_with(".json") {
                let rel = format!("ksmith/probe/{name}");
                assert!(
                    FILES.iter().any(|(r, _)| *r == rel),
                    "{rel} is not embedded"
                );
            }
        }
    }
}
