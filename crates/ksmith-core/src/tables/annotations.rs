//! `annotations.parquet`: an expert's review of cluster centers (`ksmith review`), which the
//! task selection (cluster) reads for the expert-seeded set.

use serde::{Deserialize, Serialize};

use crate::table::Table;

crate::vocabulary! {
    /// What the reviewer decided about a center.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
    pub enum ReviewVerdict {
        /// A good task as labelled.
        Accept = "accept",
        /// Not a task (broken, trivial, not a kernel workload, ...).
        Reject = "reject",
        /// A good task with another family and/or level than the rules gave.
        Relabel = "relabel",
    }
}

/// One reviewed cluster center; the latest answer per module replaces earlier ones.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AnnotationRow {
    /// The center's module id (its task id).
    pub module_id: String,
    /// The decision.
    pub verdict: ReviewVerdict,
    /// With `relabel`: the family that replaces the rules' (`None` keeps it).
    pub family: Option<String>,
    /// With `relabel`: the level (1 to 3) that replaces the rules' (`None` keeps it).
    pub level: Option<u8>,
    /// The reviewer's note.
    pub note: String,
    /// The family the rules gave when the center was reviewed.
    pub rule_family: String,
    /// The level the rules gave when the center was reviewed.
    pub rule_level: u8,
    /// The center's cluster when it was reviewed.
    pub cluster: i32,
    /// When the answer was given (RFC 3339, UTC).
    pub reviewed_at: String,
}

impl Table for AnnotationRow {
    const NAME: &'static str = "annotations";
    const SCHEMA_VERSION: u32 = 1;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::{read_table, write_table};

    #[test]
    fn annotations_round_trip() {
        let rows = vec![
            AnnotationRow {
                module_id: "m1".into(),
                verdict: ReviewVerdict::Relabel,
                family: Some("attention".into()),
                level: Some(3),
                note: "a whole block".into(),
                rule_family: "linear".into(),
                rule_level: 2,
                cluster: 4,
                reviewed_at: "2026-11-24T01:00:00Z".into(),
            },
            AnnotationRow {
                module_id: "m2".into(),
                verdict: ReviewVerdict::Reject,
                family: None,
                level: None,
                note: String::new(),
                rule_family: "activation".into(),
                rule_level: 1,
                cluster: 0,
                reviewed_at: "2026-11-24T01:00:01Z".into(),
            },
        ];
        let dir = tempfile::tempdir().unwrap();
        let path = AnnotationRow::path_in(dir.path());
        write_table(&path, &rows, "fp").unwrap();
        assert_eq!(read_table::<AnnotationRow>(&path).unwrap(), rows);
    }
}
