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
        /// It ran, but two runs with the same seed gave different outputs.
        Nondeterministic = "nondeterministic",
        /// The process died without a Python error (a signal, `os._exit`, a crash in native code).
        Crashed = "crashed",
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
    /// Python exception class of the last failure (`RuntimeError`, ...).
    pub error_class: Option<String>,
    /// Message of the last failure, trimmed.
    pub error_message: Option<String>,
    /// The program with repaired `get_init_inputs()` / `get_inputs()`, for modules that ran.
    pub program: Option<String>,
    /// Shape of each output tensor, e.g. `[4, 16, 32]`.
    pub output_shapes: Vec<String>,
    /// Dtype of each output tensor, e.g. `torch.float32`.
    pub output_dtypes: Vec<String>,
    /// Number of parameters of the instantiated module.
    pub param_count: Option<u64>,
    /// CPU time of one forward pass, in milliseconds.
    pub forward_ms: Option<f64>,
    /// CPU time spent on this module in total (all attempts), in milliseconds.
    pub cpu_time_ms: f64,
    /// The repairs applied, in order (e.g. `input0: rank 4 -> 2`).
    pub repair_steps: Vec<String>,
    /// How many times the module was run.
    pub attempts: u32,
    /// The ATen operators one forward call dispatched, with how often (`aten::convolution`,
    /// 2), sorted by name: what the module actually runs. Empty when the call dispatched
    /// nothing (an identity); none when the module did not run or the recording failed.
    pub aten_ops: Option<Vec<OpCount>>,
    /// The same operators in the order they ran (at most the first 4096): what dedup compares
    /// when two modules look alike.
    pub aten_trace: Vec<String>,
}

/// An operator and how many times it was called.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpCount {
    /// The operator (`aten::addmm`).
    pub op: String,
    /// Calls in one forward pass.
    pub count: u64,
}

impl Table for ProbeRow {
    const NAME: &'static str = "probes";
    const SCHEMA_VERSION: u32 = 2;
}
