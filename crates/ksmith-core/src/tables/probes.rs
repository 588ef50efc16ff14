//! `probes.parquet`: one row per probed module.

use serde::{Deserialize, Serialize};

use crate::table::Table;

crate::vocabulary! {
    /// The outcome of running a module.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
    pub enum ProbeStatus {
        /// It ran, twice, with identical outputs.
        Ok = "ok",
        /// It raised an error that repair could not fix; `error_class` and `error_message` say what.
        Failed = "failed",
        /// It ran past the time limit.
        Timeout = "timeout",
        /// It ran past the memory limit.
        Oom = "oom",
        /// It ran, but two runs with the same seed gave different outputs, or its forward draws
        /// random numbers (two calls on the same inputs differ).
        Nondeterministic = "nondeterministic",
        /// The process died without a Python error (a signal, `os._exit`, a crash in native code).
        Crashed = "crashed",
        /// It runs, but cannot be a task: its forward writes its own parameters or buffers, its
        /// output is constant or does not depend on its inputs (a candidate returning a constant
        /// would pass), or a GPU refuses its forward (CPU tensors beside the device's,
        /// `error_class` `HostTensor`); `error_message` says which.
        Degenerate = "degenerate",
    }
}

crate::vocabulary! {
    /// Whether a program that ran was sized for the GPU (the probe's sizing step).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
    pub enum SizeStatus {
        /// Its sizes reach the work target and at least two alternate size sets run.
        Sized = "sized",
        /// Sized as far as the program allows, below the work target.
        BelowTarget = "below_target",
        /// Not sized: the program stays as the probe verified it; `size_reason` says why.
        Unsizable = "unsizable",
    }
}

crate::vocabulary! {
    /// Why a program is below the work target or could not be sized.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
    pub enum SizeReason {
        /// The largest sizes the program allows do too little work.
        BelowTarget = "below_target",
        /// The forward runs no kernel (it returns its input or a constant).
        NoWork = "no_work",
        /// No argument or input dimension changes the work.
        NoSizeKnob = "no_size_knob",
        /// The verified program did not run again for sizing.
        TrialFailed = "trial_failed",
        /// More trial runs than the step allows.
        TrialBudget = "trial_budget",
        /// No size near the target runs on the `meta` device.
        MetaFailed = "meta_failed",
        /// The program cannot run on `meta` and the search on the CPU failed.
        MetaUnsupported = "meta_unsupported",
        /// The rewritten program does not run on the CPU at a moderate size.
        ConfirmFailed = "confirm_failed",
        /// Two CPU runs of the rewritten program gave different outputs.
        Nondeterministic = "nondeterministic",
        /// Fewer than two alternate size sets run.
        FewAlternates = "few_alternates",
        /// The work target is out of reach within `[probe.sizing] max_structural_scale` of
        /// the repository's own sizes: no plausible size gives the class GPU-meaningful work.
        TooSmall = "too_small",
        /// The step ran out of time.
        Timeout = "timeout",
        /// The sizing step itself failed (a bug; the words say where).
        Error = "error",
    }
}

/// One probed module.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProbeRow {
    /// The module's id in `modules.parquet`.
    pub module_id: String,
    /// Its repository.
    pub repo: String,
    /// Its class name.
    pub class_name: String,
    /// The outcome.
    pub status: ProbeStatus,
    /// Python exception class of the root-cause failure (`RuntimeError`, ...).
    pub error_class: Option<String>,
    /// Message of the root-cause failure, trimmed (see `attempt_log`).
    pub error_message: Option<String>,
    /// The program for modules that ran: with repaired `get_init_inputs()` / `get_inputs()`,
    /// and, when sized, its sizes as module-level constants (KernelBench style).
    pub program: Option<String>,
    /// Shape of each output tensor of the CPU run that verified `program` (for a sized program,
    /// its confirming run at the first set of `alt_sizes`), e.g. `[4, 16, 32]`.
    pub output_shapes: Vec<String>,
    /// Dtype of each output tensor, e.g. `torch.float32`.
    pub output_dtypes: Vec<String>,
    /// Number of parameters of the module in that run.
    pub param_count: Option<u64>,
    /// CPU time of one forward pass in that run, in milliseconds.
    pub forward_ms: Option<f64>,
    /// CPU time spent on this module in total (all attempts), in milliseconds.
    pub cpu_time_ms: f64,
    /// The repairs applied, in order (e.g. `input0: rank 4 -> 2`).
    pub repair_steps: Vec<String>,
    /// How many times the module was run.
    pub attempts: u32,
    /// The failed attempts of the repair search, in order, one line each (at most 64):
    /// generation (`g0` the program's own inputs, `g1`/`g2` the 2-D/3-D restarts), phase,
    /// exception and message, and the repair that led to it. `error_message` is the root cause
    /// among them, not the last.
    pub attempt_log: Vec<String>,
    /// Whether the program was sized for the GPU; none when it did not run or sizing is off.
    pub size_status: Option<SizeStatus>,
    /// Why it is below the target or unsizable (with `size_reason` in words).
    pub size_reason_code: Option<SizeReason>,
    /// The reason in words.
    pub size_reason: Option<String>,
    /// The chosen sizes: a JSON object mapping the program's module-level integer constants to
    /// their values (`{"batch_size": 16, "dim": 4096}`), which `program` carries; `{}` when
    /// not sized.
    pub sizes: String,
    /// Other size sets that run (a JSON list of objects like `sizes`; `[]` when none), for the
    /// evaluator's hidden-shape check.
    pub alt_sizes: String,
    /// Where the chosen sizes were checked without doing the work: `meta`, or `cpu` for a
    /// program `meta` cannot run.
    pub sized_on: Option<String>,
    /// Trial runs of the sizing step.
    pub size_trials: u32,
    /// FLOPs of one forward call of `program` at its sizes (PyTorch's `FlopCounterMode`).
    pub est_flops: Option<f64>,
    /// Bytes its kernels read and write in that call.
    pub est_bytes: Option<f64>,
    /// Bytes of its parameters and buffers.
    pub param_bytes: Option<u64>,
    /// Most tensor bytes alive at once in that call (parameters and inputs included).
    pub peak_bytes: Option<u64>,
    /// Estimated time of that call in PyTorch eager on the reference GPU (an H200), ms.
    pub est_ms: Option<f64>,
    /// The ATen operators one forward call dispatched, with how often (`aten::convolution`,
    /// 2), sorted by name: what the module actually runs. Empty when the call dispatched
    /// nothing (an identity); none when the module did not run or the recording failed.
    pub aten_ops: Option<Vec<OpCount>>,
    /// The same operators in the order they ran (at most the first 4096).
    pub aten_trace: Vec<String>,
    /// The calls of `aten_trace`, one for one, each written with the attributes that decide its
    /// kernel: `aten::convolution(2d,k3x3,s1,p1,d1,dw)`, `aten::native_layer_norm(KRK)` (the
    /// dimensions it works along in memory order), `aten::addmm(a,w)` (the factors' roles),
    /// `@bf16` for a first input that is not float32 (`python/ksmith/probe/aten_calls.py`
    /// defines the notation). Recorded on the sized program: what dedup and cluster compare.
    pub aten_calls: Vec<String>,
    /// How the program built and called each class of its own (a part of the model: Swin's
    /// `PatchMerging` inside `SwinTransformer`), at the sizes of `program`: the configurations the
    /// probe stage gives those classes' own programs (`ksmith_probe::observed`). Empty for a
    /// module that did not run or defines no other class.
    #[serde(default)]
    pub submodules: Vec<SubmoduleConfig>,
}

/// One class of a program as the program's model built and first called it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubmoduleConfig {
    /// The class's name in the program (as in its repository, for an inlined class).
    pub class_name: String,
    /// A `get_init_inputs()` returning the arguments it was built with (source).
    pub init: String,
    /// A `get_inputs()` returning tensors of the shapes and dtypes it was called on, and the
    /// other arguments as they were (source).
    pub inputs: String,
    /// The same in one line: `PatchMerging((56, 56), 96) called on ([4, 3136, 96] float32)`.
    pub summary: String,
    /// The program's own classes and functions `init` names (`PatchMerging` passed for
    /// `downsample`): the class's own program may not define them.
    #[serde(default)]
    pub needs: Vec<String>,
    /// `init` with the arguments that name them at their parameters' defaults; none when one
    /// has no default (or nothing is needed).
    #[serde(default)]
    pub init_without: Option<String>,
}

/// An operator and how many times it was called.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpCount {
    /// The operator (`aten::addmm`).
    pub op: String,
    /// Calls in one forward pass.
    pub count: u64,
}

impl ProbeRow {
    /// A row of `status` for a module, every other field empty (no program, no sizes): what a
    /// module the runner could not answer for gets, and where other rows start.
    pub fn empty(module_id: &str, repo: &str, class_name: &str, status: ProbeStatus) -> ProbeRow {
        ProbeRow {
            module_id: module_id.to_string(),
            repo: repo.to_string(),
            class_name: class_name.to_string(),
            status,
            error_class: None,
            error_message: None,
            program: None,
            output_shapes: Vec::new(),
            output_dtypes: Vec::new(),
            param_count: None,
            forward_ms: None,
            cpu_time_ms: 0.0,
            repair_steps: Vec::new(),
            attempts: 0,
            attempt_log: Vec::new(),
            size_status: None,
            size_reason_code: None,
            size_reason: None,
            sizes: "{}".to_string(),
            alt_sizes: "[]".to_string(),
            sized_on: None,
            size_trials: 0,
            est_flops: None,
            est_bytes: None,
            param_bytes: None,
            peak_bytes: None,
            est_ms: None,
            aten_ops: None,
            aten_trace: Vec::new(),
            aten_calls: Vec::new(),
            submodules: Vec::new(),
        }
    }
}

impl Table for ProbeRow {
    const NAME: &'static str = "probes";
    const SCHEMA_VERSION: u32 = 5;
}
