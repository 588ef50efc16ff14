//! Each step's speed labels: its speedup over eager and over its parent, each with a confidence
//! interval drawn from the evaluator's samples (`ksmith_core::speedup_interval`), or the reason
//! there is none.
//!
//! The bootstrap replicates of every correct step's speedup over eager are drawn once (in
//! parallel, seeded by the step id), so a step and the children that compare with it share
//! them: the speedup over the parent is the ratio of the two steps' replicates.

use std::collections::HashMap;

use ksmith_core::speedup_interval::{Bootstrap, Draws, Interval};
use ksmith_core::tables::SpeedLabels;
use rayon::prelude::*;

use crate::trajectory::{Parent, StepView};

/// The replicates over eager of every correct step, by step id, or why it has none.
pub struct Labeller<'a> {
    bootstrap: Bootstrap,
    draws: HashMap<&'a str, Result<Draws, String>>,
}

impl<'a> Labeller<'a> {
    /// Draws the replicates of every correct, evaluated step of `steps`.
    pub fn new(steps: &'a [StepView], bootstrap: Bootstrap) -> Self {
        let draws = steps
            .par_iter()
            .filter(|s| s.is_correct())
            .filter_map(|s| {
                let e = s.eval.as_ref()?;
                Some((s.step_id.as_str(), bootstrap.eager_draws(e, &s.step_id)))
            })
            .collect();
        Labeller { bootstrap, draws }
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

    /// The labels of `step` (over eager, over `parent`, its share of speed-of-light).
    pub fn labels(&self, step: &StepView, parent: Parent<'_>) -> SpeedLabels {
        labels_of(
            self.over_eager(step),
            Some(self.over_parent(step, parent)),
            sol_fraction(step),
        )
    }

    /// The labels of a prompt's current program `parent`: its speedup over eager only (the
    /// reference's is exactly 1 when the task's eager time is known, `eager_timed`).
    pub fn current_program(&self, parent: Parent<'_>, eager_timed: bool) -> SpeedLabels {
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
        labels_of(over_eager, None, sol)
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

/// The labels from the figures (`over_parent` `None`: not labelled), with the reasons of those
/// missing.
fn labels_of(
    over_eager: Result<Interval, String>,
    over_parent: Option<Result<Interval, String>>,
    sol: Result<f64, String>,
) -> SpeedLabels {
    let mut why = Vec::new();
    let over_eager = over_eager
        .map_err(|w| why.push(format!("over eager: {w}")))
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
        over_parent,
        sol_fraction,
        why_null: (!why.is_empty()).then(|| why.join("; ")),
    }
}
