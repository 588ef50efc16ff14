//! The `[rollout]` configuration section.

use std::collections::BTreeMap;
use std::path::PathBuf;

use ksmith_core::evaluation::Backend;
use serde::{Deserialize, Serialize};

use crate::error::Error;

/// How the evolution engine searches, prompts and records.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RolloutConfig {
    /// Steps per task (the first translates the reference into Triton).
    pub iterations: u32,
    /// Seed of every random choice (parent and inspiration sampling, request seeds).
    pub seed: u64,
    /// Tasks evolved at once (threads sharing the teacher and the evaluator); 0: derived, the
    /// evaluator's capacity (its devices times the evaluations each takes at once) plus the
    /// teacher's concurrency limit, so that every GPU and every teacher slot can be busy at once
    /// (`in_flight`).
    pub parallel_tasks: usize,
    /// Only the first `max_tasks` tasks of tasks.parquet (0: all).
    pub max_tasks: usize,
    /// Islands per task; step `i` runs on island `i % num_islands`.
    pub num_islands: u32,
    /// Ring migration every this many iterations (0: never).
    pub migration_interval: u32,
    /// Share of an island's correct programs (at least one) copied to the next island.
    pub migration_rate: f64,
    /// Size of the task-wide elite archive (the source of "top programs").
    pub elite_size: usize,
    /// Bins of the complexity axis of each island's MAP-Elites grid.
    pub complexity_bins: u32,
    /// Complexity mapped to the last bin (log scale: `log2(1 + c) / log2(1 + max)`).
    pub complexity_max: f64,
    /// Bins of the score axis (log2 speedup).
    pub score_bins: u32,
    /// Lower end of the score axis, in log2 speedup (-3: 0.125x).
    pub log2_speedup_min: f64,
    /// Upper end of the score axis, in log2 speedup (4: 16x).
    pub log2_speedup_max: f64,
    /// Share of parents picked by fitness (sigmoid-weighted, novelty bonus for few children).
    pub exploitation_ratio: f64,
    /// Share of parents picked from a uniformly random occupied grid cell.
    pub exploration_ratio: f64,
    /// Sharpness of the fitness weighting in exploitation.
    pub selection_sharpness: f64,
    /// Failed programs of an island considered as parents in repair mode (most recent first).
    pub repair_window: usize,
    /// Top programs of the task shown in the prompt.
    pub num_top_programs: usize,
    /// Programs from neighbouring grid cells shown in the prompt.
    pub num_diverse_programs: usize,
    /// Ancestors of the parent shown with their metrics.
    pub lineage_depth: usize,
    /// Latest attempts on the island shown with their outcome (the latest is never trimmed).
    pub recent_attempts: usize,
    /// Sampling temperature sent to the teacher.
    pub temperature: f64,
    /// Nucleus sampling sent to the teacher.
    pub top_p: f64,
    /// Generated-token cap sent to the teacher (the paper uses 32K).
    pub max_output_tokens: u32,
    /// Prompt budget in approximate tokens ([`ksmith_core::tokens`], as select counts them);
    /// history is trimmed before code.
    pub prompt_token_budget: usize,
    /// Longest candidate program accepted, in bytes.
    pub max_program_chars: usize,
    /// Longest error log shown in a prompt, in bytes (head and tail kept).
    pub error_log_chars: usize,
    /// Folder with prompt templates overriding the embedded ones (`system.md`, `translate.md`,
    /// `improve.md`, `repair.md`; missing files keep the default).
    pub prompts_dir: Option<PathBuf>,
    /// Ask the evaluator to time candidates (false: correctness only).
    pub measure: bool,
    /// The kernel language of the run's candidates (`triton` or `cuda`): the prompts, the seed
    /// program and the evaluator's backend.
    pub backend: Backend,
    /// Tasks written in another kernel language than `backend`, by task id (a run that mixes
    /// them).
    pub task_backends: BTreeMap<String, Backend>,
    /// Write a task's checkpoint every this many steps (more for archives above 500 programs:
    /// one more step per 50 programs), and when the task ends.
    pub checkpoint_every: u32,
    /// Teacher tokens (prompt + completion, cache hits excluded) the whole run may spend
    /// (0: unlimited); tasks stop cleanly when it is spent and a rerun continues them.
    pub token_budget: u64,
    /// Seconds the run may start steps for (0: unlimited): past it, each task stops cleanly
    /// after its step in flight and a rerun continues them (benches measure a fixed window).
    pub time_budget_s: u64,
    /// Longest time, in milliseconds, a completed step may stay in the journal without a sync to
    /// disk (0: sync after every step). A killed process loses nothing either way; this bounds
    /// what a machine crash can take, and a sync costs milliseconds on a busy disk.
    pub journal_sync_ms: u64,
    /// Fail the run when no teacher is configured instead of skipping the rollout stage (the
    /// nightly configuration sets it).
    pub required: bool,
    /// Most bytes of a teacher's answer (and, separately, of its reasoning) kept in a step's
    /// record; the rest is cut at a character boundary and the full size is recorded
    /// (`response_bytes`, `reasoning_bytes`). The edit is always read from the whole answer;
    /// select never makes an SFT sample of a cut answer.
    pub max_stored_answer_bytes: usize,
    /// A task has no headroom when the better of its baselines (eager, `torch.compile`) already
    /// reaches this share of its speed-of-light (`ksmith_core::evaluation::Headroom`), in
    /// (0, 1]. Judged from the first evaluation that carries the baselines (a GPU's).
    pub headroom_sol_share: f64,
    /// Stop a task's rollout once it is found to have no headroom (after that step; recorded
    /// in `rollout/tasks/<task>/no_headroom.json`). Off: such tasks are kept, counted and
    /// reported (`rollout/headroom.json`).
    pub skip_no_headroom: bool,
}

impl Default for RolloutConfig {
    fn default() -> Self {
        RolloutConfig {
            iterations: 40,
            seed: 0,
            parallel_tasks: 0,
            max_tasks: 0,
            num_islands: 4,
            migration_interval: 10,
            migration_rate: 0.1,
            elite_size: 20,
            complexity_bins: 8,
            complexity_max: 255.0,
            score_bins: 14,
            log2_speedup_min: -3.0,
            log2_speedup_max: 4.0,
            exploitation_ratio: 0.6,
            exploration_ratio: 0.3,
            selection_sharpness: 10.0,
            repair_window: 4,
            num_top_programs: 3,
            num_diverse_programs: 2,
            lineage_depth: 4,
            recent_attempts: 3,
            temperature: 0.6,
            top_p: 0.95,
            max_output_tokens: 32_768,
            prompt_token_budget: 32_768,
            max_program_chars: 60_000,
            error_log_chars: 4_000,
            prompts_dir: None,
            measure: true,
            backend: Backend::Triton,
            task_backends: BTreeMap::new(),
            checkpoint_every: 10,
            token_budget: 0,
            time_budget_s: 0,
            journal_sync_ms: 1000,
            required: false,
            max_stored_answer_bytes: 262_144,
            headroom_sol_share: 0.9,
            skip_no_headroom: false,
        }
    }
}

impl RolloutConfig {
    /// Checks every value; does no I/O.
    pub fn validate(&self) -> Result<(), Error> {
        let bad = |m: String| Err(Error::Config(m));
        if self.iterations == 0 {
            return bad("iterations must be at least 1".into());
        }
        if self.num_islands == 0 {
            return bad("num_islands must be at least 1".into());
        }
        if !(0.0..=1.0).contains(&self.migration_rate) {
            return bad(format!(
                "migration_rate must be in [0, 1], got {}",
                self.migration_rate
            ));
        }
        if self.elite_size == 0 {
            return bad("elite_size must be at least 1".into());
        }
        if self.complexity_bins == 0 || self.score_bins == 0 {
            return bad("complexity_bins and score_bins must be at least 1".into());
        }
        if !(self.complexity_max.is_finite() && self.complexity_max > 0.0) {
            return bad(format!(
                "complexity_max must be > 0, got {}",
                self.complexity_max
            ));
        }
        if !(self.log2_speedup_min.is_finite()
            && self.log2_speedup_max.is_finite()
            && self.log2_speedup_min < self.log2_speedup_max)
        {
            return bad("log2_speedup_min must be below log2_speedup_max".into());
        }
        let ratios = [self.exploitation_ratio, self.exploration_ratio];
        if ratios.iter().any(|r| !(0.0..=1.0).contains(r)) || ratios.iter().sum::<f64>() > 1.0 {
            return bad(format!(
                "exploitation_ratio ({}) and exploration_ratio ({}) must be in [0, 1] and sum to at most 1",
                self.exploitation_ratio, self.exploration_ratio
            ));
        }
        if !(self.selection_sharpness.is_finite() && self.selection_sharpness > 0.0) {
            return bad("selection_sharpness must be > 0".into());
        }
        if self.repair_window == 0 {
            return bad("repair_window must be at least 1".into());
        }
        if !(self.temperature.is_finite() && (0.0..=2.0).contains(&self.temperature)) {
            return bad(format!(
                "temperature must be in [0, 2], got {}",
                self.temperature
            ));
        }
        if !(self.top_p > 0.0 && self.top_p <= 1.0) {
            return bad(format!("top_p must be in (0, 1], got {}", self.top_p));
        }
        if self.max_output_tokens == 0 || self.prompt_token_budget < 256 {
            return bad(
                "max_output_tokens must be > 0 and prompt_token_budget at least 256".into(),
            );
        }
        if self.max_program_chars < 1000 {
            return bad("max_program_chars must be at least 1000".into());
        }
        if self.checkpoint_every == 0 {
            return bad("checkpoint_every must be at least 1".into());
        }
        if self.max_stored_answer_bytes < 1024 {
            return bad("max_stored_answer_bytes must be at least 1024".into());
        }
        if !(self.headroom_sol_share > 0.0 && self.headroom_sol_share <= 1.0) {
            return bad(format!(
                "headroom_sol_share must be in (0, 1], got {}",
                self.headroom_sol_share
            ));
        }
        if self.task_backends.keys().any(|k| k.trim().is_empty()) {
            return bad("task_backends: a task id is empty".into());
        }
        Ok(())
    }

    /// The kernel language of task `task_id`: its entry in `task_backends`, else `backend`.
    pub fn backend_of(&self, task_id: &str) -> Backend {
        self.task_backends
            .get(task_id)
            .copied()
            .unwrap_or(self.backend)
    }

    /// Every kernel language the run may use (`backend` first).
    pub fn backends(&self) -> Vec<Backend> {
        let mut out = vec![self.backend];
        for b in self.task_backends.values() {
            if !out.contains(b) {
                out.push(*b);
            }
        }
        out
    }

    /// Hash of the keys that shape the search (not `iterations`, `parallel_tasks`, `max_tasks`,
    /// `checkpoint_every`, `token_budget`, `time_budget_s`, `measure`,
    /// `max_stored_answer_bytes`, `headroom_sol_share`, `skip_no_headroom`): a stored rollout
    /// is resumed only under the same search hash.
    pub fn search_hash(&self) -> String {
        let mut c = self.clone();
        c.iterations = 0;
        c.parallel_tasks = 0;
        c.max_tasks = 0;
        c.checkpoint_every = 0;
        c.token_budget = 0;
        c.time_budget_s = 0;
        c.measure = true;
        c.max_stored_answer_bytes = 0;
        c.headroom_sol_share = 0.0;
        c.skip_no_headroom = false;
        ksmith_core::config::section_hash(&c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_bad_values_name_the_key() {
        RolloutConfig::default().validate().unwrap();
        let c = RolloutConfig {
            exploitation_ratio: 0.8,
            exploration_ratio: 0.4,
            ..Default::default()
        };
        assert!(
            c.validate()
                .unwrap_err()
                .to_string()
                .contains("exploitation_ratio")
        );
        let c = RolloutConfig {
            log2_speedup_min: 2.0,
            log2_speedup_max: 1.0,
            ..Default::default()
        };
        assert!(
            c.validate()
                .unwrap_err()
                .to_string()
                .contains("log2_speedup")
        );
        let c = RolloutConfig {
            headroom_sol_share: 1.5,
            ..Default::default()
        };
        assert!(
            c.validate()
                .unwrap_err()
                .to_string()
                .contains("headroom_sol_share")
        );
        let c = RolloutConfig {
            num_islands: 0,
            ..Default::default()
        };
        assert!(
            c.validate()
                .unwrap_err()
                .to_string()
                .contains("num_islands")
        );
    }

    #[test]
    fn a_task_backend_overrides_the_runs() {
        let c: RolloutConfig =
            serde_json::from_str(r#"{"backend": "cuda", "task_backends": {"t-1": "triton"}}"#)
                .unwrap();
        c.validate().unwrap();
        assert_eq!(c.backend_of("t-1"), Backend::Triton);
        assert_eq!(c.backend_of("t-2"), Backend::Cuda);
        assert_eq!(c.backends(), vec![Backend::Cuda, Backend::Triton]);
        assert_eq!(RolloutConfig::default().backends(), vec![Backend::Triton]);
        let e = serde_json::from_str::<RolloutConfig>(r#"{"backend": "tilelang"}"#).unwrap_err();
        assert!(e.to_string().contains("tilelang"), "{e}");
        // another backend is another search: a stored rollout is not resumed under it
        assert_ne!(c.search_hash(), RolloutConfig::default().search_hash());
        let empty: RolloutConfig =
            serde_json::from_str(r#"{"task_backends": {" ": "cuda"}}"#).unwrap();
        assert!(
            empty
                .validate()
                .unwrap_err()
                .to_string()
                .contains("task_backends")
        );
    }

    #[test]
    fn search_hash_ignores_run_length_but_not_search_keys() {
        let a = RolloutConfig::default();
        let b = RolloutConfig {
            iterations: 80,
            parallel_tasks: 2,
            ..Default::default()
        };
        assert_eq!(a.search_hash(), b.search_hash());
        let c = RolloutConfig {
            num_islands: 3,
            ..Default::default()
        };
        assert_ne!(a.search_hash(), c.search_hash());
    }
}
