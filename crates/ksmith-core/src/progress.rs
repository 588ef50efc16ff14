//! Progress output for long stages.
//!
//! On a terminal a stage shows an indicatif bar with counts, rate and ETA. When the output is
//! not a terminal (cron, CI, a log file) it prints a plain line at most every
//! [`LOG_INTERVAL`], and with `--quiet` nothing at all.

use std::io::IsTerminal;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// How often plain-log mode prints a progress line.
pub const LOG_INTERVAL: Duration = Duration::from_secs(10);

/// How progress is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProgressMode {
    /// An indicatif bar on stderr.
    Bar,
    /// Plain periodic log lines on stderr.
    Log,
    /// Nothing.
    Silent,
}

impl ProgressMode {
    /// Bars on a terminal, plain lines otherwise, nothing when `quiet`.
    pub fn detect(quiet: bool) -> Self {
        if quiet {
            ProgressMode::Silent
        } else if std::io::stderr().is_terminal() {
            ProgressMode::Bar
        } else {
            ProgressMode::Log
        }
    }
}

/// A progress tracker for one piece of work with a known or unknown total.
///
/// Cheap to share between threads (`&Tracker` is `Sync`).
pub struct Tracker {
    label: String,
    mode: ProgressMode,
    bar: ProgressBar,
    last_log: Mutex<Instant>,
    started: Instant,
}

impl Tracker {
    /// Starts tracking `label` with `total` items (`None` when unknown).
    pub fn new(mode: ProgressMode, label: &str, total: Option<u64>) -> Self {
        let bar = match (mode, total) {
            (ProgressMode::Bar, Some(n)) => {
                let bar = ProgressBar::new(n);
                bar.set_style(
                    ProgressStyle::with_template(
                        "{prefix:>10} [{elapsed_precise}] {bar:30} {pos}/{len} ({per_sec}, ETA {eta}) {msg}",
                    )
                    .unwrap_or_else(|_| ProgressStyle::default_bar()),
                );
                bar
            }
            (ProgressMode::Bar, None) => {
                let bar = ProgressBar::new_spinner();
                bar.enable_steady_tick(Duration::from_millis(200));
                bar
            }
            _ => ProgressBar::with_draw_target(total, ProgressDrawTarget::hidden()),
        };
        bar.set_prefix(label.to_string());
        Tracker {
            label: label.to_string(),
            mode,
            bar,
            last_log: Mutex::new(Instant::now()),
            started: Instant::now(),
        }
    }

    /// A tracker that shows nothing (for tests and library callers).
    pub fn hidden() -> Self {
        Tracker::new(ProgressMode::Silent, "", None)
    }

    /// Adds `n` finished items.
    pub fn inc(&self, n: u64) {
        self.bar.inc(n);
        if self.mode == ProgressMode::Log {
            let mut last = self.last_log.lock().unwrap_or_else(|e| e.into_inner());
            if last.elapsed() >= LOG_INTERVAL {
                *last = Instant::now();
                eprintln!("{}", self.line());
            }
        }
    }

    /// Sets the message shown after the counts.
    pub fn set_message(&self, msg: impl Into<String>) {
        self.bar.set_message(msg.into());
    }

    /// Items done so far.
    pub fn position(&self) -> u64 {
        self.bar.position()
    }

    fn line(&self) -> String {
        let pos = self.bar.position();
        let secs = self.started.elapsed().as_secs_f64().max(1e-9);
        match self.bar.length() {
            Some(len) => format!(
                "{}: {pos}/{len} ({:.1}/s, {:.0} s elapsed)",
                self.label,
                pos as f64 / secs,
                secs
            ),
            None => format!("{}: {pos} ({:.1}/s)", self.label, pos as f64 / secs),
        }
    }

    /// Ends the bar (and prints a final line in log mode).
    pub fn finish(&self) {
        match self.mode {
            ProgressMode::Bar => self.bar.finish_and_clear(),
            ProgressMode::Log => eprintln!("{}", self.line()),
            ProgressMode::Silent => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_from_many_threads() {
        let t = Tracker::new(ProgressMode::Silent, "x", Some(1000));
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    for _ in 0..250 {
                        t.inc(1)
                    }
                });
            }
        });
        assert_eq!(t.position(), 1000);
        t.finish();
    }
}
