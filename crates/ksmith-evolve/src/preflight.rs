//! The preflight of a task: before a process asks the teacher anything for a task, the task's
//! reference is built and run on the evaluation device ([`Evaluator::preflight`]), so a task
//! whose reference cannot run there (a CPU tensor made inside `forward`, beside the device's
//! tensors) costs no teacher call.
//!
//! A reference that does not run is a [`Refusal`], journaled in the task's folder
//! (`refused.json`, written atomically before the task ends) so a resumed run refuses the task
//! again without a preflight. An evaluator that cannot answer (every device out, a worker that
//! does not start) refuses nothing: the task stops as [`Preflighted::Unavailable`] and a rerun
//! preflights it again. Which device failed and which reference is broken is the evaluator's to
//! tell apart (a device that fails its check is taken out and the preflight sent to another).

use std::path::{Path, PathBuf};

use ksmith_core::evaluation::{EvalError, EvalRequest, Evaluator};
use ksmith_core::table::write_bytes_atomically;
use serde::{Deserialize, Serialize};

use crate::error::Error;

/// The file of a task's folder that records its refusal.
pub const REFUSED_FILE: &str = "refused.json";

/// Characters of the error's first line kept as the reason.
const REASON_CHARS: usize = 300;

/// Why a task was refused before its first teacher call (the content of `refused.json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Refusal {
    /// The task.
    pub task_id: String,
    /// The first line of the evaluator's message: the exception (`RuntimeError: Expected all
    /// tensors to be on the same device, ...`).
    pub error: String,
    /// The evaluator's whole message (the exception and the reference's log).
    pub message: String,
}

impl Refusal {
    /// The refusal of `task_id` whose reference failed with `message`.
    pub fn new(task_id: &str, message: &str) -> Refusal {
        let first = message
            .lines()
            .map(str::trim)
            .find(|l| !l.is_empty())
            .unwrap_or("(the evaluator gave no message)");
        Refusal {
            task_id: task_id.to_string(),
            error: first.chars().take(REASON_CHARS).collect(),
            message: message.to_string(),
        }
    }

    /// The reason in words (one line).
    pub fn reason(&self) -> String {
        format!(
            "refused before any teacher call: its reference does not run on the evaluation device: {}",
            self.error
        )
    }

    /// Where the refusal of the task in folder `dir` is recorded.
    pub fn path_in(dir: &Path) -> PathBuf {
        dir.join(REFUSED_FILE)
    }

    /// The refusal recorded in `dir` for `task_id`, if any; an unreadable record or one of
    /// another task is an error naming the file.
    pub fn load(dir: &Path, task_id: &str) -> Result<Option<Refusal>, Error> {
        let path = Refusal::path_in(dir);
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(Error::io(&path, e)),
        };
        let corrupt = |message: String| Error::Corrupt {
            task: task_id.to_string(),
            path: path.clone(),
            message,
        };
        let refusal: Refusal = serde_json::from_slice(&bytes)
            .map_err(|e| corrupt(format!("not a task's refusal: {e}")))?;
        if refusal.task_id != task_id {
            return Err(corrupt(format!(
                "the refusal of task {}, not of this task",
                refusal.task_id
            )));
        }
        Ok(Some(refusal))
    }

    /// Records the refusal in `dir` (atomically, synced).
    pub fn store(&self, dir: &Path) -> Result<(), Error> {
        let path = Refusal::path_in(dir);
        let bytes = serde_json::to_vec_pretty(self).map_err(|e| Error::Corrupt {
            task: self.task_id.clone(),
            path: path.clone(),
            message: format!("cannot encode the refusal: {e}"),
        })?;
        write_bytes_atomically(&path, &bytes)?;
        Ok(())
    }
}

/// How a task's preflight went.
#[derive(Debug)]
pub enum Preflighted {
    /// The reference runs on the evaluation device.
    Ready,
    /// It does not: the task is refused.
    Refused(Refusal),
    /// The evaluator could not say (why): nothing is refused, the task stops and a rerun
    /// preflights it again.
    Unavailable(String),
}

/// The preflight of the task of `request` (its reference; the candidate is not read).
pub fn preflight(evaluator: &dyn Evaluator, request: &EvalRequest) -> Preflighted {
    match evaluator.preflight(request) {
        Ok(_) => Preflighted::Ready,
        Err(EvalError::BrokenReference { message, .. }) => {
            Preflighted::Refused(Refusal::new(&request.task_id, &message))
        }
        Err(e) => Preflighted::Unavailable(format!("the preflight of its reference: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reason_is_the_first_line_of_the_error() {
        let r = Refusal::new(
            "t",
            "\nRuntimeError: Expected all tensors to be on the same device\nTraceback (most recent call last):\n  File ...\n",
        );
        assert_eq!(
            r.error,
            "RuntimeError: Expected all tensors to be on the same device"
        );
        assert!(r.reason().ends_with(&r.error));
        assert!(r.message.contains("Traceback"));
        let long = Refusal::new("t", &"x".repeat(1000));
        assert_eq!(long.error.len(), REASON_CHARS);
    }

    #[test]
    fn a_stored_refusal_loads_back_and_names_its_task() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(Refusal::load(dir.path(), "t").unwrap(), None);
        let r = Refusal::new("t", "ValueError: no");
        r.store(dir.path()).unwrap();
        assert_eq!(Refusal::load(dir.path(), "t").unwrap(), Some(r));
        let other = Refusal::load(dir.path(), "u").unwrap_err().to_string();
        assert!(other.contains("the refusal of task t"), "{other}");
        std::fs::write(Refusal::path_in(dir.path()), "{").unwrap();
        let torn = Refusal::load(dir.path(), "t").unwrap_err().to_string();
        assert!(
            torn.contains(REFUSED_FILE) && torn.contains("task t"),
            "{torn}"
        );
    }
}
