//! The work the rollout keeps in flight is derived from the evaluator's capacity and the
//! teacher's concurrency, and its report carries the time steps waited on each and the
//! evaluator's own counters (here a fake pool of two devices).

#![allow(clippy::unwrap_used)]

use std::collections::HashSet;
use std::sync::Mutex;
use std::thread::ThreadId;
use std::time::Duration;

use crate::support::*;
use ksmith_core::chat::{ChatClient, ChatError, ChatRequest, ChatResponse};
use ksmith_core::context::StageContext;
use ksmith_core::evaluation::{EvalError, EvalRequest, EvalResult, Evaluator, Preflight};
use ksmith_core::report::StageReport;
use ksmith_evolve::{RolloutConfig, run};

/// Two fake devices taking two evaluations each; records which threads called it.
struct FakePool {
    inner: FakeEvaluator,
    callers: Mutex<HashSet<ThreadId>>,
}

impl Evaluator for FakePool {
    fn evaluate(&self, r: &EvalRequest) -> Result<EvalResult, EvalError> {
        self.callers
            .lock()
            .unwrap()
            .insert(std::thread::current().id());
        self.inner.evaluate(r)
    }

    fn preflight(&self, r: &EvalRequest) -> Result<Preflight, EvalError> {
        self.inner.preflight(r)
    }

    fn capacity(&self) -> usize {
        4
    }

    fn describe(&self) -> String {
        "2 fake devices".into()
    }

    fn report_counters(&self) -> Vec<(String, u64)> {
        vec![("eval_device/fake:0/evaluations".into(), 7)]
    }
}

/// A teacher that says it sends two requests at once at most, each taking 5 ms.
struct SlowTeacher(ScriptedTeacher);

impl ChatClient for SlowTeacher {
    fn chat(&self, req: &ChatRequest) -> Result<ChatResponse, ChatError> {
        std::thread::sleep(Duration::from_millis(5));
        self.0.chat(req)
    }

    fn concurrency(&self) -> Option<usize> {
        Some(2)
    }
}

fn pool() -> FakePool {
    FakePool {
        inner: FakeEvaluator {
            delay: Duration::from_millis(5),
            ..FakeEvaluator::new()
        },
        callers: Mutex::new(HashSet::new()),
    }
}

/// A rollout of `tasks` tasks, `iterations` steps each on one island, with `parallel_tasks`,
/// against the slow scripted teacher and the fake pool: its report and the pool.
fn rollout(tasks: usize, iterations: u32, parallel_tasks: usize) -> (StageReport, FakePool) {
    let dir = tempfile::tempdir().expect("a temporary folder");
    write_tasks(dir.path(), &default_tasks(tasks));
    let c = RolloutConfig {
        iterations,
        num_islands: 1,
        parallel_tasks,
        ..Default::default()
    };
    let teacher = SlowTeacher(ScriptedTeacher::new());
    let evaluator = pool();
    let report = run(
        &c,
        &StageContext::for_tests(dir.path()),
        &teacher,
        &evaluator,
    )
    .expect("the rollout runs");
    (report, evaluator)
}

#[test]
fn tasks_in_flight_are_the_evaluators_capacity_plus_the_teachers_concurrency() {
    let (report, evaluator) = rollout(10, 3, 0);
    assert_eq!(report.counters.get("rollout_in_flight"), Some(&6));
    // Six tasks at once: six threads evaluated.
    assert_eq!(evaluator.callers.lock().unwrap().len(), 6);
    let steps = 10 * 3;
    assert_eq!(
        report.counters.get("step_phase_calls/teacher_wait"),
        Some(&steps)
    );
    assert!(report.counters["step_phase_ms/teacher_wait"] >= steps * 5);
    let evaluations = evaluator
        .inner
        .calls
        .load(std::sync::atomic::Ordering::SeqCst);
    assert_eq!(
        report.counters.get("step_phase_calls/evaluation"),
        Some(&evaluations)
    );
    assert!(report.counters["step_phase_ms/evaluation"] >= evaluations * 5);
    assert_eq!(
        report.counters.get("eval_device/fake:0/evaluations"),
        Some(&7)
    );
    assert!(report.counters.contains_key("rollout_wall_ms"));
}

#[test]
fn parallel_tasks_overrides_the_derived_number() {
    let (report, evaluator) = rollout(5, 2, 2);
    assert_eq!(report.counters.get("rollout_in_flight"), Some(&2));
    assert_eq!(evaluator.callers.lock().unwrap().len(), 2);
}

#[test]
fn a_time_budget_stops_tasks_cleanly_and_a_rerun_continues_them() {
    let dir = tempfile::tempdir().unwrap();
    write_tasks(dir.path(), &default_tasks(2));
    let mut c = RolloutConfig {
        iterations: 1000,
        num_islands: 1,
        parallel_tasks: 1,
        time_budget_s: 1,
        ..Default::default()
    };
    let evaluator = pool();
    let teacher = SlowTeacher(ScriptedTeacher::new());
    let ctx = StageContext::for_tests(dir.path());
    // Like the token budget: the stage succeeds and its output is marked incomplete.
    let report = run(&c, &ctx, &teacher, &evaluator).unwrap();
    assert!(
        report.fingerprint.ends_with(":incomplete"),
        "{}",
        report.fingerprint
    );
    assert_eq!(
        report.counters.get("tasks_stopped_by_time_budget"),
        Some(&2)
    );
    let first = report.counters["steps_new"];
    assert!(first > 0 && first < 1000, "{first}");
    assert_eq!(read_steps(dir.path()).len() as u64, first);
    // A rerun without the budget continues where the steps stopped, to the same length.
    c.iterations = first as u32;
    c.time_budget_s = 0;
    run(&c, &ctx, &teacher, &evaluator).unwrap();
    assert_eq!(read_steps(dir.path()).len() as u64, 2 * first);
}

fn read_steps(dir: &std::path::Path) -> Vec<ksmith_core::tables::StepRow> {
    use ksmith_core::table::Table;
    ksmith_core::table::read_table(&ksmith_core::tables::StepRow::path_in(dir)).unwrap()
}
