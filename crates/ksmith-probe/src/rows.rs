//! From worker responses (or their absence) to `ProbeRow`s.

use std::time::Duration;

use ksmith_core::tables::{ModuleRow, OpCount, ProbeRow, ProbeStatus, SizeStatus};

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
    let runs = matches!(
        status,
        ProbeStatus::Ok | ProbeStatus::Nondeterministic | ProbeStatus::Degenerate
    );
    let size_status = r.size_status.as_deref().and_then(SizeStatus::parse);
    ProbeRow {
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
        aten_calls: if runs { r.aten_calls } else { Vec::new() },
        submodules: if runs { r.submodules } else { Vec::new() },
        attempt_log: r.attempt_log,
        size_status,
        size_reason_code: r.size_reason_code,
        size_reason: r.size_reason,
        sizes: r.sizes.unwrap_or_else(|| "{}".into()),
        alt_sizes: r.alt_sizes.unwrap_or_else(|| "[]".into()),
        sized_on: r.sized_on,
        size_trials: r.size_trials,
        est_flops: r.est_flops,
        est_bytes: r.est_bytes,
        param_bytes: r.param_bytes,
        peak_bytes: r.peak_bytes,
        est_ms: r.est_ms,
        ..ProbeRow::empty(&module.id, &module.repo, &module.class_name, status)
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
        error_class: Some(fault.as_str().to_string()),
        error_message: Some(message),
        ..ProbeRow::empty(&module.id, &module.repo, &module.class_name, status)
    }
}

#[cfg(test)]
pub(crate) fn failed_row_for_tests() -> ProbeRow {
    ProbeRow {
        error_class: Some("RuntimeError".into()),
        error_message: Some("boom".into()),
        attempts: 1,
        ..ProbeRow::empty("m", "r", "C", ProbeStatus::Failed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ksmith_core::tables::SizeReason;

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

    /// The sizing outcomes and reasons the runner answers are exactly `SizeStatus` and
    /// `SizeReason` (`python/ksmith/verdicts.json`; a Python test checks the runner against it).
    #[test]
    fn size_names_are_the_python_vocabulary() {
        use ksmith_core::vocabulary::Vocabulary;

        let shared: std::collections::BTreeMap<String, Vec<String>> =
            serde_json::from_str(include_str!("../../../python/ksmith/verdicts.json")).unwrap();
        let sorted = |mut v: Vec<String>| {
            v.sort();
            v
        };
        let names = |v: Vec<&str>| sorted(v.into_iter().map(String::from).collect());
        assert_eq!(
            sorted(shared["size_status"].clone()),
            names(SizeStatus::names())
        );
        assert_eq!(
            sorted(shared["size_reason"].clone()),
            names(SizeReason::names())
        );
    }

    #[test]
    fn a_sizing_answer_becomes_typed_fields() {
        let module = ksmith_core::tables::ModuleRow {
            id: "m".into(),
            repo: "r".into(),
            commit: "0".repeat(40),
            path: "p.py".into(),
            class_name: "C".into(),
            line: 1,
            status: ksmith_core::tables::ModuleStatus::Ok,
            reason: None,
            reason_code: None,
            lines: 1,
            program: Some("x".into()),
            deps: vec![],
            imports: vec![],
            license: None,
            stars: None,
            arg_sources: Vec::new(),
        };
        let answer = |extra: &str| -> Response {
            serde_json::from_str(&format!(
                r#"{{"v": 1, "type": "result", "id": "m", "status": "ok", "program": "p"{extra}}}"#
            ))
            .unwrap()
        };
        let row = from_response(
            &module,
            answer(
                r#", "size_status": "below_target", "size_reason_code": "below_target",
                "size_reason": "0.1 GFLOP", "sizes": "{\"n\": 8}", "alt_sizes": "[{\"n\": 4}]",
                "est_ms": 0.5"#,
            ),
        );
        assert_eq!(row.size_status, Some(SizeStatus::BelowTarget));
        assert_eq!(row.size_reason_code, Some(SizeReason::BelowTarget));
        assert_eq!(row.size_reason.as_deref(), Some("0.1 GFLOP"));
        assert_eq!(
            (row.sizes.as_str(), row.alt_sizes.as_str()),
            (r#"{"n": 8}"#, r#"[{"n": 4}]"#)
        );
        assert_eq!(row.est_ms, Some(0.5));
        // No sizing: empty sets, no status.
        let row = from_response(&module, answer(""));
        assert_eq!(
            (row.size_status, row.sizes.as_str(), row.alt_sizes.as_str()),
            (None, "{}", "[]")
        );
        // A code outside the vocabulary makes the line malformed: a protocol fault of the worker.
        let line = r#"{"v": 1, "type": "result", "id": "m", "status": "ok", "size_reason_code": "gremlins"}"#;
        let err = serde_json::from_str::<Response>(line).unwrap_err();
        assert!(err.to_string().contains("gremlins"), "{err}");
        // The attributed calls come with the trace, and only for a module that ran.
        let calls = r#", "aten_trace": ["aten::convolution"],
            "aten_calls": ["aten::convolution(2d,k3x3,s1,p1,d1,dw)"]"#;
        let row = from_response(&module, answer(calls));
        assert_eq!(row.aten_calls, ["aten::convolution(2d,k3x3,s1,p1,d1,dw)"]);
        assert_eq!(row.aten_trace, ["aten::convolution"]);
        let failed = answer(calls).status.map(|_| "failed".to_string());
        let row = from_response(
            &module,
            Response {
                status: failed,
                ..answer(calls)
            },
        );
        assert!(row.aten_calls.is_empty() && row.aten_trace.is_empty());
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
