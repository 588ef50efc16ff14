//! Time as discover sees it: the current time (for rate-limit resets and the reference date of
//! a run) and sleeping (for waits and backoff). Tests substitute a virtual clock so that an
//! hour of rate-limit waiting takes no real time.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A source of time that can also wait.
pub trait Clock: Send + Sync {
    /// Seconds since 1970-01-01T00:00:00Z.
    fn now_secs(&self) -> u64;
    /// Waits for `duration`.
    fn sleep(&self, duration: Duration);
}

/// The real clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_secs(&self) -> u64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0)
    }

    fn sleep(&self, duration: Duration) {
        std::thread::sleep(duration);
    }
}
