//! Kill -9 in the middle of a rollout, resume, and compare with an uninterrupted run: no step
//! lost, none duplicated, every step identical.

#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::*;
use ksmith_core::context::StageContext;
use ksmith_core::table::{Table, read_table};
use ksmith_core::tables::StepRow;
use ksmith_evolve::{RolloutConfig, run, tasks_root};

const CHILD_ENV: &str = "KSMITH_EVOLVE_CHILD_WORKDIR";

fn cfg() -> RolloutConfig {
    RolloutConfig {
        iterations: 20,
        num_islands: 3,
        migration_interval: 5,
        checkpoint_every: 3,
        parallel_tasks: 2,
        ..Default::default()
    }
}

fn evaluator(delay_ms: u64) -> FakeEvaluator {
    FakeEvaluator {
        delay: Duration::from_millis(delay_ms),
        ..FakeEvaluator::new()
    }
}

/// The child side: a plain rollout in the work directory named by the environment. It is
/// ignored in normal runs and started by the test below, which kills it.
#[test]
#[ignore = "run as a child process by killed_rollout_resumes_identically"]
fn child_rollout() {
    let Ok(dir) = std::env::var(CHILD_ENV) else {
        return;
    };
    let ctx = StageContext::for_tests(Path::new(&dir));
    run(&cfg(), &ctx, &ScriptedTeacher::new(), &evaluator(8)).unwrap();
}

fn journal_lines(workdir: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(tasks_root(workdir)) else {
        return 0;
    };
    entries
        .filter_map(|e| e.ok())
        .map(|e| {
            std::fs::read(e.path().join("steps.jsonl"))
                .map(|b| b.iter().filter(|&&c| c == b'\n').count())
                .unwrap_or(0)
        })
        .sum()
}

#[test]
fn killed_rollout_resumes_identically() {
    let tasks = default_tasks(3);
    let reference_dir = tempfile::tempdir().unwrap();
    write_tasks(reference_dir.path(), &tasks);
    run(
        &cfg(),
        &StageContext::for_tests(reference_dir.path()),
        &ScriptedTeacher::new(),
        &evaluator(0),
    )
    .unwrap();
    let expected: Vec<StepRow> = read_table::<StepRow>(&StepRow::path_in(reference_dir.path()))
        .unwrap()
        .into_iter()
        .map(comparable)
        .collect();
    assert_eq!(expected.len(), 60);

    let exe = std::env::current_exe().unwrap();
    for kill_after in [2usize, 23, 47] {
        let dir = tempfile::tempdir().unwrap();
        write_tasks(dir.path(), &tasks);
        let mut child = Command::new(&exe)
            .args([
                "resume_after_kill::child_rollout",
                "--exact",
                "--ignored",
                "--nocapture",
            ])
            .env(CHILD_ENV, dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(60);
        while journal_lines(dir.path()) < kill_after {
            assert!(Instant::now() < deadline, "child made no progress");
            if child.try_wait().unwrap().is_some() {
                break;
            }
            std::thread::sleep(Duration::from_micros(200));
        }
        child.kill().ok(); // SIGKILL
        let status = child.wait().unwrap();
        assert!(
            !status.success(),
            "the child must be killed mid-run (kill_after {kill_after})"
        );
        let done_before = journal_lines(dir.path());
        assert!(done_before < 60, "killed before the end");

        let teacher = ScriptedTeacher::new();
        let report = run(
            &cfg(),
            &StageContext::for_tests(dir.path()),
            &teacher,
            &evaluator(0),
        )
        .unwrap();
        let got: Vec<StepRow> = read_table::<StepRow>(&StepRow::path_in(dir.path()))
            .unwrap()
            .into_iter()
            .map(comparable)
            .collect();
        assert_eq!(
            got.len(),
            60,
            "kill_after {kill_after}: no lost, no duplicated step"
        );
        assert_eq!(
            got, expected,
            "kill_after {kill_after}: resumed run differs"
        );
        let new = report.counters["steps_new"] as usize;
        assert!(new >= 60 - done_before, "every missing step was run");
        assert!(
            new <= 60 - done_before + 1,
            "at most the torn step is redone"
        );
    }
}
