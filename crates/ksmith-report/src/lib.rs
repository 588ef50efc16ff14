//! Report: a self-contained HTML page about one work directory.
//!
//! [`collect`] reads whatever tables exist in the work directory (a stage that has not run is
//! shown as such, never guessed) into [`ReportData`]; [`render_html`] turns it into one HTML file
//! with inline SVG plots and no external resources, so it can be mailed, archived next to a
//! nightly dataset or opened offline. Shown: the funnel from the classes extract found to the
//! tasks (programs, runnable, sized, unique), per repository, with the top reasons of every loss
//! and an example of each ([`funnel`]); family and level distributions of the unique modules;
//! the tasks (family, level, sizes, estimated time, a link to the source: [`task_list`]). Once
//! the rollout has run: the best-so-far speedup per iteration per task and in aggregate, the
//! paper's metrics per level (correctness, fast_1, average speedup with sub-1x counted as 0),
//! each task's steps, best speedup, hacks and how its rollout ended, evaluator verdicts and hack
//! counts, the teacher's tokens, retries and failures, select's drop reasons and the exported
//! datasets (with the reason a format was left out). Before, one line says why it has not run.
//! A chart with nothing to show is replaced by one line saying why (on CPU: no speedups are
//! measured).
//!
//! Invariants: reads tables and the stages' reports and side files only (no Python, no
//! network); a missing or unreadable table is a
//! note in the report, not an error; the page loads nothing from outside itself.
#![deny(missing_docs)]

mod collect;
mod funnel;
mod html;
mod svg;
mod task_list;

pub use collect::{ExportedDataset, LevelMetrics, ReportData, TaskSummary, Trajectory, collect};
pub use funnel::{Funnel, Loss, Reason, Repository, STEPS, Step};
pub use html::render_html;
pub use svg::escape;
pub use task_list::TaskInfo;

use std::path::{Path, PathBuf};

/// Why a report could not be written.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Writing the HTML file failed.
    #[error("cannot write report: {0}")]
    Write(#[from] ksmith_core::Error),
}

/// Collects the data of `workdir`, renders it and writes it atomically to `out` (default
/// `<workdir>/report.html`). Returns the path written.
pub fn write_report(workdir: &Path, out: Option<&Path>) -> Result<PathBuf, Error> {
    let data = collect(workdir);
    let html = render_html(&data);
    let path = out
        .map(Path::to_path_buf)
        .unwrap_or_else(|| workdir.join("report.html"));
    ksmith_core::table::write_bytes_atomically(&path, html.as_bytes())?;
    Ok(path)
}
