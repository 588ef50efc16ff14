//! Saving answers: `annotations.parquet` holds the latest answer per center, sorted by module
//! id, replaced atomically on every save; its fingerprint is a hash of its rows, so cluster
//! runs again exactly when the review changed.

use std::path::Path;

use ksmith_core::ids::content_id;
use ksmith_core::table::{Table, read_table, write_table};
use ksmith_core::tables::AnnotationRow;

use crate::Error;

/// Puts `answer` into the annotations of `workdir` (replacing an earlier answer for the same
/// center); returns how many centers have an answer.
pub fn save(workdir: &Path, answer: AnnotationRow) -> Result<usize, Error> {
    let path = AnnotationRow::path_in(workdir);
    let mut rows: Vec<AnnotationRow> = if path.exists() {
        read_table(&path)?
    } else {
        Vec::new()
    };
    rows.retain(|r| r.module_id != answer.module_id);
    rows.push(answer);
    rows.sort_by(|a, b| a.module_id.cmp(&b.module_id));
    let fingerprint = content_id(serde_json::to_vec(&rows).unwrap_or_default());
    write_table(&path, &rows, &fingerprint)?;
    Ok(rows.len())
}
