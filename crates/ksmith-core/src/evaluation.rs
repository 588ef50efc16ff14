//! The evaluator contract: what the evolution engine asks and what it gets back.
//!
//! The engine (`ksmith-evolve`) is generic over [`Evaluator`]; `ksmith-eval` implements it with a
//! pool of Python workers (one per GPU, or the Triton interpreter on CPU) or a remote endpoint;
//! only the CLI picks the implementation. These types are plain data, serializable, so they can
//! be stored in `steps.parquet` and sent over the worker protocol's Rust side unchanged.

use serde::{Deserialize, Serialize};

crate::vocabulary! {
    /// The verdict on a candidate.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
    pub enum EvalStatus {
        /// Refused before running by the static checks (no Triton kernel, forbidden constructs).
        StaticRejected = "static_rejected",
        /// Import, `@triton.jit` compilation or construction of `ModelNew` failed.
        CompileError = "compile_error",
        /// It raised while running.
        RuntimeError = "runtime_error",
        /// It ran past the time limit.
        Timeout = "timeout",
        /// It ran, but outputs differ from the reference (or have the wrong type, shape or dtype).
        Incorrect = "incorrect",
        /// It cheats; [`EvalResult::hack`] says how.
        Hacked = "hacked",
        /// Correct on every trial.
        Correct = "correct",
    }
}

crate::vocabulary! {
    /// The ways a candidate can cheat; each has its own status detail.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
    pub enum HackKind {
        /// No Triton kernel was launched: the work was done by PyTorch operators.
        TorchFallback = "torch_fallback",
        /// Triton kernels ran but did only a small share of the GPU work (decoy kernels).
        DecoyKernel = "decoy_kernel",
        /// A `try`/`except` path falls back to PyTorch.
        TryExceptFallback = "try_except_fallback",
        /// Work was launched on a side stream to escape timing.
        SideStream = "side_stream",
        /// Work was left to a background thread or process.
        BackgroundThread = "background_thread",
        /// Outputs were cached across calls instead of computed.
        OutputCaching = "output_caching",
        /// Timers, synchronization or library functions were monkeypatched.
        TimerPatch = "timer_patch",
        /// The output is a lazy or subclassed tensor.
        LazyOutput = "lazy_output",
        /// The computation ran in lower precision than the reference.
        PrecisionDowngrade = "precision_downgrade",
        /// The candidate modified its inputs.
        InputMutation = "input_mutation",
        /// An output aliases an input or a parameter.
        OutputAliasing = "output_aliasing",
        /// The candidate tried to reach outside its sandbox (files, network, processes).
        SandboxEscape = "sandbox_escape",
        /// Its timed calls split into a majority of fast ones and a minority much slower, in a
        /// measurement and again in its re-measurement: it behaves differently on some calls (what
        /// a candidate that computes only when it believes it is checked looks like).
        TimingAnomaly = "timing_anomaly",
    }
}

/// Error statistics of one output tensor against the reference.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OutputError {
    /// Index of the output.
    pub index: u32,
    /// Maximum absolute error.
    pub max_abs: f64,
    /// Mean absolute error.
    pub mean_abs: f64,
    /// Maximum relative error.
    pub max_rel: f64,
    /// Mean relative error.
    pub mean_rel: f64,
}

crate::vocabulary! {
    /// How a runtime was measured.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
    pub enum TimingMethod {
        /// Replay of a captured CUDA graph.
        CudaGraph = "cuda_graph",
        /// CUDA events around each call (graph capture did not work).
        CudaEvent = "cuda_event",
        /// No GPU (Triton interpreter): timings are meaningless and not reported.
        NotMeasured = "not_measured",
    }
}

/// A runtime measurement.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Timing {
    /// Median over the kept samples, in milliseconds.
    pub median_ms: f64,
    /// Inter-quartile range of the kept samples, in milliseconds.
    pub iqr_ms: f64,
    /// Coefficient of variation of the kept samples.
    pub cv: f64,
    /// Samples kept after outlier trimming.
    pub samples: u32,
    /// How it was measured.
    pub method: TimingMethod,
    /// The L2 cache policy, e.g. `flushed` or `warm`.
    pub l2_policy: String,
    /// Every timed sample, in the order taken, per timing process (in the order timed), in
    /// milliseconds: what the confidence intervals are drawn from (see
    /// [`crate::speedup_interval`]). Empty from the CPU and from evaluators before it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub process_samples_ms: Vec<Vec<f64>>,
    /// For a candidate timed with the reference beside it: per timing process, the reference's
    /// sample paired with each of [`Timing::process_samples_ms`] (same buffer set, same fresh
    /// inputs, taken right after it). Empty otherwise.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub process_reference_samples_ms: Vec<Vec<f64>>,
}

/// The machine an evaluation ran on.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Hardware {
    /// GPU name, or `cpu (triton interpreter)`.
    pub device: String,
    /// Driver version, when there is a GPU.
    pub driver: Option<String>,
    /// torch version.
    pub torch: String,
    /// triton version.
    pub triton: String,
    /// CUDA version torch was built with, when there is a GPU.
    #[serde(default)]
    pub cuda: Option<String>,
    /// The timing method's settings, in words (warm-up, samples, budget, L2 policy, buffer sets,
    /// processes, noise limit); empty from evaluators before it.
    #[serde(default)]
    pub timing: String,
}

/// What a labelled row was measured on and how: the hardware and toolchain of its evaluation,
/// the ksmith version that labelled it and the timing method with its settings. Every row of
/// the steps, SFT and GRPO tables carries one (empty strings for a step never evaluated).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Stamp {
    /// GPU name, or `cpu (triton interpreter)`.
    pub device: String,
    /// Driver version, when there is a GPU.
    pub driver: Option<String>,
    /// CUDA version of the torch build, when there is a GPU.
    pub cuda: Option<String>,
    /// torch version.
    pub torch: String,
    /// triton version.
    pub triton: String,
    /// The ksmith version that wrote the row.
    pub ksmith: String,
    /// How the candidate was timed (`cuda_graph`, `cuda_event`, `not_measured`).
    pub method: String,
    /// The timing method's settings, in words (see [`Hardware::timing`]).
    pub timing: String,
}

impl Stamp {
    /// The stamp of an evaluation: its hardware, this ksmith version and the candidate's timing
    /// method (`not_measured` without a timing).
    pub fn of(result: &EvalResult) -> Stamp {
        let h = &result.hardware;
        Stamp {
            device: h.device.clone(),
            driver: h.driver.clone(),
            cuda: h.cuda.clone(),
            torch: h.torch.clone(),
            triton: h.triton.clone(),
            ksmith: env!("CARGO_PKG_VERSION").to_string(),
            method: result
                .candidate_timing
                .as_ref()
                .map_or(TimingMethod::NotMeasured, |t| t.method)
                .as_str()
                .to_string(),
            timing: h.timing.clone(),
        }
    }
}

crate::vocabulary! {
    /// The kernel language of a candidate: the evaluator's backend (`python/ksmith/evaluator/
    /// backends.py`), the rollout's prompts (`configs/prompts/<backend>/`) and a column of the
    /// steps, SFT and GRPO tables.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
    pub enum Backend {
        /// Triton kernels (`@triton.jit`) in a Python program.
        #[default]
        Triton = "triton",
        /// KernelBench's inline CUDA: `torch.utils.cpp_extension.load_inline` extensions built
        /// from the program's text, with `__global__` kernels.
        Cuda = "cuda",
    }
}

/// What to evaluate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EvalRequest {
    /// The task the candidate solves (reference timings are cached per task and GPU).
    pub task_id: String,
    /// The reference program: `Model`, `get_inputs()`, `get_init_inputs()`.
    pub reference: String,
    /// The candidate program defining `ModelNew` with kernels of `backend`.
    pub candidate: String,
    /// Whether to time (false gives correctness only).
    pub measure: bool,
    /// The task's alternate size sets (its module-level integer constants by name, see the
    /// tasks table's `alt_sizes`); empty: the evaluator derives one from the constants.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub alt_sizes: Vec<SizeSet>,
    /// The candidate's kernel language (requests of older clients name none: Triton).
    #[serde(default)]
    pub backend: Backend,
}

/// What building and running a task's reference on the evaluation device gave
/// ([`Evaluator::preflight`]).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Preflight {
    /// The reference's median time there, in milliseconds (none where nothing is timed: the
    /// CPU).
    #[serde(default)]
    pub reference_ms: Option<f64>,
    /// What the build warned about (hidden size sets dropped, a timing that stayed noisy).
    #[serde(default)]
    pub warnings: Vec<String>,
}

/// One alternate size set: module-level integer constant names of a task's program and the
/// values a candidate is also checked at (hidden shapes).
pub type SizeSet = std::collections::BTreeMap<String, i64>;

/// Characters of an evaluation's error log that a conversation or tool report shows: its end
/// (select counts them in a chain's tokens, export cuts them; the reward cuts the same).
pub const ERROR_TAIL_CHARS: usize = 2000;

/// The structured result, fed back into the next prompt and stored with the step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EvalResult {
    /// The verdict.
    pub status: EvalStatus,
    /// How it cheats, when `status` is `Hacked`.
    pub hack: Option<HackKind>,
    /// Error output, trimmed (never redacted).
    pub error_log: String,
    /// Error statistics per output (from the worst trial).
    pub errors: Vec<OutputError>,
    /// Correctness trials passed and run.
    pub trials_passed: u32,
    /// Correctness trials run.
    pub trials: u32,
    /// Candidate runtime.
    pub candidate_timing: Option<Timing>,
    /// Reference (PyTorch eager) runtime, measured in the same session.
    pub reference_timing: Option<Timing>,
    /// Reference median over candidate median, when both were measured.
    pub speedup: Option<f64>,
    /// Non-fatal findings of the static checks.
    pub warnings: Vec<String>,
    /// Where it ran.
    pub hardware: Hardware,
    /// Wall time of the evaluation, in milliseconds.
    pub elapsed_ms: u64,
    /// The task's speed-of-light on this device; `None` before the task was built (a static
    /// rejection) and from evaluators before it.
    #[serde(default)]
    pub speed_of_light: Option<SpeedOfLight>,
    /// The task's `torch.compile` baseline on this device, or why there is none; `None` before
    /// the task was built (a static rejection) and from evaluators before it.
    #[serde(default)]
    pub compile_baseline: Option<CompileBaseline>,
}

/// A task's `torch.compile` baseline on a device: the reference compiled by inductor and timed
/// in a process of its own with the eager reference beside it (paired samples, as a candidate's;
/// `python/ksmith/evaluator/compile_baseline.py`), measured once per task and evaluator.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompileBaseline {
    /// The `torch.compile` mode (`default`, `max-autotune-no-cudagraphs`), or `off`.
    pub mode: String,
    /// The compiled model's timing, with the eager reference's samples paired with its own
    /// ([`Timing::process_reference_samples_ms`]); `None` when not measured (`why`).
    pub timing: Option<Timing>,
    /// The compiled model's speedup over eager (eager median beside it over its median).
    pub speedup_over_eager: Option<f64>,
    /// Seconds the compilation (the first call) took, when it finished.
    pub compile_s: Option<f64>,
    /// Why there is no baseline: `cpu` (the CPU measures no times), `off`, or what stopped the
    /// compile (it raised, its outputs differ from eager, it passed its time limit).
    pub why: Option<String>,
}

impl CompileBaseline {
    /// The speedup over compile of a program whose speedup over eager is `over_eager`: its
    /// speedup over eager over compile's (each against the eager reference of its own process),
    /// or why there is none.
    pub fn speedup_of(&self, over_eager: f64) -> Result<f64, String> {
        match self.speedup_over_eager {
            Some(c) if c > 0.0 && c.is_finite() && over_eager.is_finite() => Ok(over_eager / c),
            Some(c) => Err(format!(
                "no positive speedups to compare ({over_eager} over {c})"
            )),
            None => Err(self
                .why
                .clone()
                .unwrap_or_else(|| "no compile baseline".into())),
        }
    }

    /// The compiled model's median time in milliseconds, when measured.
    pub fn median_ms(&self) -> Option<f64> {
        self.timing.as_ref().map(|t| t.median_ms)
    }
}

/// A task's speed-of-light on a device: max(FLOPs / peak FLOP/s, bytes / peak bandwidth) from
/// the reference's FLOPs (PyTorch's formulas) and its compulsory traffic (inputs, outputs,
/// parameters and buffers, once), at the dense datasheet peaks of
/// `python/ksmith/shared/gpu_peaks.json` (`python/ksmith/evaluator/speed_of_light.py`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SpeedOfLight {
    /// The time in milliseconds; `None` when it cannot be had (`why`).
    pub ms: Option<f64>,
    /// Why there is no time (no GPU, a device without known peaks, a data type without a peak).
    pub why: Option<String>,
    /// `compute` or `memory`: which limit gives the time.
    pub bound: Option<String>,
    /// The peaks table's entry the device matched.
    pub gpu: Option<String>,
    /// FLOPs of one call.
    pub flops: f64,
    /// Bytes one call must move at least.
    pub bytes: f64,
    /// The data type whose peak applies.
    pub dtype: String,
    /// The TF32 policy (`torch_flags`, `never`, `always`).
    pub tf32_policy: String,
}

impl SpeedOfLight {
    /// The share of speed-of-light `ms` reaches (SOL time / `ms`; 1 = at the peaks), or why
    /// there is none.
    pub fn fraction(&self, ms: f64) -> Result<f64, String> {
        match self.ms {
            Some(sol) if ms > 0.0 && ms.is_finite() => Ok(sol / ms),
            Some(_) => Err(format!("no positive time to compare with ({ms})")),
            None => Err(self
                .why
                .clone()
                .unwrap_or_else(|| "no speed-of-light".into())),
        }
    }
}

impl EvalResult {
    /// True when the candidate is correct.
    pub fn is_correct(&self) -> bool {
        self.status == EvalStatus::Correct
    }

    /// The candidate's speedup over the task's `torch.compile` baseline
    /// ([`CompileBaseline::speedup_of`] of its speedup over eager), or why there is none.
    pub fn speedup_over_compile(&self) -> Result<f64, String> {
        let baseline = self
            .compile_baseline
            .as_ref()
            .ok_or_else(|| "the evaluation carries no compile baseline".to_string())?;
        let over_eager = self
            .speedup
            .ok_or_else(|| "the candidate has no speedup over eager".to_string())?;
        baseline.speedup_of(over_eager)
    }

    /// Whether the task leaves a kernel room to gain, judged from the baselines this evaluation
    /// carries (see [`Headroom`]) with the share `sol_share`; why not judged when the task's
    /// speed-of-light or eager time is missing (the CPU, an unknown device).
    pub fn headroom(&self, sol_share: f64) -> Result<Headroom, String> {
        let sol = self
            .speed_of_light
            .as_ref()
            .ok_or_else(|| "the evaluation carries no speed-of-light".to_string())?;
        let eager = self
            .reference_timing
            .as_ref()
            .filter(|t| t.method != TimingMethod::NotMeasured)
            .ok_or_else(|| "the eager reference was not timed".to_string())?;
        let eager_sol_fraction = sol.fraction(eager.median_ms)?;
        let compile = self.compile_baseline.as_ref();
        let compile_sol_fraction = compile
            .and_then(CompileBaseline::median_ms)
            .and_then(|ms| sol.fraction(ms).ok());
        let best = compile_sol_fraction.map_or(eager_sol_fraction, |c| c.max(eager_sol_fraction));
        Ok(Headroom {
            eager_sol_fraction,
            compile_sol_fraction,
            compile_over_eager: compile.and_then(|c| c.speedup_over_eager),
            none: best >= sol_share,
        })
    }
}

/// What a task leaves a kernel to gain, from its measured baselines: the share of
/// speed-of-light its eager reference reaches and, when measured, its `torch.compile`
/// baseline's. A task has **no headroom** when the better of the two is already at or above
/// the configured share (`[rollout] headroom_sol_share`): a kernel could gain at most
/// 1 / share over it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Headroom {
    /// SOL time over the eager reference's median time.
    pub eager_sol_fraction: f64,
    /// SOL time over the compile baseline's median time, when it was measured.
    pub compile_sol_fraction: Option<f64>,
    /// The compile baseline's speedup over eager, when it was measured.
    pub compile_over_eager: Option<f64>,
    /// True when the better baseline is within the share of speed-of-light.
    pub none: bool,
}

/// Why an evaluation could not be carried out at all (as opposed to a candidate that fails,
/// which is an [`EvalResult`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EvalError {
    /// The Python environment or worker could not start.
    #[error("evaluator unavailable: {0}")]
    Unavailable(String),
    /// The worker spoke something other than the protocol.
    #[error("evaluator protocol error: {0}")]
    Protocol(String),
    /// The reference program itself does not run; the task is broken, not the candidate.
    #[error("reference program of task {task_id} does not run: {message}")]
    BrokenReference {
        /// The task.
        task_id: String,
        /// The error.
        message: String,
    },
}

/// Something that evaluates candidates. Implementations are shared between threads: many
/// rollouts call [`Evaluator::evaluate`] at once and the implementation schedules them.
pub trait Evaluator: Send + Sync {
    /// Evaluates one candidate against its reference.
    fn evaluate(&self, request: &EvalRequest) -> Result<EvalResult, EvalError>;

    /// Builds and runs the reference of `request` (its candidate is not read) on a device that
    /// evaluates the task's candidates, as the task's first evaluation would, before anyone
    /// writes a candidate for it. [`EvalError::BrokenReference`] when the reference does not
    /// run there (the task's fault: no device is taken out for it); a device that fails on the
    /// way is handled as it is for an evaluation (the request goes to another one).
    fn preflight(&self, request: &EvalRequest) -> Result<Preflight, EvalError>;

    /// How many evaluations it runs at once (a local pool: its devices times the evaluations
    /// each takes at a time); callers keep at least this many in flight to keep it busy. 1 by
    /// default.
    fn capacity(&self) -> usize {
        1
    }

    /// What it evaluates on, in words (its devices and how many evaluations each takes at once),
    /// for the line a stage prints at start. Empty by default.
    fn describe(&self) -> String {
        String::new()
    }

    /// What it did so far (per device: evaluations, busy and idle time; where an evaluation's
    /// time went, by phase), as named counters for the report of the stage that used it. None by
    /// default.
    fn report_counters(&self) -> Vec<(String, u64)> {
        Vec::new()
    }
}

#[cfg(test)]
mod tests {
    /// The reward's message and the environment's tool reports (Python) cut an error log to
    /// the same number of characters as the exported conversations.
    #[test]
    fn the_python_reward_keeps_the_same_error_tail() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../python/ksmith/reward.py");
        let source = std::fs::read_to_string(path).unwrap();
        let line = format!("\nERROR_TAIL_CHARS = {}\n", super::ERROR_TAIL_CHARS);
        assert!(source.contains(&line), "{path} must define{line}");
    }
}
