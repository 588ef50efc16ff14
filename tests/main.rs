//! The workspace-level tests, in one test binary: end-to-end runs across stages (`e2e`), the
//! stage contract checked on every stage (`compliance`), the rules the workspace keeps
//! (`tidy`), dedup and tasks by what modules run (`what_runs`) and the rollout's preflight of
//! references through select and export (`preflight`).

mod compliance;
mod e2e;
mod preflight;
mod tidy;
mod what_runs;
