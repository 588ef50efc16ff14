//! Confidence intervals of speedups, from the samples the evaluator already takes.
//!
//! Method: a **percentile bootstrap of the ratio of medians**, stratified by timing process,
//! with a seed fixed per step (so a re-run gives the same interval to the last bit).
//!
//! - **Over eager, paired** (the default evaluator: the reference is timed beside the
//!   candidate, one reference sample right after each candidate sample on the same buffer set
//!   and the same fresh inputs, [`Timing::process_reference_samples_ms`]): in each timing
//!   process, `n` pairs are drawn with replacement and the replicate is the median of their
//!   reference times over the median of their candidate times; the replicate of the step is the
//!   median of those per-process ratios, as the evaluator's own figure is the median over the
//!   processes of the per-process ratios. Resampling pairs keeps what both sides of a pair share
//!   (clock, temperature, neighbours on the GPU) out of the interval's width.
//! - **Over eager, unpaired** (no reference beside the candidate, or the evaluator used the
//!   reference's own timing because the paired figure drifted): the candidate's and the
//!   reference's samples are resampled independently, per process, and the replicate is the
//!   median over the reference's processes of its resampled medians over the same for the
//!   candidate.
//! - **Over `torch.compile`**: the task's compile baseline is timed with the eager reference
//!   beside it (pairs, as a candidate's), so its speedup over eager has replicates of its own
//!   (paired, seeded by the task); the step's speedup over compile is the ratio of the step's
//!   replicates over eager to the baseline's, replicate by replicate (each against the eager
//!   reference of its own process).
//! - **Over the parent**: the ratio of the two steps' replicates over eager, replicate by
//!   replicate (each step's drawn from its own seed, so independent): both are normalized by
//!   the eager reference of their own evaluation session, so a GPU that ran warmer for one of
//!   them does not move the ratio.
//!
//! The interval is the `(1 - confidence) / 2` and `(1 + confidence) / 2` quantiles of the
//! replicates (linear interpolation). Its `value` is the evaluator's own figure (computed on
//! samples trimmed of outliers), the bounds are from the untrimmed samples: the median is
//! robust enough that the two agree to well within the interval.
//!
//! Without samples (the CPU's Triton interpreter, steps from evaluators before the samples
//! were kept) there is no interval, and the reason says so.

use serde::{Deserialize, Serialize};

use crate::evaluation::{CompileBaseline, EvalResult, Timing, TimingMethod};

/// Resamples of the bootstrap unless configured.
pub const DEFAULT_RESAMPLES: u32 = 1000;
/// Two-sided confidence of the interval unless configured.
pub const DEFAULT_CONFIDENCE: f64 = 0.95;

/// A speedup with its confidence interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Interval {
    /// The figure itself (the evaluator's speedup, or the ratio of two).
    pub value: f64,
    /// Lower bound of the interval.
    pub low: f64,
    /// Upper bound of the interval.
    pub high: f64,
}

impl Interval {
    /// True when the whole interval lies above `threshold` (the gain is significant).
    pub fn above(&self, threshold: f64) -> bool {
        self.low > threshold
    }
}

/// The bootstrap's settings.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Bootstrap {
    /// Replicates drawn.
    pub resamples: u32,
    /// Two-sided confidence of the interval, in (0, 1).
    pub confidence: f64,
}

impl Default for Bootstrap {
    fn default() -> Self {
        Bootstrap {
            resamples: DEFAULT_RESAMPLES,
            confidence: DEFAULT_CONFIDENCE,
        }
    }
}

/// Bootstrap replicates of a speedup, and its figure.
#[derive(Debug, Clone, PartialEq)]
pub struct Draws {
    /// The figure the replicates are drawn around.
    pub value: f64,
    /// One replicate per resample.
    pub draws: Vec<f64>,
    /// Whether the replicates come from paired samples.
    pub paired: bool,
}

impl Draws {
    /// The ratio `self / other`, replicate by replicate (speedup over a parent: the step's
    /// speedup over eager over the parent's). `None` when they were drawn with different
    /// numbers of resamples.
    pub fn ratio(&self, other: &Draws) -> Option<Draws> {
        if self.draws.len() != other.draws.len() || other.value <= 0.0 {
            return None;
        }
        Some(Draws {
            value: self.value / other.value,
            draws: self
                .draws
                .iter()
                .zip(&other.draws)
                .map(|(a, b)| a / b)
                .collect(),
            paired: false,
        })
    }
}

impl Bootstrap {
    /// The method in words, for the dataset cards and `selection.json`.
    pub fn describe(&self) -> String {
        format!(
            "percentile bootstrap of the ratio of medians ({} resamples, {:.0} % two-sided, seed \
             fixed per step), stratified by timing process; over eager from the pairs of the \
             reference timed beside the candidate (resampled together) when the evaluator used \
             them, else from both sides resampled independently; over the parent as the ratio of \
             the two steps' replicates over eager; over torch.compile as the ratio of the step's \
             replicates over eager to those of the task's compile baseline (timed with the eager \
             reference beside it, pairs resampled together, seed fixed per task)",
            self.resamples,
            self.confidence * 100.0
        )
    }

    /// The replicates of `result`'s speedup over eager, drawn from `seed` (the step's id, so
    /// every step has its own stream); the reason when there are none.
    pub fn eager_draws(&self, result: &EvalResult, seed: &str) -> Result<Draws, String> {
        let (Some(cand), Some(reference)) = (&result.candidate_timing, &result.reference_timing)
        else {
            return Err("not timed (no candidate or reference timing)".into());
        };
        if cand.method == TimingMethod::NotMeasured {
            return Err("not timed (the CPU's Triton interpreter measures nothing)".into());
        }
        let Some(value) = result.speedup.filter(|s| s.is_finite() && *s > 0.0) else {
            return Err("no speedup reported".into());
        };
        self.timing_draws(cand, Some(reference), value, seed)
    }

    /// The replicates of the speedup over eager of a task's `torch.compile` baseline (paired:
    /// its samples and the eager reference's beside them), drawn from `seed`; the reason when
    /// there are none (the baseline's own `why` where it was not measured).
    pub fn compile_draws(&self, baseline: &CompileBaseline, seed: &str) -> Result<Draws, String> {
        let (Some(timing), Some(value)) = (&baseline.timing, baseline.speedup_over_eager) else {
            return Err(baseline
                .why
                .clone()
                .unwrap_or_else(|| "the compile baseline was not timed".into()));
        };
        if !(value.is_finite() && value > 0.0) {
            return Err(format!(
                "the compile baseline's speedup over eager is {value}"
            ));
        }
        self.timing_draws(timing, None, value, seed)
    }

    /// The replicates of a speedup `value` from `cand`'s samples: paired with the reference's
    /// beside them when `cand` carries those, else against `reference`'s own samples.
    fn timing_draws(
        &self,
        cand: &Timing,
        reference: Option<&Timing>,
        value: f64,
        seed: &str,
    ) -> Result<Draws, String> {
        if cand.method == TimingMethod::NotMeasured {
            return Err("not timed (the CPU's Triton interpreter measures nothing)".into());
        }
        let cand_sets = usable(&cand.process_samples_ms).ok_or_else(|| no_samples("candidate"))?;
        let mut rng = SplitMix::from_text(seed);
        let n = self.resamples.max(1) as usize;
        let paired = &cand.process_reference_samples_ms;
        if paired.len() == cand_sets.len()
            && paired
                .iter()
                .zip(cand_sets)
                .all(|(r, c)| r.len() == c.len())
        {
            let draws = (0..n)
                .map(|_| {
                    let ratios: Vec<f64> = paired
                        .iter()
                        .zip(cand_sets)
                        .map(|(r, c)| paired_ratio(r, c, &mut rng))
                        .collect();
                    median(ratios)
                })
                .collect();
            return Ok(Draws {
                value,
                draws,
                paired: true,
            });
        }
        let reference = reference.ok_or_else(|| no_samples("eager reference beside"))?;
        let ref_sets =
            usable(&reference.process_samples_ms).ok_or_else(|| no_samples("reference"))?;
        let draws = (0..n)
            .map(|_| {
                let r = median(
                    ref_sets
                        .iter()
                        .map(|s| resampled_median(s, &mut rng))
                        .collect(),
                );
                let c = median(
                    cand_sets
                        .iter()
                        .map(|s| resampled_median(s, &mut rng))
                        .collect(),
                );
                r / c
            })
            .collect();
        Ok(Draws {
            value,
            draws,
            paired: false,
        })
    }

    /// The interval of `draws`: its value and the quantiles of the replicates.
    pub fn interval(&self, draws: &Draws) -> Interval {
        let mut sorted = draws.draws.clone();
        sorted.sort_by(f64::total_cmp);
        let tail = (1.0 - self.confidence) / 2.0;
        Interval {
            value: draws.value,
            low: quantile(&sorted, tail),
            high: quantile(&sorted, 1.0 - tail),
        }
    }
}

fn no_samples(side: &str) -> String {
    format!("the {side}'s timing carries no samples (an evaluator before samples were kept)")
}

/// The per-process sample lists when every one has samples and every sample is a positive time.
fn usable(sets: &[Vec<f64>]) -> Option<&[Vec<f64>]> {
    let ok = !sets.is_empty()
        && sets
            .iter()
            .all(|s| !s.is_empty() && s.iter().all(|x| x.is_finite() && *x > 0.0));
    ok.then_some(sets)
}

/// One replicate of a process's paired ratio: `n` pairs drawn with replacement, the median of
/// their reference times over the median of their candidate times.
fn paired_ratio(reference: &[f64], cand: &[f64], rng: &mut SplitMix) -> f64 {
    let n = cand.len();
    let mut r = Vec::with_capacity(n);
    let mut c = Vec::with_capacity(n);
    for _ in 0..n {
        let i = rng.below(n);
        r.push(reference[i]);
        c.push(cand[i]);
    }
    median(r) / median(c)
}

fn resampled_median(samples: &[f64], rng: &mut SplitMix) -> f64 {
    let n = samples.len();
    median((0..n).map(|_| samples[rng.below(n)]).collect())
}

/// The median (the mean of the middle two for an even count), as Python's
/// `statistics.median`; NaN for none.
fn median(mut v: Vec<f64>) -> f64 {
    let n = v.len();
    if n == 0 {
        return f64::NAN;
    }
    let (_, hi, _) = v.select_nth_unstable_by(n / 2, f64::total_cmp);
    let hi = *hi;
    if n % 2 == 1 {
        return hi;
    }
    let lo = v[..n / 2]
        .iter()
        .copied()
        .max_by(f64::total_cmp)
        .unwrap_or(hi);
    (lo + hi) / 2.0
}

/// The `q` quantile of sorted values, interpolated linearly; NaN for none.
fn quantile(sorted: &[f64], q: f64) -> f64 {
    match sorted.len() {
        0 => f64::NAN,
        1 => sorted[0],
        n => {
            let pos = q.clamp(0.0, 1.0) * (n - 1) as f64;
            let i = pos.floor() as usize;
            let j = (i + 1).min(n - 1);
            sorted[i] + (sorted[j] - sorted[i]) * (pos - i as f64)
        }
    }
}

/// SplitMix64: a small, fast generator whose stream is fixed by its seed (the bootstrap must
/// give the same interval on every run and platform).
#[derive(Debug, Clone)]
pub struct SplitMix(u64);

impl SplitMix {
    /// A generator seeded from `text` (its blake3 hash).
    pub fn from_text(text: &str) -> Self {
        let h = blake3::hash(text.as_bytes());
        let mut b = [0u8; 8];
        b.copy_from_slice(&h.as_bytes()[..8]);
        SplitMix(u64::from_le_bytes(b))
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A uniform index below `n` (`n > 0`).
    pub fn below(&mut self, n: usize) -> usize {
        ((u128::from(self.next_u64()) * n as u128) >> 64) as usize
    }

    /// A uniform number in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// A timing from per-process samples (the candidate's, with the reference's beside it when
/// `paired` is given), with the medians of the samples: for tests and benches that build
/// evaluations by hand.
pub fn timing_from_samples(samples: Vec<Vec<f64>>, paired: Vec<Vec<f64>>) -> Timing {
    let medians: Vec<f64> = samples.iter().map(|s| median(s.clone())).collect();
    Timing {
        median_ms: median(medians),
        iqr_ms: 0.0,
        cv: 0.0,
        samples: samples.iter().map(|s| s.len() as u32).sum(),
        method: TimingMethod::CudaGraph,
        l2_policy: "flushed".into(),
        process_samples_ms: samples,
        process_reference_samples_ms: paired,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::evaluation::{EvalStatus, Hardware};

    fn result(cand: Timing, reference: Timing, speedup: f64) -> EvalResult {
        EvalResult {
            status: EvalStatus::Correct,
            hack: None,
            error_log: String::new(),
            errors: vec![],
            trials_passed: 5,
            trials: 5,
            candidate_timing: Some(cand),
            reference_timing: Some(reference),
            speedup: Some(speedup),
            warnings: vec![],
            hardware: Hardware::default(),
            elapsed_ms: 1,
            speed_of_light: None,
            compile_baseline: None,
        }
    }

    /// `n` samples around `center` with a relative spread `rel` (uniform), from `rng`.
    fn noisy(center: f64, rel: f64, n: usize, rng: &mut SplitMix) -> Vec<f64> {
        (0..n)
            .map(|_| center * (1.0 + rel * (2.0 * rng.unit() - 1.0)))
            .collect()
    }

    #[test]
    fn median_and_quantile_match_their_definitions() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(vec![4.0, 1.0, 3.0, 2.0]), 2.5);
        assert!(median(vec![]).is_nan());
        let s = [1.0, 2.0, 3.0, 4.0, 5.0];
        assert_eq!(quantile(&s, 0.0), 1.0);
        assert_eq!(quantile(&s, 0.5), 3.0);
        assert_eq!(quantile(&s, 0.125), 1.5);
        assert_eq!(quantile(&s, 1.0), 5.0);
    }

    #[test]
    fn pairs_sharing_their_noise_give_an_exact_interval() {
        // Every pair shares its sample's noise and the candidate takes exactly half the time:
        // every resample has a ratio of medians of exactly 2, whatever the noise.
        let mut rng = SplitMix::from_text("data");
        let reference: Vec<f64> = noisy(1.0, 0.3, 200, &mut rng);
        let cand: Vec<f64> = reference.iter().map(|r| r / 2.0).collect();
        let r = result(
            timing_from_samples(vec![cand], vec![reference.clone()]),
            timing_from_samples(vec![reference], vec![]),
            2.0,
        );
        let b = Bootstrap::default();
        let d = b.eager_draws(&r, "step").unwrap();
        assert!(d.paired);
        let i = b.interval(&d);
        assert!(
            (i.low - 2.0).abs() < 1e-12 && (i.high - 2.0).abs() < 1e-12,
            "{i:?}"
        );
        assert!(i.above(1.99) && !i.above(2.0));
    }

    #[test]
    fn over_compile_is_the_ratio_of_the_step_and_the_baseline_over_eager() {
        // eager 1 ms; compile exactly 2x eager in every pair, the candidate exactly 3x: the
        // speedup over compile is exactly 1.5 in every replicate
        let mut rng = SplitMix::from_text("compile");
        let eager: Vec<f64> = noisy(1.0, 0.3, 200, &mut rng);
        let compiled: Vec<f64> = eager.iter().map(|r| r / 2.0).collect();
        let baseline = CompileBaseline {
            mode: "default".into(),
            timing: Some(timing_from_samples(vec![compiled], vec![eager.clone()])),
            speedup_over_eager: Some(2.0),
            compile_s: Some(5.0),
            why: None,
        };
        let eager2: Vec<f64> = noisy(1.0, 0.3, 150, &mut rng);
        let cand: Vec<f64> = eager2.iter().map(|r| r / 3.0).collect();
        let mut r = result(
            timing_from_samples(vec![cand], vec![eager2.clone()]),
            timing_from_samples(vec![eager2], vec![]),
            3.0,
        );
        r.compile_baseline = Some(baseline.clone());
        assert_eq!(r.speedup_over_compile(), Ok(1.5));
        let b = Bootstrap::default();
        let c = b.compile_draws(&baseline, "task").unwrap();
        assert!(c.paired);
        let over = b.eager_draws(&r, "step").unwrap().ratio(&c).unwrap();
        let i = b.interval(&over);
        assert!((i.value - 1.5).abs() < 1e-12, "{i:?}");
        assert!(
            (i.low - 1.5).abs() < 1e-12 && (i.high - 1.5).abs() < 1e-12,
            "{i:?}"
        );
        // a baseline that was not measured gives its reason
        let cpu = CompileBaseline {
            mode: "default".into(),
            timing: None,
            speedup_over_eager: None,
            compile_s: None,
            why: Some("cpu".into()),
        };
        assert_eq!(b.compile_draws(&cpu, "task"), Err("cpu".into()));
        r.compile_baseline = Some(cpu);
        assert_eq!(r.speedup_over_compile(), Err("cpu".into()));
        r.compile_baseline = None;
        assert!(r.speedup_over_compile().is_err());
    }

    #[test]
    fn unpaired_intervals_cover_the_true_ratio_about_as_often_as_claimed() {
        // Reference medians 1.0, candidate medians 0.5 (uniform noise is symmetric, so the
        // population medians are the centers): the true speedup is 2. Over 200 data sets the
        // 90 % interval must hold 2 about 90 % of the time.
        let b = Bootstrap {
            resamples: 400,
            confidence: 0.9,
        };
        let mut data = SplitMix::from_text("coverage");
        let sims = 200;
        let mut covered = 0;
        for k in 0..sims {
            let c = noisy(0.5, 0.2, 41, &mut data);
            let r = noisy(1.0, 0.2, 41, &mut data);
            let res = result(
                timing_from_samples(vec![c], vec![]),
                timing_from_samples(vec![r], vec![]),
                2.0,
            );
            let d = b.eager_draws(&res, &format!("sim {k}")).unwrap();
            assert!(!d.paired);
            let i = b.interval(&d);
            if i.low <= 2.0 && 2.0 <= i.high {
                covered += 1;
            }
        }
        let share = f64::from(covered) / f64::from(sims);
        assert!((0.82..=0.97).contains(&share), "coverage {share}");
    }

    #[test]
    fn more_samples_give_a_narrower_interval_and_the_seed_fixes_it() {
        let b = Bootstrap::default();
        let mut data = SplitMix::from_text("width");
        let width = |n: usize, data: &mut SplitMix| {
            let res = result(
                timing_from_samples(vec![noisy(0.5, 0.2, n, data)], vec![]),
                timing_from_samples(vec![noisy(1.0, 0.2, n, data)], vec![]),
                2.0,
            );
            let i = b.interval(&b.eager_draws(&res, "s").unwrap());
            (i.high - i.low, res)
        };
        let (small, res) = width(20, &mut data);
        let (large, _) = width(2000, &mut data);
        assert!(large < small / 4.0, "{large} vs {small}");
        let again = b.eager_draws(&res, "s").unwrap();
        assert_eq!(b.eager_draws(&res, "s").unwrap(), again);
        assert_ne!(b.eager_draws(&res, "t").unwrap().draws, again.draws);
    }

    #[test]
    fn processes_are_resampled_apart_and_combined_by_their_median() {
        // Three processes whose pairs give exactly 1.5, 2.0 and 4.0: the median is 2.0.
        let reference = vec![vec![3.0; 30], vec![4.0; 30], vec![8.0; 30]];
        let cand = vec![vec![2.0; 30]; 3];
        let res = result(
            timing_from_samples(cand, reference.clone()),
            timing_from_samples(reference, vec![]),
            2.0,
        );
        let b = Bootstrap::default();
        let i = b.interval(&b.eager_draws(&res, "s").unwrap());
        assert_eq!((i.low, i.high), (2.0, 2.0));
    }

    #[test]
    fn over_the_parent_is_the_ratio_of_the_replicates() {
        let b = Bootstrap::default();
        let step = Draws {
            value: 3.0,
            draws: vec![2.8, 3.0, 3.2],
            paired: true,
        };
        let parent = Draws {
            value: 1.5,
            draws: vec![1.4, 1.5, 1.6],
            paired: true,
        };
        let r = step.ratio(&parent).unwrap();
        assert_eq!(r.value, 2.0);
        assert_eq!(r.draws, vec![2.0, 2.0, 2.0]);
        assert_eq!(b.interval(&r).low, 2.0);
        let short = Draws {
            draws: vec![1.0],
            ..parent
        };
        assert!(step.ratio(&short).is_none());
    }

    #[test]
    fn without_samples_there_is_no_interval_and_the_reason_says_why() {
        let b = Bootstrap::default();
        let mut cpu = result(
            timing_from_samples(vec![vec![1.0]], vec![]),
            timing_from_samples(vec![vec![1.0]], vec![]),
            1.0,
        );
        if let Some(t) = cpu.candidate_timing.as_mut() {
            t.method = TimingMethod::NotMeasured;
        }
        assert!(b.eager_draws(&cpu, "s").unwrap_err().contains("CPU"));
        let old = result(
            timing_from_samples(vec![], vec![]),
            timing_from_samples(vec![], vec![]),
            1.0,
        );
        assert!(b.eager_draws(&old, "s").unwrap_err().contains("no samples"));
        let untimed = EvalResult {
            candidate_timing: None,
            ..old
        };
        assert!(
            b.eager_draws(&untimed, "s")
                .unwrap_err()
                .contains("not timed")
        );
    }
}
