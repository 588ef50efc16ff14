//! The counters every stage returns; [`crate::stage`] saves them next to the output.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::table::write_bytes_atomically;

/// What a stage did: rows read, written and dropped (by reason), and how long it took.
///
/// Saved as `reports/<stage>.json` in the work directory.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StageReport {
    /// The stage's name.
    pub stage: String,
    /// True when the stage did not run (its output was up to date, or the CLI skipped it); the
    /// other fields are then those of the last run that did.
    pub skipped: bool,
    /// Why the stage did not run, when it did not ([`crate::stage::UP_TO_DATE`], or what it
    /// lacked).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skip_reason: Option<String>,
    /// Rows read from the input tables.
    pub rows_read: u64,
    /// Rows written to the output tables.
    pub rows_written: u64,
    /// Rows that are in the output but marked as not passing (rejected, failed, dropped), by
    /// reason.
    pub dropped: BTreeMap<String, u64>,
    /// Other named counts worth reporting (bytes read, repairs made, ...).
    pub counters: BTreeMap<String, u64>,
    /// Wall time in milliseconds.
    pub elapsed_ms: u64,
    /// The fingerprint of the output.
    pub fingerprint: String,
}

impl StageReport {
    /// An empty report for `stage`.
    pub fn new(stage: &str) -> Self {
        StageReport {
            stage: stage.to_string(),
            ..Default::default()
        }
    }

    /// Counts one dropped row under `reason`.
    pub fn drop_row(&mut self, reason: &str) {
        *self.dropped.entry(reason.to_string()).or_default() += 1;
    }

    /// Adds `n` to the counter `name`.
    pub fn count(&mut self, name: &str, n: u64) {
        *self.counters.entry(name.to_string()).or_default() += n;
    }

    /// Total dropped rows.
    pub fn dropped_total(&self) -> u64 {
        self.dropped.values().sum()
    }

    /// Where the report of `stage` lives in `workdir`.
    pub fn path_in(workdir: &Path, stage: &str) -> PathBuf {
        workdir.join("reports").join(format!("{stage}.json"))
    }

    /// The report of `stage` saved in `workdir`, if there is a readable one.
    pub fn load(workdir: &Path, stage: &str) -> Option<StageReport> {
        let bytes = std::fs::read(Self::path_in(workdir, stage)).ok()?;
        serde_json::from_slice(&bytes).ok()
    }

    /// Saves the report as JSON in `workdir/reports/`. Only the stage contract
    /// ([`crate::stage`]) writes reports.
    pub(crate) fn save(&self, workdir: &Path) -> Result<()> {
        let path = Self::path_in(workdir, &self.stage);
        let json = serde_json::to_vec_pretty(self).unwrap_or_default();
        write_bytes_atomically(&path, &json)
    }

    /// One human line: `extract: 120 rows written (7 dropped) in 1.2 s`.
    pub fn summary(&self) -> String {
        if self.skipped {
            return match self.skip_reason.as_deref() {
                None | Some(crate::stage::UP_TO_DATE) => {
                    format!("{}: up to date, nothing to do", self.stage)
                }
                Some(reason) => format!("{}: skipped, {reason}", self.stage),
            };
        }
        let mut s = format!(
            "{}: {} rows read, {} written",
            self.stage, self.rows_read, self.rows_written
        );
        if !self.dropped.is_empty() {
            let reasons: Vec<String> = self
                .dropped
                .iter()
                .map(|(r, n)| format!("{r} {n}"))
                .collect();
            s.push_str(&format!(
                " ({} not passing: {})",
                self.dropped_total(),
                reasons.join(", ")
            ));
        }
        s.push_str(&format!(" in {:.1} s", self.elapsed_ms as f64 / 1000.0));
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn save_and_summary() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut r = StageReport::new("extract");
        r.rows_read = 3;
        r.rows_written = 5;
        r.drop_row("syntax_error");
        r.drop_row("syntax_error");
        r.save(dir.path()).expect("save");
        let text =
            std::fs::read_to_string(StageReport::path_in(dir.path(), "extract")).expect("read");
        let back: StageReport = serde_json::from_str(&text).expect("json");
        assert_eq!(back, r);
        assert!(
            r.summary().contains("2 not passing: syntax_error 2"),
            "{}",
            r.summary()
        );
    }
}
