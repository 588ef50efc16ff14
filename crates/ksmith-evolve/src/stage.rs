//! The rollout stage: every task's loop on a pool of threads, then compaction into
//! `steps.parquet`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use ksmith_core::chat::ChatClient;
use ksmith_core::context::StageContext;
use ksmith_core::evaluation::{Evaluator, SizeSet};
use ksmith_core::progress::Tracker;
use ksmith_core::report::StageReport;
use ksmith_core::stage::StagePlan;
use ksmith_core::table::{Table, read_table, write_bytes_atomically, write_table};
use ksmith_core::tables::{StepRow, TaskRow};
use serde::{Deserialize, Serialize};

use crate::config::RolloutConfig;
use crate::engine::{StepAbort, TaskCounters, TaskRun, task_dir};
use crate::error::Error;
use crate::journal::read_journal;
use crate::prompt::PromptSets;
use crate::{CODE_VERSION, STAGE};

/// How a task's rollout ended in this run.
#[derive(Debug)]
enum Ending {
    Done,
    BrokenReference(String),
    Aborted(String),
    BudgetSpent,
    Failed(Error),
}

struct TaskOutcome {
    ending: Ending,
    new_steps: u64,
    replayed: u64,
    new_tokens: u64,
    counters: TaskCounters,
}

/// Where the per-task journals and checkpoints live.
pub fn tasks_root(workdir: &Path) -> std::path::PathBuf {
    workdir.join("rollout").join("tasks")
}

/// The counters of a process's own work that add up over every process that worked on the same
/// journals (a resumed rollout reports the whole rollout, not its last process).
pub const ACCUMULATED: [&str; 8] = [
    "steps_new",
    "teacher_tokens_new",
    "teacher_requests",
    "teacher_cache_hits",
    "teacher_retries",
    "teacher_failures",
    "teacher_prompt_tokens",
    "teacher_completion_tokens",
];

/// `rollout/counters.json`: the [`ACCUMULATED`] counters summed over the processes that worked
/// on the journals under `rollout/tasks/` (removed with them by `--force`). The report gives the
/// sums under the counters' names, the last process's own under `last_process/<name>`, and the
/// number of processes as `rollout_processes`. A process killed before it wrote its report adds
/// nothing here (its steps are in the journals and counted from them).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RunCounters {
    /// Processes that ran the stage on these journals.
    pub processes: u64,
    /// Their counters, summed.
    pub counters: BTreeMap<String, u64>,
}

impl RunCounters {
    /// Where they live in `workdir`.
    pub fn path_in(workdir: &Path) -> PathBuf {
        workdir.join("rollout").join("counters.json")
    }

    fn load(workdir: &Path) -> Self {
        std::fs::read(Self::path_in(workdir))
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default()
    }
}

/// How one task's rollout ended in the last process, with the reason when it did not finish.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskEnding {
    /// `done`, `broken_reference`, `aborted`, `stopped_by_token_budget` or `failed`.
    pub ending: String,
    /// Why it did not finish (empty when done).
    pub reason: String,
}

/// `rollout/endings.json`: each task's [`TaskEnding`] in the last process, by task id (the
/// report lists aborted tasks with the reason).
pub fn endings_path(workdir: &Path) -> PathBuf {
    workdir.join("rollout").join("endings.json")
}

struct Shared<'a> {
    cfg: &'a RolloutConfig,
    prompts: &'a PromptSets,
    teacher: &'a dyn ChatClient,
    evaluator: &'a dyn Evaluator,
    tokens_used: AtomicU64,
    tracker: Tracker,
    root: std::path::PathBuf,
}

/// The task's recorded alternate size sets (`tasks.alt_sizes`: a JSON list of objects mapping
/// constant names to integers; empty text or `[]`: none).
fn alt_sizes_of(task: &TaskRow) -> Result<Vec<SizeSet>, Error> {
    if task.alt_sizes.trim().is_empty() {
        return Ok(Vec::new());
    }
    serde_json::from_str(&task.alt_sizes).map_err(|e| Error::Corrupt {
        task: task.task_id.clone(),
        path: TaskRow::path_in(Path::new("")),
        message: format!(
            "alt_sizes is not a list of size sets ({e}): {:.200}",
            task.alt_sizes
        ),
    })
}

fn run_task(task: &TaskRow, sh: &Shared<'_>, notes: &Mutex<Vec<String>>) -> TaskOutcome {
    let dir = task_dir(&sh.root, &task.task_id);
    let mut out = TaskOutcome {
        ending: Ending::Done,
        new_steps: 0,
        replayed: 0,
        new_tokens: 0,
        counters: TaskCounters::default(),
    };
    let broken = dir.join("broken.json");
    if let Ok(text) = std::fs::read_to_string(&broken) {
        out.ending = Ending::BrokenReference(text);
        return out;
    }
    let alt_sizes = match alt_sizes_of(task) {
        Ok(sets) => sets,
        Err(e) => {
            out.ending = Ending::Failed(e);
            return out;
        }
    };
    let prompts = match sh.prompts.of(sh.cfg.backend_of(&task.task_id)) {
        Ok(p) => p,
        Err(e) => {
            out.ending = Ending::Failed(e);
            return out;
        }
    };
    let mut run = match TaskRun::open(&task.task_id, &task.program, sh.cfg, prompts, &dir) {
        Ok(r) => r.with_alt_sizes(alt_sizes),
        Err(e) => {
            out.ending = Ending::Failed(e);
            return out;
        }
    };
    if !run.notes.is_empty() {
        notes.lock().unwrap_or_else(|e| e.into_inner()).extend(
            run.notes
                .iter()
                .map(|n| format!("task {}: {n}", task.task_id)),
        );
    }
    out.replayed = u64::from(run.replayed);
    sh.tracker
        .inc(u64::from(run.state().steps_done.min(sh.cfg.iterations)));
    while !run.finished() {
        if sh.cfg.token_budget > 0 && sh.tokens_used.load(Ordering::SeqCst) >= sh.cfg.token_budget {
            out.ending = Ending::BudgetSpent;
            break;
        }
        match run.step(sh.teacher, sh.evaluator) {
            Ok(row) => {
                out.new_steps += 1;
                if !row.cached {
                    let t = row.prompt_tokens + row.completion_tokens;
                    out.new_tokens += t;
                    sh.tokens_used.fetch_add(t, Ordering::SeqCst);
                }
                sh.tracker.inc(1);
            }
            Err(StepAbort::BrokenReference(m)) => {
                let _ = write_bytes_atomically(&broken, m.as_bytes());
                out.ending = Ending::BrokenReference(m);
                break;
            }
            Err(e @ (StepAbort::Teacher(_) | StepAbort::Evaluator(_))) => {
                out.ending = Ending::Aborted(e.to_string());
                break;
            }
            Err(StepAbort::Storage(e)) => {
                out.ending = Ending::Failed(e);
                break;
            }
        }
    }
    if let Err(e) = run.checkpoint()
        && matches!(out.ending, Ending::Done)
    {
        out.ending = Ending::Failed(e);
    }
    out.counters = run.state().counters.clone();
    out
}

/// Takes the rollout lock of `workdir` (released when the returned file is dropped or the
/// process dies), so two rollouts never append to the same journals.
fn lock_workdir(workdir: &Path) -> Result<std::fs::File, Error> {
    let dir = workdir.join("rollout");
    std::fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
    let path = dir.join("rollout.lock");
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|e| Error::io(&path, e))?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(std::fs::TryLockError::WouldBlock) => Err(Error::Locked { path }),
        Err(std::fs::TryLockError::Error(e)) => Err(Error::io(&path, e)),
    }
}

/// Runs the rollout stage: reads `tasks.parquet`, evolves each task for `cfg.iterations` steps
/// (resuming whatever earlier runs recorded under `rollout/tasks/`), and writes every step to
/// `steps.parquet`. Steps are appended durably as they complete; a task whose teacher or
/// evaluator becomes unavailable stops, keeps its steps, and makes the stage return
/// [`Error::Incomplete`] after writing the table (its fingerprint then marks it incomplete, so
/// a rerun resumes instead of skipping).
pub fn run(
    cfg: &RolloutConfig,
    ctx: &StageContext,
    teacher: &dyn ChatClient,
    evaluator: &dyn Evaluator,
) -> Result<StageReport, Error> {
    run_with_identity(cfg, ctx, teacher, evaluator, "")
}

/// [`run`], with `identity` (e.g. a hash of the teacher models and the evaluator settings) added
/// to the output's fingerprint, so that changing the teacher or the evaluator makes the stage
/// run again instead of reporting itself up to date. Recorded steps are kept and resumed either
/// way (a changed teacher continues the same trajectories).
pub fn run_with_identity(
    cfg: &RolloutConfig,
    ctx: &StageContext,
    teacher: &dyn ChatClient,
    evaluator: &dyn Evaluator,
    identity: &str,
) -> Result<StageReport, Error> {
    cfg.validate()?;
    let input = TaskRow::path_in(&ctx.workdir);
    let output = StepRow::path_in(&ctx.workdir);
    StagePlan::new(ctx, STAGE, CODE_VERSION)
        .config(cfg)
        .part("identity", identity)
        .input(&input, "cluster")
        .output(&output)
        .run(|run| {
            let mut tasks: Vec<TaskRow> = read_table(&input)?;
            if cfg.max_tasks > 0 {
                tasks.truncate(cfg.max_tasks);
            }
            run.report.rows_read = tasks.len() as u64;
            let root = tasks_root(&ctx.workdir);
            let _lock = lock_workdir(&ctx.workdir)?;
            let counters_path = RunCounters::path_in(&ctx.workdir);
            if ctx.force && root.exists() {
                std::fs::remove_dir_all(&root).map_err(|e| Error::io(&root, e))?;
            }
            if ctx.force && counters_path.exists() {
                std::fs::remove_file(&counters_path).map_err(|e| Error::io(&counters_path, e))?;
            }
            let prompts = PromptSets::load(cfg)?;
            let shared = Shared {
                cfg,
                prompts: &prompts,
                teacher,
                evaluator,
                tokens_used: AtomicU64::new(0),
                tracker: ctx.tracker(STAGE, Some(tasks.len() as u64 * u64::from(cfg.iterations))),
                root,
            };
            let outcomes = run_tasks(&tasks, &shared, ctx);
            let mut ended = collect_steps(&tasks, outcomes, &shared.root, ctx, &mut run.report)?;
            count_steps(&ended.rows, &mut run.report);
            for (name, n) in teacher.report_counters() {
                if ACCUMULATED.contains(&name) {
                    *ended.this_process.entry(name.to_string()).or_default() += n;
                } else {
                    run.report.count(name, n);
                }
            }
            let mut total = RunCounters::load(&ctx.workdir);
            total.processes += 1;
            for (name, n) in &ended.this_process {
                *total.counters.entry(name.clone()).or_default() += n;
            }
            let json = serde_json::to_vec_pretty(&total).unwrap_or_default();
            write_bytes_atomically(&counters_path, &json)?;
            for (name, n) in &total.counters {
                run.report.count(name, *n);
            }
            for (name, n) in &ended.this_process {
                run.report.count(&format!("last_process/{name}"), *n);
            }
            run.report.count("rollout_processes", total.processes);
            let json = serde_json::to_vec_pretty(&ended.endings).unwrap_or_default();
            write_bytes_atomically(&endings_path(&ctx.workdir), &json)?;
            if !ended.complete {
                let incomplete = format!("{}:incomplete", run.fingerprint());
                run.set_fingerprint(incomplete);
            }
            write_table(&output, &ended.rows, run.fingerprint())?;
            run.report.rows_written = ended.rows.len() as u64;
            if let Some(e) = ended.failure {
                run.fail_after_report(e);
            }
            if !ended.aborted.is_empty() {
                run.fail_after_report(Error::Incomplete(format!(
                    "{} task(s) stopped early, rerun to resume: {}",
                    ended.aborted.len(),
                    ended.aborted.join("; ")
                )));
            }
            Ok(())
        })
}

/// Runs every task's loop on `cfg.parallel_tasks` threads; outcomes come back in task order.
fn run_tasks(tasks: &[TaskRow], shared: &Shared<'_>, ctx: &StageContext) -> Vec<TaskOutcome> {
    let next = AtomicUsize::new(0);
    let outcomes: Mutex<Vec<(usize, TaskOutcome)>> = Mutex::new(Vec::new());
    let notes = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..shared.cfg.parallel_tasks.min(tasks.len()) {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::SeqCst);
                    let Some(task) = tasks.get(i) else { break };
                    let o = run_task(task, shared, &notes);
                    outcomes
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .push((i, o));
                }
            });
        }
    });
    shared.tracker.finish();
    for n in notes.into_inner().unwrap_or_else(|e| e.into_inner()) {
        ctx.warn(n);
    }
    let mut outcomes = outcomes.into_inner().unwrap_or_else(|e| e.into_inner());
    outcomes.sort_by_key(|(i, _)| *i);
    outcomes.into_iter().map(|(_, o)| o).collect()
}

/// Every task's recorded steps and how the run ended.
struct Ended {
    rows: Vec<StepRow>,
    /// Tasks stopped by an unavailable teacher or evaluator (resumable).
    aborted: Vec<String>,
    /// The first task that failed on stored state.
    failure: Option<Error>,
    /// False when a task did not finish, so the output must not look up to date.
    complete: bool,
    /// This process's [`ACCUMULATED`] counters.
    this_process: BTreeMap<String, u64>,
    /// How each task ended.
    endings: BTreeMap<String, TaskEnding>,
}

/// Reads back each task's journal and counts how each task ended.
fn collect_steps(
    tasks: &[TaskRow],
    outcomes: Vec<TaskOutcome>,
    root: &Path,
    ctx: &StageContext,
    report: &mut StageReport,
) -> Result<Ended, Error> {
    let mut ended = Ended {
        rows: Vec::new(),
        aborted: Vec::new(),
        failure: None,
        complete: true,
        this_process: BTreeMap::new(),
        endings: BTreeMap::new(),
    };
    for (task, o) in tasks.iter().zip(outcomes) {
        ended.rows.extend(read_journal(
            &task.task_id,
            &task_dir(root, &task.task_id).join("steps.jsonl"),
        )?);
        *ended.this_process.entry("steps_new".into()).or_default() += o.new_steps;
        *ended
            .this_process
            .entry("teacher_tokens_new".into())
            .or_default() += o.new_tokens;
        report.count("steps_replayed", o.replayed);
        report.count("prompts_trimmed", o.counters.prompts_trimmed);
        report.count("prompts_over_budget", o.counters.prompts_over_budget);
        report.count("programs_migrated", o.counters.migrated);
        let ending = |name: &str, reason: String| TaskEnding {
            ending: name.to_string(),
            reason,
        };
        let record = match &o.ending {
            Ending::Done => ending("done", String::new()),
            Ending::BrokenReference(m) => ending("broken_reference", m.clone()),
            Ending::BudgetSpent => ending(
                "stopped_by_token_budget",
                "the run's teacher token budget is spent".into(),
            ),
            Ending::Aborted(m) => ending("aborted", m.clone()),
            Ending::Failed(e) => ending("failed", e.to_string()),
        };
        ended.endings.insert(task.task_id.clone(), record);
        match o.ending {
            Ending::Done => report.count("tasks_done", 1),
            Ending::BrokenReference(m) => {
                report.count("tasks_broken_reference", 1);
                ctx.warn(format!(
                    "task {}: reference does not run: {m}",
                    task.task_id
                ));
            }
            Ending::BudgetSpent => {
                ended.complete = false;
                report.count("tasks_stopped_by_token_budget", 1);
            }
            Ending::Aborted(m) => {
                ended.complete = false;
                report.count("tasks_aborted", 1);
                ended.aborted.push(format!("task {}: {m}", task.task_id));
            }
            Ending::Failed(e) => {
                ended.complete = false;
                report.count("tasks_failed", 1);
                ctx.warn(format!("task {}: {e}", task.task_id));
                ended.failure.get_or_insert(e);
            }
        }
    }
    Ok(ended)
}

/// Correct, new-best and cached steps, and the others by evaluation status or edit outcome.
fn count_steps(rows: &[StepRow], report: &mut StageReport) {
    for row in rows {
        if row.correct {
            report.count("steps_correct", 1);
        } else if let Some(status) = row.eval_status {
            report.drop_row(status.as_str());
        } else {
            report.drop_row(row.edit_outcome.as_str());
        }
        if row.is_new_best {
            report.count("steps_new_best", 1);
        }
        if row.cached {
            report.count("steps_cached_answer", 1);
        }
    }
}
