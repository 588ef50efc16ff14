//! The JSON-lines protocol, version 1 (the Python side documents it in
//! `python/ksmith/evaluator/protocol.py`).

use ksmith_core::evaluation::{EvalError, EvalRequest, EvalResult, Preflight};
use serde::{Deserialize, Serialize};

/// The protocol version this client speaks.
pub use ksmith_core::versions::EVAL_PROTOCOL as VERSION;

/// A client message.
#[derive(Debug, Serialize)]
pub struct Outgoing<'a> {
    /// Always [`VERSION`].
    pub v: u32,
    /// `evaluate`, `preflight`, `ping` or `shutdown`.
    #[serde(rename = "type")]
    pub kind: &'a str,
    /// The request id (echoed in the answer).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The evaluation request (of `evaluate` and `preflight`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request: Option<&'a EvalRequest>,
}

/// The error body of an answer.
#[derive(Debug, Clone, Deserialize)]
pub struct ErrorBody {
    /// `broken_reference`, `bad_request`, `protocol`, `internal`, `device_failed` (the
    /// worker's device failed its check: the pool takes it out and the request goes elsewhere)
    /// or `backend_unavailable` (the request's backend cannot run on the worker: its message
    /// names what is missing).
    pub kind: String,
    /// What happened.
    pub message: String,
    /// The task, when known.
    pub task_id: Option<String>,
}

/// A worker message.
#[derive(Debug, Deserialize)]
pub struct Incoming {
    /// The worker's protocol version.
    pub v: u32,
    /// `hello`, `result`, `preflighted`, `error` or `pong`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The request id.
    pub id: Option<String>,
    /// The result of `evaluate`.
    pub result: Option<EvalResult>,
    /// What `preflight` gave.
    #[serde(default)]
    pub reference: Option<Preflight>,
    /// The error of a failed request.
    pub error: Option<ErrorBody>,
    /// Where the evaluation's time went, seconds by phase (with `result`; see
    /// `python/ksmith/evaluator/profile.py`).
    #[serde(default)]
    pub profile: Option<std::collections::BTreeMap<String, f64>>,
    /// One line for the user, sent once by a worker (with a result or an error): e.g. that its
    /// GPU ran out of memory and it now runs fewer evaluations at once
    /// (`python/ksmith/evaluator/capacity.py`).
    #[serde(default)]
    pub notice: Option<String>,
    /// The device (in `hello`).
    pub device: Option<String>,
    /// What the worker's sandbox set up and what it could not (in `hello`).
    #[serde(default)]
    pub sandbox: Option<serde_json::Map<String, serde_json::Value>>,
}

impl ErrorBody {
    /// The evaluation error this body stands for.
    pub fn into_eval_error(self) -> EvalError {
        match self.kind.as_str() {
            "broken_reference" => EvalError::BrokenReference {
                task_id: self.task_id.unwrap_or_default(),
                message: self.message,
            },
            "internal" => EvalError::Unavailable(format!("worker error: {}", self.message)),
            "backend_unavailable" => EvalError::Unavailable(self.message),
            other => EvalError::Protocol(format!("{other}: {}", self.message)),
        }
    }
}

/// Decodes one worker line.
pub fn parse(line: &str) -> Result<Incoming, EvalError> {
    let msg: Incoming = serde_json::from_str(line).map_err(|e| {
        EvalError::Protocol(format!(
            "undecodable worker message ({e}): {}",
            line.chars().take(300).collect::<String>()
        ))
    })?;
    if msg.v != VERSION {
        return Err(EvalError::Protocol(format!(
            "worker speaks protocol version {}, this client {VERSION}",
            msg.v
        )));
    }
    Ok(msg)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The verdict names the Python worker may answer (`python/ksmith/verdicts.json`, checked
    /// on every verdict it builds) are exactly those of `EvalStatus` and `HackKind`.
    #[test]
    fn verdict_names_are_the_python_vocabulary() {
        use ksmith_core::evaluation::{EvalStatus, HackKind};
        use ksmith_core::vocabulary::Vocabulary;

        let shared: std::collections::BTreeMap<String, Vec<String>> =
            serde_json::from_str(include_str!("../../../python/ksmith/verdicts.json")).unwrap();
        let sorted = |mut v: Vec<String>| {
            v.sort();
            v
        };
        let rust = |names: Vec<&str>| sorted(names.into_iter().map(String::from).collect());
        assert_eq!(
            sorted(shared["eval_status"].clone()),
            rust(EvalStatus::names())
        );
        assert_eq!(sorted(shared["hack"].clone()), rust(HackKind::names()));
        assert_eq!(
            sorted(shared["backend"].clone()),
            rust(ksmith_core::evaluation::Backend::names())
        );
    }

    #[test]
    fn parses_results_and_errors() {
        let line = r#"{"v":1,"type":"result","id":"7","result":{"status":"hacked","hack":"side_stream","error_log":"x","errors":[{"index":0,"max_abs":1.0,"mean_abs":0.5,"max_rel":1.0,"mean_rel":0.5}],"trials_passed":0,"trials":5,"candidate_timing":null,"reference_timing":null,"speedup":null,"warnings":[],"hardware":{"device":"cpu (triton interpreter)","driver":null,"torch":"2","triton":"3"},"elapsed_ms":12}}"#;
        let msg = parse(line).unwrap();
        assert_eq!(msg.notice, None);
        let r = msg.result.unwrap();
        assert_eq!(r.hack, Some(ksmith_core::evaluation::HackKind::SideStream));
        let err = r#"{"v":1,"type":"error","id":"8","error":{"kind":"broken_reference","message":"boom","task_id":"t1"}}"#;
        match parse(err).unwrap().error.unwrap().into_eval_error() {
            EvalError::BrokenReference { task_id, message } => {
                assert_eq!((task_id.as_str(), message.as_str()), ("t1", "boom"))
            }
            other => panic!("{other:?}"),
        }
        let noticed = r#"{"v":1,"type":"result","id":"7","result":{"status":"correct","hack":null,"error_log":"","errors":[],"trials_passed":1,"trials":1,"candidate_timing":null,"reference_timing":null,"speedup":null,"warnings":[],"hardware":{"device":"cpu","driver":null,"torch":"2","triton":"3"},"elapsed_ms":1},"notice":"the judge ran out of GPU memory"}"#;
        assert_eq!(
            parse(noticed).unwrap().notice.as_deref(),
            Some("the judge ran out of GPU memory")
        );
        let missing = r#"{"v":1,"type":"error","id":"9","error":{"kind":"backend_unavailable","message":"the CUDA backend is unavailable on this worker: missing nvcc","task_id":"t1"}}"#;
        match parse(missing).unwrap().error.unwrap().into_eval_error() {
            EvalError::Unavailable(m) => assert!(m.ends_with("missing nvcc"), "{m}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn rejects_other_versions_and_garbage() {
        assert!(matches!(
            parse(r#"{"v":2,"type":"hello"}"#),
            Err(EvalError::Protocol(m)) if m.contains("version 2")
        ));
        assert!(matches!(parse("hello"), Err(EvalError::Protocol(_))));
    }
}
