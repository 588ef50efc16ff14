//! The stage contract (`ksmith_core::stage`), checked on every stage: each one runs on empty
//! inputs and on a tiny corpus (one repository, one module, one task), in pipeline order, and
//! must
//!
//! - refuse to run without its first input, naming the file and the stage that writes it;
//! - write its report once, as it returned it, with the fingerprint its outputs carry;
//! - skip a re-run with nothing changed, leaving its last real report on disk with
//!   `skipped: true` added (crawl, which is incremental per repository, always runs).
//!
//! Stages are called through their crates' `run`, as the CLI calls them; the rollout gets a
//! scripted teacher and evaluator so that the tiny corpus runs without a GPU or a network.

use std::path::{Path, PathBuf};

use ksmith_core::chat::{ChatClient, ChatError, ChatRequest, ChatResponse};
use ksmith_core::config::SourceSpec;
use ksmith_core::context::StageContext;
use ksmith_core::evaluation::{
    EvalError, EvalRequest, EvalResult, EvalStatus, Evaluator, Preflight,
};
use ksmith_core::report::StageReport;
use ksmith_core::stage::UP_TO_DATE;
use ksmith_core::table::{Table, read_fingerprint};
use ksmith_core::tables::{
    ChainRow, ClusterRow, DedupRow, GrpoRow, ModuleRow, ProbeRow, RepoRow, SftRow, StepRow,
    TaskRow, env_path_in,
};

/// One module that runs on the CPU in the probe.
const MODULE: &str = "import torch\nimport torch.nn as nn\n\n\nclass Scale(nn.Module):\n    \
def __init__(self, factor=2.0):\n        super().__init__()\n        self.factor = factor\n\n    \
def forward(self, x):\n        return x * self.factor\n";

/// The scripted teacher's answer: a whole program with a Triton kernel.
const KERNEL: &str = "```python\nimport torch\nimport torch.nn as nn\nimport triton\nimport \
triton.language as tl\n\n\n@triton.jit\ndef scale_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):\n    \
offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n    mask = offs < n\n    \
tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 2.0, mask=mask)\n\n\n\
class ModelNew(nn.Module):\n    def forward(self, x):\n        y = torch.empty_like(x)\n        \
scale_kernel[(triton.cdiv(x.numel(), 64),)](x, y, x.numel(), BLOCK=64)\n        return y\n```\n";

/// Answers every request with [`KERNEL`].
struct ScriptedTeacher;

impl ChatClient for ScriptedTeacher {
    fn chat(&self, _request: &ChatRequest) -> Result<ChatResponse, ChatError> {
        Ok(ChatResponse {
            content: KERNEL.to_string(),
            reasoning: None,
            finish_reason: Some("stop".into()),
            model: "scripted".into(),
            prompt_tokens: 100,
            completion_tokens: 50,
            cached: false,
        })
    }
}

/// Finds every candidate correct and 1.5 times faster than eager.
struct ScriptedEvaluator;

impl Evaluator for ScriptedEvaluator {
    fn evaluate(&self, _request: &EvalRequest) -> Result<EvalResult, EvalError> {
        Ok(EvalResult {
            status: EvalStatus::Correct,
            hack: None,
            error_log: String::new(),
            errors: Vec::new(),
            trials_passed: 3,
            trials: 3,
            candidate_timing: None,
            reference_timing: None,
            speedup: Some(1.5),
            warnings: Vec::new(),
            hardware: Default::default(),
            elapsed_ms: 1,
            speed_of_light: None,
            compile_baseline: None,
        })
    }

    /// Every reference runs.
    fn preflight(&self, _request: &EvalRequest) -> Result<Preflight, EvalError> {
        Ok(Preflight::default())
    }
}

/// One stage under test.
struct Case {
    stage: &'static str,
    /// The input whose absence stops the stage, and the stage named in the error.
    first_input: Option<(&'static str, &'static str)>,
    /// Whether a re-run with nothing changed skips.
    skips: bool,
    run: fn(&StageContext, &Path) -> anyhow::Result<StageReport>,
    /// The files that carry the stage's fingerprint.
    outputs: fn(&Path) -> Vec<PathBuf>,
}

fn crawl(ctx: &StageContext, corpus: &Path) -> anyhow::Result<StageReport> {
    let sources: Vec<SourceSpec> = if corpus.join("tiny").exists() {
        vec![SourceSpec {
            name: Some("tests/tiny".into()),
            path: Some(corpus.join("tiny")),
            license: Some("MIT".into()),
            ..Default::default()
        }]
    } else {
        Vec::new()
    };
    Ok(ksmith_crawl::run(&sources, &Default::default(), ctx)?)
}

fn rollout(ctx: &StageContext, _: &Path) -> anyhow::Result<StageReport> {
    let cfg = ksmith_evolve::RolloutConfig {
        iterations: 2,
        parallel_tasks: 1,
        ..Default::default()
    };
    Ok(ksmith_evolve::run(
        &cfg,
        ctx,
        &ScriptedTeacher,
        &ScriptedEvaluator,
    )?)
}

/// Every shard of every exported dataset; a format without a folder must be recorded as left
/// out (for lack of rows) in `datasets/export.json`.
fn datasets(workdir: &Path) -> Vec<PathBuf> {
    let cfg = ksmith_export::ExportConfig::default();
    let record: serde_json::Value = serde_json::from_slice(
        &std::fs::read(workdir.join("datasets/export.json")).expect("export.json"),
    )
    .expect("export.json is JSON");
    let mut shards = Vec::new();
    for format in &cfg.formats {
        let dir = ksmith_export::dataset_dir(workdir, *format);
        if !dir.exists() {
            assert!(
                record["omitted"][format.folder()].is_string(),
                "{}: neither written nor recorded as left out",
                dir.display()
            );
            continue;
        }
        let before = shards.len();
        for entry in std::fs::read_dir(dir.join("data")).expect("dataset folder") {
            shards.push(entry.expect("entry").path());
        }
        assert!(shards.len() > before, "{}: no shard", dir.display());
    }
    shards
}

fn cases() -> Vec<Case> {
    vec![
        Case {
            stage: "crawl",
            first_input: None,
            skips: false,
            run: crawl,
            outputs: |w| vec![RepoRow::path_in(w)],
        },
        Case {
            stage: "extract",
            first_input: Some(("repos.parquet", "crawl")),
            skips: true,
            run: |ctx, _| Ok(ksmith_extract::run(&Default::default(), ctx)?),
            outputs: |w| vec![ModuleRow::path_in(w)],
        },
        Case {
            stage: "probe",
            first_input: Some(("modules.parquet", "extract")),
            skips: true,
            run: |ctx, _| Ok(ksmith_probe::run(&Default::default(), ctx)?),
            outputs: |w| vec![ProbeRow::path_in(w)],
        },
        Case {
            stage: "dedup",
            first_input: Some(("modules.parquet", "extract")),
            skips: true,
            run: |ctx, _| Ok(ksmith_dedup::run(&Default::default(), ctx)?),
            outputs: |w| vec![DedupRow::path_in(w)],
        },
        Case {
            stage: "cluster",
            first_input: Some(("dedup.parquet", "dedup")),
            skips: true,
            run: |ctx, _| {
                // Every module becomes a task, so that one module makes one task (the tiny
                // corpus's one module is a single multiplication).
                let cfg = ksmith_cluster::ClusterConfig {
                    tasks: "all".into(),
                    single_op_tasks: true,
                    ..Default::default()
                };
                Ok(ksmith_cluster::run(&cfg, ctx)?)
            },
            outputs: |w| vec![ClusterRow::path_in(w), TaskRow::path_in(w)],
        },
        Case {
            stage: "rollout",
            first_input: Some(("tasks.parquet", "cluster")),
            skips: true,
            run: rollout,
            outputs: |w| vec![StepRow::path_in(w)],
        },
        Case {
            stage: "select",
            first_input: Some(("steps.parquet", "rollout")),
            skips: true,
            run: |ctx, _| Ok(ksmith_select::run(&Default::default(), ctx)?),
            outputs: |w| {
                vec![
                    SftRow::path_in(w),
                    GrpoRow::path_in(w),
                    env_path_in(w),
                    ChainRow::path_in(w),
                ]
            },
        },
        Case {
            stage: "export",
            first_input: Some(("sft.parquet", "select")),
            skips: true,
            run: |ctx, _| Ok(ksmith_export::run(&Default::default(), ctx)?),
            outputs: datasets,
        },
    ]
}

fn saved(workdir: &Path, stage: &str) -> StageReport {
    StageReport::load(workdir, stage).unwrap_or_else(|| panic!("{stage}: no report on disk"))
}

/// Runs every stage in order on the corpus under `corpus` (empty when it has no `tiny/`) and
/// checks the contract; returns each stage's first report.
fn check_pipeline(corpus: &Path) -> Vec<StageReport> {
    let work = tempfile::tempdir().expect("tempdir");
    let ctx = StageContext::for_tests(work.path());
    let mut reports = Vec::new();
    for case in cases() {
        let stage = case.stage;
        let first = (case.run)(&ctx, corpus).unwrap_or_else(|e| panic!("{stage}: {e:#}"));
        assert_eq!(first.stage, stage);
        assert!(!first.skipped, "{stage} skipped its first run");
        // Written once, as returned: nothing saved it again or added to it.
        assert_eq!(saved(work.path(), stage), first, "{stage}");
        for output in (case.outputs)(work.path()) {
            assert_eq!(
                read_fingerprint(&output).as_deref(),
                Some(first.fingerprint.as_str()),
                "{stage}: {} does not carry the report's fingerprint",
                output.display()
            );
        }
        let again = (case.run)(&ctx, corpus).unwrap_or_else(|e| panic!("{stage}: {e:#}"));
        if case.skips {
            let expected = StageReport {
                skipped: true,
                skip_reason: Some(UP_TO_DATE.to_string()),
                ..first.clone()
            };
            assert_eq!(again, expected, "{stage}: the skip lost the last report");
            assert_eq!(saved(work.path(), stage), expected, "{stage}");
        } else {
            assert!(!again.skipped, "{stage} skipped");
            assert_eq!(again.fingerprint, first.fingerprint, "{stage}");
            assert_eq!(saved(work.path(), stage), again, "{stage}");
        }
        reports.push(first);
    }
    reports
}

#[test]
fn every_stage_refuses_to_run_without_its_input() {
    let work = tempfile::tempdir().expect("tempdir");
    let ctx = StageContext::for_tests(work.path());
    for case in cases() {
        let Some((input, writer)) = case.first_input else {
            continue;
        };
        let err = match (case.run)(&ctx, work.path()) {
            Ok(report) => panic!("{} ran without {input}: {report:?}", case.stage),
            Err(e) => e.to_string(),
        };
        assert!(
            err.contains(input) && err.contains(&format!("run `ksmith {writer}`")),
            "{}: {err}",
            case.stage
        );
        assert!(
            StageReport::load(work.path(), case.stage).is_none(),
            "{} saved a report for a run that did not happen",
            case.stage
        );
    }
}

#[test]
fn every_stage_keeps_the_contract_on_empty_inputs() {
    let corpus = tempfile::tempdir().expect("tempdir");
    let reports = check_pipeline(corpus.path());
    for r in &reports {
        assert_eq!(r.rows_written, 0, "{}: {r:?}", r.stage);
    }
}

#[test]
fn every_stage_keeps_the_contract_on_a_tiny_corpus() {
    let corpus = tempfile::tempdir().expect("tempdir");
    let repo = corpus.path().join("tiny");
    std::fs::create_dir_all(&repo).expect("mkdir");
    std::fs::write(repo.join("scale.py"), MODULE).expect("write");
    let reports = check_pipeline(corpus.path());
    for r in &reports {
        assert!(r.rows_written > 0, "{} wrote nothing: {r:?}", r.stage);
    }
    let rollout = reports
        .iter()
        .find(|r| r.stage == "rollout")
        .expect("rollout");
    assert_eq!(rollout.counters.get("steps_new"), Some(&2), "{rollout:?}");
}

/// `ksmith run` without a teacher skips the rollout through the contract too: the last real
/// rollout report stays, marked skipped with the reason, and the stages after it do not run.
#[test]
fn a_rollout_without_a_teacher_keeps_its_last_report() {
    use ksmith_cli::args::Common;
    use ksmith_cli::pipeline::Session;
    use ksmith_cli::stages::{NO_TEACHER, Stage};

    let dir = tempfile::tempdir().expect("tempdir");
    let work = dir.path().join("work");
    let ctx = StageContext::for_tests(&work);
    ksmith_core::table::write_table::<TaskRow>(&TaskRow::path_in(&work), &[], "tasks-fp")
        .expect("tasks");
    let real = rollout(&ctx, dir.path()).expect("rollout with the scripted teacher");
    let config = dir.path().join("no-teacher.toml");
    std::fs::write(&config, "[rollout]\nrequired = false\n").expect("config");
    let session = Session::open(&Common {
        config: Some(config),
        workdir: Some(work.clone()),
        threads: Some(1),
        quiet: true,
        force: false,
        shard: None,
        set: Vec::new(),
    })
    .expect("config loads");
    if ksmith_teacher::url_override().is_some() {
        // A teacher from the environment would run the rollout; nothing to check here.
        return;
    }
    session
        .run(&[Stage::Rollout, Stage::Select])
        .expect("skips");
    let expected = StageReport {
        skipped: true,
        skip_reason: Some(NO_TEACHER.to_string()),
        ..real
    };
    assert_eq!(saved(&work, "rollout"), expected);
    assert!(StageReport::load(&work, "select").is_none(), "select ran");
}
