//! The rollout stage: every task's loop on a pool of threads, then compaction into
//! `steps.parquet`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use ksmith_core::chat::ChatClient;
use ksmith_core::context::StageContext;
use ksmith_core::evaluation::{Evaluator, Headroom, SizeSet};
use ksmith_core::progress::Tracker;
use ksmith_core::report::StageReport;
use ksmith_core::stage::StagePlan;
use ksmith_core::table::{Table, read_table, write_bytes_atomically, write_table};
use ksmith_core::tables::{StepRow, TaskRow};
use serde::{Deserialize, Serialize};

use crate::config::RolloutConfig;
use crate::engine::{StepAbort, TaskCounters, TaskRun, task_dir};
use crate::error::Error;
use crate::in_flight::{Clock, TimedEvaluator, TimedTeacher, in_flight};
use crate::journal::read_journal;
use crate::preflight::{Preflighted, Refusal, preflight};
use crate::prompt::PromptSets;
use crate::{CODE_VERSION, STAGE};

/// How a task's rollout ended in this run.
#[derive(Debug)]
enum Ending {
    Done,
    /// Refused by its preflight, before any teacher call (this run or a recorded one).
    Refused(Refusal),
    BrokenReference(String),
    NoHeadroom(String),
    Aborted(String),
    BudgetSpent,
    TimeSpent,
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
    /// `done`, `refused_reference` (its reference does not run on the evaluation device: no
    /// teacher call was made), `broken_reference`, `no_headroom`, `aborted`,
    /// `stopped_by_token_budget`, `stopped_by_time_budget` or `failed`.
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
    /// Tasks evolved at once ([`in_flight`]).
    in_flight: usize,
    /// When the run stops starting steps (`time_budget_s`).
    deadline: Option<std::time::Instant>,
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
    match Refusal::load(&dir, &task.task_id) {
        Ok(Some(refusal)) => {
            out.ending = Ending::Refused(refusal);
            return out;
        }
        Ok(None) => {}
        Err(e) => {
            out.ending = Ending::Failed(e);
            return out;
        }
    }
    let broken = dir.join("broken.json");
    if let Ok(text) = std::fs::read_to_string(&broken) {
        out.ending = Ending::BrokenReference(text);
        return out;
    }
    let no_headroom = dir.join("no_headroom.json");
    if sh.cfg.skip_no_headroom
        && let Ok(text) = std::fs::read_to_string(&no_headroom)
    {
        out.ending = Ending::NoHeadroom(text);
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
    let mut preflighted = false;
    while !run.finished() {
        if sh.cfg.token_budget > 0 && sh.tokens_used.load(Ordering::SeqCst) >= sh.cfg.token_budget {
            out.ending = Ending::BudgetSpent;
            break;
        }
        if sh.deadline.is_some_and(|d| std::time::Instant::now() >= d) {
            out.ending = Ending::TimeSpent;
            break;
        }
        // Before this process's first teacher call for the task: its reference on the device.
        if !preflighted {
            match preflight(sh.evaluator, &run.reference_request()) {
                Preflighted::Ready => preflighted = true,
                Preflighted::Refused(refusal) => {
                    out.ending = match refusal.store(&dir) {
                        Ok(()) => Ending::Refused(refusal),
                        Err(e) => Ending::Failed(e),
                    };
                    break;
                }
                Preflighted::Unavailable(why) => {
                    out.ending = Ending::Aborted(why);
                    break;
                }
            }
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
                if sh.cfg.skip_no_headroom
                    && let Some(Ok(h)) = headroom_of(&row, sh.cfg.headroom_sol_share)
                    && h.none
                {
                    let why = describe_headroom(&h, sh.cfg.headroom_sol_share);
                    let _ = write_bytes_atomically(&no_headroom, why.as_bytes());
                    out.ending = Ending::NoHeadroom(why);
                    break;
                }
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
            let teacher = TimedTeacher {
                inner: teacher,
                clock: Clock::default(),
            };
            let evaluator = TimedEvaluator {
                inner: evaluator,
                clock: Clock::default(),
                preflights: Clock::default(),
            };
            let flight = in_flight(
                cfg.parallel_tasks,
                evaluator.capacity(),
                teacher.concurrency(),
                tasks.len(),
            );
            let described = evaluator.describe();
            ctx.info(format!(
                "rollout: {} task(s) in flight ({}); evaluator: {}",
                flight.tasks,
                flight.why,
                if described.is_empty() {
                    "-"
                } else {
                    &described
                }
            ));
            run.report.count("rollout_in_flight", flight.tasks as u64);
            let shared = Shared {
                cfg,
                prompts: &prompts,
                teacher: &teacher,
                evaluator: &evaluator,
                in_flight: flight.tasks,
                deadline: (cfg.time_budget_s > 0).then(|| {
                    std::time::Instant::now() + std::time::Duration::from_secs(cfg.time_budget_s)
                }),
                tokens_used: AtomicU64::new(0),
                tracker: ctx.tracker(STAGE, Some(tasks.len() as u64 * u64::from(cfg.iterations))),
                root,
            };
            let started = std::time::Instant::now();
            let outcomes = run_tasks(&tasks, &shared, ctx);
            run.report
                .count("rollout_wall_ms", started.elapsed().as_millis() as u64);
            let (teacher_ms, teacher_calls) = teacher.clock.read();
            let (eval_ms, eval_calls) = evaluator.clock.read();
            run.report.count("step_phase_ms/teacher_wait", teacher_ms);
            run.report
                .count("step_phase_calls/teacher_wait", teacher_calls);
            run.report.count("step_phase_ms/evaluation", eval_ms);
            run.report.count("step_phase_calls/evaluation", eval_calls);
            let (preflight_ms, preflight_calls) = evaluator.preflights.read();
            run.report.count("preflight_ms", preflight_ms);
            run.report.count("preflight_calls", preflight_calls);
            for (name, n) in evaluator.report_counters() {
                run.report.count(&name, n);
            }
            let mut ended = collect_steps(&tasks, outcomes, &shared.root, ctx, &mut run.report)?;
            count_steps(&ended.rows, &mut run.report);
            let headroom = headroom_by_task(&ended.rows, cfg.headroom_sol_share, &mut run.report);
            let json = serde_json::to_vec_pretty(&headroom).unwrap_or_default();
            write_bytes_atomically(&headroom_path(&ctx.workdir), &json)?;
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

/// Runs every task's loop on `shared.in_flight` threads; outcomes come back in task order.
fn run_tasks(tasks: &[TaskRow], shared: &Shared<'_>, ctx: &StageContext) -> Vec<TaskOutcome> {
    let next = AtomicUsize::new(0);
    let outcomes: Mutex<Vec<(usize, TaskOutcome)>> = Mutex::new(Vec::new());
    let notes = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..shared.in_flight.min(tasks.len()) {
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
            Ending::Refused(r) => ending("refused_reference", r.reason()),
            Ending::BrokenReference(m) => ending("broken_reference", m.clone()),
            Ending::NoHeadroom(m) => ending("no_headroom", m.clone()),
            Ending::BudgetSpent => ending(
                "stopped_by_token_budget",
                "the run's teacher token budget is spent".into(),
            ),
            Ending::TimeSpent => ending(
                "stopped_by_time_budget",
                "the run's time budget (time_budget_s) is spent".into(),
            ),
            Ending::Aborted(m) => ending("aborted", m.clone()),
            Ending::Failed(e) => ending("failed", e.to_string()),
        };
        ended.endings.insert(task.task_id.clone(), record);
        match o.ending {
            Ending::Done => report.count("tasks_done", 1),
            Ending::Refused(r) => {
                report.count("tasks_refused_reference", 1);
                report.count(&format!("tasks_refused_reference/{}", r.error), 1);
                ctx.warn(format!("task {}: {}", task.task_id, r.reason()));
            }
            Ending::BrokenReference(m) => {
                report.count("tasks_broken_reference", 1);
                ctx.warn(format!(
                    "task {}: reference does not run: {m}",
                    task.task_id
                ));
            }
            Ending::NoHeadroom(_) => report.count("tasks_left_out_no_headroom", 1),
            Ending::BudgetSpent => {
                ended.complete = false;
                report.count("tasks_stopped_by_token_budget", 1);
            }
            Ending::TimeSpent => {
                ended.complete = false;
                report.count("tasks_stopped_by_time_budget", 1);
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

/// `rollout/headroom.json`: each task's [`TaskHeadroom`], by task id (the report shows it).
pub fn headroom_path(workdir: &Path) -> PathBuf {
    workdir.join("rollout").join("headroom.json")
}

/// A task's headroom as the rollout judged it (see `ksmith_core::evaluation::Headroom`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskHeadroom {
    /// The baselines' figures, when they could be judged.
    pub headroom: Option<Headroom>,
    /// The share of speed-of-light it was judged with (`headroom_sol_share`).
    pub sol_share: f64,
    /// Why it could not be judged (no GPU evaluation, no speed-of-light).
    pub why: Option<String>,
}

/// The headroom judged from `row`'s evaluation, `None` when the step was not evaluated or its
/// task not built (a static rejection carries no baselines).
fn headroom_of(row: &StepRow, share: f64) -> Option<Result<Headroom, String>> {
    let eval = row.eval_result()?;
    eval.speed_of_light.as_ref()?;
    Some(eval.headroom(share))
}

/// The reason a task is left out, in words.
fn describe_headroom(h: &Headroom, share: f64) -> String {
    let compile = h
        .compile_sol_fraction
        .map_or("not measured".to_string(), |c| {
            format!("{:.0} %", c * 100.0)
        });
    format!(
        "no headroom: the eager reference reaches {:.0} % of speed-of-light, torch.compile {compile}, \
         at least headroom_sol_share = {share}",
        h.eager_sol_fraction * 100.0
    )
}

/// Every task's headroom, judged from its earliest step whose evaluation carries the baselines
/// (the evaluator measures them once per task), counted as `tasks_no_headroom`,
/// `tasks_with_headroom` and `tasks_headroom_not_judged`.
fn headroom_by_task(
    rows: &[StepRow],
    share: f64,
    report: &mut StageReport,
) -> BTreeMap<String, TaskHeadroom> {
    let mut out: BTreeMap<String, TaskHeadroom> = BTreeMap::new();
    let mut order: Vec<&StepRow> = rows.iter().collect();
    order.sort_by(|a, b| {
        (&a.task_id, a.iteration, &a.step_id).cmp(&(&b.task_id, b.iteration, &b.step_id))
    });
    for row in order {
        let judged = out.get(&row.task_id).is_some_and(|t| t.headroom.is_some());
        if judged {
            continue;
        }
        let entry = out.entry(row.task_id.clone()).or_insert(TaskHeadroom {
            headroom: None,
            sol_share: share,
            why: Some("no evaluation of the task carries its baselines".into()),
        });
        match headroom_of(row, share) {
            Some(Ok(h)) => {
                entry.headroom = Some(h);
                entry.why = None;
            }
            Some(Err(why)) => entry.why = Some(why),
            None => {}
        }
    }
    for t in out.values() {
        let key = match t.headroom {
            Some(h) if h.none => "tasks_no_headroom",
            Some(_) => "tasks_with_headroom",
            None => "tasks_headroom_not_judged",
        };
        report.count(key, 1);
    }
    out
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
