//! The selection rules: which steps become SFT samples and which prompts become GRPO prompts.
//!
//! Every step is judged once for SFT and once for GRPO; a step that does not qualify gets the
//! reason (counted in the report as `sft/<reason>` or `grpo/<reason>`).

use ksmith_core::tables::{SftKind, SpeedLabels};

use crate::config::{GrpoRule, SelectConfig, TrivialSteps};
use crate::drops::DropReason;
use crate::trajectory::{BestSoFar, Parent, StepView};

/// The SFT verdict on a step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SftVerdict {
    /// The step is a sample of this kind.
    Take(SftKind),
    /// It is not, for this reason.
    Drop(DropReason),
}

/// Judges `step` for SFT.
///
/// - Translations are correctness samples when their program is correct: first steps (PyTorch
///   to Triton) and steps that turned a failing Triton program into a correct one (a repaired
///   translation: whatever came before it, a correct translation is a translation).
/// - Triton-to-Triton steps from a correct parent are performance samples when their program
///   is correct, timed, and significantly faster than eager and than the parent: the lower
///   bounds of the intervals in `labels` are above `sft_min_speedup` and
///   `sft_min_gain_over_parent`. An untimed step (CPU interpreter) or one without an interval
///   is never a performance sample; a `trivial` one (significantly faster than eager, not than
///   `torch.compile`) is not either under `trivial_steps = "drop"`.
pub fn sft_verdict(
    step: &StepView,
    parent: Parent<'_>,
    labels: &SpeedLabels,
    cfg: &SelectConfig,
) -> SftVerdict {
    if step.response.trim().is_empty() {
        return SftVerdict::Drop(DropReason::EmptyResponse);
    }
    if step.response_cut {
        return SftVerdict::Drop(DropReason::AnswerCut);
    }
    if step.prompt.is_empty() {
        return SftVerdict::Drop(DropReason::EmptyPrompt);
    }
    if step.program.is_none() {
        return SftVerdict::Drop(DropReason::EditFailed);
    }
    if !step.is_correct() {
        return SftVerdict::Drop(DropReason::NotCorrect);
    }
    match parent {
        Parent::Reference => SftVerdict::Take(SftKind::Correctness),
        Parent::Missing => SftVerdict::Drop(DropReason::ParentMissing),
        Parent::Step(p) if !p.is_correct() => SftVerdict::Take(SftKind::Correctness),
        Parent::Step(p) => {
            if step.speedup().is_none() {
                return SftVerdict::Drop(DropReason::NotTimed);
            }
            let Some(over_eager) = labels.over_eager else {
                return SftVerdict::Drop(DropReason::NoInterval);
            };
            if !over_eager.above(cfg.sft_min_speedup) {
                return SftVerdict::Drop(DropReason::NotFasterThanEager);
            }
            let (Some(_), Some(over_parent)) = (p.speedup(), labels.over_parent) else {
                return SftVerdict::Drop(DropReason::ParentNotComparable);
            };
            if !over_parent.above(cfg.sft_min_gain_over_parent) {
                return SftVerdict::Drop(DropReason::NotFasterThanParent);
            }
            if labels.trivial == Some(true) && cfg.trivial_steps == TrivialSteps::Drop {
                return SftVerdict::Drop(DropReason::Trivial);
            }
            SftVerdict::Take(SftKind::Performance)
        }
    }
}

/// Judges `step`'s prompt for GRPO (or for an environment start) under `rule`. `Ok` means
/// selected.
///
/// `best_steps` takes a prompt when its current program was, at the time the prompt was built,
/// the best program of its trajectory (no earlier step was significantly faster), correct and significantly
/// faster than eager (the lower bound of its interval in `current`, the current program's
/// labels, above `grpo_min_parent_speedup`) and, under `trivial_steps = "drop"`, not `trivial`:
/// the prompt then shows no better program the model could copy.
pub fn grpo_verdict(
    rule: GrpoRule,
    step: &StepView,
    parent: Parent<'_>,
    current: &SpeedLabels,
    best: &BestSoFar,
    cfg: &SelectConfig,
) -> Result<(), DropReason> {
    if step.prompt.is_empty() {
        return Err(DropReason::EmptyPrompt);
    }
    match (rule, parent) {
        (_, Parent::Missing) => Err(DropReason::ParentMissing),
        (GrpoRule::FirstSteps, Parent::Reference) => Ok(()),
        (GrpoRule::FirstSteps, Parent::Step(_)) => Err(DropReason::NotFirstStep),
        (GrpoRule::AllSteps, Parent::Reference) => Ok(()),
        (GrpoRule::AllSteps, Parent::Step(p)) => {
            if p.is_correct() {
                Ok(())
            } else {
                Err(DropReason::ParentNotCorrect)
            }
        }
        (GrpoRule::BestSteps, Parent::Reference) => Err(DropReason::FirstStep),
        (GrpoRule::BestSteps, Parent::Step(p)) => {
            if !p.is_correct() {
                return Err(DropReason::ParentNotCorrect);
            }
            if p.speedup().is_none() {
                return Err(DropReason::ParentNotTimed);
            }
            let Some(over_eager) = current.over_eager else {
                return Err(DropReason::NoInterval);
            };
            if !over_eager.above(cfg.grpo_min_parent_speedup) {
                return Err(DropReason::ParentNotFasterThanEager);
            }
            if current.trivial == Some(true) && cfg.trivial_steps == TrivialSteps::Drop {
                return Err(DropReason::ParentTrivial);
            }
            if !best.parent_is_best(step, p) {
                return Err(DropReason::ParentNotBestSoFar);
            }
            Ok(())
        }
    }
}
