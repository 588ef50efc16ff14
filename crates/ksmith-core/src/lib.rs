//! Core of ksmith: the types every stage shares.
//!
//! ksmith turns public PyTorch code into training data for models that write GPU kernels. The
//! pipeline is a chain of stages (crawl, extract, probe, dedup, cluster, rollout, select,
//! export); each stage is a function from typed tables to typed tables. This crate holds what
//! the stages have in common and nothing else:
//!
//! - [`config`]: the one TOML configuration file, its `[run]` and `[[source]]` sections, and
//!   typed access to each stage's own section ([`config::Config::section`]).
//! - [`table`]: Parquet table I/O. Each table is a row struct implementing [`table::Table`];
//!   files are written atomically (temporary file, fsync, rename), compressed with zstd and carry
//!   their schema version and the stage fingerprint in the file metadata.
//! - [`tables`]: the row types of every table, which are the API between stages.
//! - [`fingerprint`]: stage fingerprints (hash of the inputs' fingerprints, the stage's config
//!   section and the stage's code version), so a re-run with nothing changed does no work.
//! - [`ids`]: content hashes used as stable ids.
//! - [`evaluation`] and [`chat`]: the contracts between the evolution engine and the
//!   evaluator and teacher implementations, which only the CLI wires together.
//! - [`evolve_block`] and [`answer`]: a program's editable block and the one reader of a
//!   teacher's answer (SEARCH/REPLACE blocks or a fenced rewrite) into a candidate program,
//!   used by the rollout, select and export (the reward's Python copy runs the same cases).
//! - [`shard`]: which repositories a shard of a sharded run owns.
//! - [`manifest`]: the JSONL repository manifest that discover writes and crawl reads.
//! - [`spdx`], [`timestamp`] and [`backoff`]: license ids, RFC 3339 times and retry delays,
//!   defined once for the stages and clients that share them.
//! - [`python_env`]: where the Python interpreter with torch and triton is found.
//! - [`tokens`]: the one approximate token counter behind every token budget.
//! - [`speedup_interval`]: confidence intervals of speedups (bootstrap of the ratio of medians
//!   from the evaluator's samples).
//! - [`versions`]: the versions of the protocols and files the Python side shares.
//! - [`vocabulary`]: closed vocabularies (statuses, verdicts, methods, reasons), each variant
//!   with one stable name.
//! - [`context`], [`progress`] and [`report`]: what a stage is given to run (work directory,
//!   thread count, progress and log output) and the counters it returns.
//! - [`stage`]: the stage contract (input check, fingerprint, skip, timing, thread pool and the
//!   one place that writes reports), so a stage crate's `run` holds only its own work.
//!
//! Invariants: this crate does no network or subprocess I/O and knows nothing about Python,
//! git or GPUs. Stage crates depend on it and never on each other.
//!
//! # Example
//!
//! ```
//! use ksmith_core::table::{read_table, write_table};
//! use ksmith_core::tables::RepoRow;
//!
//! let dir = tempfile::tempdir()?;
//! let path = dir.path().join("repos.parquet");
//! let row = RepoRow::failed("demo", "file:///nowhere", "no such repository");
//! write_table(&path, &[row.clone()], "fp-1")?;
//! let back: Vec<RepoRow> = read_table(&path)?;
//! assert_eq!(back, vec![row]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![deny(missing_docs)]

pub mod answer;
pub mod backoff;
pub mod chat;
pub mod config;
pub mod context;
pub mod error;
pub mod evaluation;
pub mod evolve_block;
pub mod fingerprint;
pub mod ids;
pub mod manifest;
pub mod progress;
pub mod python_env;
pub mod report;
pub mod shard;
pub mod spdx;
pub mod speedup_interval;
pub mod stage;
pub mod table;
pub mod tables;
pub mod timestamp;
pub mod tokens;
pub mod versions;
pub mod vocabulary;

pub use error::{Error, Result};
