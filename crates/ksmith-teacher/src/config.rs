//! The `[teacher]` configuration section.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::error::TeacherError;

/// Environment variable that, when set, replaces the `url` of every endpoint.
pub const TEACHER_URL_ENV: &str = "KSMITH_TEACHER_URL";

/// The teacher URL set by `KSMITH_TEACHER_URL` (trimmed), when it is set and not blank. The one
/// place that reads the variable: the client, the CLI's check for a configured teacher and the
/// rollout's identity all ask here.
pub fn url_override() -> Option<String> {
    std::env::var(TEACHER_URL_ENV)
        .ok()
        .map(|u| u.trim().to_string())
        .filter(|u| !u.is_empty())
}

/// One teacher model behind an OpenAI-compatible endpoint.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EndpointConfig {
    /// A label for logs and reports; the model name when empty.
    pub name: String,
    /// Base URL (`http://host:8000/v1`) or the full `.../chat/completions` URL.
    pub url: String,
    /// The `model` field sent with each request.
    pub model: String,
    /// Relative weight of this teacher in the seeded choice (> 0).
    pub weight: f64,
    /// Name of the environment variable holding the API key (none: no `Authorization` header).
    pub api_key_env: Option<String>,
    /// Cap on generated tokens for this teacher (lowers the request's cap when smaller).
    pub max_tokens: Option<u32>,
}

impl Default for EndpointConfig {
    fn default() -> Self {
        EndpointConfig {
            name: String::new(),
            url: "http://127.0.0.1:8000/v1".to_string(),
            model: "teacher".to_string(),
            weight: 1.0,
            api_key_env: None,
            max_tokens: None,
        }
    }
}

impl EndpointConfig {
    /// The label used in logs: `name`, or the model when `name` is empty.
    pub fn label(&self) -> &str {
        if self.name.is_empty() {
            &self.model
        } else {
            &self.name
        }
    }

    /// The chat-completions URL derived from `url`.
    pub fn completions_url(&self) -> String {
        let base = self.url.trim_end_matches('/');
        if base.ends_with("/chat/completions") {
            base.to_string()
        } else if base.ends_with("/v1") {
            format!("{base}/chat/completions")
        } else {
            format!("{base}/v1/chat/completions")
        }
    }
}

/// The `[teacher]` section: which teachers to ask and how.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TeacherConfig {
    /// The teachers (`[[teacher.endpoints]]`); one is chosen per request by weight.
    pub endpoints: Vec<EndpointConfig>,
    /// Requests in flight at once, over all teachers and threads.
    pub max_concurrency: usize,
    /// Time limit of one HTTP exchange (connect, send, wait, read), in seconds.
    pub timeout_s: f64,
    /// Time limit of connection setup, in seconds.
    pub connect_timeout_s: f64,
    /// Retries after a timeout, a connection failure, 429, 408 or 5xx (attempts = retries + 1).
    pub max_retries: u32,
    /// First backoff delay, in milliseconds; doubles on each retry, with jitter.
    pub backoff_initial_ms: u64,
    /// Longest backoff delay (also caps `Retry-After`), in milliseconds.
    pub backoff_max_ms: u64,
    /// Keep answers in the response cache and reuse them.
    pub cache: bool,
    /// Cache directory; relative paths are inside the work directory.
    pub cache_dir: PathBuf,
    /// Seed of the weighted teacher choice.
    pub choice_seed: u64,
}

impl Default for TeacherConfig {
    fn default() -> Self {
        TeacherConfig {
            endpoints: vec![EndpointConfig::default()],
            max_concurrency: 16,
            timeout_s: 900.0,
            connect_timeout_s: 10.0,
            max_retries: 6,
            backoff_initial_ms: 1000,
            backoff_max_ms: 60_000,
            cache: true,
            cache_dir: PathBuf::from("rollout/teacher-cache"),
            choice_seed: 0,
        }
    }
}

impl TeacherConfig {
    /// Checks every value; does no I/O.
    pub fn validate(&self) -> Result<(), TeacherError> {
        let bad = |m: String| Err(TeacherError::Config(m));
        if self.endpoints.is_empty() {
            return bad("endpoints: at least one teacher is needed".into());
        }
        for (i, e) in self.endpoints.iter().enumerate() {
            if !(e.weight.is_finite() && e.weight > 0.0) {
                return bad(format!(
                    "endpoints[{i}].weight must be > 0, got {}",
                    e.weight
                ));
            }
            if e.model.trim().is_empty() {
                return bad(format!("endpoints[{i}].model is empty"));
            }
            if !(e.url.starts_with("http://") || e.url.starts_with("https://")) {
                return bad(format!(
                    "endpoints[{i}].url must start with http:// or https://, got `{}`",
                    e.url
                ));
            }
            if e.max_tokens == Some(0) {
                return bad(format!("endpoints[{i}].max_tokens must be > 0"));
            }
        }
        if self.max_concurrency == 0 {
            return bad("max_concurrency must be at least 1".into());
        }
        if !(self.timeout_s.is_finite() && self.timeout_s > 0.0) {
            return bad(format!("timeout_s must be > 0, got {}", self.timeout_s));
        }
        if !(self.connect_timeout_s.is_finite() && self.connect_timeout_s > 0.0) {
            return bad(format!(
                "connect_timeout_s must be > 0, got {}",
                self.connect_timeout_s
            ));
        }
        if self.backoff_max_ms < self.backoff_initial_ms {
            return bad("backoff_max_ms must be >= backoff_initial_ms".into());
        }
        Ok(())
    }

    /// The endpoints with the `KSMITH_TEACHER_URL` override applied (when `url_override` is set).
    pub fn resolved_endpoints(&self, url_override: Option<&str>) -> Vec<EndpointConfig> {
        self.endpoints
            .iter()
            .cloned()
            .map(|mut e| {
                if let Some(u) = url_override.filter(|u| !u.trim().is_empty()) {
                    e.url = u.trim().to_string();
                }
                e
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_urls_are_completed() {
        TeacherConfig::default().validate().unwrap();
        let mut e = EndpointConfig::default();
        assert_eq!(
            e.completions_url(),
            "http://127.0.0.1:8000/v1/chat/completions"
        );
        e.url = "http://h:1/".into();
        assert_eq!(e.completions_url(), "http://h:1/v1/chat/completions");
        e.url = "https://api.x/v1/chat/completions".into();
        assert_eq!(e.completions_url(), "https://api.x/v1/chat/completions");
    }

    #[test]
    fn invalid_values_name_the_key() {
        let mut c = TeacherConfig::default();
        c.endpoints[0].weight = 0.0;
        assert!(c.validate().unwrap_err().to_string().contains("weight"));
        let mut c = TeacherConfig::default();
        c.endpoints[0].url = "ftp://x".into();
        assert!(c.validate().unwrap_err().to_string().contains("url"));
        let mut c = TeacherConfig::default();
        c.endpoints.clear();
        assert!(c.validate().unwrap_err().to_string().contains("endpoints"));
        let c = TeacherConfig {
            max_concurrency: 0,
            ..Default::default()
        };
        assert!(
            c.validate()
                .unwrap_err()
                .to_string()
                .contains("max_concurrency")
        );
    }

    #[test]
    fn url_override_replaces_every_url() {
        let mut c = TeacherConfig::default();
        c.endpoints.push(EndpointConfig {
            url: "http://b:2/v1".into(),
            ..Default::default()
        });
        let r = c.resolved_endpoints(Some("http://o:9/v1"));
        assert!(r.iter().all(|e| e.url == "http://o:9/v1"));
        let r = c.resolved_endpoints(None);
        assert_eq!(r[1].url, "http://b:2/v1");
    }
}
