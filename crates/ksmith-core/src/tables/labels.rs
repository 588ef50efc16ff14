//! The speed labels a selected row carries: its speedups with their confidence intervals (see
//! [`crate::speedup_interval`] for the method), and why a figure is missing.

use serde::{Deserialize, Serialize};

use crate::speedup_interval::Interval;

/// A program's speed labels. A figure is `None` where it cannot be had (no GPU timing, no
/// samples, a first step has no Triton parent); `why_null` then says why.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SpeedLabels {
    /// Speedup over PyTorch eager (the reference) with its interval.
    pub over_eager: Option<Interval>,
    /// Speedup over the task's `torch.compile` baseline (the speedup over eager over the
    /// baseline's, each against the eager reference of its own process) with its interval.
    #[serde(default)]
    pub over_compile: Option<Interval>,
    /// `Some(true)` when the gain over eager is significant but the gain over `torch.compile`
    /// is not (the lower bound of `over_compile` is not above `[select]
    /// min_gain_over_compile`): what one compiler call gives for free. `None` when it cannot be
    /// judged (no significant gain over eager to explain, or no compile interval).
    #[serde(default)]
    pub trivial: Option<bool>,
    /// Speedup over the parent program (its speedup over eager over the parent's) with its
    /// interval.
    pub over_parent: Option<Interval>,
    /// The share of the task's speed-of-light the program reaches: SOL time over its median
    /// time (1 = at the device's datasheet peaks; see `evaluation::SpeedOfLight`).
    pub sol_fraction: Option<f64>,
    /// Why a figure above is `None`, one clause per missing figure; `None` when none is.
    pub why_null: Option<String>,
}
