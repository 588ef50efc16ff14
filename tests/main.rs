//! The workspace-level tests, in one test binary: end-to-end runs across stages (`e2e`), the
//! stage contract checked on every stage (`compliance`), the rules the workspace keeps
//! (`tidy`) and dedup and tasks by what modules run (`what_runs`).

mod compliance;
mod e2e;
mod tidy;
mod what_runs;
