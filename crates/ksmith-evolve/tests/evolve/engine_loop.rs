//! The loop end to end with a scripted teacher and evaluator: outcomes of every kind,
//! determinism, resume from a journal, checkpoint round trip, stage output and skipping.

#![allow(clippy::unwrap_used)]

use std::collections::HashSet;

use crate::support::*;
use ksmith_core::context::StageContext;
use ksmith_core::evaluation::Backend;
use ksmith_core::table::{Table, read_table};
use ksmith_core::tables::{EditOutcome, StepKind, StepRow};
use ksmith_evolve::engine::{TaskRun, TaskState};
use ksmith_evolve::prompt::Prompts;
use ksmith_evolve::{RolloutConfig, run, tasks_root};

fn cfg(iterations: u32) -> RolloutConfig {
    RolloutConfig {
        iterations,
        num_islands: 3,
        migration_interval: 6,
        checkpoint_every: 4,
        parallel_tasks: 2,
        ..Default::default()
    }
}

fn rollout(workdir: &std::path::Path, c: &RolloutConfig) -> Vec<StepRow> {
    let teacher = ScriptedTeacher::new();
    let evaluator = FakeEvaluator::new();
    let report = run(c, &StageContext::for_tests(workdir), &teacher, &evaluator).unwrap();
    assert!(!report.skipped);
    read_table(&StepRow::path_in(workdir)).unwrap()
}

#[test]
fn loop_records_every_outcome_and_improves() {
    let dir = tempfile::tempdir().unwrap();
    write_tasks(dir.path(), &default_tasks(3));
    let c = cfg(40);
    let rows = rollout(dir.path(), &c);
    assert_eq!(rows.len(), 3 * 40);
    for t in 0..3 {
        let its: Vec<u32> = rows
            .iter()
            .filter(|r| r.task_id == format!("task{t}"))
            .map(|r| r.iteration)
            .collect();
        assert_eq!(its, (0..40).collect::<Vec<_>>());
    }
    let outcomes: HashSet<EditOutcome> = rows.iter().map(|r| r.edit_outcome).collect();
    for o in [
        EditOutcome::Applied,
        EditOutcome::NoOp,
        EditOutcome::Unparseable,
        EditOutcome::SearchNotFound,
        EditOutcome::Truncated,
    ] {
        assert!(outcomes.contains(&o), "{o:?} missing from {outcomes:?}");
    }
    let kinds: HashSet<StepKind> = rows.iter().map(|r| r.kind).collect();
    assert!(kinds.contains(&StepKind::Translate) && kinds.contains(&StepKind::Optimize));
    assert!(
        rows.iter()
            .all(|r| r.prompt_tokens > 0 && !r.user_prompt.is_empty())
    );
    // Failed edits carry their reason, and the next prompt on the island shows it.
    for (i, r) in rows.iter().enumerate() {
        if !r.edit_outcome.has_program() {
            let e = r.edit_error.as_deref().unwrap();
            assert!(!e.is_empty());
            let next = rows[i + 1..]
                .iter()
                .find(|n| n.task_id == r.task_id && n.island == r.island);
            if let Some(n) = next {
                assert!(
                    n.user_prompt
                        .contains(&format!("iteration {} (", r.iteration)),
                    "feedback of step {} missing from the next prompt",
                    r.iteration
                );
            }
        }
    }
    // Evolution makes progress: some step beats its correct parent and becomes a new best.
    assert!(rows.iter().any(|r| r.is_new_best && r.parent_correct));
    let best = rows.iter().filter_map(|r| r.speedup).fold(0.0f64, f64::max);
    assert!(best > 1.0, "best speedup {best}");
    // Translation parents are the seed; optimize parents were correct.
    for r in &rows {
        match r.kind {
            StepKind::Translate => assert!(r.parent_step_id.is_none()),
            StepKind::Optimize => assert!(r.parent_correct),
            StepKind::Repair => assert!(!r.parent_correct && r.parent_step_id.is_some()),
        }
        if r.edit_outcome == EditOutcome::Applied {
            assert!(r.eval_result().is_some() && r.program.is_some());
        }
    }
    let report: ksmith_core::report::StageReport = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("reports/rollout.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(report.rows_written, 120);
    assert_eq!(report.counters["tasks_done"], 3);
    assert!(report.counters["programs_migrated"] > 0);
}

#[test]
fn same_seed_same_steps_other_seed_other_steps() {
    let c = cfg(24);
    let (a, b, d) = (
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
    );
    for w in [&a, &b, &d] {
        write_tasks(w.path(), &default_tasks(2));
    }
    let ra: Vec<StepRow> = rollout(a.path(), &c).into_iter().map(comparable).collect();
    let rb: Vec<StepRow> = rollout(b.path(), &c).into_iter().map(comparable).collect();
    assert_eq!(ra, rb);
    let other = RolloutConfig { seed: 99, ..c };
    let rd: Vec<StepRow> = rollout(d.path(), &other)
        .into_iter()
        .map(comparable)
        .collect();
    assert_ne!(ra, rd);
}

#[test]
fn rerun_skips_and_longer_run_extends_without_redoing() {
    let dir = tempfile::tempdir().unwrap();
    write_tasks(dir.path(), &default_tasks(2));
    let short = cfg(10);
    let first = rollout(dir.path(), &short);
    let teacher = ScriptedTeacher::new();
    let ev = FakeEvaluator::new();
    let ctx = StageContext::for_tests(dir.path());
    let again = run(&short, &ctx, &teacher, &ev).unwrap();
    assert!(again.skipped);
    assert_eq!(teacher.calls.load(std::sync::atomic::Ordering::SeqCst), 0);
    // Another teacher or evaluator identity re-runs the stage, but every step is restored.
    let other = ksmith_evolve::run_with_identity(&short, &ctx, &teacher, &ev, "teacher-b").unwrap();
    assert!(!other.skipped);
    assert_eq!(other.counters["last_process/steps_new"], 0);
    assert_eq!(
        other.counters["steps_new"], 20,
        "counted over both processes"
    );
    assert_eq!(teacher.calls.load(std::sync::atomic::Ordering::SeqCst), 0);
    let back: Vec<StepRow> = read_table(&StepRow::path_in(dir.path())).unwrap();
    assert_eq!(back, first);
    let long = cfg(16);
    let report = run(&long, &ctx, &teacher, &ev).unwrap();
    assert_eq!(report.counters["last_process/steps_new"], 12);
    assert_eq!(report.counters["steps_new"], 32);
    assert_eq!(report.counters["rollout_processes"], 3);
    // Each task was checkpointed when it finished: nothing to replay.
    assert_eq!(report.counters["steps_replayed"], 0);
    let rows: Vec<StepRow> = read_table(&StepRow::path_in(dir.path())).unwrap();
    assert_eq!(rows.len(), 32);
    let kept: Vec<StepRow> = rows.iter().filter(|r| r.iteration < 10).cloned().collect();
    assert_eq!(kept, first, "earlier steps are kept as they were");
    // The extended run equals a fresh 16-iteration run.
    let fresh = tempfile::tempdir().unwrap();
    write_tasks(fresh.path(), &default_tasks(2));
    let f: Vec<StepRow> = rollout(fresh.path(), &long)
        .into_iter()
        .map(comparable)
        .collect();
    let r: Vec<StepRow> = rows.into_iter().map(comparable).collect();
    assert_eq!(r, f);
}

#[test]
fn checkpoint_restores_the_exact_state() {
    let dir = tempfile::tempdir().unwrap();
    let c = cfg(12);
    let prompts = Prompts::load(None).unwrap();
    let teacher = ScriptedTeacher::new();
    let ev = FakeEvaluator::new();
    let tdir = dir.path().join("t");
    let state: TaskState = {
        let mut run = TaskRun::open("t", REFERENCE, &c, &prompts, &tdir).unwrap();
        for _ in 0..9 {
            run.step(&teacher, &ev).unwrap();
        }
        run.checkpoint().unwrap();
        run.state().clone()
    };
    let back = TaskRun::open("t", REFERENCE, &c, &prompts, &tdir).unwrap();
    assert_eq!(
        back.replayed, 0,
        "restored from the checkpoint, nothing to replay"
    );
    assert_eq!(back.state(), &state);
    // Without the checkpoint, replaying the journal gives the same state.
    std::fs::remove_file(tdir.join("checkpoint.json")).unwrap();
    let replayed = TaskRun::open("t", REFERENCE, &c, &prompts, &tdir).unwrap();
    assert_eq!(replayed.replayed, 9);
    assert_eq!(replayed.state(), &state);
    // A corrupt checkpoint falls back to the journal, with a note.
    std::fs::write(tdir.join("checkpoint.json"), b"{\"format\":").unwrap();
    let noted = TaskRun::open("t", REFERENCE, &c, &prompts, &tdir).unwrap();
    assert_eq!(noted.state(), &state);
    assert!(noted.notes[0].contains("unreadable checkpoint"));
}

#[test]
fn torn_journal_tail_is_cut_and_redone() {
    let dir = tempfile::tempdir().unwrap();
    let c = cfg(8);
    let prompts = Prompts::load(None).unwrap();
    let teacher = ScriptedTeacher::new();
    let ev = FakeEvaluator::new();
    let tdir = dir.path().join("t");
    let mut all = Vec::new();
    {
        let mut run = TaskRun::open("t", REFERENCE, &c, &prompts, &tdir).unwrap();
        for _ in 0..5 {
            all.push(run.step(&teacher, &ev).unwrap());
        }
    }
    // A crash in the middle of writing step 5: half a line at the end.
    let journal = tdir.join("steps.jsonl");
    let mut bytes = std::fs::read(&journal).unwrap();
    let line = serde_json::to_vec(&all[0]).unwrap();
    bytes.extend_from_slice(&line[..line.len() / 2]);
    std::fs::write(&journal, &bytes).unwrap();
    let mut run = TaskRun::open("t", REFERENCE, &c, &prompts, &tdir).unwrap();
    assert_eq!(run.state().steps_done, 5);
    while !run.finished() {
        run.step(&teacher, &ev).unwrap();
    }
    let rows = ksmith_evolve::journal::read_journal("t", &journal).unwrap();
    assert_eq!(
        rows.iter().map(|r| r.iteration).collect::<Vec<_>>(),
        (0..8).collect::<Vec<_>>()
    );
    // A corrupt complete line is an error naming the file and line.
    let mut text = std::fs::read_to_string(&journal).unwrap();
    text.insert_str(0, "{not json}\n");
    std::fs::write(&journal, text).unwrap();
    let err = TaskRun::open("t", REFERENCE, &c, &prompts, &tdir)
        .err()
        .unwrap();
    assert!(err.to_string().contains("line 1"), "{err}");
    assert!(err.to_string().contains("steps.jsonl"), "{err}");
}

#[test]
fn changed_search_config_is_refused_and_force_starts_over() {
    let dir = tempfile::tempdir().unwrap();
    write_tasks(dir.path(), &default_tasks(1));
    rollout(dir.path(), &cfg(6));
    let changed = RolloutConfig {
        num_islands: 2,
        ..cfg(6)
    };
    let teacher = ScriptedTeacher::new();
    let ev = FakeEvaluator::new();
    let mut ctx = StageContext::for_tests(dir.path());
    let err = run(&changed, &ctx, &teacher, &ev).unwrap_err();
    assert!(err.to_string().contains("--force"), "{err}");
    assert!(err.to_string().contains("task0"), "{err}");
    ctx.force = true;
    let r = run(&changed, &ctx, &teacher, &ev).unwrap();
    assert_eq!(r.counters["steps_new"], 6);
    assert!(tasks_root(dir.path()).join("task0/steps.jsonl").exists());
}

#[test]
fn broken_reference_stops_only_that_task() {
    let dir = tempfile::tempdir().unwrap();
    let mut tasks = default_tasks(2);
    tasks.push(task("bad", &format!("{REFERENCE}\nREFBROKEN = 1\n")));
    write_tasks(dir.path(), &tasks);
    let teacher = ScriptedTeacher::new();
    let ev = FakeEvaluator::new();
    let report = run(&cfg(5), &StageContext::for_tests(dir.path()), &teacher, &ev).unwrap();
    assert_eq!(report.counters["tasks_broken_reference"], 1);
    assert_eq!(report.counters["tasks_done"], 2);
    let rows: Vec<StepRow> = read_table(&StepRow::path_in(dir.path())).unwrap();
    assert!(rows.iter().all(|r| r.task_id != "bad"));
}

#[test]
fn missing_tasks_table_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let err = run(
        &cfg(2),
        &StageContext::for_tests(dir.path()),
        &ScriptedTeacher::new(),
        &FakeEvaluator::new(),
    )
    .unwrap_err();
    assert!(err.to_string().contains("tasks.parquet"), "{err}");
}

#[test]
fn a_second_rollout_on_the_same_workdir_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    write_tasks(dir.path(), &default_tasks(1));
    let held = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open({
            std::fs::create_dir_all(dir.path().join("rollout")).unwrap();
            dir.path().join("rollout/rollout.lock")
        })
        .unwrap();
    held.lock().unwrap();
    let err = run(
        &cfg(2),
        &StageContext::for_tests(dir.path()),
        &ScriptedTeacher::new(),
        &FakeEvaluator::new(),
    )
    .unwrap_err();
    assert!(err.to_string().contains("another rollout"), "{err}");
    held.unlock().unwrap();
    rollout(dir.path(), &cfg(2));
}

#[test]
fn checkpoint_interval_grows_with_the_archive() {
    let dir = tempfile::tempdir().unwrap();
    let c = cfg(12);
    let prompts = Prompts::load(None).unwrap();
    let mut run = TaskRun::open("t", REFERENCE, &c, &prompts, dir.path()).unwrap();
    assert_eq!(run.checkpoint_interval(), c.checkpoint_every);
    let a = run.archive_mut();
    for i in 0..1000 {
        a.add_program(
            kernel_body(1.0 + f64::from(i) / 100.0, &format!("# v{i}")),
            0,
            "s",
            0,
            0,
            result(ksmith_core::evaluation::EvalStatus::Correct, Some(1.0), ""),
        );
    }
    assert_eq!(run.checkpoint_interval(), 20);
}

/// The scripted teacher, with a long tail of prose after every answer and a long reasoning.
struct Verbose(ScriptedTeacher);

impl ksmith_core::chat::ChatClient for Verbose {
    fn chat(
        &self,
        req: &ksmith_core::chat::ChatRequest,
    ) -> Result<ksmith_core::chat::ChatResponse, ksmith_core::chat::ChatError> {
        let mut r = self.0.chat(req)?;
        r.content
            .push_str(&format!("\n\nNotes: {}", "é".repeat(40_000)));
        r.reasoning = Some("thinking ".repeat(10_000));
        Ok(r)
    }
}

#[test]
fn long_answers_are_stored_up_to_the_cap_with_their_full_size() {
    let capped = tempfile::tempdir().unwrap();
    let whole = tempfile::tempdir().unwrap();
    let small = RolloutConfig {
        max_stored_answer_bytes: 4096,
        ..cfg(8)
    };
    let large = RolloutConfig {
        max_stored_answer_bytes: 1 << 20,
        ..cfg(8)
    };
    let mut rows = Vec::new();
    for (dir, c) in [(&capped, &small), (&whole, &large)] {
        write_tasks(dir.path(), &default_tasks(1));
        let ctx = StageContext::for_tests(dir.path());
        run(
            c,
            &ctx,
            &Verbose(ScriptedTeacher::new()),
            &FakeEvaluator::new(),
        )
        .unwrap();
        rows.push(read_table::<StepRow>(&StepRow::path_in(dir.path())).unwrap());
    }
    let (cut, full) = (&rows[0], &rows[1]);
    for (c, f) in cut.iter().zip(full) {
        assert!(
            c.response.len() <= 4096 && c.response_cut(),
            "{}",
            c.response.len()
        );
        assert!(
            f.response.starts_with(&c.response),
            "cut at a character boundary"
        );
        assert_eq!(c.response_bytes, f.response.len() as u64);
        assert!(!f.response_cut());
        let reasoning = c.reasoning.as_deref().unwrap();
        assert_eq!(reasoning.len(), 4096);
        assert_eq!(c.reasoning_bytes, 90_000);
        // The edit read the whole answer: same programs, same outcomes, same evaluations.
        assert_eq!(
            (&c.program, c.edit_outcome, c.eval_status),
            (&f.program, f.edit_outcome, f.eval_status)
        );
    }
}

/// Records the alternate size sets each evaluation request carried, then evaluates as the fake.
struct SizeRecorder {
    inner: FakeEvaluator,
    seen: std::sync::Mutex<Vec<(String, Vec<ksmith_core::evaluation::SizeSet>)>>,
}

impl ksmith_core::evaluation::Evaluator for SizeRecorder {
    fn evaluate(
        &self,
        r: &ksmith_core::evaluation::EvalRequest,
    ) -> Result<ksmith_core::evaluation::EvalResult, ksmith_core::evaluation::EvalError> {
        self.seen
            .lock()
            .unwrap()
            .push((r.task_id.clone(), r.alt_sizes.clone()));
        self.inner.evaluate(r)
    }
    fn preflight(
        &self,
        r: &ksmith_core::evaluation::EvalRequest,
    ) -> Result<ksmith_core::evaluation::Preflight, ksmith_core::evaluation::EvalError> {
        self.inner.preflight(r)
    }
}

#[test]
fn the_tasks_alternate_sizes_reach_every_evaluation_and_bad_ones_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let mut sized = task("sized", REFERENCE);
    sized.alt_sizes = r#"[{"batch_size": 8, "dim": 2048}, {"batch_size": 4, "dim": 512}]"#.into();
    let plain = task("plain", REFERENCE);
    let mut bad = task("bad", REFERENCE);
    bad.alt_sizes = r#"{"dim": "large"}"#.into();
    write_tasks(dir.path(), &[sized, plain, bad]);
    let ev = SizeRecorder {
        inner: FakeEvaluator::new(),
        seen: Default::default(),
    };
    // The bad task fails the stage (after the others ran), naming the task and the column.
    let err = run(
        &cfg(3),
        &StageContext::for_tests(dir.path()),
        &ScriptedTeacher::new(),
        &ev,
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("task bad") && err.contains("alt_sizes"),
        "{err}"
    );
    let seen = ev.seen.lock().unwrap();
    let of = |id: &str| -> Vec<_> {
        seen.iter()
            .filter(|(t, _)| t == id)
            .map(|(_, s)| s.clone())
            .collect()
    };
    let sized_sets = of("sized");
    assert!(!sized_sets.is_empty());
    for sets in &sized_sets {
        assert_eq!(sets.len(), 2);
        assert_eq!(sets[0]["batch_size"], 8);
        assert_eq!(sets[1]["dim"], 512);
    }
    assert!(of("plain").iter().all(Vec::is_empty) && !of("plain").is_empty());
    assert!(of("bad").is_empty());
}

/// The scripted evaluator with a GPU's baselines: the eager reference takes 1 ms, its
/// speed-of-light is 0.95 ms for a reference marked `SATURATED` (no headroom) and 0.2 ms
/// otherwise, and `torch.compile` is 1.25x faster than eager.
struct WithBaselines(FakeEvaluator);

impl ksmith_core::evaluation::Evaluator for WithBaselines {
    fn evaluate(
        &self,
        r: &ksmith_core::evaluation::EvalRequest,
    ) -> Result<ksmith_core::evaluation::EvalResult, ksmith_core::evaluation::EvalError> {
        use ksmith_core::evaluation::{CompileBaseline, EvalStatus, SpeedOfLight};
        use ksmith_core::speedup_interval::timing_from_samples;
        let mut res = self.0.evaluate(r)?;
        if res.status == EvalStatus::StaticRejected {
            return Ok(res);
        }
        res.reference_timing = Some(timing_from_samples(vec![vec![1.0; 5]], vec![]));
        res.speed_of_light = Some(SpeedOfLight {
            ms: Some(if r.reference.contains("SATURATED") {
                0.95
            } else {
                0.2
            }),
            why: None,
            bound: Some("memory".into()),
            gpu: Some("H200 SXM".into()),
            flops: 0.0,
            bytes: 1e9,
            dtype: "float32".into(),
            tf32_policy: "torch_flags".into(),
        });
        res.compile_baseline = Some(CompileBaseline {
            mode: "default".into(),
            timing: Some(timing_from_samples(vec![vec![0.8; 5]], vec![vec![1.0; 5]])),
            speedup_over_eager: Some(1.25),
            compile_s: Some(3.0),
            why: None,
        });
        Ok(res)
    }
    fn preflight(
        &self,
        r: &ksmith_core::evaluation::EvalRequest,
    ) -> Result<ksmith_core::evaluation::Preflight, ksmith_core::evaluation::EvalError> {
        self.0.preflight(r)
    }
}

#[test]
fn tasks_without_headroom_are_counted_and_left_out_when_configured() {
    use ksmith_evolve::{TaskEnding, TaskHeadroom, endings_path, headroom_path};
    use std::collections::BTreeMap;
    let saturated = format!("# SATURATED\n{REFERENCE}");
    let tasks = vec![task("roomy", REFERENCE), task("full", &saturated)];
    let go = |workdir: &std::path::Path, c: &RolloutConfig| {
        let report = run(
            c,
            &StageContext::for_tests(workdir),
            &ScriptedTeacher::new(),
            &WithBaselines(FakeEvaluator::new()),
        )
        .unwrap();
        let rows: Vec<StepRow> = read_table(&StepRow::path_in(workdir)).unwrap();
        (report, rows)
    };
    let steps_of = |rows: &[StepRow], t: &str| rows.iter().filter(|r| r.task_id == t).count();

    // kept (the default): counted, recorded, every step run
    let dir = tempfile::tempdir().unwrap();
    write_tasks(dir.path(), &tasks);
    let (report, rows) = go(dir.path(), &cfg(6));
    assert_eq!((steps_of(&rows, "roomy"), steps_of(&rows, "full")), (6, 6));
    assert_eq!(report.counters.get("tasks_no_headroom"), Some(&1));
    assert_eq!(report.counters.get("tasks_with_headroom"), Some(&1));
    let headroom: BTreeMap<String, TaskHeadroom> =
        serde_json::from_slice(&std::fs::read(headroom_path(dir.path())).unwrap()).unwrap();
    let full = headroom["full"].headroom.unwrap();
    assert!(full.none && (full.eager_sol_fraction - 0.95).abs() < 1e-12);
    assert_eq!(full.compile_sol_fraction, Some(0.95 / 0.8));
    let roomy = headroom["roomy"].headroom.unwrap();
    assert!(!roomy.none && (roomy.compile_sol_fraction.unwrap() - 0.25).abs() < 1e-12);
    // every correct timed step carries its speedup over compile
    let timed: Vec<&StepRow> = rows.iter().filter(|r| r.speedup.is_some()).collect();
    assert!(!timed.is_empty());
    for r in timed {
        let want = r.speedup.unwrap() / 1.25;
        assert!(
            (r.speedup_over_compile.unwrap() - want).abs() < 1e-12,
            "{r:?}"
        );
    }

    // left out: the saturated task stops after its first evaluated step, and stays stopped
    let dir = tempfile::tempdir().unwrap();
    write_tasks(dir.path(), &tasks);
    let skip = RolloutConfig {
        skip_no_headroom: true,
        ..cfg(6)
    };
    let (report, rows) = go(dir.path(), &skip);
    assert_eq!(steps_of(&rows, "roomy"), 6);
    let first = steps_of(&rows, "full");
    assert!(first < 6, "stopped early: {first} steps");
    assert_eq!(report.counters.get("tasks_left_out_no_headroom"), Some(&1));
    let endings: BTreeMap<String, TaskEnding> =
        serde_json::from_slice(&std::fs::read(endings_path(dir.path())).unwrap()).unwrap();
    assert_eq!(endings["full"].ending, "no_headroom");
    assert!(
        endings["full"].reason.contains("95 % of speed-of-light"),
        "{:?}",
        endings["full"]
    );
    let longer = RolloutConfig {
        iterations: 9,
        ..skip
    };
    let (_, rows) = go(dir.path(), &longer);
    assert_eq!(
        (steps_of(&rows, "roomy"), steps_of(&rows, "full")),
        (9, first)
    );
}
/// The scripted evaluator, recording the backend of every request.
struct BackendRecorder {
    inner: FakeEvaluator,
    seen: std::sync::Mutex<Vec<(String, Backend)>>,
}

impl ksmith_core::evaluation::Evaluator for BackendRecorder {
    fn evaluate(
        &self,
        r: &ksmith_core::evaluation::EvalRequest,
    ) -> Result<ksmith_core::evaluation::EvalResult, ksmith_core::evaluation::EvalError> {
        self.seen
            .lock()
            .unwrap()
            .push((r.task_id.clone(), r.backend));
        self.inner.evaluate(r)
    }
    fn preflight(
        &self,
        r: &ksmith_core::evaluation::EvalRequest,
    ) -> Result<ksmith_core::evaluation::Preflight, ksmith_core::evaluation::EvalError> {
        self.inner.preflight(r)
    }
}

#[test]
fn a_run_mixing_backends_prompts_evaluates_and_records_each_tasks_own() {
    let dir = tempfile::tempdir().unwrap();
    write_tasks(
        dir.path(),
        &[task("in-cuda", REFERENCE), task("in-triton", REFERENCE)],
    );
    let c = RolloutConfig {
        backend: Backend::Cuda,
        task_backends: [("in-triton".to_string(), Backend::Triton)].into(),
        ..cfg(3)
    };
    let ev = BackendRecorder {
        inner: FakeEvaluator::new(),
        seen: Default::default(),
    };
    run(
        &c,
        &StageContext::for_tests(dir.path()),
        &ScriptedTeacher::new(),
        &ev,
    )
    .unwrap();
    let rows: Vec<StepRow> = read_table(&StepRow::path_in(dir.path())).unwrap();
    assert_eq!(rows.len(), 6);
    for r in &rows {
        let want = if r.task_id == "in-cuda" {
            Backend::Cuda
        } else {
            Backend::Triton
        };
        assert_eq!(r.backend, want, "{}", r.task_id);
        // the backend's own rules and seed
        assert_eq!(
            r.system_prompt.contains("load_inline"),
            want == Backend::Cuda,
            "{}",
            r.task_id
        );
        if r.kind == StepKind::Translate {
            assert_eq!(
                r.parent_program.contains("import triton\n"),
                want == Backend::Triton
            );
        }
    }
    let seen = ev.seen.lock().unwrap();
    assert!(!seen.is_empty());
    for (task, backend) in seen.iter() {
        let want = if task == "in-cuda" {
            Backend::Cuda
        } else {
            Backend::Triton
        };
        assert_eq!(*backend, want, "{task}");
    }
}
