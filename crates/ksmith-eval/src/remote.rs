//! [`RemoteEvaluator`]: the same protocol over HTTP (`POST {url}/v1/evaluate`, and
//! `POST {url}/v1/preflight` for a preflight).

use std::time::Duration;

use ksmith_core::evaluation::{EvalError, EvalRequest, EvalResult, Evaluator, Preflight};

use crate::protocol::{self, ErrorBody};

/// Largest answer accepted (a result with its trimmed log is a few kB).
const MAX_BODY_BYTES: u64 = 16 << 20;

/// An evaluator endpoint served by `python -m ksmith.evaluator serve` (or anything speaking
/// protocol version 1 over HTTP).
#[derive(Debug)]
pub struct RemoteEvaluator {
    url: String,
    agent: ureq::Agent,
}

#[derive(serde::Serialize)]
struct Body<'a> {
    v: u32,
    request: &'a EvalRequest,
}

#[derive(serde::Deserialize)]
struct Answer<T> {
    v: u32,
    #[serde(alias = "reference")]
    result: Option<T>,
    error: Option<ErrorBody>,
}

impl RemoteEvaluator {
    /// An evaluator for the endpoint at `url` (e.g. `http://10.0.0.5:8765`).
    pub fn new(url: &str, timeout_s: f64) -> RemoteEvaluator {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_global(Some(Duration::from_secs_f64(timeout_s)))
            .timeout_connect(Some(Duration::from_secs(10)))
            .http_status_as_error(false)
            .build()
            .into();
        RemoteEvaluator {
            url: url.trim_end_matches('/').to_string(),
            agent,
        }
    }

    /// `request` posted to `route` (`evaluate` or `preflight`), and its answer's result.
    fn post<T: serde::de::DeserializeOwned>(
        &self,
        route: &str,
        request: &EvalRequest,
    ) -> Result<T, EvalError> {
        let url = format!("{}/v1/{route}", self.url);
        let body = serde_json::to_string(&Body {
            v: protocol::VERSION,
            request,
        })
        .map_err(|e| EvalError::Protocol(format!("encoding the request: {e}")))?;
        let mut resp = self
            .agent
            .post(&url)
            .header("Content-Type", "application/json")
            .send(body.as_bytes())
            .map_err(|e| EvalError::Unavailable(format!("{url}: {e}")))?;
        let status = resp.status().as_u16();
        let text = resp
            .body_mut()
            .with_config()
            .limit(MAX_BODY_BYTES)
            .read_to_string()
            .map_err(|e| EvalError::Unavailable(format!("{url}: HTTP {status}: {e}")))?;
        let answer: Answer<T> = serde_json::from_str(&text).map_err(|e| {
            EvalError::Protocol(format!(
                "{url}: HTTP {status}: undecodable answer ({e}): {}",
                text.chars().take(300).collect::<String>()
            ))
        })?;
        if answer.v != protocol::VERSION {
            return Err(EvalError::Protocol(format!(
                "{url} speaks protocol version {}, this client {}",
                answer.v,
                protocol::VERSION
            )));
        }
        match (answer.result, answer.error) {
            (Some(r), _) if status == 200 => Ok(r),
            (_, Some(e)) => Err(e.into_eval_error()),
            _ => Err(EvalError::Protocol(format!(
                "{url}: HTTP {status} without result or error"
            ))),
        }
    }
}

impl Evaluator for RemoteEvaluator {
    fn evaluate(&self, request: &EvalRequest) -> Result<EvalResult, EvalError> {
        self.post("evaluate", request)
    }

    fn preflight(&self, request: &EvalRequest) -> Result<Preflight, EvalError> {
        self.post("preflight", request)
    }
}
