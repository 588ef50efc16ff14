//! Reading a work directory's tables into the figures the report shows.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use ksmith_core::table::{Table, read_table};
use ksmith_core::tables::{
    ClusterRow, DedupRow, GrpoRow, ModuleRow, ModuleStatus, ProbeRow, ProbeStatus, RepoRow,
    RepoStatus, SftRow, StepRow, TaskRow,
};

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

/// Everything the report shows.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ReportData {
    /// The work directory.
    pub workdir: String,
    /// Funnel stages with their counts; `None` when the table does not exist.
    pub funnel: Vec<(String, Option<u64>)>,
    /// Unique modules per functional family.
    pub families: BTreeMap<String, u64>,
    /// Unique modules per difficulty level.
    pub levels: BTreeMap<u8, u64>,
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

    let count = |n: Option<usize>| n.map(|n| n as u64);
    let funnel = vec![
        (
            "repositories accepted".to_string(),
            count(
                repos
                    .as_ref()
                    .map(|r| r.iter().filter(|r| r.status == RepoStatus::Ok).count()),
            ),
        ),
        (
            "modules extracted".to_string(),
            count(
                modules
                    .as_ref()
                    .map(|m| m.iter().filter(|m| m.status == ModuleStatus::Ok).count()),
            ),
        ),
        (
            "runnable".to_string(),
            count(
                probes
                    .as_ref()
                    .map(|p| p.iter().filter(|p| p.status == ProbeStatus::Ok).count()),
            ),
        ),
        (
            "unique".to_string(),
            count(dedup.as_ref().map(|d| d.iter().filter(|d| d.kept).count())),
        ),
        ("tasks".to_string(), count(tasks.as_ref().map(Vec::len))),
        (
            "rollout steps".to_string(),
            count(steps.as_ref().map(Vec::len)),
        ),
        ("SFT samples".to_string(), count(sft.as_ref().map(Vec::len))),
        (
            "GRPO samples".to_string(),
            count(grpo.as_ref().map(Vec::len)),
        ),
    ];

    let mut families = BTreeMap::new();
    let mut levels = BTreeMap::new();
    for c in clusters.iter().flatten() {
        *families.entry(c.family.clone()).or_insert(0) += 1;
        *levels.entry(c.level).or_insert(0) += 1;
    }

    let task_level: BTreeMap<&str, u8> = tasks
        .iter()
        .flatten()
        .map(|t| (t.task_id.as_str(), t.level))
        .collect();
    let steps = steps.unwrap_or_default();
    let (trajectories, level_metrics, timed) = rollout_metrics(&steps, &task_level);

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
        trajectories,
        level_metrics,
        statuses,
        hacks,
        tokens,
        timed,
        notes,
    }
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
        assert_eq!(data.funnel.len(), 8);
        assert!(data.funnel.iter().all(|(_, n)| n.is_none()));
        assert!(data.trajectories.is_empty());
        assert!(data.notes.is_empty());
    }
}
