//! The GitHub REST client: one request at a time, the token in the `Authorization` header only,
//! rate limits honoured per resource, retries with backoff for server errors, dropped
//! connections and malformed answers.
//!
//! Requests are sequential on purpose: the search API allows 30 requests a minute (10 for code
//! search, 10 without a token), so concurrency would only earn secondary rate limits.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use ksmith_core::backoff::{delay, jitter_seed};

use crate::clock::Clock;
use crate::config::DiscoverConfig;
use crate::error::Error;
use crate::rate_limit::{LimitHeaders, Verdict, classify, primary_wait_secs, secondary_wait_secs};

/// Largest answer body read, in bytes.
const MAX_BODY_BYTES: u64 = 32 * 1024 * 1024;

/// The media type of JSON answers.
pub(crate) const ACCEPT_JSON: &str = "application/vnd.github+json";
/// The media type that makes the commit endpoint answer with the bare SHA.
pub(crate) const ACCEPT_SHA: &str = "application/vnd.github.sha";

/// An API token. It is sent in the `Authorization` header and nowhere else: its `Debug` form
/// hides it.
#[derive(Clone)]
pub struct Token(String);

impl Token {
    /// A token from its text; `None` when blank.
    pub fn new(text: impl Into<String>) -> Option<Token> {
        let text = text.into().trim().to_string();
        (!text.is_empty()).then_some(Token(text))
    }

    /// The token from the environment variable `var`, when set and not blank.
    pub fn from_env(var: &str) -> Option<Token> {
        std::env::var(var).ok().and_then(Token::new)
    }
}

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Token(<hidden>)")
    }
}

/// GitHub's rate-limit resources: each has its own budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Resource {
    /// Repository search (30 requests a minute with a token).
    Search,
    /// Code search (10 a minute, token required).
    CodeSearch,
    /// Everything else (5,000 an hour with a token).
    Core,
}

impl Resource {
    /// GitHub's name for it (`x-ratelimit-resource`).
    pub(crate) fn name(self) -> &'static str {
        match self {
            Resource::Search => "search",
            Resource::CodeSearch => "code_search",
            Resource::Core => "core",
        }
    }
}

/// What the client did, for the report.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ClientStats {
    /// Requests sent, by resource name.
    pub(crate) requests: BTreeMap<&'static str, u64>,
    /// Retries after server errors, dropped connections and malformed answers.
    pub(crate) retries: u64,
    /// Waits for an exhausted primary limit (announced by the headers or by a 403/429).
    pub(crate) primary_waits: u64,
    /// Waits for secondary limits.
    pub(crate) secondary_waits: u64,
    /// Seconds spent waiting for rate limits.
    pub(crate) waited_secs: u64,
}

/// One GET request.
pub(crate) struct Request {
    /// Rate-limit budget it draws from.
    pub(crate) resource: Resource,
    /// Path below the API's base URL, starting with `/`.
    pub(crate) path: String,
    /// Query parameters (encoded by the client).
    pub(crate) query: Vec<(&'static str, String)>,
    /// `Accept` header.
    pub(crate) accept: &'static str,
    /// What the request is, for messages (`search repositories "q" page 2`).
    pub(crate) what: String,
}

/// A final answer that is not a success: its status and GitHub's message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Refusal {
    /// HTTP status.
    pub(crate) status: u16,
    /// GitHub's `message`, or the start of the body.
    pub(crate) message: String,
}

impl Refusal {
    /// The refusal as an error of request `what`.
    pub(crate) fn into_error(self, what: &str) -> Error {
        Error::Refused {
            what: what.to_string(),
            status: self.status,
            message: self.message,
        }
    }
}

#[derive(Debug, Clone, Copy, Default)]
struct Budget {
    remaining: Option<u64>,
    reset: Option<u64>,
}

/// Which rate limit a wait is for.
#[derive(Clone, Copy)]
enum Wait {
    Primary,
    Secondary,
}

/// One failed attempt and what to do about it.
struct Failure {
    /// What went wrong (the token redacted).
    message: String,
    /// At least this many seconds before the next attempt, when the server said so.
    retry_after: Option<u64>,
    /// A secondary rate limit (at least a minute), rather than a backoff.
    secondary: bool,
}

impl Failure {
    fn backoff(message: String, retry_after: Option<u64>) -> Failure {
        Failure {
            message,
            retry_after,
            secondary: false,
        }
    }
}

/// What one attempt gave.
enum Step<T> {
    /// A final answer.
    Done(Result<T, Refusal>),
    /// The primary rate limit is exhausted until `reset`.
    Primary { status: u16, reset: u64 },
    /// A failure to retry.
    Failed(Failure),
}

/// The GitHub client of one run.
pub(crate) struct GitHub<'a> {
    agent: ureq::Agent,
    base: String,
    token: Option<Token>,
    clock: &'a dyn Clock,
    notify: &'a dyn Fn(&str),
    max_retries: u32,
    backoff_initial_ms: u64,
    backoff_max_ms: u64,
    max_wait_secs: u64,
    budgets: BTreeMap<Resource, Budget>,
    stats: ClientStats,
}

impl<'a> GitHub<'a> {
    /// A client for `cfg.api_url`; `notify` receives one line per rate-limit wait.
    pub(crate) fn new(
        cfg: &DiscoverConfig,
        token: Option<Token>,
        clock: &'a dyn Clock,
        notify: &'a dyn Fn(&str),
    ) -> GitHub<'a> {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_global(Some(Duration::from_secs(cfg.timeout_secs)))
            .http_status_as_error(false)
            .user_agent("ksmith-discover")
            .build()
            .into();
        GitHub {
            agent,
            base: cfg.api_url.trim().trim_end_matches('/').to_string(),
            token,
            clock,
            notify,
            max_retries: cfg.max_retries,
            backoff_initial_ms: cfg.backoff_initial_ms,
            backoff_max_ms: cfg.backoff_max_ms,
            max_wait_secs: cfg.max_wait_secs,
            budgets: BTreeMap::new(),
            stats: ClientStats::default(),
        }
    }

    /// What the client did so far.
    pub(crate) fn stats(&self) -> &ClientStats {
        &self.stats
    }

    /// Sends `req` until it gets a final answer: `parse`'s value for a success, a [`Refusal`]
    /// for a final non-success. A success whose body `parse` rejects is retried like a server
    /// error. Errors: retries exhausted, or a rate-limit wait longer than `max_wait_secs`.
    pub(crate) fn get<T>(
        &mut self,
        req: &Request,
        parse: impl Fn(&str) -> Result<T, String>,
    ) -> Result<Result<T, Refusal>, Error> {
        let (mut failures, mut secondary, mut primary) = (0u32, 0u32, 0u32);
        loop {
            self.wait_for_budget(req)?;
            let failure = match self.step(req, &parse) {
                Step::Done(answer) => return Ok(answer),
                Step::Primary { status, reset } => {
                    primary += 1;
                    if primary > self.max_retries {
                        return Err(Error::Unreachable {
                            what: req.what.clone(),
                            attempts: primary,
                            message: format!(
                                "HTTP {status}: the {} rate limit stayed exhausted after its reset",
                                req.resource.name()
                            ),
                        });
                    }
                    // The budget now says "exhausted until reset"; the next turn waits.
                    let reset = reset.max(self.clock.now_secs());
                    self.budgets.insert(
                        req.resource,
                        Budget {
                            remaining: Some(0),
                            reset: Some(reset),
                        },
                    );
                    continue;
                }
                Step::Failed(failure) => failure,
            };
            failures += 1;
            if failures > self.max_retries {
                return Err(Error::Unreachable {
                    what: req.what.clone(),
                    attempts: failures,
                    message: failure.message,
                });
            }
            self.stats.retries += 1;
            if failure.secondary {
                let secs = secondary_wait_secs(failure.retry_after, secondary);
                secondary += 1;
                self.wait(req, secs, Wait::Secondary)?;
            } else {
                self.clock.sleep(delay(
                    failures - 1,
                    self.backoff_initial_ms,
                    self.backoff_max_ms,
                    failure.retry_after.map(Duration::from_secs),
                    jitter_seed(failures),
                ));
            }
        }
    }

    /// One attempt at `req`, classified.
    fn step<T>(&mut self, req: &Request, parse: &impl Fn(&str) -> Result<T, String>) -> Step<T> {
        let (status, headers, body) = match self.attempt(req) {
            Ok(answer) => answer,
            Err(message) => return Step::Failed(Failure::backoff(message, None)),
        };
        let failure = match classify(status, &headers, &body) {
            Verdict::Answer if (200..300).contains(&status) => match parse(&body) {
                Ok(value) => return Step::Done(Ok(value)),
                Err(message) => Failure::backoff(format!("malformed answer: {message}"), None),
            },
            Verdict::Answer => {
                return Step::Done(Err(Refusal {
                    status,
                    message: self.redact(github_message(&body)),
                }));
            }
            Verdict::Primary { reset } => return Step::Primary { status, reset },
            Verdict::Secondary { retry_after } => Failure {
                message: format!("HTTP {status}: {}", github_message(&body)),
                retry_after,
                secondary: true,
            },
            Verdict::ServerError => Failure::backoff(
                format!("HTTP {status}: {}", github_message(&body)),
                headers.retry_after,
            ),
        };
        Step::Failed(Failure {
            message: self.redact(failure.message),
            ..failure
        })
    }

    /// `text` with the token, should an answer echo it, replaced.
    fn redact(&self, text: String) -> String {
        match &self.token {
            Some(Token(token)) if text.contains(token.as_str()) => {
                text.replace(token.as_str(), "<token>")
            }
            _ => text,
        }
    }

    /// Waits until the resource's budget is reset when the last answer said it is exhausted.
    fn wait_for_budget(&mut self, req: &Request) -> Result<(), Error> {
        let budget = self.budgets.get(&req.resource).copied().unwrap_or_default();
        if let (Some(0), Some(reset)) = (budget.remaining, budget.reset) {
            let now = self.clock.now_secs();
            if now <= reset {
                self.wait(req, primary_wait_secs(reset, now), Wait::Primary)?;
            }
            self.budgets.remove(&req.resource);
        }
        Ok(())
    }

    fn wait(&mut self, req: &Request, secs: u64, kind: Wait) -> Result<(), Error> {
        if secs > self.max_wait_secs {
            return Err(Error::RateLimited {
                what: req.what.clone(),
                resource: req.resource.name().to_string(),
                wait_secs: secs,
                max_wait_secs: self.max_wait_secs,
            });
        }
        let kind = match kind {
            Wait::Primary => {
                self.stats.primary_waits += 1;
                "primary"
            }
            Wait::Secondary => {
                self.stats.secondary_waits += 1;
                "secondary"
            }
        };
        (self.notify)(&format!(
            "discover: {} {kind} rate limit reached; waiting {secs} s",
            req.resource.name()
        ));
        self.stats.waited_secs += secs;
        self.clock.sleep(Duration::from_secs(secs));
        Ok(())
    }

    /// One exchange: status, rate-limit headers and body, or why there is none.
    fn attempt(&mut self, req: &Request) -> Result<(u16, LimitHeaders, String), String> {
        *self.stats.requests.entry(req.resource.name()).or_default() += 1;
        let url = format!("{}{}", self.base, req.path);
        let mut call = self
            .agent
            .get(&url)
            .header("Accept", req.accept)
            .header("X-GitHub-Api-Version", "2022-11-28");
        for (k, v) in &req.query {
            call = call.query(k, v);
        }
        if let Some(Token(token)) = &self.token {
            call = call.header("Authorization", format!("Bearer {token}"));
        }
        let mut resp = call
            .call()
            .map_err(|e| self.redact(format!("{url}: {e}")))?;
        let status = resp.status().as_u16();
        let headers = LimitHeaders::read(|name| {
            resp.headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string)
        });
        if let (Some(remaining), Some(reset)) = (headers.remaining, headers.reset) {
            self.budgets.insert(
                req.resource,
                Budget {
                    remaining: Some(remaining),
                    reset: Some(reset),
                },
            );
        }
        let body = resp
            .body_mut()
            .with_config()
            .limit(MAX_BODY_BYTES)
            .read_to_string()
            .map_err(|e| self.redact(format!("{url}: reading the answer (HTTP {status}): {e}")))?;
        Ok((status, headers, body))
    }
}

/// GitHub's `message` field, or the start of the body.
fn github_message(body: &str) -> String {
    let message = serde_json::from_str::<serde_json::Value>(body)
        .ok()
        .and_then(|v| {
            v.get("message")
                .and_then(|m| m.as_str())
                .map(str::to_string)
        });
    let text = message.unwrap_or_else(|| body.trim().to_string());
    match text.char_indices().nth(200) {
        Some((i, _)) => format!("{}...", &text[..i]),
        None => text,
    }
}

/// Percent-encodes a ref name for a URL path (slashes kept: GitHub reads `a/b` as one ref).
pub(crate) fn encode_ref(name: &str) -> String {
    let mut out = String::new();
    for b in name.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~' | b'/') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_token_never_shows_in_debug_output() {
        let t = Token::new("ghp_secret123").expect("token");
        assert!(!format!("{t:?}").contains("secret"));
        assert!(Token::new("  ").is_none());
    }

    #[test]
    fn messages_and_refs() {
        assert_eq!(
            github_message(r#"{"message": "Validation Failed", "errors": []}"#),
            "Validation Failed"
        );
        assert_eq!(github_message(" oops "), "oops");
        assert!(github_message(&"x".repeat(500)).ends_with("..."));
        assert_eq!(encode_ref("main"), "main");
        assert_eq!(encode_ref("feat/a b#1"), "feat/a%20b%231");
    }
}
