//! The workspace-level tests, in one test binary: end-to-end runs across stages (`e2e`) and the
//! rules the workspace keeps (`tidy`).

mod e2e;
mod tidy;
