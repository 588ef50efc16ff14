//! The durable step journal of a task: one JSON line per completed step, appended before the
//! step counts as done.
//!
//! A line is handed to the kernel with one `write` before the archive changes, so a killed
//! process (`kill -9`) never loses a completed step. Syncing to the disk is what protects against
//! a machine crash; it costs milliseconds on a busy disk, so it is grouped: at most every
//! `sync_every` (zero: after every step), before every checkpoint, and when the journal closes.
//!
//! A crash can only cut the last line short (a line is written with a single `write_all` and
//! ends with `\n`); opening the journal drops such a torn tail. A complete line that does not
//! parse is corruption and an error naming the file and line.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use ksmith_core::tables::StepRow;

use crate::error::Error;

/// An open journal, positioned for appending.
pub struct Journal {
    path: PathBuf,
    file: File,
    sync_every: Duration,
    last_sync: Instant,
    unsynced: bool,
}

fn parse_lines(task: &str, path: &Path, bytes: &[u8]) -> Result<(Vec<StepRow>, usize), Error> {
    let complete = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |p| p + 1);
    let mut rows = Vec::new();
    for (n, line) in bytes[..complete].split(|&b| b == b'\n').enumerate() {
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let row: StepRow = serde_json::from_slice(line).map_err(|e| Error::Corrupt {
            task: task.to_string(),
            path: path.to_path_buf(),
            message: format!("line {}: {e}", n + 1),
        })?;
        rows.push(row);
    }
    Ok((rows, complete))
}

/// Reads the complete lines of a journal (a torn tail is ignored, not repaired).
pub fn read_journal(task: &str, path: &Path) -> Result<Vec<StepRow>, Error> {
    match std::fs::read(path) {
        Ok(bytes) => Ok(parse_lines(task, path, &bytes)?.0),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(Error::io(path, e)),
    }
}

impl Journal {
    /// Opens (or creates) the journal at `path`, cuts a torn last line and returns the rows
    /// already recorded. Appended lines are synced to disk at most `sync_every` apart.
    pub fn open(
        task: &str,
        path: &Path,
        sync_every: Duration,
    ) -> Result<(Journal, Vec<StepRow>), Error> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        }
        let bytes = match std::fs::read(path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(Error::io(path, e)),
        };
        let (rows, complete) = parse_lines(task, path, &bytes)?;
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(|e| Error::io(path, e))?;
        if complete < bytes.len() {
            file.set_len(complete as u64)
                .map_err(|e| Error::io(path, e))?;
            file.sync_all().map_err(|e| Error::io(path, e))?;
        }
        Ok((
            Journal {
                path: path.to_path_buf(),
                file,
                sync_every,
                last_sync: Instant::now(),
                unsynced: false,
            },
            rows,
        ))
    }

    /// Appends one step (and syncs the journal when `sync_every` has passed since the last sync).
    pub fn append(&mut self, row: &StepRow) -> Result<(), Error> {
        let mut line = serde_json::to_vec(row).map_err(|e| Error::Corrupt {
            task: row.task_id.clone(),
            path: self.path.clone(),
            message: format!("cannot encode step {}: {e}", row.iteration),
        })?;
        line.push(b'\n');
        self.file
            .write_all(&line)
            .map_err(|e| Error::io(&self.path, e))?;
        self.unsynced = true;
        if self.last_sync.elapsed() >= self.sync_every {
            self.sync()?;
        }
        Ok(())
    }

    /// Syncs every appended line to disk.
    pub fn sync(&mut self) -> Result<(), Error> {
        if self.unsynced {
            self.file
                .sync_data()
                .map_err(|e| Error::io(&self.path, e))?;
            self.unsynced = false;
        }
        self.last_sync = Instant::now();
        Ok(())
    }

    /// The journal's path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for Journal {
    fn drop(&mut self) {
        // Best effort: a failed sync at close cannot be reported, and the lines are already
        // in the kernel's hands.
        let _ = self.sync();
    }
}
