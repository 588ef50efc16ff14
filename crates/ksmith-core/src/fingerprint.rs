//! Stage fingerprints.
//!
//! A stage's fingerprint hashes what determines its output: the fingerprints of the tables it
//! reads, its config section (after defaults) and the stage's code version. The fingerprint is
//! stored in the metadata of the table the stage writes; when a stage is about to run and its
//! output already carries the fingerprint it would compute, the stage has nothing to do.

use std::path::Path;

use crate::ids::IdHasher;
use crate::table::read_fingerprint;

/// Builds a stage fingerprint from its parts.
#[derive(Clone)]
pub struct Fingerprint {
    hasher: IdHasher,
}

impl Fingerprint {
    /// Starts a fingerprint for `stage` at code version `code_version`.
    pub fn new(stage: &str, code_version: u32) -> Self {
        let mut hasher = IdHasher::new();
        hasher
            .part("ksmith-stage")
            .part(stage)
            .part(code_version.to_le_bytes());
        Fingerprint { hasher }
    }

    /// Adds a named part (an input's fingerprint, a config hash, ...).
    pub fn with(mut self, name: &str, value: &str) -> Self {
        self.hasher.part(name).part(value);
        self
    }

    /// Adds the fingerprint of an input table, or a marker when it has none.
    pub fn with_input(self, path: &Path) -> Self {
        let fp = read_fingerprint(path).unwrap_or_else(|| "missing".to_string());
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        self.with(&name, &fp)
    }

    /// The fingerprint as an id string.
    pub fn finish(&self) -> String {
        self.hasher.finish()
    }
}

/// True when every output exists and carries `fingerprint`.
pub fn is_up_to_date(outputs: &[&Path], fingerprint: &str) -> bool {
    outputs
        .iter()
        .all(|p| read_fingerprint(p).as_deref() == Some(fingerprint))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_part_changes_the_fingerprint() {
        let base = Fingerprint::new("extract", 1).with("config", "a").finish();
        assert_eq!(
            base,
            Fingerprint::new("extract", 1).with("config", "a").finish()
        );
        assert_ne!(
            base,
            Fingerprint::new("extract", 2).with("config", "a").finish()
        );
        assert_ne!(
            base,
            Fingerprint::new("probe", 1).with("config", "a").finish()
        );
        assert_ne!(
            base,
            Fingerprint::new("extract", 1).with("config", "b").finish()
        );
    }

    #[test]
    fn missing_output_is_not_up_to_date() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("none.parquet");
        assert!(!is_up_to_date(&[&p], "x"));
    }
}
