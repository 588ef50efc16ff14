//! Probe: runs every extracted module in a sandboxed Python child, repairs its guessed
//! arguments from the error text (pytorch-jit-paritybench style), runs it twice to check
//! determinism and records what ran. Input: `modules.parquet` ([`ModuleRow`], rows with status
//! `ok` and a program). Output: `probes.parquet` ([`ProbeRow`]), one row per probed module.
//!
//! Invariants:
//! - Every probed module gets exactly one row, in the order of `modules.parquet`; a module that
//!   fails, hangs, crashes, exhausts memory or misbehaves is a row with a status and a reason,
//!   never an error of the stage. Only environment failures (no Python, a worker that cannot
//!   start, disk) are [`Error`]s.
//! - A row with status `ok` (or `nondeterministic`) carries the program with its repaired
//!   `get_init_inputs()` / `get_inputs()`; that exact text was run from scratch (twice) in the
//!   sandbox, so it runs as it stands.
//! - Module code only runs in the sandboxed child of a warm worker, itself started in the
//!   shared sandbox ([`ksmith_sandbox`]; see the runner's `sandbox.py` for what is and is not
//!   enforced); this process never runs it.
//! - The Python runner is compiled in ([`runtime`]), so the binary does not need the checkout.
//!
//! - A class that a model of its repository builds is probed a second time with the arguments
//!   and input shapes that model gave it ([`observed`]); that row replaces the first when it
//!   runs, and says so in its first repair step.
//!
//! Entry points: [`run`], [`run_with_chat`] (optional LLM repair), [`probe_programs`].
#![deny(missing_docs)]

pub mod config;
pub mod error;
pub mod journal;
pub mod llm_repair;
pub mod observed;
pub mod pool;
pub mod protocol;
pub mod ray;
pub mod reuse;
pub mod rows;
pub mod runtime;
pub mod worker;

use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

use ksmith_core::chat::ChatClient;
use ksmith_core::context::StageContext;
use ksmith_core::progress::Tracker;
use ksmith_core::python_env::resolve_python;
use ksmith_core::report::StageReport;
use ksmith_core::stage::StagePlan;
use ksmith_core::table::{Table, read_table, write_table};
use ksmith_core::tables::{ModuleRow, ModuleStatus, ProbeRow, ProbeStatus};

pub use config::{ProbeConfig, SizingConfig};
pub use error::Error;
pub use pool::PoolOutput;

/// The stage's name.
pub const STAGE: &str = "probe";
/// Bumped when the output for the same input changes.
pub const CODE_VERSION: u32 = 9;

/// Probes `modules.parquet` into `probes.parquet` without LLM repair.
pub fn run(cfg: &ProbeConfig, ctx: &StageContext) -> Result<StageReport, Error> {
    run_with_chat(cfg, ctx, None)
}

/// Probes `modules.parquet` into `probes.parquet`; `chat` is used when `cfg.llm_repair` is on.
pub fn run_with_chat(
    cfg: &ProbeConfig,
    ctx: &StageContext,
    chat: Option<&dyn ChatClient>,
) -> Result<StageReport, Error> {
    cfg.validate()?;
    let input = ModuleRow::path_in(&ctx.workdir);
    let out = ProbeRow::path_in(&ctx.workdir);
    let key = reuse::key(cfg, chat.is_some());
    StagePlan::new(ctx, STAGE, CODE_VERSION)
        .part("reuse-key", &key)
        .input(&input, "extract")
        .output(&out)
        .run(|run| {
            if cfg.llm_repair && chat.is_none() {
                ctx.warn("probe: llm_repair is on but no chat client is configured; rules only");
            }
            let modules: Vec<ModuleRow> = read_table(&input)?;
            run.report.rows_read = modules.len() as u64;
            let (journal, resumed) = journal::Journal::open(&ctx.workdir, &key)?;
            let output = probe_table(
                &modules,
                cfg,
                chat,
                &key,
                ctx,
                &mut run.report,
                &journal,
                resumed,
            )?;
            write_table(&out, &output.rows, run.fingerprint())?;
            reuse::save_key(&ctx.workdir, &key)?;
            journal.finish()?;
            run.report.rows_written = output.rows.len() as u64;
            Ok(())
        })
}

/// Probes the runnable modules of `modules` that have no reusable row (from the last run or
/// from the `journal` of an interrupted one, `resumed`), and counts the rows.
#[allow(clippy::too_many_arguments)]
fn probe_table(
    modules: &[ModuleRow],
    cfg: &ProbeConfig,
    chat: Option<&dyn ChatClient>,
    key: &str,
    ctx: &StageContext,
    report: &mut StageReport,
    journal: &journal::Journal,
    resumed: HashMap<String, ProbeRow>,
) -> Result<PoolOutput, Error> {
    let todo: Vec<&ModuleRow> = modules
        .iter()
        .filter(|m| m.status == ModuleStatus::Ok && m.program.is_some())
        .collect();
    report.count(
        "modules_without_program",
        (modules.len() - todo.len()) as u64,
    );
    // Modules probed before with the same program, config and runner keep their row; so do
    // those an interrupted run of this configuration finished (its journal).
    let mut previous = if ctx.force {
        HashMap::new()
    } else {
        reuse::previous_rows(&ctx.workdir, key)
    };
    let resumed_count = todo.iter().filter(|m| resumed.contains_key(&m.id)).count();
    previous.extend(resumed);
    let fresh: Vec<&ModuleRow> = todo
        .iter()
        .copied()
        .filter(|m| !previous.contains_key(&m.id))
        .collect();
    report.count("resumed", resumed_count as u64);
    report.count(
        "reused",
        (todo.len() - fresh.len()).saturating_sub(resumed_count) as u64,
    );
    let tracker = ctx.tracker(STAGE, Some(fresh.len() as u64));
    let workers = if cfg.workers == 0 {
        ctx.threads
    } else {
        cfg.workers
    };
    // One runner folder serves both rounds.
    let runtime = runtime::Runtime::create()?;
    let jobs: Vec<Job<'_>> = fresh.iter().map(|&module| Job::own(module)).collect();
    let mut output = probe_programs_in(&runtime, &jobs, cfg, workers, chat, &tracker, &|row| {
        journal.append(row)
    })?;
    tracker.finish();
    output.rows = reuse::merge(&todo, &previous, output.rows);
    if cfg.observed_configs {
        probe_observed(
            &runtime,
            &todo,
            &mut output,
            cfg,
            workers,
            ctx,
            report,
            journal,
        )?;
    }
    for row in &output.rows {
        if row.status != ProbeStatus::Ok {
            report.drop_row(row.status.as_str());
        } else if !row.repair_steps.is_empty() {
            report.count("repaired", 1);
        }
        if let Some(size) = row.size_status {
            report.count(&format!("size_{}", size.as_str()), 1);
        }
        if let Some(code) = row.size_reason_code {
            report.count(&format!("size_reason/{}", code.as_str()), 1);
        }
        report.count("size_trials", u64::from(row.size_trials));
        report.count("attempts", u64::from(row.attempts));
        report.count("cpu_ms", row.cpu_time_ms as u64);
    }
    report.count("workers_started", output.workers_started);
    report.count("setup_cpu_ms", output.setup_cpu_ms);
    report.count("runner_cpu_ms", output.runner_cpu_ms);
    report.count("llm_asked", output.llm_asked);
    report.count("llm_fixed", output.llm_fixed);
    report.count("requeued", output.requeued);
    Ok(output)
}

/// Probes again, with the configuration a model of their repository gave them, the modules of
/// `todo` that some row's `submodules` name ([`observed`]); a row that runs that way replaces
/// the module's row, and every outcome is journaled and counted.
#[allow(clippy::too_many_arguments)]
fn probe_observed(
    runtime: &runtime::Runtime,
    todo: &[&ModuleRow],
    output: &mut PoolOutput,
    cfg: &ProbeConfig,
    workers: usize,
    ctx: &StageContext,
    report: &mut StageReport,
    journal: &journal::Journal,
) -> Result<(), Error> {
    let plan = observed::plan(todo, &output.rows);
    if plan.is_empty() {
        return Ok(());
    }
    let jobs: Vec<Job<'_>> = plan
        .iter()
        .map(|r| Job {
            module: todo[r.index],
            over: Some(r.config.clone()),
        })
        .collect();
    let by_id: HashMap<&str, &observed::Reprobe> = plan
        .iter()
        .map(|r| (todo[r.index].id.as_str(), r))
        .collect();
    let rows = &output.rows;
    let tracker = ctx.tracker("probe (observed configurations)", Some(jobs.len() as u64));
    let second = probe_programs_in(
        runtime,
        &jobs,
        cfg,
        workers,
        None,
        &tracker,
        &|row| match by_id.get(row.module_id.as_str()) {
            Some(r) => journal.append(&observed::adopt(&rows[r.index], row.clone(), r)),
            None => Ok(()),
        },
    )?;
    tracker.finish();
    for (r, row) in plan.iter().zip(second.rows) {
        let merged = observed::adopt(&output.rows[r.index], row, r);
        let used = observed::adopted(&merged);
        report.count(
            if used {
                "observed_used"
            } else {
                "observed_not_run"
            },
            1,
        );
        output.rows[r.index] = merged;
    }
    output.workers_started += second.workers_started;
    output.setup_cpu_ms += second.setup_cpu_ms;
    output.runner_cpu_ms += second.runner_cpu_ms;
    output.requeued += second.requeued;
    Ok(())
}

/// Probes modules (each with a program) with `workers` worker processes; rows come back in
/// the order of `modules`. An empty list returns at once without starting Python.
pub fn probe_programs(
    modules: &[&ModuleRow],
    cfg: &ProbeConfig,
    workers: usize,
    chat: Option<&dyn ChatClient>,
    tracker: &Tracker,
) -> Result<PoolOutput, Error> {
    probe_programs_with(modules, cfg, workers, chat, tracker, &|_| Ok(()))
}

/// [`probe_programs`], handing each row to `finished` as soon as its module is done (the
/// stage journals it); an error of `finished` stops the run.
pub fn probe_programs_with(
    modules: &[&ModuleRow],
    cfg: &ProbeConfig,
    workers: usize,
    chat: Option<&dyn ChatClient>,
    tracker: &Tracker,
    finished: pool::Finished<'_>,
) -> Result<PoolOutput, Error> {
    let runtime = runtime::Runtime::create()?;
    let jobs: Vec<Job<'_>> = modules.iter().map(|&module| Job::own(module)).collect();
    probe_programs_in(&runtime, &jobs, cfg, workers, chat, tracker, finished)
}

/// One module to probe.
#[derive(Debug, Clone)]
pub struct Job<'a> {
    /// The module (it must have a program).
    pub module: &'a ModuleRow,
    /// Definitions of `get_init_inputs()` / `get_inputs()` that replace the program's own
    /// (source); none: the program as it stands. The LLM repair is not asked about a job with
    /// an override.
    pub over: Option<String>,
}

impl<'a> Job<'a> {
    /// The module's program as it stands.
    pub fn own(module: &'a ModuleRow) -> Job<'a> {
        Job { module, over: None }
    }
}

/// [`probe_programs_with`] over `jobs`, with the runner of `runtime` (the benchmark's older
/// runner).
pub fn probe_programs_in(
    runtime: &runtime::Runtime,
    jobs: &[Job<'_>],
    cfg: &ProbeConfig,
    workers: usize,
    chat: Option<&dyn ChatClient>,
    tracker: &Tracker,
    finished: pool::Finished<'_>,
) -> Result<PoolOutput, Error> {
    cfg.validate()?;
    if jobs.is_empty() {
        return Ok(PoolOutput::default());
    }
    let configured = (!cfg.python.is_empty()).then(|| Path::new(&cfg.python));
    let python = resolve_python(configured).map_err(Error::Python)?;
    worker::check_interpreter(&python)?;
    let spec = worker::WorkerSpec {
        python,
        python_path: runtime.python_path(),
        tmp_root: runtime.tmp_root(),
        max_processes: cfg.max_processes,
        startup_timeout: Duration::from_secs_f64(cfg.startup_timeout_s),
        sandbox: cfg.sandbox.clone(),
    };
    let workers = workers.clamp(1, jobs.len());
    if cfg.ray_address.is_empty() {
        pool::probe_all(jobs, cfg, &spec, workers, chat, tracker, finished)
    } else {
        ray::probe_all(jobs, cfg, &spec, workers, chat, tracker, finished)
    }
}
