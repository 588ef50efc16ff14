//! The `ksmith` command line: one subcommand per stage, `ksmith run` for all of them.
//!
//! This crate is the only place that knows every stage: it loads the configuration once,
//! validates every stage's section before any work starts, builds each stage's
//! [`ksmith_core::context::StageContext`], runs the stages in order and reports. It also picks the
//! concrete implementations of the cross-stage contracts (the evaluator and the teacher).
//! Stage crates never see a command-line type.
#![deny(missing_docs)]

pub mod args;
pub mod benchmarks;
pub mod import_tasks;
pub mod merge;
pub mod pipeline;
pub mod stages;
