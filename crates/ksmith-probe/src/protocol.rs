//! The JSON-lines protocol between this crate and the Python worker (`ksmith.probe.worker`).
//!
//! One request line per module, one response line per request, each carrying the protocol
//! version `v`. The worker first writes a `hello` line saying which isolation it could set up.

use serde::{Deserialize, Serialize};

/// The protocol version both sides speak.
pub use ksmith_core::versions::PROBE_PROTOCOL as PROTOCOL_VERSION;

/// One module to probe.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Request {
    /// Always [`PROTOCOL_VERSION`].
    pub v: u32,
    /// Echoed in the response.
    pub id: String,
    /// The KernelBench-format program.
    pub program: String,
    /// Seed of every run.
    pub seed: u64,
    /// Time limit for the whole module, in seconds.
    pub timeout_s: f64,
    /// Memory limit on top of the worker's address space, in MiB.
    pub memory_mb: u64,
    /// Repair steps per restart.
    pub max_steps: u32,
    /// Restarts (program inputs, 2-D, 3-D).
    pub restarts: u32,
    /// CPU seconds of the repair search after which no new attempt starts.
    pub repair_budget_s: f64,
    /// Bytes of stdout/stderr kept.
    pub output_cap_bytes: u64,
    /// New `get_inputs`/`get_init_inputs` definitions replacing the program's (LLM repair).
    pub r#override: Option<String>,
    /// The sizing step's targets (`[probe.sizing]`); none: no sizing.
    pub sizing: Option<crate::config::SizingConfig>,
    /// Where each constructor argument of the program came from (`ModuleRow::arg_sources`,
    /// `dim=64: call path:line`): sizing bounds the growth of the repository's sizes.
    #[serde(default)]
    pub arg_sources: Vec<String>,
    /// The override is the configuration a model of the repository gave the class
    /// ([`crate::observed`]): its arguments and input sizes are the repository's.
    #[serde(default)]
    pub observed: bool,
}

/// The worker's first line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Hello {
    /// The protocol version of the worker.
    pub v: u32,
    /// `hello`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The worker's process id.
    pub pid: u32,
    /// torch version.
    pub torch: String,
    /// Which isolation is active (network/pid/mount namespace, pids cgroup).
    pub sandbox: serde_json::Map<String, serde_json::Value>,
    /// The cluster, when the hello comes from the Ray driver (`ksmith.probe_ray`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ray: Option<RayInfo>,
}

/// The Ray cluster the driver probes on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RayInfo {
    /// Actors, one sandboxed worker each.
    pub actors: usize,
    /// Nodes the actors run on.
    pub nodes: usize,
}

/// The result of one module.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Response {
    /// The protocol version of the worker.
    pub v: u32,
    /// `result` (or `error` for a request the worker could not read); the Ray driver also
    /// answers `fault` (the actor's worker failed the request: `error_class` is the
    /// `RunnerFault`) and ends with `stats`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The request's id.
    pub id: Option<String>,
    /// `ok`, `failed`, `timeout`, `oom`, `nondeterministic` or `crashed`.
    #[serde(default)]
    pub status: Option<String>,
    /// Exception class of the last failure.
    #[serde(default)]
    pub error_class: Option<String>,
    /// Message of the last failure (or of a protocol `error`).
    #[serde(default, alias = "message")]
    pub error_message: Option<String>,
    /// The program with its repaired inputs, when it ran.
    #[serde(default)]
    pub program: Option<String>,
    /// Shape of each output tensor.
    #[serde(default)]
    pub output_shapes: Vec<String>,
    /// Dtype of each output tensor.
    #[serde(default)]
    pub output_dtypes: Vec<String>,
    /// Parameter count.
    #[serde(default)]
    pub param_count: Option<u64>,
    /// CPU time of one forward, ms.
    #[serde(default)]
    pub forward_ms: Option<f64>,
    /// CPU time of the module's processes, ms.
    #[serde(default)]
    pub cpu_time_ms: Option<f64>,
    /// CPU time of the runner's own work on the module (repair, verification, sizing), ms.
    #[serde(default)]
    pub runner_cpu_ms: Option<f64>,
    /// CPU time of setting the module's child up and tearing it down (the rest of
    /// `cpu_time_ms`, plus the worker's own time for the child), ms.
    #[serde(default)]
    pub setup_cpu_ms: Option<f64>,
    /// Repairs applied.
    #[serde(default)]
    pub repair_steps: Vec<String>,
    /// Runs made.
    #[serde(default)]
    pub attempts: u32,
    /// Workers the Ray driver's actors started (its `stats` line).
    #[serde(default)]
    pub workers_started: Option<u64>,
    /// Requests the Ray driver ran again after their actor died (its `stats` line).
    #[serde(default)]
    pub requeued: Option<u64>,
    /// ATen operators one forward call dispatched, with counts (null: not recorded).
    #[serde(default)]
    pub aten_ops: Option<std::collections::BTreeMap<String, u64>>,
    /// The same operators in the order they ran.
    #[serde(default)]
    pub aten_trace: Vec<String>,
    /// The same calls with the attributes that decide their kernel.
    #[serde(default)]
    pub aten_calls: Vec<String>,
    /// The failed attempts, one line each.
    #[serde(default)]
    pub attempt_log: Vec<String>,
    /// `sized`, `below_target` or `unsizable`.
    #[serde(default)]
    pub size_status: Option<String>,
    /// Why the program is below its target or unsizable (`size_reason` of `verdicts.json`).
    #[serde(default)]
    pub size_reason_code: Option<ksmith_core::tables::SizeReason>,
    /// The same, in words.
    #[serde(default)]
    pub size_reason: Option<String>,
    /// The chosen sizes (a JSON object).
    #[serde(default)]
    pub sizes: Option<String>,
    /// Alternate size sets (a JSON list of objects).
    #[serde(default)]
    pub alt_sizes: Option<String>,
    /// `meta` or `cpu`.
    #[serde(default)]
    pub sized_on: Option<String>,
    /// Trial runs of the sizing step.
    #[serde(default)]
    pub size_trials: u32,
    /// FLOPs of one forward call at the chosen sizes.
    #[serde(default)]
    pub est_flops: Option<f64>,
    /// Bytes moved by that call.
    #[serde(default)]
    pub est_bytes: Option<f64>,
    /// Bytes of parameters and buffers.
    #[serde(default)]
    pub param_bytes: Option<u64>,
    /// Peak tensor bytes of that call.
    #[serde(default)]
    pub peak_bytes: Option<u64>,
    /// Estimated eager time on the reference GPU, ms.
    #[serde(default)]
    pub est_ms: Option<f64>,
    /// The configurations the program gave its own classes (`observe.py`).
    #[serde(default)]
    pub submodules: Vec<ksmith_core::tables::SubmoduleConfig>,
}
