//! Steps as select sees them, grouped into trajectories with parent links resolved.
//!
//! A step's parent is the program its prompt asked to improve: another step's program (joined
//! on the parent id), or, for a first step (no parent id), the task's PyTorch reference, which
//! runs at eager speed by definition.

use std::collections::HashMap;

use ksmith_core::chat::ChatMessage;
use ksmith_core::evaluation::{Backend, EvalResult, Stamp, TimingMethod};

use crate::labels::Labeller;

/// One rollout step, reduced to what select needs.
#[derive(Debug, Clone, PartialEq)]
pub struct StepView {
    /// Step id.
    pub step_id: String,
    /// Task id.
    pub task_id: String,
    /// Iteration in the task's rollout (0 = first step).
    pub iteration: u32,
    /// Island.
    pub island: u32,
    /// The kernel language of the step's program.
    pub backend: Backend,
    /// The parent step; `None` when the parent is the reference.
    pub parent_id: Option<String>,
    /// The current (parent) program as the prompt showed it (for first steps, the seed: the
    /// reference with its editable block marked); empty when unknown.
    pub parent_program: String,
    /// Prompt messages as the teacher saw them.
    pub prompt: Vec<ChatMessage>,
    /// The teacher's answer as stored.
    pub response: String,
    /// True when the stored answer is only the start of the teacher's (cut at
    /// `[rollout] max_stored_answer_bytes`).
    pub response_cut: bool,
    /// The program after applying the answer; `None` when the edit failed.
    pub program: Option<String>,
    /// The evaluation of `program`; `None` when it was not evaluated.
    pub eval: Option<EvalResult>,
    /// The teacher model.
    pub teacher: String,
}

impl StepView {
    /// True when the step's program was evaluated correct.
    pub fn is_correct(&self) -> bool {
        self.program.is_some() && self.eval.as_ref().is_some_and(EvalResult::is_correct)
    }

    /// Speedup over eager, when correct and timed.
    pub fn speedup(&self) -> Option<f64> {
        if !self.is_correct() {
            return None;
        }
        self.eval
            .as_ref()
            .and_then(|e| e.speedup)
            .filter(|s| s.is_finite() && *s > 0.0)
    }

    /// Median runtime of the step's program in ms, when measured.
    pub fn runtime_ms(&self) -> Option<f64> {
        self.eval
            .as_ref()
            .and_then(|e| e.candidate_timing.as_ref())
            .filter(|t| t.method != TimingMethod::NotMeasured)
            .map(|t| t.median_ms)
    }

    /// Median runtime of eager PyTorch in ms in the step's evaluation session, when measured.
    pub fn eager_ms(&self) -> Option<f64> {
        self.eval
            .as_ref()
            .and_then(|e| e.reference_timing.as_ref())
            .filter(|t| t.method != TimingMethod::NotMeasured)
            .map(|t| t.median_ms)
    }

    /// The stamp of the step's evaluation (empty when it was not evaluated).
    pub fn stamp(&self) -> Stamp {
        self.eval.as_ref().map(Stamp::of).unwrap_or_default()
    }
}

/// The parent of a step.
#[derive(Debug, Clone, Copy)]
pub enum Parent<'a> {
    /// The PyTorch reference (first steps).
    Reference,
    /// Another step.
    Step(&'a StepView),
    /// The parent id names no step in the table.
    Missing,
}

/// All steps, indexed by id.
pub struct Trajectories<'a> {
    by_id: HashMap<&'a str, &'a StepView>,
}

impl<'a> Trajectories<'a> {
    /// Indexes `steps`.
    pub fn new(steps: &'a [StepView]) -> Self {
        Trajectories {
            by_id: steps.iter().map(|s| (s.step_id.as_str(), s)).collect(),
        }
    }

    /// The parent of `step`.
    pub fn parent(&self, step: &StepView) -> Parent<'a> {
        match &step.parent_id {
            None => Parent::Reference,
            Some(id) => match self.by_id.get(id.as_str()) {
                Some(p) if p.task_id == step.task_id => Parent::Step(p),
                _ => Parent::Missing,
            },
        }
    }
}

/// A trajectory: a task, and the island when trajectories are per island.
type TrajectoryKey = (String, Option<u32>);

/// `(iteration, the fastest step up to and including it)`, sorted by iteration.
type RecordLine<'a> = Vec<(u32, &'a StepView)>;

/// The best programs of each trajectory over time, to answer "was this program the best so
/// far when that prompt was built?".
///
/// A trajectory is a task's rollout, or one island of it (`per_island`). Only correct, timed
/// steps count. "Best" is judged on the speedups' intervals, not their point figures: a program
/// is still the best when the fastest earlier one is not significantly faster than it (the lower
/// bound of the ratio of their speedups is at most 1), so that two programs within timing noise
/// of each other are judged alike whichever of them the noise put ahead in a run.
pub struct BestSoFar<'a> {
    per_island: bool,
    records: HashMap<TrajectoryKey, RecordLine<'a>>,
    labeller: &'a Labeller<'a>,
}

impl<'a> BestSoFar<'a> {
    /// Indexes `steps`; `labeller` compares two programs' speedups with their intervals.
    pub fn new(steps: &'a [StepView], per_island: bool, labeller: &'a Labeller<'a>) -> Self {
        let mut groups: HashMap<TrajectoryKey, RecordLine<'a>> = HashMap::new();
        for s in steps.iter().filter(|s| s.speedup().is_some()) {
            groups
                .entry((s.task_id.clone(), per_island.then_some(s.island)))
                .or_default()
                .push((s.iteration, s));
        }
        for list in groups.values_mut() {
            list.sort_by(|a, b| {
                a.0.cmp(&b.0)
                    .then(speed(a.1).total_cmp(&speed(b.1)))
                    .then(a.1.step_id.cmp(&b.1.step_id))
            });
            let mut best: Option<&'a StepView> = None;
            for entry in list.iter_mut() {
                let fastest = match best {
                    Some(b) if speed(b) >= speed(entry.1) => b,
                    _ => entry.1,
                };
                best = Some(fastest);
                entry.1 = fastest;
            }
        }
        BestSoFar {
            per_island,
            records: groups,
            labeller,
        }
    }

    /// The fastest step of `step`'s trajectory among steps of earlier iterations.
    pub fn best_before(&self, step: &StepView) -> Option<&'a StepView> {
        let key = (step.task_id.clone(), self.per_island.then_some(step.island));
        let list = self.records.get(&key)?;
        let n = list.partition_point(|(it, _)| *it < step.iteration);
        n.checked_sub(1).map(|i| list[i].1)
    }

    /// True when `parent` (a correct, timed program) was the best of `step`'s trajectory when
    /// `step`'s prompt was built: no step of an earlier iteration was significantly faster.
    pub fn parent_is_best(&self, step: &StepView, parent: &StepView) -> bool {
        let (Some(mine), Some(best)) = (parent.speedup(), self.best_before(step)) else {
            return false;
        };
        if mine >= speed(best) || best.step_id == parent.step_id {
            return true;
        }
        // The fastest earlier program over this one: significantly faster when the lower
        // bound is above 1. Without an interval (no samples), the point figures decide.
        match self.labeller.over_parent(best, Parent::Step(parent)) {
            Ok(ratio) => !ratio.above(1.0),
            Err(_) => false,
        }
    }
}

/// A correct, timed step's speedup over eager (0 for others, which are never recorded).
fn speed(step: &StepView) -> f64 {
    step.speedup().unwrap_or(0.0)
}
