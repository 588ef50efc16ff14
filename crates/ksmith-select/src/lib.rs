//! Select: chooses SFT samples, GRPO prompts, agent-environment starts and multi-turn chains
//! from the rollout's steps.
//!
//! Input: `steps.parquet` (`StepRow`) and `tasks.parquet` (`TaskRow`: family, level, cluster).
//! Output: `sft.parquet` ([`SftRow`]), `grpo.parquet` ([`GrpoRow`]), `env.parquet` (more
//! [`GrpoRow`]s: the starts of agent episodes, `env_rule`), `chains.parquet` ([`ChainRow`]: per
//! island, the lineage of its best step, see [`chains`]) and `selection.json`
//! ([`SelectionManifest`], the rules in words for the dataset cards).
//!
//! The rules (see [`rules`]): correctness SFT = every correct translation (a first step, or a
//! step that repaired a failing Triton program into a correct one); performance SFT =
//! correct Triton-to-Triton steps significantly faster than eager and than their parent (the
//! lower bound of a confidence interval above a factor, see [`labels`]); GRPO = prompts whose
//! current program is a best-so-far of its trajectory, correct and significantly faster than
//! eager
//! (`all_steps` and `first_steps` are selectable for ablations). Samples over the token budget
//! are dropped ([`ksmith_core::tokens`]), each set is balanced across levels and families ([`balance`]) and
//! split into train and validation by cluster ([`split`]).
//!
//! Invariants: deterministic (same inputs and config give the same rows, in the same order);
//! every step that does not become a sample is counted under a reason in the report; no task
//! has samples on both sides of the split. Entry point: [`run`].
#![deny(missing_docs)]

pub mod balance;
pub mod chains;
pub mod config;
pub mod drops;
pub mod error;
pub mod input;
pub mod labels;
pub mod manifest;
pub mod rules;
pub mod selection;
pub mod split;
pub mod trajectory;

pub use config::{BestScope, GrpoRule, SelectConfig};
pub use error::Error;
pub use ksmith_core::tables::{ChainRow, GrpoRow, SftRow};
pub use manifest::SelectionManifest;
pub use selection::{Selection, select};
pub use trajectory::StepView;

/// The stage's name.
pub const STAGE: &str = "select";
/// Bumped when the output for the same input changes.
pub const CODE_VERSION: u32 = 5;

use ksmith_core::context::StageContext;
use ksmith_core::report::StageReport;
use ksmith_core::stage::StagePlan;
use ksmith_core::table::{Table, read_table, write_bytes_atomically, write_table};
use ksmith_core::tables::{StepRow, TaskRow, env_path_in};

use crate::drops::SampleSet;

/// Runs the select stage in `ctx.workdir`: reads `steps.parquet` and `tasks.parquet`, writes
/// `sft.parquet`, `grpo.parquet`, `env.parquet`, `chains.parquet`, `selection.json` and
/// `reports/select.json`.
pub fn run(cfg: &SelectConfig, ctx: &StageContext) -> Result<StageReport, Error> {
    cfg.validate()?;
    let steps_path = StepRow::path_in(&ctx.workdir);
    let tasks_path = TaskRow::path_in(&ctx.workdir);
    let sft_path = SftRow::path_in(&ctx.workdir);
    let grpo_path = GrpoRow::path_in(&ctx.workdir);
    let env_path = env_path_in(&ctx.workdir);
    let chains_path = ChainRow::path_in(&ctx.workdir);
    let manifest_path = SelectionManifest::path_in(&ctx.workdir);
    StagePlan::new(ctx, STAGE, CODE_VERSION)
        .config(cfg)
        .input(&steps_path, "rollout")
        .input(&tasks_path, "cluster")
        .output(&sft_path)
        .output(&grpo_path)
        .output(&env_path)
        .output(&chains_path)
        .output_file(&manifest_path)
        .run(|run| {
            let rows: Vec<StepRow> = read_table(&steps_path)?;
            let tasks: Vec<TaskRow> = read_table(&tasks_path)?;
            let report = &mut run.report;
            report.rows_read = (rows.len() + tasks.len()) as u64;
            report.count("steps", rows.len() as u64);
            report.count("tasks", tasks.len() as u64);
            let steps = step_views(rows, &steps_path, ctx, report);
            let tracker = ctx.tracker(STAGE, Some(steps.len() as u64));
            let pool = run.pool()?;
            let chosen = pool.install(|| select(&steps, &tasks, cfg, &mut run.report));
            tracker.inc(steps.len() as u64);
            tracker.finish();
            let untimed = run.report.counters.get("steps_correct_untimed").copied();
            if let Some(n) = untimed.filter(|&n| n > 0) {
                ctx.info(format!(
                    "select: {n} correct steps have no GPU timing (CPU interpreter): they cannot \
                     be performance SFT samples, nor GRPO best-step prompts"
                ));
            }
            write_table(&sft_path, &chosen.sft, run.fingerprint())?;
            write_table(&grpo_path, &chosen.grpo, run.fingerprint())?;
            write_table(&env_path, &chosen.env, run.fingerprint())?;
            write_table(&chains_path, &chosen.chains, run.fingerprint())?;
            let manifest = SelectionManifest::new(cfg, run.fingerprint()).with_outcome(
                &run.report,
                &[
                    (SampleSet::Sft, chosen.sft.len()),
                    (SampleSet::Grpo, chosen.grpo.len()),
                    (SampleSet::Env, chosen.env.len()),
                    (SampleSet::Chains, chosen.chains.len()),
                ],
            );
            let json = serde_json::to_vec_pretty(&manifest).unwrap_or_default();
            write_bytes_atomically(&manifest_path, &json)?;
            run.report.rows_written =
                (chosen.sft.len() + chosen.grpo.len() + chosen.env.len() + chosen.chains.len())
                    as u64;
            Ok(())
        })
}

/// The views select works on; a step whose evaluation cannot be read is counted and warned
/// about, and treated as not evaluated.
fn step_views(
    rows: Vec<StepRow>,
    steps_path: &std::path::Path,
    ctx: &StageContext,
    report: &mut StageReport,
) -> Vec<StepView> {
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
    steps
}
