//! `datasets/export.json`: what the last export wrote and left out, for people, the HTML
//! report, and the stage's own up-to-date check.
//!
//! A format left out has no folder, so nothing on disk could say that it is up to date; the
//! record does: when it carries the current fingerprint, a left-out format needs no output.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::lengths::{Fit, Lengths};

/// The file name of the record in the datasets folder.
pub const RECORD_FILE: &str = "export.json";

/// One dataset the export wrote.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WrittenDataset {
    /// Rows per split.
    pub splits: BTreeMap<String, u64>,
    /// Its shard files per split, relative to the dataset folder.
    pub files: BTreeMap<String, Vec<String>>,
    /// Token lengths of its samples.
    pub lengths: Lengths,
    /// Trainer settings that fit them.
    pub fit: Fit,
}

/// What one export run did.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ExportRecord {
    /// The export's fingerprint (with `:incomplete` when a required format had no rows).
    pub fingerprint: String,
    /// How tokens were counted.
    pub token_counter: String,
    /// Datasets written, by folder name.
    pub written: BTreeMap<String, WrittenDataset>,
    /// Formats left out for lack of rows, by folder name, with the reason.
    pub omitted: BTreeMap<String, String>,
}

impl ExportRecord {
    /// Where the record lives in the datasets folder.
    pub fn path_in(datasets: &Path) -> PathBuf {
        datasets.join(RECORD_FILE)
    }

    /// The record in `datasets`, if there is a readable one.
    pub fn load(datasets: &Path) -> Option<ExportRecord> {
        let bytes = std::fs::read(Self::path_in(datasets)).ok()?;
        serde_json::from_slice(&bytes).ok()
    }
}
