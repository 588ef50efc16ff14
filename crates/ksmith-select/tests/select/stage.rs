//! The select stage end to end on tables in a work directory: outputs, report, manifest,
//! up-to-date skip, missing inputs and unreadable evaluations.

use ksmith_core::context::StageContext;
use ksmith_core::evaluation::{Backend, EvalResult, EvalStatus, Hardware, Stamp, Timing};
use ksmith_core::report::StageReport;
use ksmith_core::speedup_interval::timing_from_samples;
use ksmith_core::table::{Table, read_table, write_table};
use ksmith_core::tables::{
    ChainRow, EditFormat, EditOutcome, GrpoRow, GrpoSelection, SftKind, SftRow, StepKind, StepRow,
    TaskRow, env_path_in,
};
use ksmith_select::{SelectConfig, SelectionManifest, run};

fn eval(speedup: f64) -> EvalResult {
    // 50 pairs sharing their noise: the candidate takes exactly 1 / speedup of its pair's time.
    let reference: Vec<f64> = (0..50).map(|i| 1.0 + f64::from(i % 7) * 0.001).collect();
    let cand: Vec<f64> = reference.iter().map(|r| r / speedup).collect();
    let candidate = Timing {
        median_ms: 1.0 / speedup,
        ..timing_from_samples(vec![cand], vec![reference.clone()])
    };
    let eager = Timing {
        median_ms: 1.0,
        ..timing_from_samples(vec![reference], vec![])
    };
    EvalResult {
        status: EvalStatus::Correct,
        hack: None,
        error_log: String::new(),
        errors: vec![],
        trials_passed: 5,
        trials: 5,
        candidate_timing: Some(candidate),
        reference_timing: Some(eager),
        speedup: Some(speedup),
        warnings: vec![],
        hardware: Hardware {
            device: "NVIDIA H200".into(),
            driver: Some("580".into()),
            torch: "2.15".into(),
            triton: "3.9".into(),
            cuda: None,
            timing: String::new(),
        },
        elapsed_ms: 900,
        speed_of_light: None,
        compile_baseline: None,
    }
}

fn row(id: &str, iteration: u32, parent: Option<&str>, speedup: Option<f64>) -> StepRow {
    let e = speedup.map(eval);
    StepRow {
        step_id: id.into(),
        task_id: "T".into(),
        iteration,
        island: 0,
        // the rows of a CUDA rollout: the samples must say so (their reward evaluates them so)
        backend: Backend::Cuda,
        kind: if parent.is_none() {
            StepKind::Translate
        } else {
            StepKind::Optimize
        },
        parent_id: parent.unwrap_or("seed").into(),
        parent_step_id: parent.map(Into::into),
        parent_program: parent
            .map(|p| format!("# program {p}\n"))
            .unwrap_or_default(),
        parent_correct: parent.is_some(),
        parent_speedup: None,
        parent_was_best: true,
        system_prompt: "You are a Triton expert.".into(),
        user_prompt: format!("Step {id}: make it faster."),
        response: format!("```python\n# {id}\n```"),
        response_bytes: 0,
        reasoning: None,
        reasoning_bytes: 0,
        finish_reason: Some("stop".into()),
        teacher_model: Some("teacher-x".into()),
        prompt_tokens: 100,
        completion_tokens: 50,
        cached: false,
        edit_format: Some(EditFormat::FullRewrite),
        edit_outcome: EditOutcome::Applied,
        edit_error: None,
        program_id: Some(format!("p-{id}")),
        program: Some(format!("# program {id}\n")),
        eval_status: e.as_ref().map(|e| e.status),
        correct: e.is_some(),
        speedup,
        speedup_over_compile: None,
        hack: None,
        stamp: e.as_ref().map(Stamp::of).unwrap_or_default(),
        eval_json: e.map(|e| serde_json::to_string(&e).expect("json")),
        is_new_best: false,
        started_at_ms: 0,
        finished_at_ms: 1,
    }
}

fn write_inputs(dir: &std::path::Path, steps: &[StepRow]) {
    let task = TaskRow {
        task_id: "T".into(),
        repo: "org/kernels".into(),
        class_name: "Gelu".into(),
        program: "# reference\n".into(),
        family: "activation".into(),
        level: 1,
        cluster: 3,
        license: Some("Apache-2.0".into()),
        selected_as: "center".into(),
        alt_sizes: "[]".into(),
    };
    write_table(&StepRow::path_in(dir), steps, "steps-fp").expect("write steps");
    write_table(&TaskRow::path_in(dir), &[task], "tasks-fp").expect("write tasks");
}

#[test]
fn run_writes_tables_manifest_and_report_then_skips() {
    let dir = tempfile::tempdir().unwrap();
    let steps = vec![
        row("a", 0, None, Some(0.9)),
        row("b", 1, Some("a"), Some(1.4)),
        row("c", 2, Some("b"), Some(1.9)),
    ];
    write_inputs(dir.path(), &steps);
    let ctx = StageContext::for_tests(dir.path());
    let cfg = SelectConfig::default();
    let report = run(&cfg, &ctx).unwrap();
    assert!(!report.skipped);
    let sft: Vec<SftRow> = read_table(&SftRow::path_in(dir.path())).unwrap();
    let grpo: Vec<GrpoRow> = read_table(&GrpoRow::path_in(dir.path())).unwrap();
    let kinds: Vec<(&str, SftKind)> = sft.iter().map(|r| (r.step_id.as_str(), r.kind)).collect();
    assert_eq!(
        kinds,
        vec![
            ("a", SftKind::Correctness),
            ("b", SftKind::Performance),
            ("c", SftKind::Performance)
        ]
    );
    assert!(sft.iter().all(|r| r.backend == Backend::Cuda));
    // c's prompt is on b, a best-so-far faster than eager.
    assert_eq!(grpo.len(), 1);
    assert_eq!(grpo[0].backend, Backend::Cuda);
    assert_eq!(grpo[0].step_id, "c");
    assert_eq!(grpo[0].prompt[0].role, "system");
    assert_eq!(grpo[0].prompt[1].content, "Step c: make it faster.");
    assert_eq!(grpo[0].parent_program, "# program b\n");
    // The agent environments start from the reference (one per task, `first_steps`).
    let env: Vec<GrpoRow> = read_table(&env_path_in(dir.path())).unwrap();
    assert_eq!(env.len(), 1);
    assert_eq!(
        (env[0].step_id.as_str(), env[0].selection),
        ("a", GrpoSelection::FirstSteps)
    );
    assert_eq!(env[0].parent_program, "# reference\n");
    // One chain: the island's lineage a -> b -> c ends at its best step.
    let chains: Vec<ChainRow> = read_table(&ChainRow::path_in(dir.path())).unwrap();
    assert_eq!(chains.len(), 1);
    let ids: Vec<&str> = chains[0].turns.iter().map(|t| t.step_id.as_str()).collect();
    assert_eq!(ids, ["a", "b", "c"]);
    assert_eq!(chains[0].prompt[1].content, "Step a: make it faster.");
    assert_eq!(report.rows_written, 6);
    assert_eq!(report.dropped.get("grpo/first_step"), Some(&1));
    let saved: StageReport =
        serde_json::from_slice(&std::fs::read(StageReport::path_in(dir.path(), "select")).unwrap())
            .unwrap();
    assert_eq!(saved, report);
    let manifest: SelectionManifest =
        serde_json::from_slice(&std::fs::read(SelectionManifest::path_in(dir.path())).unwrap())
            .unwrap();
    assert_eq!(manifest.config, cfg);
    assert_eq!(manifest.fingerprint, report.fingerprint);
    assert!(manifest.rules.iter().any(|r| r.contains("best_steps")));
    assert!(manifest.interval_method.contains("bootstrap"));
    // b and c over their parents, b and c over eager (a at 0.9x is not faster).
    assert_eq!(manifest.significance.get("timed"), Some(&3));
    assert_eq!(
        manifest.significance.get("significant_over_eager"),
        Some(&2)
    );
    assert_eq!(
        manifest.significance.get("significant_over_parent"),
        Some(&2)
    );
    assert_eq!(
        manifest.significance.get("not_faster_over_parent"),
        Some(&1)
    );
    // Every row carries the stamp of its evaluation, through the Parquet round trip.
    assert!(
        sft.iter()
            .all(|r| r.stamp.device == "NVIDIA H200" && r.stamp.driver.as_deref() == Some("580"))
    );
    assert_eq!(grpo[0].stamp.method, "cuda_graph");
    let c = sft[2].labels.over_eager.unwrap();
    assert!(
        (c.low - 1.9).abs() < 1e-9 && (c.high - 1.9).abs() < 1e-9,
        "{c:?}"
    );
    // What each set kept and why the rest was dropped, for export to explain empty datasets.
    assert_eq!(manifest.outcome["sft"].kept, 3);
    assert_eq!(manifest.outcome["grpo"].kept, 1);
    assert_eq!(manifest.outcome["env"].kept, 1);
    assert_eq!(manifest.outcome["chains"].kept, 1);
    assert_eq!(
        manifest.outcome["grpo"].dropped.get("first_step"),
        Some(&1),
        "{:?}",
        manifest.outcome
    );
    assert_eq!(
        manifest
            .outcome
            .values()
            .map(|o| o.dropped.values().sum::<u64>())
            .sum::<u64>(),
        report.dropped_total()
    );

    // Nothing changed: skipped. A config change: re-run.
    assert!(run(&cfg, &ctx).unwrap().skipped);
    let other = SelectConfig {
        sft_min_speedup: 1.5,
        ..Default::default()
    };
    let again = run(&other, &ctx).unwrap();
    assert!(!again.skipped);
    let sft: Vec<SftRow> = read_table(&SftRow::path_in(dir.path())).unwrap();
    assert_eq!(sft.len(), 2, "b (1.4x) is no longer fast enough");
}

#[test]
fn missing_inputs_name_the_stage_to_run() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = StageContext::for_tests(dir.path());
    let err = run(&SelectConfig::default(), &ctx).unwrap_err().to_string();
    assert!(
        err.contains("steps.parquet") && err.contains("ksmith rollout"),
        "{err}"
    );
}

#[test]
fn an_unreadable_evaluation_is_counted_not_fatal() {
    let dir = tempfile::tempdir().unwrap();
    let mut bad = row("a", 0, None, Some(1.2));
    bad.eval_json = Some("{not json".into());
    write_inputs(dir.path(), &[bad, row("b", 0, None, Some(1.1))]);
    let ctx = StageContext::for_tests(dir.path());
    let report = run(&SelectConfig::default(), &ctx).unwrap();
    assert_eq!(report.counters.get("steps_eval_unreadable"), Some(&1));
    assert_eq!(report.dropped.get("sft/not_correct"), Some(&1));
    let sft: Vec<SftRow> = read_table(&SftRow::path_in(dir.path())).unwrap();
    assert_eq!(sft.len(), 1);
}

#[test]
fn a_config_error_stops_before_any_io() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = StageContext::for_tests(dir.path());
    let cfg = SelectConfig {
        validation_fraction: 2.0,
        ..Default::default()
    };
    let err = run(&cfg, &ctx).unwrap_err().to_string();
    assert!(err.contains("validation_fraction"), "{err}");
}
