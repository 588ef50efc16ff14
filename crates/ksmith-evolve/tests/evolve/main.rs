//! The integration tests of ksmith-evolve, in one test binary (one link per crate).

mod engine_loop;
mod in_flight;
mod loop_over_http;
mod preflight;
mod resume_after_kill;
mod rollout_vs_reward;
mod support;
