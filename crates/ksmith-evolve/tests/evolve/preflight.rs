//! The preflight of a task's reference: a task whose reference does not run on the evaluation
//! device is refused before any teacher call, journaled, counted and named; an evaluator that
//! cannot answer refuses nothing.

#![allow(clippy::unwrap_used)]

use std::sync::Mutex;
use std::sync::atomic::Ordering;

use crate::support::*;
use ksmith_core::chat::{ChatClient, ChatError, ChatRequest, ChatResponse};
use ksmith_core::context::StageContext;
use ksmith_core::table::{Table, read_table};
use ksmith_core::tables::StepRow;
use ksmith_evolve::preflight::{REFUSED_FILE, Refusal};
use ksmith_evolve::{RolloutConfig, TaskEnding, endings_path, run, tasks_root};

fn cfg(iterations: u32) -> RolloutConfig {
    RolloutConfig {
        iterations,
        num_islands: 2,
        parallel_tasks: 2,
        ..Default::default()
    }
}

/// The scripted teacher, keeping every prompt it was sent.
struct Recording {
    inner: ScriptedTeacher,
    prompts: Mutex<Vec<String>>,
}

impl ChatClient for Recording {
    fn chat(&self, req: &ChatRequest) -> Result<ChatResponse, ChatError> {
        let user = req.messages.last().unwrap().content.clone();
        self.prompts.lock().unwrap().push(user);
        self.inner.chat(req)
    }
}

fn teacher() -> Recording {
    Recording {
        inner: ScriptedTeacher::new(),
        prompts: Mutex::new(Vec::new()),
    }
}

fn endings(workdir: &std::path::Path) -> std::collections::BTreeMap<String, TaskEnding> {
    serde_json::from_slice(&std::fs::read(endings_path(workdir)).unwrap()).unwrap()
}

#[test]
fn a_reference_that_fails_on_the_device_is_refused_before_any_teacher_call() {
    let dir = tempfile::tempdir().unwrap();
    let swin = format!("{REFERENCE}\nDEVICEBROKEN = 1\n");
    write_tasks(
        dir.path(),
        &[task("healthy", REFERENCE), task("swin", &swin)],
    );
    let t = teacher();
    let ev = FakeEvaluator::new();
    let report = run(&cfg(4), &StageContext::for_tests(dir.path()), &t, &ev).unwrap();

    // The teacher never saw the refused task's program; the healthy task ran every step.
    let prompts = t.prompts.lock().unwrap().clone();
    assert_eq!(prompts.len(), 4);
    assert!(prompts.iter().all(|p| !p.contains("DEVICEBROKEN")));
    let rows: Vec<StepRow> = read_table(&StepRow::path_in(dir.path())).unwrap();
    assert_eq!(rows.len(), 4);
    assert!(rows.iter().all(|r| r.task_id == "healthy"));

    // Counted, and why; named with its error in the endings.
    assert_eq!(report.counters["tasks_refused_reference"], 1);
    assert_eq!(
        report.counters[&format!("tasks_refused_reference/{DEVICE_ERROR}")],
        1
    );
    assert_eq!(report.counters["tasks_done"], 1);
    assert_eq!(report.counters["preflight_calls"], 2);
    let ended = endings(dir.path());
    assert_eq!(ended["swin"].ending, "refused_reference");
    assert!(
        ended["swin"].reason.contains("no teacher call")
            || ended["swin"].reason.contains("before any teacher call"),
        "{}",
        ended["swin"].reason
    );
    assert!(ended["swin"].reason.ends_with(DEVICE_ERROR), "{:?}", ended);
    assert_eq!(ended["healthy"].ending, "done");

    // Journaled: the refusal is on disk with the evaluator's whole message.
    let task_dir = tasks_root(dir.path()).join("swin");
    assert!(task_dir.join(REFUSED_FILE).exists());
    let refusal = Refusal::load(&task_dir, "swin").unwrap().unwrap();
    assert_eq!(refusal.error, DEVICE_ERROR);
    assert!(refusal.message.contains("Traceback"));

    // A later run (more iterations) refuses it again from the journal, without a preflight;
    // the healthy task is preflighted again by this process before its first teacher call.
    let report = run(&cfg(6), &StageContext::for_tests(dir.path()), &t, &ev).unwrap();
    assert_eq!(ev.preflights.load(Ordering::SeqCst), 3);
    assert_eq!(report.counters["tasks_refused_reference"], 1);
    assert_eq!(report.counters["tasks_done"], 1);
    assert_eq!(t.prompts.lock().unwrap().len(), 6);
    assert!(
        t.prompts
            .lock()
            .unwrap()
            .iter()
            .all(|p| !p.contains("DEVICEBROKEN"))
    );
    let rows: Vec<StepRow> = read_table(&StepRow::path_in(dir.path())).unwrap();
    assert_eq!(rows.len(), 6);
    assert!(rows.iter().all(|r| r.task_id == "healthy"));
}

#[test]
fn an_evaluator_that_cannot_answer_refuses_nothing_and_a_rerun_preflights_again() {
    let dir = tempfile::tempdir().unwrap();
    write_tasks(dir.path(), &default_tasks(2));
    let t = teacher();
    let ev = FakeEvaluator::new();
    ev.device_down.store(true, Ordering::SeqCst);
    let err = run(&cfg(3), &StageContext::for_tests(dir.path()), &t, &ev).unwrap_err();
    assert!(
        err.to_string().contains("preflight") && err.to_string().contains("taken out"),
        "{err}"
    );
    assert!(t.prompts.lock().unwrap().is_empty(), "no teacher call");
    for task in ["task0", "task1"] {
        assert!(
            !tasks_root(dir.path())
                .join(task)
                .join(REFUSED_FILE)
                .exists()
        );
        assert_eq!(endings(dir.path())[task].ending, "aborted");
    }

    // The devices are back: the rerun preflights both tasks and runs them.
    ev.device_down.store(false, Ordering::SeqCst);
    let report = run(&cfg(3), &StageContext::for_tests(dir.path()), &t, &ev).unwrap();
    assert_eq!(report.counters["tasks_done"], 2);
    assert_eq!(ev.preflights.load(Ordering::SeqCst), 4);
    assert!(!report.counters.contains_key("tasks_refused_reference"));
    let rows: Vec<StepRow> = read_table(&StepRow::path_in(dir.path())).unwrap();
    assert_eq!(rows.len(), 6);
}

#[test]
fn a_corrupt_refusal_record_is_an_error_naming_the_task_and_its_file() {
    let dir = tempfile::tempdir().unwrap();
    write_tasks(dir.path(), &default_tasks(1));
    let task_dir = tasks_root(dir.path()).join("task0");
    std::fs::create_dir_all(&task_dir).unwrap();
    std::fs::write(task_dir.join(REFUSED_FILE), "{not json").unwrap();
    let t = teacher();
    let err = run(
        &cfg(2),
        &StageContext::for_tests(dir.path()),
        &t,
        &FakeEvaluator::new(),
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("task0") && err.contains(REFUSED_FILE), "{err}");
    assert!(t.prompts.lock().unwrap().is_empty());
}
