//! Renders a report of a synthetic work directory and checks it in headless Chromium: the page
//! loads offline and every plot is present with its marks.

#![allow(clippy::unwrap_used)] // Test fixtures: a failure here is a test failure.

use std::path::Path;
use std::process::Command;

use ksmith_core::evaluation::{EvalStatus, HackKind};
use ksmith_core::report::StageReport;
use ksmith_core::table::{Table, read_table, write_table};
use ksmith_core::tables::{
    ClusterRow, DedupRow, EditOutcome, ModuleRow, ModuleStatus, ProbeRow, ProbeStatus, RepoRow,
    RepoStatus, StepKind, StepRow, TaskRow,
};

fn module(i: usize) -> ModuleRow {
    ModuleRow {
        id: format!("m{i}"),
        repo: "r".into(),
        commit: "c".into(),
        path: "a.py".into(),
        class_name: format!("C{i}"),
        line: 1,
        status: ModuleStatus::Ok,
        reason: None,
        reason_code: None,
        program: Some("class Model: pass".into()),
        deps: vec![],
        imports: vec![],
        lines: 1,
        license: Some("MIT".into()),
        stars: None,
        arg_sources: Vec::new(),
    }
}

fn step(task: &str, iteration: u32, correct: bool, speedup: Option<f64>) -> StepRow {
    StepRow {
        step_id: format!("{task}-{iteration}"),
        task_id: task.into(),
        iteration,
        island: 0,
        kind: if iteration == 0 {
            StepKind::Translate
        } else {
            StepKind::Optimize
        },
        parent_id: "p".into(),
        parent_step_id: None,
        parent_program: String::new(),
        parent_correct: false,
        parent_speedup: None,
        parent_was_best: true,
        system_prompt: String::new(),
        user_prompt: String::new(),
        response: String::new(),
        response_bytes: 0,
        reasoning: None,
        reasoning_bytes: 0,
        finish_reason: None,
        teacher_model: Some("teacher".into()),
        prompt_tokens: 100,
        completion_tokens: 50,
        cached: false,
        edit_format: None,
        edit_outcome: EditOutcome::Applied,
        edit_error: None,
        program_id: None,
        program: None,
        eval_status: Some(if correct {
            EvalStatus::Correct
        } else {
            EvalStatus::Hacked
        }),
        correct,
        speedup,
        hack: (!correct).then_some(HackKind::TorchFallback),
        eval_json: None,
        is_new_best: false,
        started_at_ms: 0,
        finished_at_ms: 0,
    }
}

fn write_workdir(dir: &Path) {
    let mut repo = RepoRow::failed("r", "file:///r", "x");
    repo.status = RepoStatus::Ok;
    repo.reason = None;
    write_table(&RepoRow::path_in(dir), &[repo], "fp").unwrap();
    let modules: Vec<ModuleRow> = (0..4).map(module).collect();
    write_table(&ModuleRow::path_in(dir), &modules, "fp").unwrap();
    let probes: Vec<ProbeRow> = modules
        .iter()
        .map(|m| ProbeRow {
            program: m.program.clone(),
            output_shapes: vec!["[4]".into()],
            output_dtypes: vec!["torch.float32".into()],
            param_count: Some(1),
            forward_ms: Some(1.0),
            cpu_time_ms: 1.0,
            attempts: 1,
            ..ProbeRow::empty(&m.id, "r", &m.class_name, ProbeStatus::Ok)
        })
        .collect();
    write_table(&ProbeRow::path_in(dir), &probes, "fp").unwrap();
    let dedup: Vec<DedupRow> = modules
        .iter()
        .map(|m| DedupRow {
            module_id: m.id.clone(),
            kept: m.id != "m3",
            method: None,
            duplicate_of: None,
            similarity: None,
            contaminated_via: None,
        })
        .collect();
    write_table(&DedupRow::path_in(dir), &dedup, "fp").unwrap();
    let clusters: Vec<ClusterRow> = (0..3)
        .map(|i| ClusterRow {
            module_id: format!("m{i}"),
            cluster: i % 2,
            is_center: i < 2,
            family: if i == 0 { "activation" } else { "attention" }.into(),
            family_rule: "ops".into(),
            level: if i == 0 { 1 } else { 3 },
            level_rule: "ops".into(),
            trivial: None,
        })
        .collect();
    write_table(&ClusterRow::path_in(dir), &clusters, "fp").unwrap();
    let tasks: Vec<TaskRow> = (0..2)
        .map(|i| TaskRow {
            task_id: format!("m{i}"),
            repo: "r".into(),
            class_name: format!("C{i}"),
            program: "class Model: pass".into(),
            family: "activation".into(),
            level: if i == 0 { 1 } else { 3 },
            cluster: i,
            license: None,
            selected_as: "center".into(),
            alt_sizes: "[]".into(),
        })
        .collect();
    write_table(&TaskRow::path_in(dir), &tasks, "fp").unwrap();
    let steps = vec![
        step("m0", 0, true, Some(0.8)),
        step("m0", 1, true, Some(1.6)),
        step("m0", 2, false, None),
        step("m1", 0, false, None),
        step("m1", 1, true, Some(0.5)),
    ];
    write_table(&StepRow::path_in(dir), &steps, "fp").unwrap();
}

#[test]
fn metrics_follow_the_papers_definitions() {
    let dir = tempfile::tempdir().unwrap();
    write_workdir(dir.path());
    let data = ksmith_report::collect(dir.path());
    let funnel: Vec<Option<u64>> = data.funnel.iter().map(|(_, n)| *n).collect();
    assert_eq!(
        funnel,
        [
            Some(1),
            Some(4),
            Some(4),
            Some(3),
            Some(2),
            Some(5),
            None,
            None
        ]
    );
    assert_eq!(data.families.get("attention"), Some(&2));
    let l1 = data.level_metrics.iter().find(|m| m.level == 1).unwrap();
    let l3 = data.level_metrics.iter().find(|m| m.level == 3).unwrap();
    // m0 (level 1): correct, best 1.6; m1 (level 3): correct but slower than eager -> 0.
    assert_eq!(
        (l1.correctness, l1.fast_1, l1.avg_speedup),
        (1.0, Some(1.0), Some(1.6))
    );
    assert_eq!(
        (l3.correctness, l3.fast_1, l3.avg_speedup),
        (1.0, Some(0.0), Some(0.0))
    );
    let m0 = data
        .trajectories
        .iter()
        .find(|t| t.task_id == "m0")
        .unwrap();
    assert_eq!(
        m0.best_so_far,
        vec![(0, Some(0.8)), (1, Some(1.6)), (2, Some(1.6))]
    );
    assert_eq!(data.hacks.get("torch_fallback"), Some(&2));
    assert_eq!(data.tokens, (500, 250, 0));
}

#[path = "support/chromium.rs"]
mod chromium;

fn headless(dir: &Path) -> Command {
    let mut cmd = Command::new(chromium::chromium());
    cmd.args(chromium::headless_args(dir));
    cmd
}

/// The DOM of `url` after Chromium rendered it.
fn dump_dom(dir: &Path, url: &str) -> String {
    let out = headless(dir)
        .arg("--dump-dom")
        .arg(url)
        .output()
        .expect("chromium runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn report_renders_in_headless_chromium_with_every_plot() {
    let dir = tempfile::tempdir().unwrap();
    write_workdir(dir.path());
    let html = ksmith_report::write_report(dir.path(), None).unwrap();
    let url = format!("file://{}", html.display());

    let dom = dump_dom(dir.path(), &url);
    for id in [
        "funnel",
        "families",
        "levels",
        "best-so-far",
        "best-so-far-mean",
        "statuses",
        "hacks",
    ] {
        assert!(
            dom.contains(&format!("id=\"{id}\"")),
            "plot {id} missing from the rendered DOM"
        );
    }
    assert_eq!(
        dom.matches("class=\"bar\"").count(),
        6 + 2 + 2 + 2 + 1,
        "bars in the DOM"
    );
    assert!(
        dom.matches("class=\"series\"").count() >= 3,
        "lines in the DOM"
    );
    assert!(
        !dom.contains("src=\"http"),
        "the page must not load anything from outside"
    );

    let png = dir.path().join("report.png");
    let shot = headless(dir.path())
        .arg(format!("--screenshot={}", png.display()))
        .arg("--window-size=1200,2600")
        .arg(&url)
        .output()
        .expect("chromium runs");
    assert!(
        shot.status.success(),
        "{}",
        String::from_utf8_lossy(&shot.stderr)
    );
    let bytes = std::fs::read(&png).expect("screenshot written");
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
    assert!(
        bytes.len() > 20_000,
        "screenshot looks blank ({} bytes)",
        bytes.len()
    );
}

/// A CPU run: nothing timed, one task aborted by the teacher, select and export reports.
fn write_cpu_workdir(dir: &Path) {
    write_workdir(dir);
    let mut steps: Vec<StepRow> = read_table(&StepRow::path_in(dir)).unwrap();
    for s in &mut steps {
        s.speedup = None;
    }
    write_table(&StepRow::path_in(dir), &steps, "fp").unwrap();
    let report = |stage: &str, dropped: &[(&str, u64)], counters: &[(&str, u64)]| {
        let mut r = StageReport::new(stage);
        r.dropped = dropped.iter().map(|(k, v)| (k.to_string(), *v)).collect();
        r.counters = counters.iter().map(|(k, v)| (k.to_string(), *v)).collect();
        let path = StageReport::path_in(dir, stage);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, serde_json::to_vec(&r).unwrap()).unwrap();
    };
    report(
        "rollout",
        &[],
        &[
            ("teacher_requests", 9),
            ("teacher_retries", 4),
            ("teacher_failures", 2),
            ("rollout_processes", 2),
            ("steps_new", 5),
        ],
    );
    report(
        "select",
        &[("grpo/parent_not_timed", 3), ("sft/not_correct", 2)],
        &[("sft_correctness_train", 2), ("steps", 5)],
    );
    std::fs::create_dir_all(dir.join("rollout")).unwrap();
    std::fs::write(
        dir.join("rollout/endings.json"),
        r#"{"m0": {"ending": "done", "reason": ""},
            "m1": {"ending": "aborted", "reason": "teacher unavailable: 503 overloaded"},
            "m9": {"ending": "broken_reference",
                   "reason": "Traceback (most recent call last):\n  File \"x.py\"\nRuntimeError: nondeterministic task\n\n"}}"#,
    )
    .unwrap();
    std::fs::create_dir_all(dir.join("datasets")).unwrap();
    std::fs::write(
        dir.join("datasets/export.json"),
        r#"{"fingerprint": "f", "token_counter": "approx_chars_div_4",
            "written": {"verl-sft": {"splits": {"train": 2}, "files": {},
                "lengths": {"counter": "x", "samples": 2,
                    "prompt": {"median": 1, "p99": 1, "max": 1100},
                    "response": {"median": 1, "p99": 1, "max": 300},
                    "total": {"median": 1, "p99": 1, "max": 1400}},
                "fit": {"prompt": 1536, "response": 512, "total": 1792}}},
            "omitted": {"verl-rl": "no rows: select's GRPO rule `best_steps` kept 0"}}"#,
    )
    .unwrap();
}

#[test]
fn a_cpu_run_tells_its_story_without_empty_charts() {
    let dir = tempfile::tempdir().unwrap();
    write_cpu_workdir(dir.path());
    let data = ksmith_report::collect(dir.path());
    assert!(!data.timed);
    let m1 = data.tasks.iter().find(|t| t.task_id == "m1").unwrap();
    assert_eq!(
        (m1.steps, m1.correct_steps, m1.hacks, m1.level),
        (2, 1, 1, 3)
    );
    assert_eq!(m1.ending.as_deref(), Some("aborted"));
    assert_eq!(data.teacher.get("teacher_retries"), Some(&4));
    assert!(!data.teacher.contains_key("steps_new"));

    let html = ksmith_report::write_report(dir.path(), None).unwrap();
    let dom = dump_dom(dir.path(), &format!("file://{}", html.display()));
    // No empty speedup charts: one line says why.
    assert!(!dom.contains("id=\"best-so-far\""), "empty chart rendered");
    assert!(!dom.contains("id=\"best-so-far-mean\""));
    assert!(dom.contains("id=\"best-so-far-empty\"") && dom.contains("Triton interpreter"));
    // No bare "no data": every empty chart is a titled line with its reason.
    assert!(!dom.contains(">no data<"));
    // The per-task table, with the aborted task and its reason.
    assert_eq!(
        dom.matches("class=\"task\"").count(),
        3,
        "m9 has an ending, no step"
    );
    assert!(
        dom.contains("C1 (r)"),
        "tasks are named by class and repository"
    );
    assert!(
        dom.contains("(aborted): teacher unavailable: 503 overloaded"),
        "{dom}"
    );
    assert!(
        dom.contains("(broken_reference): RuntimeError: nondeterministic task"),
        "{dom}"
    );
    assert_eq!(dom.matches("class=\"aborted\"").count(), 2);
    assert!(dom.contains("none correct") || dom.contains("not measured"));
    // Teacher retries and failures over both processes, select's drop reasons, the datasets.
    for text in [
        "teacher_retries",
        "teacher_failures",
        "rollout_processes",
        "grpo/parent_not_timed",
        "sft/not_correct",
        "sft_correctness_train",
        "left out: no rows: select's GRPO rule `best_steps` kept 0",
        "1100 / 1400",
    ] {
        assert!(dom.contains(text), "{text} missing");
    }
    assert!(dom.contains("id=\"drops\""), "select's drops are a chart");
}
