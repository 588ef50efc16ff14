//! Select: chooses SFT samples and GRPO prompts from the rollout's steps.
//!
//! Input: `steps.parquet` (`StepRow`) and `tasks.parquet` (`TaskRow`: family, level, cluster).
//! Output: `sft.parquet` ([`SftRow`]), `grpo.parquet` ([`GrpoRow`]) and `selection.json`
//! ([`SelectionManifest`], the rules in words for the dataset cards).
//!
//! The rules (see [`rules`]): correctness SFT = every correct first step; performance SFT =
//! correct Triton-to-Triton steps faster than eager and than their parent; GRPO = prompts whose
//! current program is a best-so-far of its trajectory, correct and faster than eager
//! (`all_steps` and `first_steps` are selectable for ablations). Samples over the token budget
//! are dropped ([`tokens`]), each set is balanced across levels and families ([`balance`]) and
//! split into train and validation by cluster ([`split`]).
//!
//! Invariants: deterministic (same inputs and config give the same rows, in the same order);
//! every step that does not become a sample is counted under a reason in the report; no task
//! has samples on both sides of the split. Entry point: [`run`].
#![deny(missing_docs)]

pub mod balance;
pub mod config;
pub mod error;
pub mod input;
pub mod manifest;
pub mod rules;
pub mod selection;
pub mod split;
pub mod tokens;
pub mod trajectory;

pub use config::{BestScope, GrpoRule, SelectConfig};
pub use error::Error;
pub use ksmith_core::tables::{GrpoRow, SftRow};
pub use manifest::SelectionManifest;
pub use selection::{Selection, select};
pub use trajectory::StepView;

/// The stage's name.
pub const STAGE: &str = "select";
/// Bumped when the output for the same input changes.
pub const CODE_VERSION: u32 = 1;

use std::time::Instant;

use ksmith_core::config::section_hash;
use ksmith_core::context::StageContext;
use ksmith_core::fingerprint::{Fingerprint, is_up_to_date};
use ksmith_core::report::StageReport;
use ksmith_core::table::{Table, read_table, write_bytes_atomically, write_table};
use ksmith_core::tables::{StepRow, TaskRow};

/// Runs the select stage in `ctx.workdir`: reads `steps.parquet` and `tasks.parquet`, writes
/// `sft.parquet`, `grpo.parquet`, `selection.json` and `reports/select.json`.
pub fn run(cfg: &SelectConfig, ctx: &StageContext) -> Result<StageReport, Error> {
    let started = Instant::now();
    cfg.validate()?;
    let steps_path = StepRow::path_in(&ctx.workdir);
    let tasks_path = TaskRow::path_in(&ctx.workdir);
    for (path, stage) in [(&steps_path, "rollout"), (&tasks_path, "cluster")] {
        if !path.exists() {
            return Err(Error::MissingInput {
                path: path.clone(),
                stage,
            });
        }
    }
    let sft_path = SftRow::path_in(&ctx.workdir);
    let grpo_path = GrpoRow::path_in(&ctx.workdir);
    let manifest_path = SelectionManifest::path_in(&ctx.workdir);
    let fp = Fingerprint::new(STAGE, CODE_VERSION)
        .with("config", &section_hash(cfg))
        .with_input(&steps_path)
        .with_input(&tasks_path)
        .finish();
    let mut report = StageReport::new(STAGE);
    report.fingerprint = fp.clone();
    if !ctx.force && manifest_path.exists() && is_up_to_date(&[&sft_path, &grpo_path], &fp) {
        report.skipped = true;
        return Ok(report);
    }
    let rows: Vec<StepRow> = read_table(&steps_path)?;
    let tasks: Vec<TaskRow> = read_table(&tasks_path)?;
    report.rows_read = (rows.len() + tasks.len()) as u64;
    report.count("steps", rows.len() as u64);
    report.count("tasks", tasks.len() as u64);
    let mut steps = Vec::with_capacity(rows.len());
    for row in rows {
        let (view, unreadable) = input::step_view(row);
        if unreadable {
            ctx.warn(format!(
                "{}: step {} of task {}: its evaluation JSON cannot be read; treated as not \
                 evaluated",
                steps_path.display(),
                view.step_id,
                view.task_id
            ));
            report.count("steps_eval_unreadable", 1);
        }
        steps.push(view);
    }
    let tracker = ctx.tracker("select", Some(steps.len() as u64));
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(ctx.threads.max(1))
        .build()
        .map_err(|e| Error::Threads {
            threads: ctx.threads,
            message: e.to_string(),
        })?;
    let chosen = pool.install(|| select(&steps, &tasks, cfg, &mut report));
    tracker.inc(steps.len() as u64);
    tracker.finish();
    if report
        .counters
        .get("steps_correct_untimed")
        .copied()
        .unwrap_or(0)
        > 0
    {
        ctx.info(format!(
            "select: {} correct steps have no GPU timing (CPU interpreter): they cannot be \
             performance SFT samples, nor GRPO best-step prompts",
            report.counters["steps_correct_untimed"]
        ));
    }
    write_table(&sft_path, &chosen.sft, &fp)?;
    write_table(&grpo_path, &chosen.grpo, &fp)?;
    let manifest = SelectionManifest::new(cfg, &fp);
    let json = serde_json::to_vec_pretty(&manifest).unwrap_or_default();
    write_bytes_atomically(&manifest_path, &json)?;
    report.rows_written = (chosen.sft.len() + chosen.grpo.len()) as u64;
    report.elapsed_ms = started.elapsed().as_millis() as u64;
    report.save(&ctx.workdir)?;
    Ok(report)
}
