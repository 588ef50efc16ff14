//! Renders reports of synthetic work directories and checks them in headless Chromium: the page
//! loads offline, every plot is present with its marks, the funnel's counts add up, and before
//! the rollout no section of it is shown.

#![allow(clippy::unwrap_used)] // Test fixtures: a failure here is a test failure.

use std::path::Path;
use std::process::Command;

use ksmith_core::evaluation::{EvalStatus, HackKind};
use ksmith_core::report::StageReport;
use ksmith_core::table::{Table, read_table, write_table};
use ksmith_core::tables::{
    ClusterRow, DedupMethod, DedupRow, EditOutcome, ModuleReason, ModuleRow, ModuleStatus,
    ProbeRow, ProbeStatus, RepoReason, RepoRow, RepoStatus, SizeReason, SizeStatus, SourceKind,
    StepKind, StepRow, TaskRow,
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
        backend: ksmith_core::evaluation::Backend::Triton,
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
        speedup_over_compile: speedup.map(|s| s / 1.25),
        hack: (!correct).then_some(HackKind::TorchFallback),
        eval_json: None,
        stamp: Default::default(),
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
    let funnel: Vec<Option<u64>> = data.funnel.steps.iter().map(|s| s.total).collect();
    assert_eq!(
        funnel,
        [Some(4), Some(4), Some(4), Some(4), Some(3), Some(2)]
    );
    let outputs: Vec<Option<u64>> = data.outputs.iter().map(|(_, n)| *n).collect();
    assert_eq!(outputs, [Some(5), Some(3), None, None]);
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
    no_table_without_rows(&dom);
    for id in [
        "funnel",
        "funnel-repos",
        "families",
        "levels",
        "tasks",
        "outputs",
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
    no_table_without_rows(&dom);
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
        dom.contains("C1 (r) m1 (aborted)"),
        "named by class and repository"
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

/// Every table of the page has at least one row of cells (no header-only table).
fn no_table_without_rows(dom: &str) {
    for (i, table) in dom.split("<table").skip(1).enumerate() {
        let table = table.split("</table>").next().unwrap_or_default();
        assert!(table.contains("<td"), "table {i} has no row: <table{table}");
    }
}

/// A run up to cluster, without a teacher: two repositories (one refused for its license), and
/// classes lost at every step for a reason of their own.
fn write_pre_rollout_workdir(dir: &Path) {
    let mut ok = RepoRow::failed("acme/layers", "https://github.com/acme/layers.git", "x");
    ok.status = RepoStatus::Ok;
    ok.reason = None;
    ok.source_kind = SourceKind::Git;
    ok.commit = Some("0123abcd".into());
    let mut local = RepoRow::failed("convs", "/src/convs", "x");
    local.status = RepoStatus::Ok;
    local.reason = None;
    local.source_kind = SourceKind::Folder;
    local.commit = Some("feed".into());
    local.snapshot = Some("snapshots/convs/feed".into());
    let mut gpl = RepoRow::failed("gplnet", "/src/gplnet", "x");
    gpl.status = RepoStatus::Rejected;
    gpl.set_reason(RepoReason::LicenseNotAllowed, Some("GPL-3.0"));
    write_table(&RepoRow::path_in(dir), &[ok, local, gpl], "fp").unwrap();

    let class = |id: &str, repo: &str, path: &str, line: u32| ModuleRow {
        id: id.into(),
        repo: repo.into(),
        path: path.into(),
        class_name: id.to_string(),
        line,
        ..module(0)
    };
    let rejected = |id: &str, code: ModuleReason, reason: &str| ModuleRow {
        status: ModuleStatus::Rejected,
        reason: Some(reason.into()),
        reason_code: Some(code),
        program: None,
        ..class(id, "acme/layers", "extra.py", 4)
    };
    let modules = vec![
        class("Gelu", "acme/layers", "act.py", 10),
        class("Norm", "acme/layers", "norm.py", 20),
        class("NormCopy", "acme/layers", "norm2.py", 20),
        class("Flatten", "acme/layers", "misc.py", 5),
        class("Conv", "convs", "conv.py", 7),
        class("BadShape", "convs", "bad.py", 3),
        class("Rnn", "convs", "rnn.py", 9),
        rejected(
            "Spectral",
            ModuleReason::ImportNotAllowed,
            "import_not_allowed: scipy",
        ),
        rejected(
            "Fft",
            ModuleReason::ImportNotAllowed,
            "import_not_allowed: scipy",
        ),
        rejected("Base", ModuleReason::NoForward, "no_forward: abstract"),
    ];
    write_table(&ModuleRow::path_in(dir), &modules, "fp").unwrap();
    let ran = |m: &ModuleRow, sizes: &str, est: f64| ProbeRow {
        program: m.program.clone(),
        size_status: Some(SizeStatus::Sized),
        sizes: sizes.into(),
        alt_sizes: "[{\"n\": 8}, {\"n\": 4}]".into(),
        est_ms: Some(est),
        ..ProbeRow::empty(&m.id, &m.repo, &m.class_name, ProbeStatus::Ok)
    };
    let by = |id: &str| modules.iter().find(|m| m.id == id).unwrap();
    let probes = vec![
        ran(by("Gelu"), r#"{"batch_size": 32, "dim": 4096}"#, 1.25),
        ran(by("Norm"), r#"{"rows": 8192, "cols": 1024}"#, 0.5),
        ran(by("NormCopy"), r#"{"rows": 8192, "cols": 1024}"#, 0.5),
        ran(by("Flatten"), r#"{"n": 64}"#, 0.01),
        ran(by("Conv"), r#"{"batch_size": 16, "channels": 256}"#, 2.0),
        ProbeRow {
            error_class: Some("RuntimeError".into()),
            error_message: Some("mat1 and mat2 shapes cannot be multiplied (4x3 and 5x2)".into()),
            ..ProbeRow::empty("BadShape", "convs", "BadShape", ProbeStatus::Failed)
        },
        ProbeRow {
            size_status: Some(SizeStatus::Unsizable),
            size_reason_code: Some(SizeReason::Timeout),
            size_reason: Some("timeout: sizing ran past its 20.0 s".into()),
            ..ran(by("Rnn"), "{}", 0.0)
        },
    ];
    write_table(&ProbeRow::path_in(dir), &probes, "fp").unwrap();
    let dedup: Vec<DedupRow> = probes
        .iter()
        .filter(|p| p.status == ProbeStatus::Ok)
        .map(|p| {
            let copy = p.module_id == "NormCopy";
            DedupRow {
                module_id: p.module_id.clone(),
                kept: !copy,
                method: copy.then_some(DedupMethod::Near),
                duplicate_of: copy.then(|| "Norm".into()),
                similarity: copy.then_some(0.93),
                contaminated_via: None,
            }
        })
        .collect();
    write_table(&DedupRow::path_in(dir), &dedup, "fp").unwrap();
    let labelled = |id: &str, family: &str, level: u8, trivial: Option<&str>| ClusterRow {
        module_id: id.into(),
        cluster: -1,
        is_center: false,
        family: family.into(),
        family_rule: "aten".into(),
        level,
        level_rule: "aten".into(),
        trivial: trivial.map(str::to_string),
    };
    let clusters = vec![
        labelled("Gelu", "activation", 1, None),
        labelled("Norm", "normalization", 1, None),
        labelled("Flatten", "reshape", 1, Some("no_compute")),
        labelled("Conv", "convolution", 2, None),
    ];
    write_table(&ClusterRow::path_in(dir), &clusters, "fp").unwrap();
    let tasks: Vec<TaskRow> = clusters
        .iter()
        .filter(|c| c.trivial.is_none())
        .map(|c| TaskRow {
            task_id: c.module_id.clone(),
            repo: by(&c.module_id).repo.clone(),
            class_name: c.module_id.clone(),
            program: "class Model: pass".into(),
            family: c.family.clone(),
            level: c.level,
            cluster: c.cluster,
            license: Some("MIT".into()),
            selected_as: "all".into(),
            alt_sizes: "[]".into(),
        })
        .collect();
    write_table(&TaskRow::path_in(dir), &tasks, "fp").unwrap();
    let mut rollout = StageReport::new("rollout");
    rollout.skipped = true;
    rollout.skip_reason = Some("no teacher configured".into());
    let path = StageReport::path_in(dir, "rollout");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, serde_json::to_vec(&rollout).unwrap()).unwrap();
}

#[test]
fn before_rollouts_the_page_follows_every_class_to_the_tasks_and_lists_them() {
    let dir = tempfile::tempdir().unwrap();
    write_pre_rollout_workdir(dir.path());
    let data = ksmith_report::collect(dir.path());
    let f = &data.funnel;
    let totals: Vec<u64> = f.steps.iter().map(|s| s.total.unwrap()).collect();
    assert_eq!(totals, [10, 7, 6, 5, 4, 3]);
    for (step, next) in f.steps.iter().zip(&f.steps[1..]) {
        let loss = f.losses.iter().find(|l| l.step == next.name).unwrap();
        assert_eq!(step.total.unwrap() - loss.lost, next.total.unwrap());
        assert_eq!(step.per_repo.values().sum::<u64>(), step.total.unwrap());
    }
    // The family and level charts count the funnel's unique modules.
    assert_eq!(data.families.values().sum::<u64>(), totals[4]);
    assert_eq!(data.levels.values().sum::<u64>(), totals[4]);

    let html = ksmith_report::write_report(dir.path(), None).unwrap();
    let dom = dump_dom(dir.path(), &format!("file://{}", html.display()));
    no_table_without_rows(&dom);
    assert!(
        dom.contains("3 tasks from 10 classes found in 2 repositories."),
        "summary"
    );
    // Per repository, with the refused one and a total row.
    assert_eq!(dom.matches("class=\"repo\"").count(), 3);
    assert!(dom.contains("not accepted: license_not_allowed: GPL-3.0"));
    assert!(dom.contains(
        "<td>acme/layers</td><td>7</td><td>4</td><td>4</td><td>4</td><td>3</td><td>2</td>"
    ));
    assert!(
        dom.contains("<td>convs</td><td>3</td><td>3</td><td>2</td><td>1</td><td>1</td><td>1</td>")
    );
    assert!(
        dom.contains("<td>all</td><td>10</td><td>7</td><td>6</td><td>5</td><td>4</td><td>3</td>")
    );
    // Every loss with its reasons, most frequent first, and an example of each.
    for text in [
        "programs (3 lost)",
        "import_not_allowed</td><td>2</td><td class=\"text\">Spectral in acme/layers/extra.py:4: import_not_allowed: scipy",
        "no_forward</td><td>1</td>",
        "runnable (1 lost)",
        "failed: RuntimeError</td><td>1</td><td class=\"text\">BadShape in convs/bad.py:3: mat1 and mat2 shapes cannot be multiplied (4x3 and 5x2)",
        "sized (1 lost)",
        "unsizable: timeout</td><td>1</td><td class=\"text\">Rnn in convs/rnn.py:9: timeout: sizing ran past its 20.0 s",
        "unique (1 lost)",
        "NormCopy in acme/layers/norm2.py:20: duplicates Norm in acme/layers/norm.py:20 (similarity 0.93)",
        "tasks (1 lost)",
        "trivial: no_compute",
    ] {
        assert!(dom.contains(text), "{text} missing");
    }
    // The tasks: family, level, sizes, estimated time and a link to the source.
    assert_eq!(dom.matches("class=\"task\"").count(), 3);
    assert!(dom.contains("batch_size=32, dim=4096</td><td>1.25 ms</td>"));
    assert!(dom.contains(
        "href=\"https://github.com/acme/layers/blob/0123abcd/act.py#L10\">acme/layers/act.py:10</a>"
    ));
    assert!(dom.contains("/snapshots/convs/feed/conv.py\">convs/conv.py:7</a>"));
    // No rollout section yet: one line says why.
    assert!(dom.contains("id=\"rollout-not-run\"") && dom.contains("no teacher configured"));
    for absent in [
        "Metrics per level",
        "Evaluator",
        "Teacher",
        "Selection",
        "Datasets",
    ] {
        assert!(
            !dom.contains(&format!("<h2>{absent}</h2>")),
            "{absent} shown before rollouts"
        );
    }

    let png = dir.path().join("before.png");
    let shot = headless(dir.path())
        .arg(format!("--screenshot={}", png.display()))
        .arg("--window-size=1200,2000")
        .arg(format!("file://{}", html.display()))
        .output()
        .expect("chromium runs");
    assert!(
        shot.status.success(),
        "{}",
        String::from_utf8_lossy(&shot.stderr)
    );
    assert!(
        std::fs::metadata(&png).unwrap().len() > 20_000,
        "screenshot looks blank"
    );
}

#[test]
fn each_task_shows_its_speedup_over_compile_share_of_sol_trivial_steps_and_headroom() {
    let dir = tempfile::tempdir().unwrap();
    write_workdir(dir.path());
    std::fs::create_dir_all(dir.path().join("rollout")).unwrap();
    std::fs::write(
        dir.path().join("rollout/headroom.json"),
        r#"{"m0": {"headroom": {"eager_sol_fraction": 0.95, "compile_sol_fraction": 0.99,
                               "compile_over_eager": 1.04, "none": true},
                   "sol_share": 0.9, "why": null},
            "m1": {"headroom": null, "sol_share": 0.9, "why": "the eager reference was not timed"}}"#,
    )
    .unwrap();
    std::fs::write(
        dir.path().join("selection.json"),
        r#"{"trivial_by_task": {"m0": 2}}"#,
    )
    .unwrap();
    let data = ksmith_report::collect(dir.path());
    let m0 = data.tasks.iter().find(|t| t.task_id == "m0").unwrap();
    assert_eq!(m0.best_speedup, Some(1.6));
    assert!((m0.best_over_compile.unwrap() - 1.6 / 1.25).abs() < 1e-12);
    assert_eq!((m0.trivial, m0.best_sol_fraction), (Some(2), None));
    assert_eq!(m0.headroom, "none (SOL: eager 95 %, compile 99 %)");
    let m1 = data.tasks.iter().find(|t| t.task_id == "m1").unwrap();
    assert_eq!(m1.trivial, Some(0));
    assert_eq!(m1.headroom, "not judged: the eager reference was not timed");
    let html = ksmith_report::render_html(&data);
    for text in [
        "its speedup over torch.compile",
        "its share of SOL",
        "trivial steps",
        "<td>1.28x</td>",
        "none (SOL: eager 95 %, compile 99 %)",
    ] {
        assert!(html.contains(text), "{text} missing");
    }
}
