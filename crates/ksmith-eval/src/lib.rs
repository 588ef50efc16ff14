//! Evaluator client: runs candidates on local Python workers (one per GPU, or Triton-interpreter
//! workers on CPU) or on a remote endpoint, behind [`ksmith_core::evaluation::Evaluator`].
//!
//! - [`WorkerPool`] starts one worker per device (`python -m ksmith.evaluator worker`, pinned
//!   with `CUDA_VISIBLE_DEVICES`; GPUs found with `nvidia-smi -L`, else `cpu_workers`
//!   interpreter workers; all started at once), speaks the versioned JSON-lines protocol
//!   ([`protocol`]) with each, queues requests from any number of threads to the worker that
//!   already served the task when it has room, else to the least busy healthy one ([`schedule`]:
//!   a task's reference is then built on few devices, not on every one; at most `inflight_per_worker` each: while one
//!   candidate is timed on the GPU, which the worker serializes, others are spawned, compiled
//!   and checked for correctness), replaces a worker that dies or stops answering, and takes a
//!   device out of the pool when it fails (its request goes to another device). It accounts,
//!   per device, evaluations, busy time and time without work, and sums the workers' profiles
//!   of where an evaluation's time went ([`Evaluator::report_counters`]).
//! - The worker's Python sources are embedded in this crate (`include_str!`) and written to a
//!   private runtime folder ([`runtime::RuntimeDir`]) at start; the interpreter is found with
//!   [`ksmith_core::python_env::resolve_python`].
//! - [`RemoteEvaluator`] speaks the same protocol over HTTP to `python -m ksmith.evaluator serve`.
//! - [`build`] picks one of the two from an [`EvalConfig`] (`[eval]` section).
//!
//! Invariants: a candidate never runs in a worker, only in a child process of it; a failing
//! candidate is an [`ksmith_core::evaluation::EvalResult`] with its status, never an error;
//! errors ([`ksmith_core::evaluation::EvalError`]) mean the evaluation could not be carried out
//! (no worker, broken reference, protocol).
#![deny(missing_docs)]

pub mod config;
pub mod devices;
pub mod error;
pub mod pool;
pub mod protocol;
pub mod remote;
pub mod runtime;
pub mod schedule;
pub mod spawner;
pub mod worker;

pub use config::EvalConfig;
pub use error::EvalClientError;
pub use pool::WorkerPool;
pub use remote::RemoteEvaluator;

use ksmith_core::evaluation::Evaluator;

/// The evaluator `cfg` asks for: the remote endpoint when `remote_url` is set, else a local
/// [`WorkerPool`].
pub fn build(cfg: &EvalConfig) -> Result<Box<dyn Evaluator>, EvalClientError> {
    cfg.validate()?;
    match &cfg.remote_url {
        Some(url) => Ok(Box::new(RemoteEvaluator::new(url, cfg.remote_timeout_s))),
        None => Ok(Box::new(WorkerPool::start(cfg)?)),
    }
}
