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

/// One alternate size set: module-level integer constant names of a task's program and the
/// values a candidate is also checked at (hidden shapes).
pub type SizeSet = std::collections::BTreeMap<String, i64>;

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
}
