//! The teacher client: endpoint choice, concurrency limit, retries, cache, usage counters.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use ksmith_core::backoff::{self, jitter_seed};
use ksmith_core::chat::{ChatClient, ChatError, ChatRequest, ChatResponse};
use ksmith_core::ids::IdHasher;
use serde::{Deserialize, Serialize};

use crate::cache::{ResponseCache, cache_key};
use crate::config::{EndpointConfig, TeacherConfig, url_override};
use crate::error::TeacherError;
use crate::semaphore::Semaphore;
use crate::wire::{parse_completion, request_body};

/// Largest answer body read, in bytes.
const MAX_BODY_BYTES: u64 = 64 * 1024 * 1024;

struct Endpoint {
    cfg: EndpointConfig,
    url: String,
    api_key: Option<String>,
}

/// Counters of a teacher's work since it was built.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TeacherUsage {
    /// Calls to [`ChatClient::chat`].
    pub requests: u64,
    /// Answers served from the cache.
    pub cache_hits: u64,
    /// HTTP exchanges attempted (first tries and retries).
    pub http_attempts: u64,
    /// Retries after timeouts, connection failures, 429, 408 and 5xx.
    pub retries: u64,
    /// Requests that failed for good (unreachable, refused, malformed).
    pub failures: u64,
    /// Prompt tokens reported by the endpoints (cache hits not counted).
    pub prompt_tokens: u64,
    /// Completion tokens reported by the endpoints (cache hits not counted).
    pub completion_tokens: u64,
    /// Cache entries that could not be written or read back (the request still went through).
    pub cache_errors: u64,
}

#[derive(Default)]
struct Counters {
    requests: AtomicU64,
    cache_hits: AtomicU64,
    http_attempts: AtomicU64,
    retries: AtomicU64,
    failures: AtomicU64,
    prompt_tokens: AtomicU64,
    completion_tokens: AtomicU64,
    cache_errors: AtomicU64,
}

fn bump(c: &AtomicU64, n: u64) {
    c.fetch_add(n, Ordering::Relaxed);
}

/// An OpenAI-compatible chat client over one or more weighted teachers. Shared by all rollout
/// threads (`&Teacher` is `Sync`).
pub struct Teacher {
    endpoints: Vec<Endpoint>,
    total_weight: f64,
    cfg: TeacherConfig,
    agent: ureq::Agent,
    permits: Semaphore,
    cache: Option<ResponseCache>,
    counters: Counters,
}

/// What one HTTP exchange gave.
enum Attempt {
    Done(Result<ChatResponse, ChatError>),
    Retry {
        message: String,
        retry_after: Option<Duration>,
    },
}

impl Teacher {
    /// Builds a client from the `[teacher]` section. The `KSMITH_TEACHER_URL` environment
    /// variable, when set, replaces every endpoint's URL; API keys are read from the variables
    /// named by `api_key_env`. A relative `cache_dir` is taken inside `workdir`.
    pub fn new(cfg: &TeacherConfig, workdir: &Path) -> Result<Teacher, TeacherError> {
        Teacher::with_url_override(cfg, workdir, url_override().as_deref())
    }

    /// Like [`Teacher::new`] with an explicit URL override instead of the environment variable.
    pub fn with_url_override(
        cfg: &TeacherConfig,
        workdir: &Path,
        url_override: Option<&str>,
    ) -> Result<Teacher, TeacherError> {
        cfg.validate()?;
        let mut endpoints = Vec::new();
        for e in cfg.resolved_endpoints(url_override) {
            let api_key = match &e.api_key_env {
                None => None,
                Some(var) => Some(std::env::var(var).map_err(|_| TeacherError::MissingApiKey {
                    endpoint: e.label().to_string(),
                    var: var.clone(),
                })?),
            };
            endpoints.push(Endpoint {
                url: e.completions_url(),
                cfg: e,
                api_key,
            });
        }
        let total_weight = endpoints.iter().map(|e| e.cfg.weight).sum();
        let cache = if cfg.cache {
            let dir = if cfg.cache_dir.is_absolute() {
                cfg.cache_dir.clone()
            } else {
                workdir.join(&cfg.cache_dir)
            };
            std::fs::create_dir_all(&dir).map_err(|source| TeacherError::Cache {
                path: dir.clone(),
                source,
            })?;
            Some(ResponseCache::new(dir))
        } else {
            None
        };
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_global(Some(Duration::from_secs_f64(cfg.timeout_s)))
            .timeout_connect(Some(Duration::from_secs_f64(cfg.connect_timeout_s)))
            .http_status_as_error(false)
            .build()
            .into();
        Ok(Teacher {
            endpoints,
            total_weight,
            cfg: cfg.clone(),
            agent,
            permits: Semaphore::new(cfg.max_concurrency),
            cache,
            counters: Counters::default(),
        })
    }

    /// The counters so far.
    pub fn usage(&self) -> TeacherUsage {
        let c = &self.counters;
        let g = |a: &AtomicU64| a.load(Ordering::Relaxed);
        TeacherUsage {
            requests: g(&c.requests),
            cache_hits: g(&c.cache_hits),
            http_attempts: g(&c.http_attempts),
            retries: g(&c.retries),
            failures: g(&c.failures),
            prompt_tokens: g(&c.prompt_tokens),
            completion_tokens: g(&c.completion_tokens),
            cache_errors: g(&c.cache_errors),
        }
    }

    /// The label of the teacher that `request` goes to (a pure function of the request and
    /// `choice_seed`).
    pub fn teacher_for(&self, request: &ChatRequest) -> &str {
        self.choose(request).cfg.label()
    }

    fn choose(&self, request: &ChatRequest) -> &Endpoint {
        if self.endpoints.len() == 1 {
            return &self.endpoints[0];
        }
        let canonical = serde_json::to_string(request).unwrap_or_default();
        let id = IdHasher::new()
            .part("teacher-choice")
            .part(self.cfg.choice_seed.to_le_bytes())
            .part(canonical)
            .finish();
        let bits = u64::from_str_radix(&id[..16], 16).unwrap_or(0);
        let mut point = (bits >> 11) as f64 / (1u64 << 53) as f64 * self.total_weight;
        for e in &self.endpoints {
            if point < e.cfg.weight {
                return e;
            }
            point -= e.cfg.weight;
        }
        &self.endpoints[self.endpoints.len() - 1]
    }

    fn exchange(&self, endpoint: &Endpoint, body: &str) -> Attempt {
        let _permit = self.permits.acquire();
        bump(&self.counters.http_attempts, 1);
        let mut req = self
            .agent
            .post(&endpoint.url)
            .header("Content-Type", "application/json");
        if let Some(key) = &endpoint.api_key {
            req = req.header("Authorization", format!("Bearer {key}"));
        }
        let mut resp = match req.send(body.as_bytes()) {
            Ok(r) => r,
            Err(e) => {
                return Attempt::Retry {
                    message: format!("{}: {e}", endpoint.url),
                    retry_after: None,
                };
            }
        };
        let status = resp.status().as_u16();
        let retry_after = resp
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<f64>().ok())
            .filter(|s| s.is_finite() && *s >= 0.0)
            .map(Duration::from_secs_f64);
        let text = match resp
            .body_mut()
            .with_config()
            .limit(MAX_BODY_BYTES)
            .read_to_string()
        {
            Ok(t) => t,
            Err(e) => {
                return Attempt::Retry {
                    message: format!("{}: reading the answer (HTTP {status}): {e}", endpoint.url),
                    retry_after: None,
                };
            }
        };
        match status {
            200..=299 => Attempt::Done(parse_completion(&text, &endpoint.cfg.model)),
            408 | 429 | 500..=599 => Attempt::Retry {
                message: format!("{}: HTTP {status}: {}", endpoint.url, short(&text)),
                retry_after,
            },
            _ => Attempt::Done(Err(ChatError::Refused(format!(
                "{}: HTTP {status}: {}",
                endpoint.url,
                short(&text)
            )))),
        }
    }
}

fn short(text: &str) -> String {
    let t = text.trim();
    match t.char_indices().nth(200) {
        Some((i, _)) => format!("{}...", &t[..i]),
        None => t.to_string(),
    }
}

impl ChatClient for Teacher {
    fn chat(&self, request: &ChatRequest) -> Result<ChatResponse, ChatError> {
        bump(&self.counters.requests, 1);
        let endpoint = self.choose(request);
        let max_tokens = match endpoint.cfg.max_tokens {
            Some(cap) => cap.min(request.max_tokens),
            None => request.max_tokens,
        };
        let body = request_body(&endpoint.cfg.model, request, max_tokens);
        let key = cache_key(&body);
        if let Some(cache) = &self.cache {
            match cache.get(&key) {
                Ok(Some(hit)) => {
                    bump(&self.counters.cache_hits, 1);
                    return Ok(hit);
                }
                Ok(None) => {}
                Err(_) => bump(&self.counters.cache_errors, 1),
            }
        }
        let attempts = self.cfg.max_retries + 1;
        let mut last = String::new();
        for attempt in 0..attempts {
            if attempt > 0 {
                bump(&self.counters.retries, 1);
            }
            match self.exchange(endpoint, &body) {
                Attempt::Done(Ok(answer)) => {
                    bump(&self.counters.prompt_tokens, answer.prompt_tokens);
                    bump(&self.counters.completion_tokens, answer.completion_tokens);
                    if let Some(cache) = &self.cache
                        && cache.put(&key, &answer).is_err()
                    {
                        bump(&self.counters.cache_errors, 1);
                    }
                    return Ok(answer);
                }
                Attempt::Done(Err(e)) => {
                    bump(&self.counters.failures, 1);
                    return Err(e);
                }
                Attempt::Retry {
                    message,
                    retry_after,
                } => {
                    last = message;
                    if attempt + 1 < attempts {
                        std::thread::sleep(backoff::delay(
                            attempt,
                            self.cfg.backoff_initial_ms,
                            self.cfg.backoff_max_ms,
                            retry_after,
                            jitter_seed(attempt),
                        ));
                    }
                }
            }
        }
        bump(&self.counters.failures, 1);
        Err(ChatError::Unreachable {
            attempts,
            message: last,
        })
    }

    fn report_counters(&self) -> Vec<(&'static str, u64)> {
        let u = self.usage();
        vec![
            ("teacher_requests", u.requests),
            ("teacher_cache_hits", u.cache_hits),
            ("teacher_retries", u.retries),
            ("teacher_failures", u.failures),
            ("teacher_prompt_tokens", u.prompt_tokens),
            ("teacher_completion_tokens", u.completion_tokens),
        ]
    }

    fn concurrency(&self) -> Option<usize> {
        Some(self.cfg.max_concurrency)
    }
}
