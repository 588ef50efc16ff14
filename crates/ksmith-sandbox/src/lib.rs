//! The sandbox for untrusted code, shared by the probe (crawled modules) and the evaluator
//! (generated kernels): the `[sandbox]` section ([`SandboxConfig`]), the Python launcher and
//! per-child confinement (`python/ksmith/confine`, embedded here as [`PYTHON_FILES`] and written
//! into each stage's runtime folder), and [`Launch`], the one way both stages start a worker.
//!
//! A worker starts as `python -s -m ksmith.confine --policy JSON -- <worker args>` with an
//! environment of [`ENV_PASSED`] only: the launcher puts it in a bubblewrap sandbox (read-only
//! view of the interpreter, its environment and the runtime package; fresh `/proc`; no network;
//! a tmpfs for scratch; a seccomp filter; a pids cgroup) and the worker confines every child
//! further (its own PID namespace, `/proc` and tmpfs workspace, limits, no capabilities, a
//! stricter seccomp filter). What could not be set up is in the worker's hello
//! ([`missing`]). By default (`require`) the launcher or the worker refuses to start instead,
//! before any untrusted code exists in it, with one line saying what is missing and how to fix
//! it ([`refusal`]); only `[sandbox] require = false` runs without the missing parts, and the
//! stage says so before its first request ([`admit`]).
//!
//! Invariant: no worker that runs untrusted code is started any other way.
#![deny(missing_docs)]

pub mod admission;
pub mod config;
pub mod launch;

pub use admission::{EXIT_REFUSED, REFUSAL, Refused, admit, refusal};
pub use config::SandboxConfig;
pub use launch::{ENV_PASSED, Launch, PYTHON_FILES, missing};
