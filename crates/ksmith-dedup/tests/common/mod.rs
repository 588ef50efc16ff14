//! Shared fixtures of the dedup integration tests: module and probe rows, planted duplicates.

pub(crate) mod synth;
