//! How much work the rollout keeps in flight, and the time its steps wait on the teacher and the
//! evaluator.
//!
//! Each task in flight is one thread alternating a teacher request and an evaluation, so the
//! evaluator's slots ([`Evaluator::capacity`]) are all busy only while as many tasks evaluate at
//! once, and the others meanwhile wait on the teacher (at most its concurrency limit at a time).
//! With `parallel_tasks = 0` the rollout keeps `capacity + teacher concurrency` tasks in flight
//! (the teacher's limit defaults to the capacity when it has none): every evaluation slot and
//! every teacher slot can be busy at once, whatever the teacher's latency.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use ksmith_core::chat::{ChatClient, ChatError, ChatRequest, ChatResponse};
use ksmith_core::evaluation::{EvalError, EvalRequest, EvalResult, Evaluator, Preflight};

/// The tasks kept in flight and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InFlight {
    /// Tasks evolved at once.
    pub tasks: usize,
    /// How the number came about, in words.
    pub why: String,
}

/// The tasks to keep in flight: `parallel_tasks` when set (> 0), else the evaluator's
/// `capacity` plus the teacher's `concurrency` (the capacity when unknown); never more than
/// the `tasks` there are (at least one).
pub fn in_flight(
    parallel_tasks: usize,
    capacity: usize,
    concurrency: Option<usize>,
    tasks: usize,
) -> InFlight {
    let (wanted, why) = if parallel_tasks > 0 {
        (
            parallel_tasks,
            "set by [rollout] parallel_tasks".to_string(),
        )
    } else {
        let capacity = capacity.max(1);
        let (teacher, said) = match concurrency {
            Some(c) => (c.max(1), format!("teacher concurrency {c}")),
            None => (
                capacity,
                "no teacher concurrency limit: as many again".into(),
            ),
        };
        (
            capacity + teacher,
            format!("evaluator capacity {capacity} + {said}"),
        )
    };
    let n = wanted.min(tasks).max(1);
    let why = if n < wanted {
        format!("{why} = {wanted}, limited by the {tasks} task(s)")
    } else {
        why
    };
    InFlight { tasks: n, why }
}

/// Milliseconds and calls, added from many threads.
#[derive(Debug, Default)]
pub struct Clock {
    ms: AtomicU64,
    calls: AtomicU64,
}

impl Clock {
    fn time<T>(&self, f: impl FnOnce() -> T) -> T {
        let t = Instant::now();
        let out = f();
        self.ms
            .fetch_add(t.elapsed().as_millis() as u64, Ordering::Relaxed);
        self.calls.fetch_add(1, Ordering::Relaxed);
        out
    }

    /// Milliseconds spent in the calls, and their number.
    pub fn read(&self) -> (u64, u64) {
        (
            self.ms.load(Ordering::Relaxed),
            self.calls.load(Ordering::Relaxed),
        )
    }
}

/// A teacher whose requests are timed (the steps' wait for answers).
pub struct TimedTeacher<'a> {
    /// The teacher.
    pub inner: &'a dyn ChatClient,
    /// Time in its requests.
    pub clock: Clock,
}

impl ChatClient for TimedTeacher<'_> {
    fn chat(&self, request: &ChatRequest) -> Result<ChatResponse, ChatError> {
        self.clock.time(|| self.inner.chat(request))
    }

    fn report_counters(&self) -> Vec<(&'static str, u64)> {
        self.inner.report_counters()
    }

    fn concurrency(&self) -> Option<usize> {
        self.inner.concurrency()
    }
}

/// An evaluator whose requests are timed (the steps' wait for verdicts, queue included; the
/// tasks' preflights apart).
pub struct TimedEvaluator<'a> {
    /// The evaluator.
    pub inner: &'a dyn Evaluator,
    /// Time in its evaluations.
    pub clock: Clock,
    /// Time in its preflights.
    pub preflights: Clock,
}

impl Evaluator for TimedEvaluator<'_> {
    fn evaluate(&self, request: &EvalRequest) -> Result<EvalResult, EvalError> {
        self.clock.time(|| self.inner.evaluate(request))
    }

    fn preflight(&self, request: &EvalRequest) -> Result<Preflight, EvalError> {
        self.preflights.time(|| self.inner.preflight(request))
    }

    fn capacity(&self) -> usize {
        self.inner.capacity()
    }

    fn describe(&self) -> String {
        self.inner.describe()
    }

    fn report_counters(&self) -> Vec<(String, u64)> {
        self.inner.report_counters()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derived_from_the_evaluator_and_the_teacher_unless_set() {
        let auto = in_flight(0, 8, Some(16), 100);
        assert_eq!(auto.tasks, 24);
        assert!(auto.why.contains("capacity 8") && auto.why.contains("concurrency 16"));
        assert_eq!(in_flight(0, 4, None, 100).tasks, 8);
        let set = in_flight(3, 8, Some(16), 100);
        assert_eq!(set.tasks, 3);
        assert!(set.why.contains("parallel_tasks"));
    }

    #[test]
    fn never_more_than_the_tasks_and_never_none() {
        let few = in_flight(0, 8, Some(16), 5);
        assert_eq!(few.tasks, 5);
        assert!(few.why.contains("limited by the 5 task(s)"), "{}", few.why);
        assert_eq!(in_flight(0, 0, Some(0), 0).tasks, 1);
    }
}
