//! Steps as select sees them, grouped into trajectories with parent links resolved.
//!
//! A step's parent is the program its prompt asked to improve: another step's program (joined
//! on the parent id), or, for a first step (no parent id), the task's PyTorch reference, which
//! runs at eager speed by definition.

use std::collections::HashMap;

use ksmith_core::chat::ChatMessage;
use ksmith_core::evaluation::{EvalResult, TimingMethod};

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
    /// The parent step; `None` when the parent is the reference.
    pub parent_id: Option<String>,
    /// The current (parent) program as the prompt showed it (for first steps, the seed: the
    /// reference with its editable block marked); empty when unknown.
    pub parent_program: String,
    /// Prompt messages as the teacher saw them.
    pub prompt: Vec<ChatMessage>,
    /// The teacher's answer.
    pub response: String,
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

    /// The device of the step's evaluation.
    pub fn device(&self) -> String {
        self.eval
            .as_ref()
            .map(|e| e.hardware.device.clone())
            .unwrap_or_default()
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

/// The ids of steps whose program was a new best when it was found: correct, timed, and
/// faster than every correct timed step of the same group (task, or task and island) at an
/// earlier iteration.
pub fn best_so_far(steps: &[StepView], per_island: bool) -> std::collections::HashSet<String> {
    let mut groups: HashMap<(String, Option<u32>), Vec<&StepView>> = HashMap::new();
    for s in steps.iter().filter(|s| s.speedup().is_some()) {
        let island = per_island.then_some(s.island);
        groups
            .entry((s.task_id.clone(), island))
            .or_default()
            .push(s);
    }
    let mut best = std::collections::HashSet::new();
    for list in groups.values_mut() {
        list.sort_by(|a, b| {
            a.iteration
                .cmp(&b.iteration)
                .then_with(|| a.step_id.cmp(&b.step_id))
        });
        // Best of strictly earlier iterations; steps of one iteration do not see each other.
        let mut record = f64::NEG_INFINITY;
        let mut i = 0;
        while i < list.len() {
            let it = list[i].iteration;
            let mut j = i;
            let mut round_best = f64::NEG_INFINITY;
            while j < list.len() && list[j].iteration == it {
                let s = list[j].speedup().unwrap_or(f64::NEG_INFINITY);
                if s > record {
                    best.insert(list[j].step_id.clone());
                }
                round_best = round_best.max(s);
                j += 1;
            }
            record = record.max(round_best);
            i = j;
        }
    }
    best
}
