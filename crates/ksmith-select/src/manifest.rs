//! `selection.json`: the rules select applied, in words, with its config and config hash.
//!
//! Written next to `sft.parquet` and `grpo.parquet`; export copies it into the dataset cards.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::config::{BestScope, GrpoRule, SelectConfig};
use crate::drops::SampleSet;
use ksmith_core::report::StageReport;
use ksmith_core::tokens::APPROX_CHARS_DIV_4;

/// The file name of the manifest in the work directory.
pub const MANIFEST_FILE: &str = "selection.json";

/// What export needs to describe a selection.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SelectionManifest {
    /// The `[select]` section after defaults.
    pub config: SelectConfig,
    /// Its hash (as in the stage fingerprint).
    pub config_hash: String,
    /// The stage fingerprint of the tables it describes.
    pub fingerprint: String,
    /// How tokens were counted.
    pub token_counter: String,
    /// One sentence per rule, in the order they apply.
    pub rules: Vec<String>,
    /// What the rules kept and dropped per set (`sft`, `grpo`, `env`, `chains`), so that export
    /// can say why a dataset has no rows. Empty in manifests of older versions.
    #[serde(default)]
    pub outcome: BTreeMap<String, SetOutcome>,
    /// Correct steps without a GPU timing (CPU interpreter): they can be neither performance
    /// SFT samples nor GRPO best-step prompts.
    #[serde(default)]
    pub steps_correct_untimed: u64,
    /// The confidence intervals' method in words.
    #[serde(default)]
    pub interval_method: String,
    /// Over the correct timed steps, by the SFT factors: `timed`;
    /// `significant_over_eager` / `_over_parent` (the interval's lower bound is above the
    /// factor); `faster_not_significant_*` (the figure is above it, the lower bound is not: what
    /// a raw threshold would have kept); `not_faster_*`; `no_interval_*` (no samples, or no
    /// timed parent); the same `*_over_compile`; `trivial`, `not_trivial`, `trivial_not_judged`.
    /// Empty in manifests of older versions.
    #[serde(default)]
    pub significance: BTreeMap<String, u64>,
    /// Trivial steps (significantly faster than eager, not than `torch.compile`) per task.
    /// Empty in manifests of older versions.
    #[serde(default)]
    pub trivial_by_task: BTreeMap<String, u64>,
}

/// What select kept of one set and why it dropped the rest.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SetOutcome {
    /// Rows written.
    pub kept: u64,
    /// Steps not taken, by reason (the report's `<set>/<reason>` counts without the prefix).
    pub dropped: BTreeMap<String, u64>,
}

impl SelectionManifest {
    /// The manifest of a run with `cfg`.
    pub fn new(cfg: &SelectConfig, fingerprint: &str) -> Self {
        SelectionManifest {
            config: cfg.clone(),
            config_hash: ksmith_core::config::section_hash(cfg),
            fingerprint: fingerprint.to_string(),
            token_counter: APPROX_CHARS_DIV_4.to_string(),
            rules: rules(cfg),
            outcome: BTreeMap::new(),
            steps_correct_untimed: 0,
            interval_method: cfg.bootstrap().describe(),
            significance: BTreeMap::new(),
            trivial_by_task: BTreeMap::new(),
        }
    }

    /// Adds what the run kept (`kept` rows per set) and dropped (from `report`).
    pub fn with_outcome(mut self, report: &StageReport, kept: &[(SampleSet, usize)]) -> Self {
        for &(set, n) in kept {
            let prefix = format!("{set}/");
            let dropped = report
                .dropped
                .iter()
                .filter_map(|(k, v)| k.strip_prefix(&prefix).map(|r| (r.to_string(), *v)))
                .collect();
            self.outcome.insert(
                set.to_string(),
                SetOutcome {
                    kept: n as u64,
                    dropped,
                },
            );
        }
        self.steps_correct_untimed = report
            .counters
            .get("steps_correct_untimed")
            .copied()
            .unwrap_or(0);
        self.significance = report
            .counters
            .iter()
            .filter_map(|(k, v)| k.strip_prefix("labels_").map(|r| (r.to_string(), *v)))
            .collect();
        self
    }

    /// Where the manifest lives in `workdir`.
    pub fn path_in(workdir: &Path) -> PathBuf {
        workdir.join(MANIFEST_FILE)
    }
}

/// The prompt rule `rule` of set `set` (`GRPO`, `Environments`) in words.
fn prompt_rule(set: &str, rule: GrpoRule, cfg: &SelectConfig) -> String {
    match rule {
        GrpoRule::BestSteps => format!(
            "{set} (best_steps): prompts whose current program was the best so far of its \
             trajectory ({}) when the prompt was built (no earlier step was significantly faster: \
             the lower bound of the ratio of their speedups at most 1), correct \
             and significantly faster than eager (the lower bound of its speedup's confidence \
             interval above {}x); at most {} prompt(s) per current program \
             (0 = no limit). The answer is rewarded by its speedup relative to that program.",
            match cfg.grpo_best_scope {
                BestScope::Task => "over the whole task",
                BestScope::Island => "within its island",
            },
            cfg.grpo_min_parent_speedup,
            cfg.grpo_max_prompts_per_parent
        ),
        GrpoRule::AllSteps => format!(
            "{set} (all_steps): every prompt whose current program is correct or is \
             the PyTorch reference; at most {} prompt(s) per current program (0 = no limit).",
            cfg.grpo_max_prompts_per_parent
        ),
        GrpoRule::FirstSteps => format!(
            "{set} (first_steps): only first-step prompts (translate the PyTorch \
             reference); at most {} prompt(s) per task (0 = no limit).",
            cfg.grpo_max_prompts_per_parent
        ),
    }
}

/// The rules of `cfg` in words.
pub fn rules(cfg: &SelectConfig) -> Vec<String> {
    let grpo = prompt_rule("GRPO", cfg.grpo_rule, cfg);
    vec![
        "SFT correctness: every correct translation: a first step (PyTorch reference to \
         Triton) or a step that repaired a failing Triton program into a correct one; \
         identical answers to one task are kept once. Needs no timings (the CPU interpreter \
         gives these samples too)."
            .to_string(),
        format!(
            "SFT performance: Triton-to-Triton steps whose program is correct and \
             significantly faster than eager and than its (correct, timed) parent: the lower \
             bounds of the {:.0} % confidence intervals of its speedup over eager and over the \
             parent are above {}x and {}x. Steps without GPU timings (CPU interpreter) or \
             without samples to draw an interval from are never performance samples.",
            cfg.interval_confidence * 100.0,
            cfg.sft_min_speedup,
            cfg.sft_min_gain_over_parent
        ),
        format!(
            "Speed labels: every SFT row carries its speedup over eager, over the task's \
             torch.compile baseline and over its parent, every GRPO row its current program's \
             speedups over eager and over compile, each with a confidence interval ({}), and a \
             stamp (GPU, driver, CUDA, torch, Triton, ksmith version, timing method and \
             settings).",
            cfg.bootstrap().describe()
        ),
        format!(
            "Trivial steps: a step whose speedup over eager is significant (lower bound above \
             1x) but whose speedup over torch.compile is not (lower bound not above {}x) is \
             labelled trivial: one compiler call gives the same. They are {} (counted in the \
             significance and per task). Without a compile baseline (CPU) no step is judged.",
            cfg.min_gain_over_compile,
            match cfg.trivial_steps {
                crate::config::TrivialSteps::Drop => {
                    "never performance SFT samples nor the current program of a best_steps prompt"
                }
                crate::config::TrivialSteps::Keep => "selected like any other step",
            }
        ),
        grpo,
        prompt_rule("Agent environments", cfg.env_rule, cfg),
        format!(
            "Multi-turn chains: per island, the lineage (parent -> child) of its best step (the \
             fastest correct one; the earliest when untimed), its latest {} steps at most and {} \
             at least, every step with a whole answer, a program and an evaluation; it must end \
             better than it starts (the last program beats the first turn's, a failing one by \
             being correct, a correct one by more than {}x its speedup, and the program the \
             first prompt shows when both are timed), its first prompt must show none of its \
             programs, and it must fit {} tokens ({APPROX_CHARS_DIV_4}); a lineage that does not \
             starts later.",
            cfg.chain_max_turns, cfg.chain_min_turns, cfg.chain_min_gain, cfg.chain_max_tokens
        ),
        format!(
            "Token budget: samples over {} tokens are dropped (SFT: whole conversation; GRPO: \
             prompt), counted with {APPROX_CHARS_DIV_4} (ceil(characters / 4) + 4 per message).",
            cfg.max_tokens
        ),
        format!(
            "Balance: within each level no family holds more than max({}, 1/families) of the \
             samples; level proportions {}.",
            cfg.max_family_share,
            if cfg.level_proportions.is_empty() {
                "not enforced (natural mix)".to_string()
            } else {
                cfg.level_proportions
                    .iter()
                    .map(|(l, p)| format!("level {l}: {p}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            }
        ),
        format!(
            "Split: by cluster (noise tasks one by one), validation when a seeded hash of the \
             cluster is below {}; a task and its near duplicates are never on both sides.",
            cfg.validation_fraction
        ),
    ]
}
