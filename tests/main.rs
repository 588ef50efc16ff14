//! The workspace-level tests, in one test binary: end-to-end runs across stages (`e2e`), the
//! stage contract checked on every stage (`compliance`) and the rules the workspace keeps
//! (`tidy`).

mod compliance;
mod e2e;
mod tidy;
