//! Each step's speed labels: its speedup over eager, over the task's `torch.compile` baseline
//! and over its parent, each with a confidence interval drawn from the evaluator's samples
//! (`ksmith_core::speedup_interval`), or the reason there is none; and whether the step is
//! `trivial` (significantly faster than eager, not than compile).
//!
//! The bootstrap replicates of every correct step's speedup over eager are drawn once (in
//! parallel, seeded by the step id), so a step and the children that compare with it share
//! them: the speedup over the parent is the ratio of the two steps' replicates. The compile
//! baseline's replicates are drawn once per task (seeded by the task id, from the first step
//! whose evaluation carries a measured baseline: the evaluator measures it once per task), and
//! the speedup over compile is the ratio of the step's replicates to them.

use std::cmp::Reverse;
use std::collections::HashMap;

use ksmith_core::evaluation::CompileBaseline;
use ksmith_core::speedup_interval::{Bootstrap, Draws, Interval};
use ksmith_core::tables::SpeedLabels;
use rayon::prelude::*;

use crate::trajectory::{Parent, StepView};

/// A task's compile baseline as a step's evaluation carries it: whether it was measured, the
/// step (earliest first) and the baseline.
type FoundBaseline<'a> = (bool, Reverse<(u32, &'a str)>, &'a CompileBaseline);

/// The replicates over eager of every correct step, by step id, or why it has none; those of
/// each task's compile baseline; and the factor a step must beat compile by.
pub struct Labeller<'a> {
    bootstrap: Bootstrap,
    draws: HashMap<&'a str, Result<Draws, String>>,
    compile: HashMap<&'a str, Result<Draws, String>>,
    min_gain_over_compile: f64,
}

impl<'a> Labeller<'a> {
    /// Draws the replicates of every correct, evaluated step of `steps` and of every task's
    /// compile baseline; a step is `trivial` when its speedup over eager is significant and
    /// the lower bound of its speedup over compile is not above `min_gain_over_compile`.
    pub fn new(steps: &'a [StepView], bootstrap: Bootstrap, min_gain_over_compile: f64) -> Self {
        let draws = steps
            .par_iter()
            .filter(|s| s.is_correct())
            .filter_map(|s| {
                let e = s.eval.as_ref()?;
                Some((s.step_id.as_str(), bootstrap.eager_draws(e, &s.step_id)))
            })
            .collect();
        // per task, the earliest step's measured baseline (else the earliest one's reason)
        let mut baselines: HashMap<&str, FoundBaseline<'_>> = HashMap::new();
        for s in steps {
            let Some(b) = s.eval.as_ref().and_then(|e| e.compile_baseline.as_ref()) else {
                continue;
            };
            let found = (
                b.timing.is_some(),
                Reverse((s.iteration, s.step_id.as_str())),
                b,
            );
            let held = baselines.entry(s.task_id.as_str()).or_insert(found);
            if (found.0, found.1) > (held.0, held.1) {
                *held = found;
            }
        }
        let compile = baselines
            .into_par_iter()
            .map(|(task, (_, _, b))| (task, bootstrap.compile_draws(b, &format!("{task}:compile"))))
            .collect();
        Labeller {
            bootstrap,
            draws,
            compile,
            min_gain_over_compile,
        }
    }

    /// The speedup over the task's `torch.compile` baseline of `step` with its interval, or
    /// why there is none.
    pub fn over_compile(&self, step: &StepView) -> Result<Interval, String> {
        let mine = self.eager_draws(step)?;
        let theirs = match self.compile.get(step.task_id.as_str()) {
            Some(Ok(d)) => d,
            Some(Err(why)) => return Err(format!("compile baseline: {why}")),
            None => return Err("no evaluation of the task carries a compile baseline".into()),
        };
        mine.ratio(theirs)
            .map(|r| self.bootstrap.interval(&r))
            .ok_or_else(|| "the compile baseline's speedup cannot be compared".into())
    }

    /// Whether a step with these intervals is `trivial` (see [`SpeedLabels::trivial`]):
    /// `None` without a significant gain over eager or without an interval over compile.
    fn trivial(
        &self,
        over_eager: &Result<Interval, String>,
        over_compile: &Result<Interval, String>,
    ) -> Option<bool> {
        match (over_eager, over_compile) {
            (Ok(e), Ok(c)) if e.above(1.0) => Some(!c.above(self.min_gain_over_compile)),
            _ => None,
        }
    }

    fn eager_draws(&self, step: &StepView) -> Result<&Draws, String> {
        if !step.is_correct() {
            return Err("not correct".into());
        }
        match self.draws.get(step.step_id.as_str()) {
            Some(Ok(d)) => Ok(d),
            Some(Err(why)) => Err(why.clone()),
            None => Err("not evaluated".into()),
        }
    }

    /// The speedup over eager of `step` with its interval, or why there is none.
    pub fn over_eager(&self, step: &StepView) -> Result<Interval, String> {
        self.eager_draws(step).map(|d| self.bootstrap.interval(d))
    }

    /// The speedup of `step` over `parent` with its interval, or why there is none. Over the
    /// PyTorch reference it is the speedup over eager.
    pub fn over_parent(&self, step: &StepView, parent: Parent<'_>) -> Result<Interval, String> {
        match parent {
            Parent::Reference => self.over_eager(step),
            Parent::Missing => Err("the parent is not among the steps".into()),
            Parent::Step(p) => {
                let mine = self.eager_draws(step)?;
                let theirs = self
                    .eager_draws(p)
                    .map_err(|why| format!("parent: {why}"))?;
                mine.ratio(theirs)
                    .map(|r| self.bootstrap.interval(&r))
                    .ok_or_else(|| "the parent's speedup cannot be compared".into())
            }
        }
    }

    /// The labels of `step` (over eager, over compile, over `parent`, whether it is trivial,
    /// its share of speed-of-light).
    pub fn labels(&self, step: &StepView, parent: Parent<'_>) -> SpeedLabels {
        let over_eager = self.over_eager(step);
        let over_compile = self.over_compile(step);
        let trivial = self.trivial(&over_eager, &over_compile);
        labels_of(
            Figures {
                over_eager,
                over_compile,
                over_parent: Some(self.over_parent(step, parent)),
                sol: sol_fraction(step),
            },
            trivial,
        )
    }

    /// The labels of a prompt's current program `parent` of task `task_id`: its speedups over
    /// eager (the reference's is exactly 1 when the task's eager time is known, `eager_timed`)
    /// and over compile, whether it is trivial, its share of speed-of-light.
    pub fn current_program(
        &self,
        task_id: &str,
        parent: Parent<'_>,
        eager_timed: bool,
    ) -> SpeedLabels {
        let sol = match parent {
            Parent::Step(p) => sol_fraction(p),
            _ => Err("the current program is the reference: see the task's speed-of-light".into()),
        };
        let over_eager = match parent {
            Parent::Step(p) => self.over_eager(p),
            Parent::Reference if eager_timed => Ok(Interval {
                value: 1.0,
                low: 1.0,
                high: 1.0,
            }),
            Parent::Reference => Err("no step of the task timed the reference".into()),
            Parent::Missing => Err("the current program is not among the steps".into()),
        };
        let over_compile = match parent {
            Parent::Step(p) => self.over_compile(p),
            Parent::Reference => match self.compile.get(task_id) {
                // the reference's speedup over compile: 1 over compile's over eager
                Some(Ok(c)) => {
                    let one = Draws {
                        value: 1.0,
                        draws: vec![1.0; c.draws.len()],
                        paired: true,
                    };
                    one.ratio(c)
                        .map(|r| self.bootstrap.interval(&r))
                        .ok_or_else(|| "the compile baseline's speedup cannot be compared".into())
                }
                Some(Err(why)) => Err(format!("compile baseline: {why}")),
                None => Err("no evaluation of the task carries a compile baseline".into()),
            },
            Parent::Missing => Err("the current program is not among the steps".into()),
        };
        let trivial = self.trivial(&over_eager, &over_compile);
        labels_of(
            Figures {
                over_eager,
                over_compile,
                over_parent: None,
                sol,
            },
            trivial,
        )
    }
}

/// The share of speed-of-light `step`'s program reaches, or why there is none.
fn sol_fraction(step: &StepView) -> Result<f64, String> {
    let Some(ms) = step.runtime_ms().filter(|_| step.is_correct()) else {
        return Err("not a correct, timed program".into());
    };
    match step.eval.as_ref().and_then(|e| e.speed_of_light.as_ref()) {
        Some(sol) => sol.fraction(ms),
        None => Err("the evaluation carries no speed-of-light".into()),
    }
}

/// A program's figures, each or why it is missing (`over_parent` `None`: not labelled).
struct Figures {
    over_eager: Result<Interval, String>,
    over_compile: Result<Interval, String>,
    over_parent: Option<Result<Interval, String>>,
    sol: Result<f64, String>,
}

/// The labels from the figures, with the reasons of those missing.
fn labels_of(f: Figures, trivial: Option<bool>) -> SpeedLabels {
    let Figures {
        over_eager,
        over_compile,
        over_parent,
        sol,
    } = f;
    let mut why = Vec::new();
    let over_eager = over_eager
        .map_err(|w| why.push(format!("over eager: {w}")))
        .ok();
    let over_compile = over_compile
        .map_err(|w| why.push(format!("over torch.compile: {w}")))
        .ok();
    let over_parent = over_parent.and_then(|r| {
        r.map_err(|w| why.push(format!("over the parent: {w}")))
            .ok()
    });
    let sol_fraction = sol
        .map_err(|w| why.push(format!("speed-of-light: {w}")))
        .ok();
    SpeedLabels {
        over_eager,
        over_compile,
        trivial,
        over_parent,
        sol_fraction,
        why_null: (!why.is_empty()).then(|| why.join("; ")),
    }
}
