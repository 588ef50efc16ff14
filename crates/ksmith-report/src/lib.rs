//! Report: a self-contained HTML page about one work directory.
//!
//! [`collect`] reads whatever tables exist in the work directory (a stage that has not run is
//! shown as such, never guessed) into [`ReportData`]; [`render_html`] turns it into one HTML file
//! with inline SVG plots and no external resources, so it can be mailed, archived next to a
//! nightly dataset or opened offline. Shown: the funnel (repos, modules, runnable, unique, tasks,
//! steps, samples), family and level distributions, the best-so-far speedup per iteration per
//! task and in aggregate, the paper's metrics per level (correctness, fast_1, average speedup
//! with sub-1x counted as 0), a table per task (family, level, steps, best speedup,
//! correctness, hacks, how its rollout ended), evaluator verdicts and hack counts, the teacher's
//! tokens, retries and failures, select's drop reasons and the exported datasets (with the
//! reason a format was left out). A chart with nothing to show is replaced by one line saying
//! why (on CPU: no speedups are measured).
//!
//! Invariants: reads tables and the stages' reports and side files only (no Python, no
//! network); a missing or unreadable table is a
//! note in the report, not an error; the page loads nothing from outside itself.
#![deny(missing_docs)]

mod collect;
mod html;
mod svg;

pub use collect::{ExportedDataset, LevelMetrics, ReportData, TaskSummary, Trajectory, collect};
pub use html::render_html;
pub use svg::escape;

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
