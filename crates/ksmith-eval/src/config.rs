//! `[eval]`: the evaluator's configuration.
//!
//! The defaults of everything the worker is told (trials, tolerances, time limits, timing) are
//! defined once, in `python/ksmith/evaluator/defaults.json`: the Python worker and the reward
//! function read that file, and this crate embeds it ([`WORKER_DEFAULTS_JSON`]) for
//! [`EvalConfig::default`].

use std::path::PathBuf;
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

use crate::error::EvalClientError;

/// The values of `compile_baseline` (as `compile_baseline.MODES` of the evaluator).
const COMPILE_BASELINE_MODES: [&str; 3] = ["off", "default", "max-autotune-no-cudagraphs"];

/// The worker's default options (`python/ksmith/evaluator/defaults.json`).
pub const WORKER_DEFAULTS_JSON: &str =
    include_str!("../../../python/ksmith/evaluator/defaults.json");

/// The part of [`WORKER_DEFAULTS_JSON`] that `[eval]` exposes.
#[derive(Deserialize)]
struct WorkerDefaults {
    trials: u32,
    tolerances: Tolerances,
    relative_error: Relative,
    compile_timeout_s: f64,
    run_timeout_s: f64,
    timing_timeout_s: f64,
    memory_limit_mb: u64,
    max_processes: u32,
    log_limit: usize,
    static_checks: bool,
    decoy_work_share: f64,
    min_kernel_share: f64,
    sol_tf32: String,
    compile_baseline: String,
    compile_baseline_timeout_s: f64,
    pause_starts_for_timing: bool,
    pause_correctness_for_timing: bool,
    max_cached_tasks: u32,
    hidden_shapes: u32,
    memory_budget_mb: u64,
    timing: TimingDefaults,
}

/// `(atol, rtol)` per dtype; `[eval]` has one pair for float32/float64 and one for the 16-bit
/// types.
#[derive(Deserialize)]
struct Tolerances {
    float32: [f64; 2],
    float16: [f64; 2],
}

/// Relative error of a whole output per dtype; `[eval]` has one value for float32/float64 and one
/// for the 16-bit types.
#[derive(Deserialize)]
struct Relative {
    float32: f64,
    float16: f64,
}

#[derive(Deserialize)]
struct TimingDefaults {
    warmup: u32,
    warmup_ms: f64,
    min_samples: u32,
    max_samples: u32,
    budget_ms: f64,
    buffer_sets: u32,
    buffer_mb: f64,
    checks: u32,
    processes: u32,
    extra_processes: u32,
    process_spread: f64,
    reference_in_process: bool,
    reference_drift: f64,
    max_cv: f64,
}

fn worker_defaults() -> &'static WorkerDefaults {
    static DEFAULTS: OnceLock<WorkerDefaults> = OnceLock::new();
    DEFAULTS.get_or_init(|| {
        serde_json::from_str(WORKER_DEFAULTS_JSON)
            .expect("the embedded evaluator defaults.json parses (tested)")
    })
}

/// The `[eval]` section: where candidates run and how they are judged.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EvalConfig {
    /// Devices: `["auto"]` (one worker per GPU that `nvidia-smi -L` lists, else `cpu_workers`
    /// Triton-interpreter workers), or a list of GPU indices (`"0"`, `"cuda:1"`) and `"cpu"`.
    pub devices: Vec<String>,
    /// Interpreter workers when `auto` finds no GPU.
    pub cpu_workers: usize,
    /// Requests in flight per worker: above 1, one candidate compiles and runs its correctness
    /// trials while another is timed (timing itself is serialized per GPU by the worker).
    /// `None`: `INFLIGHT_PER_GPU` when the pool has a GPU, else `INFLIGHT_PER_CPU_WORKER`
    /// (see `inflight_for`).
    pub inflight_per_worker: Option<usize>,
    /// The Python interpreter with torch and triton (default: `KSMITH_PYTHON`, then the venv).
    pub python: Option<PathBuf>,
    /// Where the worker's Python sources are written (a private folder is made inside);
    /// default: the system temporary folder.
    pub runtime_dir: Option<PathBuf>,
    /// Correctness trials (fresh inputs each, cycling normal/uniform/Laplace/log-normal).
    pub trials: u32,
    /// Seed of the trials' inputs; default: drawn from the OS for each task in each worker.
    pub seed: Option<u64>,
    /// float32/float64 tolerance: `|out - ref| <= atol + rtol * |ref|`.
    pub atol_f32: f64,
    /// Relative part of the float32 tolerance.
    pub rtol_f32: f64,
    /// float16/bfloat16 absolute tolerance.
    pub atol_f16: f64,
    /// float16/bfloat16 relative tolerance.
    pub rtol_f16: f64,
    /// float32/float64 outputs also need `||out - ref|| / ||ref|| <= rel_err_f32` (whole output,
    /// L2 norms), so a near-zero constant cannot pass where `atol` dwarfs the reference's values.
    pub rel_err_f32: f64,
    /// The same for float16/bfloat16 outputs.
    pub rel_err_f16: f64,
    /// Limit for importing the candidate and building `ModelNew` (includes the reference run).
    pub compile_timeout_s: f64,
    /// Limit for the correctness trials (Triton compilation happens in the first).
    pub run_timeout_s: f64,
    /// Limit for the timing phase.
    pub timing_timeout_s: f64,
    /// How long the client waits for a worker's answer before it replaces the worker.
    pub request_timeout_s: f64,
    /// Resident memory limit of a child process (MiB); past it the child is killed.
    pub memory_limit_mb: u64,
    /// Processes (threads included) a child may have at once.
    pub max_processes: u32,
    /// Warm-up calls before timing (at least).
    pub timing_warmup: u32,
    /// Warm-up time before timing (at least), in milliseconds.
    pub timing_warmup_ms: f64,
    /// Fewest timed samples.
    pub timing_min_samples: u32,
    /// Most timed samples (over the `timing_processes` processes together; each at least
    /// `timing_min_samples`).
    pub timing_max_samples: u32,
    /// Time to spend on samples, in milliseconds, over the `timing_processes` processes together
    /// (bounded by min/max samples).
    pub timing_budget_ms: f64,
    /// Copies of the inputs (each at its own addresses, with its own graph) that the timed
    /// samples rotate over, so the median does not depend on one placement in memory.
    pub timing_buffer_sets: u32,
    /// Extra device memory the additional buffer sets may take, in MiB (fewer sets when the
    /// inputs are large; at least one set is always timed).
    pub timing_buffer_mb: f64,
    /// Timed calls whose outputs the judge checks (through their digests), picked by the worker
    /// after the timing among all of them: every timed call gets fresh inputs and a digest, so
    /// the candidate cannot tell them from the others.
    pub timing_checks: u32,
    /// Processes the reference and each candidate are timed in (each a fresh child, a
    /// candidate's with its judge and the checks that guard the timing); the median of their
    /// medians is used. `timing_budget_ms` and `timing_max_samples` are shared out between them.
    pub timing_processes: u32,
    /// Processes added, one at a time, while the medians of those timed disagree by more than
    /// `timing_process_spread`.
    pub timing_extra_processes: u32,
    /// Relative disagreement of the per-process medians (max / min - 1) above which a process is
    /// added.
    pub timing_process_spread: f64,
    /// Whether the reference is also timed in each candidate timing process, its samples paired
    /// with the candidate's on the same buffers (its CUDA graphs captured before the candidate is
    /// imported); the speedup is then the ratio of the two medians in the same process, which
    /// cancels what makes a whole process faster or slower.
    pub timing_reference_in_process: bool,
    /// Largest relative gap between the reference timed beside the candidate and the reference
    /// timed in its own process for the paired ratio to be used (past it, the reference's own
    /// timing is used, with a warning).
    pub timing_reference_drift: f64,
    /// Coefficient of variation of a measurement's samples (the candidate's or the reference's
    /// beside it, or the reference's own) above which it is measured again (twice at most); a
    /// figure that stays above is used as the least noisy of its measurements, with a warning.
    pub timing_max_cv: f64,
    /// PyTorch work outside Triton at or above this share of the reference's work: decoy.
    pub decoy_work_share: f64,
    /// The candidate's Triton kernels below this share of GPU time of one call: decoy.
    pub min_kernel_share: f64,
    /// The speed-of-light's TF32 policy: `torch_flags` (each FLOP class at the precision
    /// torch's flags give it; the evaluator's children run with TF32 off), `never` or `always`.
    pub sol_tf32: String,
    /// The task's `torch.compile` baseline, measured once per task and worker on a GPU: `off`,
    /// `default` (inductor's default mode) or `max-autotune-no-cudagraphs`.
    pub compile_baseline: String,
    /// Seconds the compile baseline's compilation may take (its first call); past it the task
    /// has no compile baseline, with the reason.
    pub compile_baseline_timeout_s: f64,
    /// Stop (SIGSTOP) the children that are starting on a GPU while a timing holds it, and
    /// continue them after it, instead of making the timing wait for their starts to end.
    pub pause_starts_for_timing: bool,
    /// Hold a candidate's correctness calls as one such start (its harness and judge stopped
    /// together for another candidate's timing) instead of taking the gate for every call; only
    /// where starts are paused.
    pub pause_correctness_for_timing: bool,
    /// Tasks whose reference facts (fingerprints, output shapes, size sets, timing; no tensor)
    /// each worker keeps.
    pub max_cached_tasks: u32,
    /// Hidden size sets a candidate is also checked at (the task's recorded `alt_sizes`, else one
    /// derived from its module-level size constants); 0 turns the check off.
    pub hidden_shapes: u32,
    /// Host memory one evaluation of a task may hold (result files, the judge's trial; on the
    /// CPU also the inputs), MiB; a task needing more is refused with a message saying so.
    pub memory_budget_mb: u64,
    /// Run the static (AST) checks; off only to test the runtime layer alone.
    pub static_checks: bool,
    /// Error log kept per result, in bytes (the end of the log).
    pub log_limit: usize,
    /// When set, evaluate on this remote endpoint (`POST {url}/v1/evaluate`) instead of local
    /// workers.
    pub remote_url: Option<String>,
    /// Time limit of one remote request.
    pub remote_timeout_s: f64,
    /// The shared `[sandbox]` section (not an `[eval]` key: the CLI copies it in and checks it).
    #[serde(skip)]
    pub sandbox: ksmith_sandbox::SandboxConfig,
}

/// Evaluations at once per GPU worker by default. An evaluation spends most of its time off the
/// GPU (its start, the candidate's compilation, the judge), so more of them at once keep the GPU
/// busier. Measured on H200s (docs/bench/multi-gpu.md): 8 gave 17.2 steps a minute against 12.0
/// for 4; in the steady state (every task's reference built), 16 gave 23.1 against 18.0 for 8,
/// side by side on one host, whose cores stayed mostly idle (vmstat: 80 % idle with 40 at once
/// on 64 cores).
pub const INFLIGHT_PER_GPU: usize = 16;
/// Evaluations at once per CPU interpreter worker by default (each runs on the machine's cores).
pub const INFLIGHT_PER_CPU_WORKER: usize = 2;

impl Default for EvalConfig {
    fn default() -> Self {
        let d = worker_defaults();
        EvalConfig {
            devices: vec!["auto".to_string()],
            cpu_workers: 2,
            inflight_per_worker: None,
            python: None,
            runtime_dir: None,
            trials: d.trials,
            seed: None,
            atol_f32: d.tolerances.float32[0],
            rtol_f32: d.tolerances.float32[1],
            atol_f16: d.tolerances.float16[0],
            rtol_f16: d.tolerances.float16[1],
            rel_err_f32: d.relative_error.float32,
            rel_err_f16: d.relative_error.float16,
            compile_timeout_s: d.compile_timeout_s,
            run_timeout_s: d.run_timeout_s,
            timing_timeout_s: d.timing_timeout_s,
            request_timeout_s: 900.0,
            memory_limit_mb: d.memory_limit_mb,
            max_processes: d.max_processes,
            timing_warmup: d.timing.warmup,
            timing_warmup_ms: d.timing.warmup_ms,
            timing_min_samples: d.timing.min_samples,
            timing_max_samples: d.timing.max_samples,
            timing_budget_ms: d.timing.budget_ms,
            timing_buffer_sets: d.timing.buffer_sets,
            timing_buffer_mb: d.timing.buffer_mb,
            timing_checks: d.timing.checks,
            timing_processes: d.timing.processes,
            timing_extra_processes: d.timing.extra_processes,
            timing_process_spread: d.timing.process_spread,
            timing_reference_in_process: d.timing.reference_in_process,
            timing_reference_drift: d.timing.reference_drift,
            timing_max_cv: d.timing.max_cv,
            decoy_work_share: d.decoy_work_share,
            min_kernel_share: d.min_kernel_share,
            sol_tf32: d.sol_tf32.clone(),
            compile_baseline: d.compile_baseline.clone(),
            compile_baseline_timeout_s: d.compile_baseline_timeout_s,
            pause_starts_for_timing: d.pause_starts_for_timing,
            pause_correctness_for_timing: d.pause_correctness_for_timing,
            max_cached_tasks: d.max_cached_tasks,
            hidden_shapes: d.hidden_shapes,
            memory_budget_mb: d.memory_budget_mb,
            static_checks: d.static_checks,
            log_limit: d.log_limit,
            remote_url: None,
            remote_timeout_s: 900.0,
            sandbox: Default::default(),
        }
    }
}

impl EvalConfig {
    /// Evaluations at once per worker of a pool over `devices`: `inflight_per_worker` when set,
    /// else `INFLIGHT_PER_GPU` when a device is a GPU, else `INFLIGHT_PER_CPU_WORKER`.
    pub fn inflight_for(&self, devices: &[crate::devices::Device]) -> usize {
        self.inflight_per_worker.unwrap_or_else(|| {
            if devices
                .iter()
                .any(|d| matches!(d, crate::devices::Device::Gpu(_)))
            {
                INFLIGHT_PER_GPU
            } else {
                INFLIGHT_PER_CPU_WORKER
            }
        })
    }

    /// Checks every value (no I/O).
    pub fn validate(&self) -> Result<(), EvalClientError> {
        let bad = |m: String| Err(EvalClientError::Config(m));
        if self.devices.is_empty() {
            return bad("devices must not be empty (use [\"auto\"])".into());
        }
        for d in &self.devices {
            if d != "auto" && d != "cpu" && crate::devices::gpu_index(d).is_none() {
                return bad(format!(
                    "devices: `{d}` is not `auto`, `cpu`, a GPU index or `cuda:N`"
                ));
            }
        }
        if self.devices.len() > 1 && self.devices.iter().any(|d| d == "auto") {
            return bad("devices: `auto` cannot be combined with other devices".into());
        }
        let mut gpus: Vec<u32> = self
            .devices
            .iter()
            .filter_map(|d| crate::devices::gpu_index(d))
            .collect();
        gpus.sort_unstable();
        if let Some(w) = gpus.windows(2).find(|w| w[0] == w[1]) {
            return bad(format!(
                "devices: GPU {} is listed twice; one worker serves a GPU (its timing must have the \
                 GPU alone): raise inflight_per_worker for more evaluations at once on it",
                w[0]
            ));
        }
        if self.cpu_workers == 0 || self.inflight_per_worker == Some(0) {
            return bad("cpu_workers and inflight_per_worker must be at least 1".into());
        }
        if self.max_processes < 16 {
            return bad(format!(
                "max_processes must be at least 16 (torch and triton start threads), got {}",
                self.max_processes
            ));
        }
        if self.trials == 0 {
            return bad("trials must be at least 1".into());
        }
        for (name, v) in [
            ("atol_f32", self.atol_f32),
            ("rtol_f32", self.rtol_f32),
            ("atol_f16", self.atol_f16),
            ("rtol_f16", self.rtol_f16),
            ("rel_err_f32", self.rel_err_f32),
            ("rel_err_f16", self.rel_err_f16),
        ] {
            if !(v.is_finite() && v >= 0.0) {
                return bad(format!("{name} must be a finite number >= 0, got {v}"));
            }
        }
        for (name, v) in [
            ("compile_timeout_s", self.compile_timeout_s),
            ("run_timeout_s", self.run_timeout_s),
            ("timing_timeout_s", self.timing_timeout_s),
            ("request_timeout_s", self.request_timeout_s),
            ("remote_timeout_s", self.remote_timeout_s),
            ("timing_budget_ms", self.timing_budget_ms),
        ] {
            if !(v.is_finite() && v > 0.0) {
                return bad(format!("{name} must be > 0, got {v}"));
            }
        }
        if !(self.timing_warmup_ms.is_finite() && self.timing_warmup_ms >= 0.0) {
            return bad(format!(
                "timing_warmup_ms must be >= 0, got {}",
                self.timing_warmup_ms
            ));
        }
        if self.timing_buffer_sets == 0 {
            return bad("timing_buffer_sets must be at least 1".into());
        }
        if self.timing_processes == 0 {
            return bad("timing_processes must be at least 1".into());
        }
        if !(self.timing_process_spread.is_finite() && self.timing_process_spread >= 0.0) {
            return bad(format!(
                "timing_process_spread must be >= 0, got {}",
                self.timing_process_spread
            ));
        }
        if !(self.timing_reference_drift.is_finite() && self.timing_reference_drift >= 0.0) {
            return bad(format!(
                "timing_reference_drift must be >= 0, got {}",
                self.timing_reference_drift
            ));
        }
        if !["torch_flags", "never", "always"].contains(&self.sol_tf32.as_str()) {
            return bad(format!(
                "sol_tf32 must be \"torch_flags\", \"never\" or \"always\", got {:?}",
                self.sol_tf32
            ));
        }
        if !COMPILE_BASELINE_MODES.contains(&self.compile_baseline.as_str()) {
            return bad(format!(
                "compile_baseline must be one of {}, got {:?}",
                COMPILE_BASELINE_MODES.join(", "),
                self.compile_baseline
            ));
        }
        if !(self.compile_baseline_timeout_s.is_finite() && self.compile_baseline_timeout_s > 0.0) {
            return bad(format!(
                "compile_baseline_timeout_s must be a finite number > 0, got {}",
                self.compile_baseline_timeout_s
            ));
        }
        if !(self.timing_max_cv.is_finite() && self.timing_max_cv > 0.0) {
            return bad(format!(
                "timing_max_cv must be a finite number > 0, got {}",
                self.timing_max_cv
            ));
        }
        if !(self.timing_buffer_mb.is_finite() && self.timing_buffer_mb >= 0.0) {
            return bad(format!(
                "timing_buffer_mb must be >= 0, got {}",
                self.timing_buffer_mb
            ));
        }
        if self.timing_min_samples == 0 || self.timing_min_samples > self.timing_max_samples {
            return bad(format!(
                "need 1 <= timing_min_samples ({}) <= timing_max_samples ({})",
                self.timing_min_samples, self.timing_max_samples
            ));
        }
        for (name, v) in [
            ("decoy_work_share", self.decoy_work_share),
            ("min_kernel_share", self.min_kernel_share),
        ] {
            if !(0.0..=1.0).contains(&v) {
                return bad(format!("{name} must be within [0, 1], got {v}"));
            }
        }
        if self.memory_limit_mb < 256 {
            return bad(format!(
                "memory_limit_mb must be at least 256, got {}",
                self.memory_limit_mb
            ));
        }
        if self.memory_budget_mb < 16 {
            return bad(format!(
                "memory_budget_mb must be at least 16, got {}",
                self.memory_budget_mb
            ));
        }
        if self.max_cached_tasks == 0 {
            return bad("max_cached_tasks must be at least 1".into());
        }
        if let Some(url) = &self.remote_url
            && !(url.starts_with("http://") || url.starts_with("https://"))
        {
            return bad(format!("remote_url must be an http(s) URL, got `{url}`"));
        }
        let wait = self.compile_timeout_s + self.run_timeout_s + self.timing_timeout_s;
        if self.request_timeout_s < wait {
            return bad(format!(
                "request_timeout_s ({}) must cover compile + run + timing timeouts ({wait})",
                self.request_timeout_s
            ));
        }
        Ok(())
    }

    /// The options object the Python worker takes (`--options`).
    pub fn worker_options(&self) -> serde_json::Value {
        let f32 = [self.atol_f32, self.rtol_f32];
        let f16 = [self.atol_f16, self.rtol_f16];
        serde_json::json!({
            "trials": self.trials,
            "seed": self.seed.map(|s| s % (1u64 << 31)),
            "tolerances": {"float32": f32, "float64": f32, "float16": f16, "bfloat16": f16},
            "relative_error": {
                "float32": self.rel_err_f32,
                "float64": self.rel_err_f32,
                "float16": self.rel_err_f16,
                "bfloat16": self.rel_err_f16,
            },
            "compile_timeout_s": self.compile_timeout_s,
            "run_timeout_s": self.run_timeout_s,
            "timing_timeout_s": self.timing_timeout_s,
            "memory_limit_mb": self.memory_limit_mb,
            "max_processes": self.max_processes,
            "log_limit": self.log_limit,
            "static_checks": self.static_checks,
            "decoy_work_share": self.decoy_work_share,
            "min_kernel_share": self.min_kernel_share,
            "sol_tf32": self.sol_tf32,
            "compile_baseline": self.compile_baseline,
            "compile_baseline_timeout_s": self.compile_baseline_timeout_s,
            "pause_starts_for_timing": self.pause_starts_for_timing,
            "pause_correctness_for_timing": self.pause_correctness_for_timing,
            "max_cached_tasks": self.max_cached_tasks,
            "hidden_shapes": self.hidden_shapes,
            "memory_budget_mb": self.memory_budget_mb,
            "timing": {
                "warmup": self.timing_warmup,
                "warmup_ms": self.timing_warmup_ms,
                "min_samples": self.timing_min_samples,
                "max_samples": self.timing_max_samples,
                "budget_ms": self.timing_budget_ms,
                "buffer_sets": self.timing_buffer_sets,
                "buffer_mb": self.timing_buffer_mb,
                "checks": self.timing_checks,
                "processes": self.timing_processes,
                "extra_processes": self.timing_extra_processes,
                "process_spread": self.timing_process_spread,
                "reference_in_process": self.timing_reference_in_process,
                "reference_drift": self.timing_reference_drift,
                "max_cv": self.timing_max_cv,
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_round_trip_through_toml() {
        let cfg = EvalConfig::default();
        cfg.validate().unwrap();
        let text = serde_json::to_string(&cfg).unwrap();
        let back: EvalConfig = serde_json::from_str(&text).unwrap();
        assert_eq!(back, cfg);
    }

    #[test]
    fn evaluations_in_flight_default_by_device_and_follow_the_key_when_set() {
        use crate::devices::Device;
        let cfg = EvalConfig::default();
        assert_eq!(cfg.inflight_for(&[Device::Gpu(0), Device::Gpu(1)]), 16);
        assert_eq!(cfg.inflight_for(&[Device::Cpu, Device::Cpu]), 2);
        let set: EvalConfig = serde_json::from_str(r#"{"inflight_per_worker": 3}"#).unwrap();
        assert_eq!(set.inflight_for(&[Device::Gpu(0)]), 3);
        assert_eq!(set.inflight_for(&[Device::Cpu]), 3);
        let zero: EvalConfig = serde_json::from_str(r#"{"inflight_per_worker": 0}"#).unwrap();
        assert!(
            zero.validate()
                .unwrap_err()
                .to_string()
                .contains("inflight_per_worker")
        );
    }

    #[test]
    fn bad_values_are_named() {
        let cases: Vec<(EvalConfig, &str)> = vec![
            (
                EvalConfig {
                    devices: vec!["gpu7".into()],
                    ..Default::default()
                },
                "gpu7",
            ),
            (
                EvalConfig {
                    devices: vec!["auto".into(), "0".into()],
                    ..Default::default()
                },
                "auto",
            ),
            (
                EvalConfig {
                    devices: vec!["0".into(), "cuda:0".into()],
                    ..Default::default()
                },
                "GPU 0 is listed twice",
            ),
            (
                EvalConfig {
                    trials: 0,
                    ..Default::default()
                },
                "trials",
            ),
            (
                EvalConfig {
                    sol_tf32: "sometimes".into(),
                    ..Default::default()
                },
                "sol_tf32",
            ),
            (
                EvalConfig {
                    compile_baseline: "reduce-overhead".into(),
                    ..Default::default()
                },
                "compile_baseline must be one of off, default, max-autotune-no-cudagraphs",
            ),
            (
                EvalConfig {
                    compile_baseline_timeout_s: 0.0,
                    ..Default::default()
                },
                "compile_baseline_timeout_s",
            ),
            (
                EvalConfig {
                    atol_f32: f64::NAN,
                    ..Default::default()
                },
                "atol_f32",
            ),
            (
                EvalConfig {
                    timing_min_samples: 10,
                    timing_max_samples: 5,
                    ..Default::default()
                },
                "timing_min_samples",
            ),
            (
                EvalConfig {
                    decoy_work_share: 1.5,
                    ..Default::default()
                },
                "decoy_work_share",
            ),
            (
                EvalConfig {
                    remote_url: Some("ftp://x".into()),
                    ..Default::default()
                },
                "remote_url",
            ),
            (
                EvalConfig {
                    request_timeout_s: 10.0,
                    ..Default::default()
                },
                "request_timeout_s",
            ),
            (
                EvalConfig {
                    timing_processes: 0,
                    ..Default::default()
                },
                "timing_processes",
            ),
            (
                EvalConfig {
                    timing_process_spread: -0.1,
                    ..Default::default()
                },
                "timing_process_spread",
            ),
            (
                EvalConfig {
                    timing_reference_drift: f64::NAN,
                    ..Default::default()
                },
                "timing_reference_drift",
            ),
            (
                EvalConfig {
                    timing_max_cv: 0.0,
                    ..Default::default()
                },
                "timing_max_cv",
            ),
        ];
        for (cfg, key) in cases {
            let err = cfg.validate().unwrap_err().to_string();
            assert!(err.contains(key), "{err} should name {key}");
        }
    }

    /// Every option the worker is sent has, by default, the value the Python worker and the
    /// reward function default to: the one in defaults.json.
    #[test]
    fn default_worker_options_are_the_python_defaults() {
        let file: serde_json::Value = serde_json::from_str(WORKER_DEFAULTS_JSON).unwrap();
        let sent = EvalConfig::default().worker_options();
        let sent = sent.as_object().unwrap();
        for (key, value) in sent {
            assert_eq!(Some(value), file.get(key), "{key}");
        }
        // The options the worker has that `[eval]` does not set (switches for tests of one layer).
        let unsent: Vec<&String> = file
            .as_object()
            .unwrap()
            .keys()
            .filter(|k| !sent.contains_key(*k))
            .collect();
        assert_eq!(unsent, ["audit", "confine"]);
    }

    #[test]
    fn worker_options_carry_tolerances_per_dtype() {
        let cfg = EvalConfig {
            atol_f32: 1e-5,
            rtol_f16: 2e-2,
            ..Default::default()
        };
        let o = cfg.worker_options();
        assert_eq!(o["tolerances"]["float32"][0], 1e-5);
        assert_eq!(o["tolerances"]["bfloat16"][1], 2e-2);
        assert_eq!(o["timing"]["min_samples"], 50);
    }
}
