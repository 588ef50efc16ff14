//! From worker responses (or their absence) to `ProbeRow`s.

use ksmith_core::tables::{ModuleRow, OpCount, ProbeRow, ProbeStatus};

use std::time::Duration;

use crate::protocol::Response;
use crate::worker::WorkerFailure;

ksmith_core::vocabulary! {
    /// The `error_class` of a row the runner could not answer for (rows it answered carry the
    /// module's own exception class).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
    pub enum RunnerFault {
        /// The pool ended without probing the module.
        Internal = "Internal",
        /// The worker did not answer within the module's time limit and was replaced.
        Timeout = "Timeout",
        /// The worker died while probing the module.
        WorkerDied = "WorkerDied",
        /// The worker answered something the protocol does not allow.
        Protocol = "Protocol",
    }
}

/// The row of a module from the worker's response.
pub fn from_response(module: &ModuleRow, r: Response) -> ProbeRow {
    let (status, error_class, error_message) =
        match r.status.as_deref().and_then(ProbeStatus::parse) {
            Some(s) => (s, r.error_class, r.error_message),
            None => (
                ProbeStatus::Crashed,
                Some(RunnerFault::Protocol.as_str().to_string()),
                Some(format!(
                    "the worker answered an unknown status {:?}",
                    r.status
                )),
            ),
        };
    let runs = matches!(status, ProbeStatus::Ok | ProbeStatus::Nondeterministic);
    ProbeRow {
        module_id: module.id.clone(),
        repo: module.repo.clone(),
        class_name: module.class_name.clone(),
        status,
        error_class,
        error_message,
        program: if runs { r.program } else { None },
        output_shapes: r.output_shapes,
        output_dtypes: r.output_dtypes,
        param_count: r.param_count,
        forward_ms: r.forward_ms,
        cpu_time_ms: r.cpu_time_ms.unwrap_or(0.0),
        repair_steps: r.repair_steps,
        attempts: r.attempts,
        aten_ops: r.aten_ops.filter(|_| runs).map(|ops| {
            ops.into_iter()
                .map(|(op, count)| OpCount { op, count })
                .collect()
        }),
        aten_trace: if runs { r.aten_trace } else { Vec::new() },
    }
}

/// The row of a module whose worker failed it (`deadline` is the watchdog's limit).
pub fn from_failure(module: &ModuleRow, failure: WorkerFailure, deadline: Duration) -> ProbeRow {
    match failure {
        WorkerFailure::Timeout => without_response(
            module,
            ProbeStatus::Timeout,
            RunnerFault::Timeout,
            format!(
                "the worker did not answer within {:.0} s; it was killed and replaced",
                deadline.as_secs_f64()
            ),
        ),
        WorkerFailure::Died(msg) => {
            without_response(module, ProbeStatus::Crashed, RunnerFault::WorkerDied, msg)
        }
        WorkerFailure::Protocol(msg) => {
            without_response(module, ProbeStatus::Crashed, RunnerFault::Protocol, msg)
        }
    }
}

/// The row of a module that got no response (the worker hung or died).
pub fn without_response(
    module: &ModuleRow,
    status: ProbeStatus,
    fault: RunnerFault,
    message: String,
) -> ProbeRow {
    ProbeRow {
        module_id: module.id.clone(),
        repo: module.repo.clone(),
        class_name: module.class_name.clone(),
        status,
        error_class: Some(fault.as_str().to_string()),
        error_message: Some(message),
        program: None,
        output_shapes: Vec::new(),
        output_dtypes: Vec::new(),
        param_count: None,
        forward_ms: None,
        cpu_time_ms: 0.0,
        repair_steps: Vec::new(),
        attempts: 0,
        aten_ops: None,
        aten_trace: Vec::new(),
    }
}

#[cfg(test)]
pub(crate) fn failed_row_for_tests() -> ProbeRow {
    ProbeRow {
        module_id: "m".into(),
        repo: "r".into(),
        class_name: "C".into(),
        status: ProbeStatus::Failed,
        error_class: Some("RuntimeError".into()),
        error_message: Some("boom".into()),
        program: None,
        output_shapes: vec![],
        output_dtypes: vec![],
        param_count: None,
        forward_ms: None,
        cpu_time_ms: 0.0,
        repair_steps: vec![],
        attempts: 1,
        aten_ops: None,
        aten_trace: vec![],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_status_round_trips_and_unknown_is_crashed() {
        for s in [
            ProbeStatus::Ok,
            ProbeStatus::Failed,
            ProbeStatus::Timeout,
            ProbeStatus::Oom,
            ProbeStatus::Nondeterministic,
            ProbeStatus::Crashed,
        ] {
            assert_eq!(ProbeStatus::parse(s.as_str()), Some(s));
        }
        assert_eq!(ProbeStatus::parse("fine"), None);
    }

    /// The statuses the Python runner answers (`python/ksmith/verdicts.json`; a Python test
    /// checks the runner's sources against it) are exactly those of `ProbeStatus`.
    #[test]
    fn status_names_are_the_python_vocabulary() {
        use ksmith_core::vocabulary::Vocabulary;

        let shared: std::collections::BTreeMap<String, Vec<String>> =
            serde_json::from_str(include_str!("../../../python/ksmith/verdicts.json")).unwrap();
        let mut python = shared["probe_status"].clone();
        python.sort();
        let mut rust: Vec<String> = ProbeStatus::names().into_iter().map(String::from).collect();
        rust.sort();
        assert_eq!(python, rust);
    }
}
