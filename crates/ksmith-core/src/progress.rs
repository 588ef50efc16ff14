//! Progress output for long stages.
//!
//! On a terminal a stage shows an indicatif bar with counts, rate and ETA. When the output is
//! not a terminal (cron, CI, a log file) it prints a plain line at most every
//! [`LOG_INTERVAL`], and with `--quiet` nothing at all.

use std::io::IsTerminal;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
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
    /// Between [`Tracker::starting`] and the first item or [`Tracker::started`].
    starting: AtomicBool,
}

/// The bar of a known total: counts, rate and time left.
const COUNTING: &str =
    "{prefix:>10} [{elapsed_precise}] {bar:30} {pos}/{len} ({per_sec}, ETA {eta}) {msg}";
/// The bar while the work's processes start: what is starting, no rate or time left yet.
const STARTING: &str = "{prefix:>10} [{elapsed_precise}] {spinner} {msg}";

fn style(template: &str) -> ProgressStyle {
    ProgressStyle::with_template(template).unwrap_or_else(|_| ProgressStyle::default_bar())
}

/// The bar of a total, or a spinner without one.
fn counting_style(total: Option<u64>) -> ProgressStyle {
    match total {
        Some(_) => style(COUNTING),
        None => ProgressStyle::default_spinner(),
    }
}

impl Tracker {
    /// Starts tracking `label` with `total` items (`None` when unknown).
    pub fn new(mode: ProgressMode, label: &str, total: Option<u64>) -> Self {
        let target = match mode {
            ProgressMode::Bar => ProgressDrawTarget::stderr(),
            _ => ProgressDrawTarget::hidden(),
        };
        Tracker::drawn_on(target, mode, label, total)
    }

    /// [`Tracker::new`], drawing on `target`.
    fn drawn_on(
        target: ProgressDrawTarget,
        mode: ProgressMode,
        label: &str,
        total: Option<u64>,
    ) -> Self {
        let bar = ProgressBar::with_draw_target(total, target);
        if mode == ProgressMode::Bar {
            bar.set_style(counting_style(total));
            if total.is_none() {
                bar.enable_steady_tick(Duration::from_millis(200));
            }
        }
        bar.set_prefix(label.to_string());
        Tracker {
            label: label.to_string(),
            mode,
            bar,
            last_log: Mutex::new(Instant::now()),
            started: Instant::now(),
            starting: AtomicBool::new(false),
        }
    }

    /// Says that the work's processes are starting (`what`, e.g. "starting 4 sandboxed
    /// workers") instead of showing `0/N (0/s, ETA 0s)` until the first item is done or
    /// [`Tracker::started`] is called.
    pub fn starting(&self, what: &str) {
        match self.mode {
            ProgressMode::Bar => {
                self.starting.store(true, Ordering::SeqCst);
                self.bar.set_style(style(STARTING));
                self.bar
                    .set_message(format!("{what} ({} to do)", self.total()));
                self.bar.enable_steady_tick(Duration::from_millis(200));
            }
            ProgressMode::Log => eprintln!("{}: {what} ({} to do)", self.label, self.total()),
            ProgressMode::Silent => {}
        }
    }

    /// The processes have started: back to counts, rate and time left.
    pub fn started(&self) {
        if self.starting.swap(false, Ordering::SeqCst) {
            let total = self.bar.length();
            if total.is_some() {
                self.bar.disable_steady_tick();
            }
            self.bar.set_style(counting_style(total));
            self.bar.set_message("");
            self.bar.reset_eta();
        }
    }

    /// The total, or "?" when unknown.
    fn total(&self) -> String {
        self.bar
            .length()
            .map_or_else(|| "?".to_string(), |n| n.to_string())
    }

    /// Prints `message` as a warning (always, `--quiet` too), above the bar.
    pub fn warn(&self, message: &str) {
        self.bar.suspend(|| eprintln!("warning: {message}"));
    }

    /// A tracker that shows nothing (for tests and library callers).
    pub fn hidden() -> Self {
        Tracker::new(ProgressMode::Silent, "", None)
    }

    /// Adds `n` finished items.
    pub fn inc(&self, n: u64) {
        self.started();
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
    use std::sync::Arc;

    /// A terminal that keeps what was drawn on it.
    #[derive(Debug, Default, Clone)]
    struct Screen(Arc<Mutex<String>>);

    impl indicatif::TermLike for Screen {
        fn width(&self) -> u16 {
            120
        }
        fn move_cursor_up(&self, _: usize) -> std::io::Result<()> {
            Ok(())
        }
        fn move_cursor_down(&self, _: usize) -> std::io::Result<()> {
            Ok(())
        }
        fn move_cursor_right(&self, _: usize) -> std::io::Result<()> {
            Ok(())
        }
        fn move_cursor_left(&self, _: usize) -> std::io::Result<()> {
            Ok(())
        }
        fn write_line(&self, s: &str) -> std::io::Result<()> {
            self.write_str(s)
        }
        fn write_str(&self, s: &str) -> std::io::Result<()> {
            self.0.lock().unwrap().push_str(s);
            Ok(())
        }
        fn clear_line(&self) -> std::io::Result<()> {
            Ok(())
        }
        fn flush(&self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl Screen {
        /// What was drawn since the last call.
        fn take(&self) -> String {
            std::mem::take(&mut *self.0.lock().unwrap())
        }
    }

    #[test]
    fn the_bar_says_it_is_starting_until_the_work_has_started() {
        let screen = Screen::default();
        let target = ProgressDrawTarget::term_like(Box::new(screen.clone()));
        let t = Tracker::drawn_on(target, ProgressMode::Bar, "probe", Some(127));
        screen.take();
        t.starting("starting 2 sandboxed workers");
        t.bar.tick();
        let drawn = screen.take();
        assert!(
            drawn.contains("starting 2 sandboxed workers (127 to do)"),
            "{drawn:?}"
        );
        assert!(
            !drawn.contains("0/127"),
            "no count, rate or ETA yet: {drawn:?}"
        );
        t.started();
        // What the steady tick drew before `started` (under load it may draw the starting
        // line again after the first look) is not what is drawn after it.
        screen.take();
        t.bar.tick();
        let drawn = screen.take();
        assert!(drawn.contains("0/127"), "{drawn:?}");
        assert!(!drawn.contains("starting"), "{drawn:?}");
        // The first item ends the starting state too.
        t.starting("starting again");
        t.inc(1);
        t.bar.tick();
        assert!(screen.take().contains("1/127"));
    }

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
