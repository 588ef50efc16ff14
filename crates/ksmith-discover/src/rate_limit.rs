//! GitHub's rate limits, read from its answers: what an answer's status and headers ask of
//! the client, and how long to wait. Pure functions; the client in `github` applies them.
//!
//! GitHub's rules (REST API, "Rate limits"): when `x-ratelimit-remaining` is 0, wait until the
//! `x-ratelimit-reset` epoch second; a 403 or 429 with `retry-after` asks to wait that many
//! seconds; another 403 or 429 that says it is a (secondary) rate limit asks to wait at least a
//! minute, longer on each repetition. A 403 that is none of these is a refusal (no access).

/// The rate-limit headers of one answer.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct LimitHeaders {
    /// `x-ratelimit-remaining`.
    pub(crate) remaining: Option<u64>,
    /// `x-ratelimit-reset`, epoch seconds.
    pub(crate) reset: Option<u64>,
    /// `retry-after`, seconds.
    pub(crate) retry_after: Option<u64>,
}

impl LimitHeaders {
    /// Reads the headers from a lookup function (header names in lower case).
    pub(crate) fn read(get: impl Fn(&str) -> Option<String>) -> LimitHeaders {
        let num = |name: &str| get(name).and_then(|v| v.trim().parse::<u64>().ok());
        LimitHeaders {
            remaining: num("x-ratelimit-remaining"),
            reset: num("x-ratelimit-reset"),
            retry_after: num("retry-after"),
        }
    }
}

/// What an answer asks the client to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// An answer for the caller: a success, or a refusal the caller interprets (404, 422, ...).
    Answer,
    /// The primary limit is exhausted: wait until this epoch second.
    Primary {
        /// `x-ratelimit-reset`.
        reset: u64,
    },
    /// A secondary limit: wait `retry_after` seconds, or at least a minute when absent.
    Secondary {
        /// `retry-after`, when sent.
        retry_after: Option<u64>,
    },
    /// A server error: retry with backoff (honouring `retry-after`, when sent).
    ServerError,
}

/// Classifies an answer by its status, headers and body.
pub(crate) fn classify(status: u16, headers: &LimitHeaders, body: &str) -> Verdict {
    match status {
        403 | 429 => {
            if headers.retry_after.is_some() {
                Verdict::Secondary {
                    retry_after: headers.retry_after,
                }
            } else if let (Some(0), Some(reset)) = (headers.remaining, headers.reset) {
                Verdict::Primary { reset }
            } else if status == 429 || says_rate_limit(body) {
                Verdict::Secondary { retry_after: None }
            } else {
                Verdict::Answer
            }
        }
        500..=599 => Verdict::ServerError,
        _ => Verdict::Answer,
    }
}

fn says_rate_limit(body: &str) -> bool {
    let lower = body.to_ascii_lowercase();
    lower.contains("rate limit") || lower.contains("abuse")
}

/// The wait a secondary limit asks for: `retry-after` when sent, otherwise one minute doubled on
/// each repetition (`repeat` counts earlier secondary limits of the same request).
pub(crate) fn secondary_wait_secs(retry_after: Option<u64>, repeat: u32) -> u64 {
    retry_after.unwrap_or_else(|| 60u64.saturating_mul(1u64 << repeat.min(20)))
}

/// The wait before the next request of a resource whose primary limit is exhausted until
/// `reset`: up to one second past the reset (GitHub's clock and ours may differ by a little).
pub(crate) fn primary_wait_secs(reset: u64, now: u64) -> u64 {
    reset.saturating_sub(now) + 1
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(remaining: Option<u64>, reset: Option<u64>, retry_after: Option<u64>) -> LimitHeaders {
        LimitHeaders {
            remaining,
            reset,
            retry_after,
        }
    }

    #[test]
    fn classifies_github_answers() {
        let none = h(None, None, None);
        assert_eq!(classify(200, &none, "{}"), Verdict::Answer);
        assert_eq!(classify(422, &none, "{}"), Verdict::Answer);
        assert_eq!(classify(404, &none, "{}"), Verdict::Answer);
        assert_eq!(
            classify(403, &h(Some(0), Some(99), None), "API rate limit exceeded"),
            Verdict::Primary { reset: 99 }
        );
        assert_eq!(
            classify(429, &h(Some(0), Some(99), None), ""),
            Verdict::Primary { reset: 99 }
        );
        assert_eq!(
            classify(403, &h(Some(10), Some(99), Some(30)), ""),
            Verdict::Secondary {
                retry_after: Some(30)
            }
        );
        assert_eq!(
            classify(
                403,
                &h(Some(10), None, None),
                "You have exceeded a secondary rate limit"
            ),
            Verdict::Secondary { retry_after: None }
        );
        assert_eq!(
            classify(429, &none, ""),
            Verdict::Secondary { retry_after: None }
        );
        assert_eq!(
            classify(
                403,
                &h(Some(10), Some(99), None),
                "Repository access blocked"
            ),
            Verdict::Answer
        );
        assert_eq!(classify(502, &none, "bad gateway"), Verdict::ServerError);
    }

    #[test]
    fn waits() {
        assert_eq!(secondary_wait_secs(Some(7), 3), 7);
        assert_eq!(secondary_wait_secs(None, 0), 60);
        assert_eq!(secondary_wait_secs(None, 2), 240);
        assert_eq!(primary_wait_secs(110, 100), 11);
        assert_eq!(primary_wait_secs(90, 100), 1);
    }

    #[test]
    fn reads_headers() {
        let got = LimitHeaders::read(|name| match name {
            "x-ratelimit-remaining" => Some("0".into()),
            "x-ratelimit-reset" => Some(" 1700000000 ".into()),
            "retry-after" => Some("soon".into()),
            _ => None,
        });
        assert_eq!(got, h(Some(0), Some(1_700_000_000), None));
    }
}
