//! The rows of a probe run, kept as they finish, so a run that is killed (`kill -9`, a lost
//! machine) resumes where it stopped instead of from the first module.
//!
//! `probes.partial.jsonl` in the work directory: a header line with the run's reuse key (the
//! configuration, runner and LLM setting the rows were made with, see [`crate::reuse`]) and the
//! table's schema version, then one [`ProbeRow`] per line in the order they finished. Each row
//! is written and flushed to the operating system as soon as its module is done, so killing the
//! process loses at most the modules in flight; the file is synced to disk every
//! [`SYNC_EVERY`] rows. A run that starts finds the journal of an interrupted run with the same
//! key and reuses its rows; a journal of another key or schema is discarded. When
//! `probes.parquet` is written, the journal is removed.
//!
//! A last line cut short by the kill is ignored (its module is probed again); any other
//! unreadable line is an error naming the file and line, never skipped silently.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use ksmith_core::table::Table;
use ksmith_core::tables::ProbeRow;
use serde::{Deserialize, Serialize};

use crate::error::Error;

/// Rows between two syncs of the journal to disk.
pub const SYNC_EVERY: usize = 32;

/// The journal's file in a work directory.
pub fn path(workdir: &Path) -> PathBuf {
    workdir.join("probes.partial.jsonl")
}

#[derive(Debug, Serialize, Deserialize, PartialEq)]
struct Header {
    key: String,
    schema: u32,
}

/// An open journal, appended to from the pool's threads.
#[derive(Debug)]
pub struct Journal {
    path: PathBuf,
    file: Mutex<(File, usize)>,
}

impl Journal {
    /// Opens the journal of `workdir` for a run with `key`: returns it with the rows an
    /// interrupted run of the same key finished (by module id), or a fresh journal.
    pub fn open(workdir: &Path, key: &str) -> Result<(Journal, HashMap<String, ProbeRow>), Error> {
        let path = path(workdir);
        let header = Header {
            key: key.to_string(),
            schema: ProbeRow::SCHEMA_VERSION,
        };
        let rows = match File::open(&path) {
            Ok(f) => read_rows(&path, f, &header)?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(source) => return Err(Error::Journal { path, source }),
        };
        let io = |source| Error::Journal {
            path: path.clone(),
            source,
        };
        let file = match &rows {
            Some(_) => OpenOptions::new().append(true).open(&path).map_err(io)?,
            None => {
                let mut f = File::create(&path).map_err(io)?;
                let line = serde_json::to_string(&header).map_err(std::io::Error::other);
                writeln!(f, "{}", line.map_err(io)?).map_err(io)?;
                f.sync_all().map_err(io)?;
                f
            }
        };
        let journal = Journal {
            path,
            file: Mutex::new((file, 0)),
        };
        Ok((journal, rows.unwrap_or_default()))
    }

    /// Appends a finished row (flushed to the operating system before this returns).
    pub fn append(&self, row: &ProbeRow) -> Result<(), Error> {
        let io = |source| Error::Journal {
            path: self.path.clone(),
            source,
        };
        let mut line = serde_json::to_string(row).map_err(|e| io(std::io::Error::other(e)))?;
        line.push('\n');
        let mut guard = self
            .file
            .lock()
            .map_err(|_| io(std::io::Error::other("a journal writer panicked")))?;
        let (file, written) = &mut *guard;
        file.write_all(line.as_bytes()).map_err(io)?;
        *written += 1;
        if (*written).is_multiple_of(SYNC_EVERY) {
            file.sync_data().map_err(io)?;
        }
        Ok(())
    }

    /// Removes the journal: its rows are in `probes.parquet` now.
    pub fn finish(self) -> Result<(), Error> {
        std::fs::remove_file(&self.path).map_err(|source| Error::Journal {
            path: self.path.clone(),
            source,
        })
    }
}

/// The rows of a journal whose header is `want`; `None` for a journal of another run.
fn read_rows(
    path: &Path,
    file: File,
    want: &Header,
) -> Result<Option<HashMap<String, ProbeRow>>, Error> {
    let mut lines = BufReader::new(file).lines();
    let header = match lines.next() {
        Some(Ok(line)) => serde_json::from_str::<Header>(&line).ok(),
        _ => None,
    };
    if header.as_ref() != Some(want) {
        return Ok(None);
    }
    let lines: Vec<String> = lines
        .collect::<Result<_, _>>()
        .map_err(|source| Error::Journal {
            path: path.to_path_buf(),
            source,
        })?;
    let mut rows = HashMap::new();
    for (i, line) in lines.iter().enumerate() {
        match serde_json::from_str::<ProbeRow>(line) {
            Ok(row) => {
                rows.insert(row.module_id.clone(), row);
            }
            // The write the kill interrupted.
            Err(_) if i + 1 == lines.len() => {}
            Err(e) => {
                return Err(Error::JournalLine {
                    path: path.to_path_buf(),
                    line: i + 2,
                    message: e.to_string(),
                });
            }
        }
    }
    Ok(Some(rows))
}

#[cfg(test)]
mod tests {
    use super::*;
    use ksmith_core::tables::ProbeStatus;

    fn row(id: &str) -> ProbeRow {
        ProbeRow::empty(id, "r", "C", ProbeStatus::Ok)
    }

    #[test]
    fn rows_survive_a_reopen_with_the_same_key_only() {
        let dir = tempfile::tempdir().unwrap();
        let (j, rows) = Journal::open(dir.path(), "k1").unwrap();
        assert!(rows.is_empty());
        j.append(&row("a")).unwrap();
        j.append(&row("b")).unwrap();
        drop(j); // as a kill would leave it
        let (j, rows) = Journal::open(dir.path(), "k1").unwrap();
        assert_eq!(rows.len(), 2);
        assert_eq!(rows["a"], row("a"));
        j.append(&row("c")).unwrap();
        drop(j);
        assert_eq!(Journal::open(dir.path(), "k1").unwrap().1.len(), 3);
        // Another configuration: the rows are not this run's.
        let (j, rows) = Journal::open(dir.path(), "k2").unwrap();
        assert!(rows.is_empty());
        j.finish().unwrap();
        assert!(!path(dir.path()).exists());
    }

    #[test]
    fn a_torn_last_line_is_dropped_and_a_torn_middle_line_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let (j, _) = Journal::open(dir.path(), "k").unwrap();
        j.append(&row("a")).unwrap();
        drop(j);
        let p = path(dir.path());
        let mut text = std::fs::read_to_string(&p).unwrap();
        text.push_str("{\"module_id\": \"b\", \"re");
        std::fs::write(&p, &text).unwrap();
        let (_, rows) = Journal::open(dir.path(), "k").unwrap();
        assert_eq!(rows.keys().collect::<Vec<_>>(), vec!["a"]);
        text.push_str("\n{\"module_id\": \"c\"}\n");
        std::fs::write(&p, &text).unwrap();
        let err = Journal::open(dir.path(), "k").unwrap_err().to_string();
        assert!(
            err.contains("probes.partial.jsonl") && err.contains("line 3"),
            "{err}"
        );
    }
}
