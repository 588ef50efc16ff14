//! Reading a work directory's tables into the figures the report shows.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;

use ksmith_core::report::StageReport;
use ksmith_core::table::{Table, read_table};
use ksmith_core::tables::{
    AnnotationRow, ClusterRow, DedupRow, GrpoRow, ModuleRow, ProbeRow, RepoRow, SftRow, StepRow,
    TaskRow,
};

use crate::funnel::{self, Funnel};
use crate::task_list::{self, TaskInfo};

/// Rollout metrics of one difficulty level, as the paper reports them.
#[derive(Debug, Clone, PartialEq)]
pub struct LevelMetrics {
    /// The level (1 to 3).
    pub level: u8,
    /// Tasks of this level with at least one step.
    pub tasks: u64,
    /// Share of those tasks with at least one correct program.
    pub correctness: f64,
    /// Share of those tasks whose best correct program is faster than eager (speedup > 1).
    pub fast_1: Option<f64>,
    /// Mean over tasks of the best speedup, counting tasks below 1x (or never correct) as 0.
    pub avg_speedup: Option<f64>,
}

/// The best-so-far speedup of one task after each iteration.
#[derive(Debug, Clone, PartialEq)]
pub struct Trajectory {
    /// The task.
    pub task_id: String,
    /// `(iteration, best correct speedup so far)`; `None` until a timed correct program exists.
    pub best_so_far: Vec<(u32, Option<f64>)>,
}

/// One task's rollout, for the per-task table.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskSummary {
    /// The task.
    pub task_id: String,
    /// Its module's class name and repository (empty when `tasks.parquet` does not name them).
    pub name: String,
    /// Its functional family (empty when `tasks.parquet` does not name it).
    pub family: String,
    /// Its difficulty level (0 when unknown).
    pub level: u8,
    /// Steps recorded.
    pub steps: u64,
    /// Correct steps.
    pub correct_steps: u64,
    /// Best measured speedup of a correct program (over PyTorch eager).
    pub best_speedup: Option<f64>,
    /// That program's speedup over the task's `torch.compile` baseline, when measured.
    pub best_over_compile: Option<f64>,
    /// That program's share of the task's speed-of-light, when known.
    pub best_sol_fraction: Option<f64>,
    /// Trivial steps (significantly faster than eager, not than compile), from
    /// `selection.json`; `None` before select ran.
    pub trivial: Option<u64>,
    /// The task's headroom as the rollout judged it (`rollout/headroom.json`): `none`, `yes`
    /// or `not judged`, with the baselines' shares of speed-of-light; empty when not recorded.
    pub headroom: String,
    /// Hacked steps.
    pub hacks: u64,
    /// How its rollout ended in the last process (`done`, `aborted`, ...), when recorded.
    pub ending: Option<String>,
    /// Why it did not finish.
    pub reason: String,
}

/// A dataset the export wrote or left out.
#[derive(Debug, Clone, PartialEq)]
pub struct ExportedDataset {
    /// Folder name.
    pub folder: String,
    /// Rows per split (empty when left out).
    pub splits: BTreeMap<String, u64>,
    /// Longest prompt and whole sample in tokens, when written.
    pub longest: Option<(u64, u64)>,
    /// Why it was left out.
    pub omitted: Option<String>,
}

/// Everything the report shows.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ReportData {
    /// The work directory.
    pub workdir: String,
    /// From the classes found to the tasks, per repository, with why classes were lost.
    pub funnel: Funnel,
    /// The funnel's unique modules per functional family (they add up to its "unique" count).
    pub families: BTreeMap<String, u64>,
    /// The funnel's unique modules per difficulty level.
    pub levels: BTreeMap<u8, u64>,
    /// The tasks: family, level, sizes, estimated time, source.
    pub task_list: Vec<TaskInfo>,
    /// True once the rollout has written steps (`steps.parquet`): the rollout sections are
    /// shown only then.
    pub rollout_ran: bool,
    /// Why the rollout did not run (its report's skip reason, e.g. no teacher configured).
    pub rollout_skipped: Option<String>,
    /// What the rollout and select made: steps, correct steps, SFT and GRPO samples (`None`
    /// for a table that does not exist).
    pub outputs: Vec<(String, Option<u64>)>,
    /// Best-so-far speedup per task.
    pub trajectories: Vec<Trajectory>,
    /// Paper metrics per level.
    pub level_metrics: Vec<LevelMetrics>,
    /// Steps per evaluator verdict (and per edit outcome when no candidate was evaluated).
    pub statuses: BTreeMap<String, u64>,
    /// Hacked steps per hack kind.
    pub hacks: BTreeMap<String, u64>,
    /// Teacher prompt tokens, completion tokens and steps answered from the cache.
    pub tokens: (u64, u64, u64),
    /// True when any step has a measured speedup (a GPU evaluator ran).
    pub timed: bool,
    /// One row per task with steps (or with a recorded ending).
    pub tasks: Vec<TaskSummary>,
    /// The rollout report's teacher counters (`teacher_requests`, `teacher_retries`,
    /// `teacher_failures`, ...) and `rollout_processes`.
    pub teacher: BTreeMap<String, u64>,
    /// Select's drops by `<set>/<reason>`, and export's caps too.
    pub select_drops: BTreeMap<String, u64>,
    /// Select's kept samples by set, kind and split (`sft_correctness_train`, `grpo_train`, ...).
    pub select_kept: BTreeMap<String, u64>,
    /// The datasets of the last export (`datasets/export.json`).
    pub exported: Vec<ExportedDataset>,
    /// True when select has run (its report exists).
    pub select_ran: bool,
    /// Tables that could not be read, with the error.
    pub notes: Vec<String>,
}

fn load<T: Table>(workdir: &Path, notes: &mut Vec<String>) -> Option<Vec<T>> {
    let path = T::path_in(workdir);
    if !path.exists() {
        return None;
    }
    match read_table::<T>(&path) {
        Ok(rows) => Some(rows),
        Err(e) => {
            notes.push(e.to_string());
            None
        }
    }
}

/// Reads every table of `workdir` that exists.
pub fn collect(workdir: &Path) -> ReportData {
    let mut notes = Vec::new();
    let repos = load::<RepoRow>(workdir, &mut notes);
    let modules = load::<ModuleRow>(workdir, &mut notes);
    let probes = load::<ProbeRow>(workdir, &mut notes);
    let dedup = load::<DedupRow>(workdir, &mut notes);
    let clusters = load::<ClusterRow>(workdir, &mut notes);
    let tasks = load::<TaskRow>(workdir, &mut notes);
    let steps = load::<StepRow>(workdir, &mut notes);
    let sft = load::<SftRow>(workdir, &mut notes);
    let grpo = load::<GrpoRow>(workdir, &mut notes);

    let annotations = load::<AnnotationRow>(workdir, &mut notes);
    let funnel = funnel::funnel(&funnel::Tables {
        repos: repos.as_deref(),
        modules: modules.as_deref(),
        probes: probes.as_deref(),
        dedup: dedup.as_deref(),
        clusters: clusters.as_deref(),
        tasks: tasks.as_deref(),
        annotations: annotations.as_deref(),
    });
    let (families, levels) = match &clusters {
        Some(clusters) => labels(&funnel.unique, clusters),
        None => Default::default(),
    };
    let task_list = task_list::task_list(
        workdir,
        tasks.as_deref().unwrap_or_default(),
        modules.as_deref().unwrap_or_default(),
        probes.as_deref().unwrap_or_default(),
        repos.as_deref().unwrap_or_default(),
    );
    let count = |n: Option<usize>| n.map(|n| n as u64);
    let outputs = vec![
        (
            "rollout steps".to_string(),
            count(steps.as_ref().map(Vec::len)),
        ),
        (
            "correct steps".to_string(),
            count(
                steps
                    .as_ref()
                    .map(|s| s.iter().filter(|s| s.correct).count()),
            ),
        ),
        ("SFT samples".to_string(), count(sft.as_ref().map(Vec::len))),
        (
            "GRPO samples".to_string(),
            count(grpo.as_ref().map(Vec::len)),
        ),
    ];
    let rollout_ran = steps.is_some();

    let task_level: BTreeMap<&str, u8> = tasks
        .iter()
        .flatten()
        .map(|t| (t.task_id.as_str(), t.level))
        .collect();
    let steps = steps.unwrap_or_default();
    let (trajectories, level_metrics, timed) = rollout_metrics(&steps, &task_level);
    let tasks = task_summaries(
        &steps,
        tasks.as_deref().unwrap_or_default(),
        workdir,
        &mut notes,
    );
    let rollout = StageReport::load(workdir, "rollout");
    let rollout_skipped = rollout
        .as_ref()
        .filter(|r| r.skipped && !rollout_ran)
        .and_then(|r| r.skip_reason.clone());
    let teacher = rollout
        .map(|r| {
            r.counters
                .into_iter()
                .filter(|(k, _)| k.starts_with("teacher_") || k == "rollout_processes")
                .collect()
        })
        .unwrap_or_default();
    let select = StageReport::load(workdir, "select");
    let select_ran = select.is_some();
    let select_kept = select
        .as_ref()
        .map(|r| {
            r.counters
                .iter()
                .filter(|(k, _)| k.starts_with("sft_") || k.starts_with("grpo_"))
                .map(|(k, v)| (k.clone(), *v))
                .collect()
        })
        .unwrap_or_default();
    let mut select_drops: BTreeMap<String, u64> = select.map(|r| r.dropped).unwrap_or_default();
    if let Some(r) = StageReport::load(workdir, "export") {
        for (k, v) in r.dropped {
            select_drops.insert(format!("export: {k}"), v);
        }
    }
    let exported = exported(workdir, &mut notes);

    let mut statuses = BTreeMap::new();
    let mut hacks = BTreeMap::new();
    let mut tokens = (0, 0, 0);
    for s in &steps {
        let key = match s.eval_status {
            Some(st) => format!("{st:?}"),
            None => format!("not evaluated: {:?}", s.edit_outcome),
        };
        *statuses.entry(snake(&key)).or_insert(0) += 1;
        if let Some(h) = s.hack {
            *hacks.entry(snake(&format!("{h:?}"))).or_insert(0) += 1;
        }
        tokens.0 += s.prompt_tokens;
        tokens.1 += s.completion_tokens;
        tokens.2 += u64::from(s.cached);
    }

    ReportData {
        workdir: workdir.display().to_string(),
        funnel,
        families,
        levels,
        task_list,
        rollout_ran,
        rollout_skipped,
        outputs,
        trajectories,
        level_metrics,
        statuses,
        hacks,
        tokens,
        timed,
        tasks,
        teacher,
        select_drops,
        select_kept,
        exported,
        select_ran,
        notes,
    }
}

/// The modules of `unique` per family and per level, as cluster labelled them (`unlabelled`,
/// level 0, for one it did not).
fn labels(
    unique: &[String],
    clusters: &[ClusterRow],
) -> (BTreeMap<String, u64>, BTreeMap<u8, u64>) {
    let by_id: HashMap<&str, &ClusterRow> =
        clusters.iter().map(|c| (c.module_id.as_str(), c)).collect();
    let mut families = BTreeMap::new();
    let mut levels = BTreeMap::new();
    for id in unique {
        let (family, level) = by_id
            .get(id.as_str())
            .map_or(("unlabelled".to_string(), 0), |c| {
                (c.family.clone(), c.level)
            });
        *families.entry(family).or_insert(0) += 1;
        *levels.entry(level).or_insert(0) += 1;
    }
    (families, levels)
}

/// A JSON side file of `workdir`, if it exists; an unreadable one is a note.
fn side_file(workdir: &Path, rel: &str, notes: &mut Vec<String>) -> Option<serde_json::Value> {
    let path = workdir.join(rel);
    let bytes = std::fs::read(&path).ok()?;
    match serde_json::from_slice(&bytes) {
        Ok(v) => Some(v),
        Err(e) => {
            notes.push(format!("{}: {e}", path.display()));
            None
        }
    }
}

/// The summary of `task` in `by_task`, made from `tasks.parquet`'s row when first seen.
fn entry<'a>(
    by_task: &'a mut BTreeMap<String, TaskSummary>,
    known: &BTreeMap<&str, &TaskRow>,
    task: &str,
) -> &'a mut TaskSummary {
    by_task
        .entry(task.to_string())
        .or_insert_with(|| TaskSummary {
            task_id: task.to_string(),
            name: known
                .get(task)
                .map(|t| format!("{} ({})", t.class_name, t.repo))
                .unwrap_or_default(),
            family: known
                .get(task)
                .map(|t| t.family.clone())
                .unwrap_or_default(),
            level: known.get(task).map_or(0, |t| t.level),
            steps: 0,
            correct_steps: 0,
            best_speedup: None,
            best_over_compile: None,
            best_sol_fraction: None,
            trivial: None,
            headroom: String::new(),
            hacks: 0,
            ending: None,
            reason: String::new(),
        })
}

/// One summary per task: its steps from `steps.parquet`, its family and level from
/// `tasks.parquet`, how it ended from `rollout/endings.json`.
fn task_summaries(
    steps: &[StepRow],
    tasks: &[TaskRow],
    workdir: &Path,
    notes: &mut Vec<String>,
) -> Vec<TaskSummary> {
    let mut by_task: BTreeMap<String, TaskSummary> = BTreeMap::new();
    let known: BTreeMap<&str, &TaskRow> = tasks.iter().map(|t| (t.task_id.as_str(), t)).collect();
    let mut best_step: BTreeMap<String, &StepRow> = BTreeMap::new();
    for s in steps {
        let t = entry(&mut by_task, &known, &s.task_id);
        t.steps += 1;
        if s.correct {
            t.correct_steps += 1;
            if let Some(sp) = s.speedup
                && t.best_speedup.is_none_or(|b| sp > b)
            {
                t.best_speedup = Some(sp);
                t.best_over_compile = s.speedup_over_compile;
                best_step.insert(s.task_id.clone(), s);
            }
        }
        t.hacks += u64::from(s.hack.is_some());
    }
    for (task, s) in best_step {
        let t = entry(&mut by_task, &known, &task);
        t.best_sol_fraction = s.eval_result().and_then(|e| {
            let ms = e.candidate_timing.as_ref()?.median_ms;
            e.speed_of_light.as_ref()?.fraction(ms).ok()
        });
    }
    if let Some(selection) = side_file(workdir, "selection.json", notes) {
        let trivial = selection["trivial_by_task"].as_object();
        for t in by_task.values_mut() {
            t.trivial = Some(
                trivial
                    .and_then(|m| m.get(&t.task_id))
                    .and_then(serde_json::Value::as_u64)
                    .unwrap_or(0),
            );
        }
    }
    if let Some(headroom) = side_file(workdir, "rollout/headroom.json", notes)
        && let Some(map) = headroom.as_object()
    {
        for (task, h) in map {
            entry(&mut by_task, &known, task).headroom = headroom_text(h);
        }
    }
    if let Some(endings) = side_file(workdir, "rollout/endings.json", notes)
        && let Some(map) = endings.as_object()
    {
        for (task, e) in map {
            let t = entry(&mut by_task, &known, task);
            t.ending = e["ending"].as_str().map(str::to_string);
            t.reason = e["reason"].as_str().unwrap_or_default().to_string();
        }
    }
    by_task.into_values().collect()
}

/// A task's headroom record (`ksmith_evolve::TaskHeadroom` as JSON) in words: `none` or `yes`
/// with the eager reference's and compile's shares of speed-of-light, or why it was not judged.
fn headroom_text(h: &serde_json::Value) -> String {
    let share = |v: &serde_json::Value| {
        v.as_f64().map_or("not measured".to_string(), |f| {
            format!("{:.0} %", f * 100.0)
        })
    };
    let judged = &h["headroom"];
    if judged.is_null() {
        return format!(
            "not judged: {}",
            h["why"].as_str().unwrap_or("no GPU evaluation")
        );
    }
    format!(
        "{} (SOL: eager {}, compile {})",
        if judged["none"].as_bool().unwrap_or(false) {
            "none"
        } else {
            "yes"
        },
        share(&judged["eager_sol_fraction"]),
        share(&judged["compile_sol_fraction"])
    )
}

/// The datasets `datasets/export.json` records.
fn exported(workdir: &Path, notes: &mut Vec<String>) -> Vec<ExportedDataset> {
    let Some(record) = side_file(workdir, "datasets/export.json", notes) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    if let Some(written) = record["written"].as_object() {
        for (folder, w) in written {
            let splits = w["splits"]
                .as_object()
                .map(|m| {
                    m.iter()
                        .map(|(k, v)| (k.clone(), v.as_u64().unwrap_or(0)))
                        .collect()
                })
                .unwrap_or_default();
            let longest = match (
                w["lengths"]["prompt"]["max"].as_u64(),
                w["lengths"]["total"]["max"].as_u64(),
            ) {
                (Some(p), Some(t)) => Some((p, t)),
                _ => None,
            };
            out.push(ExportedDataset {
                folder: folder.clone(),
                splits,
                longest,
                omitted: None,
            });
        }
    }
    if let Some(omitted) = record["omitted"].as_object() {
        for (folder, why) in omitted {
            out.push(ExportedDataset {
                folder: folder.clone(),
                splits: BTreeMap::new(),
                longest: None,
                omitted: Some(why.as_str().unwrap_or_default().to_string()),
            });
        }
    }
    out.sort_by(|a, b| a.folder.cmp(&b.folder));
    out
}

/// `TorchFallback` -> `torch_fallback`, `not evaluated: NoOp` -> `not evaluated: no_op`.
fn snake(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 4);
    let mut prev_lower = false;
    for c in s.chars() {
        if c.is_ascii_uppercase() {
            if prev_lower {
                out.push('_');
            }
            out.push(c.to_ascii_lowercase());
            prev_lower = false;
        } else {
            prev_lower = c.is_ascii_lowercase() || c.is_ascii_digit();
            out.push(c);
        }
    }
    out
}

fn rollout_metrics(
    steps: &[StepRow],
    task_level: &BTreeMap<&str, u8>,
) -> (Vec<Trajectory>, Vec<LevelMetrics>, bool) {
    let mut by_task: BTreeMap<&str, Vec<&StepRow>> = BTreeMap::new();
    for s in steps {
        by_task.entry(s.task_id.as_str()).or_default().push(s);
    }
    let timed = steps.iter().any(|s| s.speedup.is_some());
    let mut trajectories = Vec::new();
    // Per level: tasks, tasks with a correct program, best speedup per task.
    let mut per_level: BTreeMap<u8, (u64, u64, Vec<f64>)> = BTreeMap::new();
    for (task, mut rows) in by_task {
        rows.sort_by_key(|s| s.iteration);
        let iterations: BTreeSet<u32> = rows.iter().map(|s| s.iteration).collect();
        let mut best: Option<f64> = None;
        let mut best_so_far = Vec::new();
        let mut any_correct = false;
        let mut idx = 0;
        for it in iterations {
            while idx < rows.len() && rows[idx].iteration == it {
                let s = rows[idx];
                if s.correct {
                    any_correct = true;
                    if let Some(sp) = s.speedup {
                        best = Some(best.map_or(sp, |b: f64| b.max(sp)));
                    }
                }
                idx += 1;
            }
            best_so_far.push((it, best));
        }
        trajectories.push(Trajectory {
            task_id: task.to_string(),
            best_so_far,
        });
        let level = task_level.get(task).copied().unwrap_or(0);
        let entry = per_level.entry(level).or_insert((0, 0, Vec::new()));
        entry.0 += 1;
        entry.1 += u64::from(any_correct);
        let score = match best {
            Some(b) if any_correct && b >= 1.0 => b,
            _ => 0.0,
        };
        entry.2.push(score);
    }
    let level_metrics = per_level
        .into_iter()
        .map(|(level, (tasks, correct, scores))| {
            let n = tasks.max(1) as f64;
            LevelMetrics {
                level,
                tasks,
                correctness: correct as f64 / n,
                fast_1: timed.then(|| scores.iter().filter(|s| **s > 1.0).count() as f64 / n),
                avg_speedup: timed.then(|| scores.iter().sum::<f64>() / n),
            }
        })
        .collect();
    (trajectories, level_metrics, timed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snake_case_names() {
        assert_eq!(snake("TorchFallback"), "torch_fallback");
        assert_eq!(snake("Correct"), "correct");
        assert_eq!(snake("not evaluated: NoOp"), "not evaluated: no_op");
    }

    #[test]
    fn empty_workdir_shows_every_stage_as_not_run() {
        let dir = tempfile::tempdir().expect("tempdir");
        let data = collect(dir.path());
        assert_eq!(data.funnel.steps.len(), 6);
        assert!(data.funnel.steps.iter().all(|s| s.total.is_none()));
        assert!(data.outputs.iter().all(|(_, n)| n.is_none()));
        assert!(!data.rollout_ran && !data.select_ran);
        assert!(data.trajectories.is_empty());
        assert!(data.notes.is_empty());
    }
}
