//! The Python worker package, embedded in the binary and written to a private folder at start
//! together with the sandbox launcher (`ksmith.confine`) and the shared layer (`ksmith.shared`),
//! both from `ksmith-sandbox`, which also makes the folder.

use std::path::{Path, PathBuf};

use crate::error::EvalClientError;

/// The worker's sources: path under the package root, contents.
pub const SOURCES: &[(&str, &str)] = &[
    (
        "ksmith/__init__.py",
        "\"\"\"ksmith evaluator runtime (written by ksmith-eval).\"\"\"\n",
    ),
    (
        "ksmith/verdicts.json",
        include_str!("../../../python/ksmith/verdicts.json"),
    ),
    (
        "ksmith/evaluator/__init__.py",
        include_str!("../../../python/ksmith/evaluator/__init__.py"),
    ),
    (
        "ksmith/evaluator/__main__.py",
        include_str!("../../../python/ksmith/evaluator/__main__.py"),
    ),
    (
        "ksmith/evaluator/candidate_child.py",
        include_str!("../../../python/ksmith/evaluator/candidate_child.py"),
    ),
    (
        "ksmith/evaluator/child_common.py",
        include_str!("../../../python/ksmith/evaluator/child_common.py"),
    ),
    (
        "ksmith/evaluator/capacity.py",
        include_str!("../../../python/ksmith/evaluator/capacity.py"),
    ),
    (
        "ksmith/evaluator/compare.py",
        include_str!("../../../python/ksmith/evaluator/compare.py"),
    ),
    (
        "ksmith/evaluator/defaults.json",
        include_str!("../../../python/ksmith/evaluator/defaults.json"),
    ),
    (
        "ksmith/evaluator/evaluate.py",
        include_str!("../../../python/ksmith/evaluator/evaluate.py"),
    ),
    (
        "ksmith/evaluator/inputs.py",
        include_str!("../../../python/ksmith/evaluator/inputs.py"),
    ),
    (
        "ksmith/evaluator/forkserver.py",
        include_str!("../../../python/ksmith/evaluator/forkserver.py"),
    ),
    (
        "ksmith/evaluator/integrity.py",
        include_str!("../../../python/ksmith/evaluator/integrity.py"),
    ),
    (
        "ksmith/evaluator/launched.py",
        include_str!("../../../python/ksmith/evaluator/launched.py"),
    ),
    (
        "ksmith/evaluator/messages.py",
        include_str!("../../../python/ksmith/evaluator/messages.py"),
    ),
    (
        "ksmith/evaluator/protocol.py",
        include_str!("../../../python/ksmith/evaluator/protocol.py"),
    ),
    (
        "ksmith/evaluator/reference_child.py",
        include_str!("../../../python/ksmith/evaluator/reference_child.py"),
    ),
    (
        "ksmith/evaluator/sandbox.py",
        include_str!("../../../python/ksmith/evaluator/sandbox.py"),
    ),
    (
        "ksmith/evaluator/server.py",
        include_str!("../../../python/ksmith/evaluator/server.py"),
    ),
    (
        "ksmith/evaluator/speed_of_light.py",
        include_str!("../../../python/ksmith/evaluator/speed_of_light.py"),
    ),
    (
        "ksmith/evaluator/static_check.py",
        include_str!("../../../python/ksmith/evaluator/static_check.py"),
    ),
    (
        "ksmith/evaluator/timing.py",
        include_str!("../../../python/ksmith/evaluator/timing.py"),
    ),
    (
        "ksmith/evaluator/compile_baseline.py",
        include_str!("../../../python/ksmith/evaluator/compile_baseline.py"),
    ),
    (
        "ksmith/evaluator/decide.py",
        include_str!("../../../python/ksmith/evaluator/decide.py"),
    ),
    (
        "ksmith/evaluator/digest.py",
        include_str!("../../../python/ksmith/evaluator/digest.py"),
    ),
    (
        "ksmith/evaluator/digest_kernel.py",
        include_str!("../../../python/ksmith/evaluator/digest_kernel.py"),
    ),
    (
        "ksmith/evaluator/gate.py",
        include_str!("../../../python/ksmith/evaluator/gate.py"),
    ),
    (
        "ksmith/evaluator/health.py",
        include_str!("../../../python/ksmith/evaluator/health.py"),
    ),
    (
        "ksmith/evaluator/idle.py",
        include_str!("../../../python/ksmith/evaluator/idle.py"),
    ),
    (
        "ksmith/evaluator/gpu_memory.py",
        include_str!("../../../python/ksmith/evaluator/gpu_memory.py"),
    ),
    (
        "ksmith/evaluator/result_file.py",
        include_str!("../../../python/ksmith/evaluator/result_file.py"),
    ),
    (
        "ksmith/evaluator/shapes.py",
        include_str!("../../../python/ksmith/evaluator/shapes.py"),
    ),
    (
        "ksmith/evaluator/task.py",
        include_str!("../../../python/ksmith/evaluator/task.py"),
    ),
    (
        "ksmith/evaluator/tritoncache.py",
        include_str!("../../../python/ksmith/evaluator/tritoncache.py"),
    ),
    (
        "ksmith/evaluator/worker.py",
        include_str!("../../../python/ksmith/evaluator/worker.py"),
    ),
    (
        "ksmith/evaluator/backend.py",
        include_str!("../../../python/ksmith/evaluator/backend.py"),
    ),
    (
        "ksmith/evaluator/backends.py",
        include_str!("../../../python/ksmith/evaluator/backends.py"),
    ),
    (
        "ksmith/evaluator/backend_triton.py",
        include_str!("../../../python/ksmith/evaluator/backend_triton.py"),
    ),
    (
        "ksmith/evaluator/backend_cuda.py",
        include_str!("../../../python/ksmith/evaluator/backend_cuda.py"),
    ),
    (
        "ksmith/evaluator/build_child.py",
        include_str!("../../../python/ksmith/evaluator/build_child.py"),
    ),
    (
        "ksmith/evaluator/cuda_source.py",
        include_str!("../../../python/ksmith/evaluator/cuda_source.py"),
    ),
    (
        "ksmith/evaluator/cudacache.py",
        include_str!("../../../python/ksmith/evaluator/cudacache.py"),
    ),
];

/// Every file written to the runtime folder: the worker's and the sandbox's.
pub fn all_sources() -> impl Iterator<Item = &'static (&'static str, &'static str)> {
    SOURCES.iter().chain(ksmith_sandbox::PYTHON_FILES)
}

/// The evaluator's runtime folder ([`ksmith_sandbox::RuntimeFolder`]): the worker package on
/// `PYTHONPATH`, the workers' scratch folder and their logs; removed on drop.
#[derive(Debug)]
pub struct RuntimeDir {
    folder: ksmith_sandbox::RuntimeFolder,
}

impl RuntimeDir {
    /// Writes the package into a new folder (mode 0700) under `base` (default: the system
    /// temporary folder), removing those of evaluator processes that no longer run.
    pub fn create(base: Option<&Path>) -> Result<RuntimeDir, EvalClientError> {
        let files = all_sources().map(|(rel, text)| (*rel, *text));
        let folder =
            ksmith_sandbox::RuntimeFolder::create("ksmith-eval-", base, files).map_err(|e| {
                EvalClientError::Io {
                    path: e.path,
                    source: e.source,
                }
            })?;
        Ok(RuntimeDir { folder })
    }

    /// The folder to put on `PYTHONPATH`.
    pub fn path(&self) -> PathBuf {
        self.folder.python_path()
    }

    /// The workers' scratch folder (a tmpfs at this path inside their sandbox).
    pub fn scratch(&self) -> PathBuf {
        self.folder.scratch()
    }

    /// Where the workers' logs go.
    pub fn logs(&self) -> &Path {
        self.folder.root()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_every_source_and_removes_them_on_drop() {
        let base = tempfile::tempdir().unwrap();
        let dir = RuntimeDir::create(Some(base.path())).unwrap();
        let root = dir.path();
        for (rel, text) in all_sources() {
            assert_eq!(&std::fs::read_to_string(root.join(rel)).unwrap(), text);
        }
        assert!(SOURCES.iter().any(|(rel, _)| rel.ends_with("worker.py")));
        drop(dir);
        assert!(!root.exists());
    }

    /// A module added to the worker package but not embedded would only fail at run time.
    #[test]
    fn every_file_of_the_worker_package_is_embedded() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../python/ksmith/evaluator");
        for entry in std::fs::read_dir(dir).unwrap() {
            let name = entry.unwrap().file_name().to_string_lossy().into_owned();
            if name.ends_with(".py") || name.ends_with(".json") {
                let rel = format!("ksmith/evaluator/{name}");
                assert!(
                    SOURCES.iter().any(|(r, _)| *r == rel),
                    "{rel} is not embedded"
                );
            }
        }
    }
}
