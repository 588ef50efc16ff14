//! What a stage is given to run.

use std::path::{Path, PathBuf};

use crate::progress::{ProgressMode, Tracker};
use crate::shard::Shard;

/// The environment of one stage run: where the work directory is, how many threads to use and
/// how to report progress and messages.
#[derive(Debug, Clone)]
pub struct StageContext {
    /// The work directory holding every table.
    pub workdir: PathBuf,
    /// Worker threads for CPU-parallel work (at least 1).
    pub threads: usize,
    /// How progress and messages are shown.
    pub progress: ProgressMode,
    /// Re-run even when the output is up to date.
    pub force: bool,
    /// Only the repositories of this shard (crawl filters them; the stages after it see only
    /// what crawl wrote). `None` is the whole run.
    pub shard: Option<Shard>,
}

impl StageContext {
    /// A context for `workdir` with `threads` threads (0 means one per core).
    pub fn new(workdir: impl Into<PathBuf>, threads: usize, progress: ProgressMode) -> Self {
        let threads = if threads == 0 {
            std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1)
        } else {
            threads
        };
        StageContext {
            workdir: workdir.into(),
            threads,
            progress,
            force: false,
            shard: None,
        }
    }

    /// A silent single-threaded context, for tests.
    pub fn for_tests(workdir: &Path) -> Self {
        StageContext::new(workdir, 1, ProgressMode::Silent)
    }

    /// A progress tracker for `label` with `total` items.
    pub fn tracker(&self, label: &str, total: Option<u64>) -> Tracker {
        Tracker::new(self.progress, label, total)
    }

    /// Prints an informational line unless the run is quiet.
    pub fn info(&self, message: impl AsRef<str>) {
        if self.progress != ProgressMode::Silent {
            eprintln!("{}", message.as_ref());
        }
    }

    /// Prints a warning; warnings are shown even in quiet runs.
    pub fn warn(&self, message: impl AsRef<str>) {
        eprintln!("warning: {}", message.as_ref());
    }
}
