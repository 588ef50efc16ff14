//! The `[select]` section of the configuration.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use ksmith_core::speedup_interval::{Bootstrap, DEFAULT_CONFIDENCE, DEFAULT_RESAMPLES};

use crate::error::Error;

/// Which steps give GRPO prompts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GrpoRule {
    /// Prompts whose current program is a best-so-far of its trajectory, correct and already
    /// faster than eager (the paper's choice).
    BestSteps,
    /// Every step whose current program is correct, or is the reference (ablation).
    AllSteps,
    /// Only first steps, whose current program is the PyTorch reference (ablation).
    FirstSteps,
}

/// What select does with a `trivial` step (significantly faster than eager, not than
/// `torch.compile`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TrivialSteps {
    /// Never a performance SFT sample, never the current program of a GRPO `best_steps`
    /// prompt (counted as `trivial` / `parent_trivial`).
    Drop,
    /// Selected like any other step (labelled `trivial`, counted).
    Keep,
}

/// Where "best so far" is judged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BestScope {
    /// Over every island of the task's rollout.
    Task,
    /// Within the program's own island.
    Island,
}

/// Configuration of the select stage (`[select]`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SelectConfig {
    /// Performance SFT: the lower bound of the step's speedup over eager must be above this
    /// factor (1 + a margin; 1.0: significantly faster than eager).
    pub sft_min_speedup: f64,
    /// Performance SFT: the lower bound of the step's speedup over its parent (its speedup
    /// over eager over the parent's) must be above this factor (1.0: significantly faster
    /// than the parent).
    pub sft_min_gain_over_parent: f64,
    /// Which steps give GRPO prompts: `best_steps` (paper), `all_steps`, `first_steps`.
    pub grpo_rule: GrpoRule,
    /// GRPO `best_steps`: the lower bound of the current program's speedup over eager must be
    /// above this factor.
    pub grpo_min_parent_speedup: f64,
    /// A step is `trivial` when its gain over eager is significant and the lower bound of its
    /// speedup over the task's `torch.compile` baseline is not above this factor (1 + a
    /// margin; 1.0: not significantly faster than compile).
    pub min_gain_over_compile: f64,
    /// What happens to `trivial` steps: `drop` (no performance SFT sample, no `best_steps`
    /// prompt on them) or `keep`.
    pub trivial_steps: TrivialSteps,
    /// Two-sided confidence of the speedups' intervals, in [0.5, 0.999].
    pub interval_confidence: f64,
    /// Bootstrap replicates per interval, 100 to 100000 (see
    /// `ksmith_core::speedup_interval`).
    pub bootstrap_resamples: u32,
    /// GRPO `best_steps`: best so far within the `task` or within the program's `island`.
    pub grpo_best_scope: BestScope,
    /// Most GRPO prompts sharing one current program (the earliest steps are kept); 0 means
    /// no limit.
    pub grpo_max_prompts_per_parent: u32,
    /// Samples over this many tokens are dropped (SFT: the whole conversation; GRPO: the
    /// prompt).
    pub max_tokens: u64,
    /// Which steps' prompts start the agent environments (`env.parquet`): `first_steps` (one per
    /// task, from the PyTorch reference), `best_steps` (the GRPO best-step parents) or
    /// `all_steps`; `grpo_max_prompts_per_parent` applies too.
    pub env_rule: GrpoRule,
    /// Multi-turn chains: fewest steps in a chain.
    pub chain_min_turns: u32,
    /// Multi-turn chains: most steps in a chain (the latest ones, ending at the best step).
    pub chain_max_turns: u32,
    /// Multi-turn chains: the last program must be faster than the first turn's and than the
    /// program the first prompt shows by more than this factor (when both are timed).
    pub chain_min_gain: f64,
    /// Multi-turn chains: the longest conversation (prompt, answers, programs, evaluations), in
    /// tokens; a longer lineage starts later.
    pub chain_max_tokens: u64,
    /// A Hugging Face `tokenizer.json` to count tokens with. This build has no tokenizer
    /// support: leave empty (tokens are then approximated as `approx_chars_div_4`).
    pub tokenizer: Option<PathBuf>,
    /// Target share of each difficulty level (`"1"`, `"2"`, `"3"`) in every selected set:
    /// the largest subset with these proportions is kept. Empty keeps the natural mix.
    pub level_proportions: BTreeMap<String, f64>,
    /// Within a level, no family holds more than this share of the level's samples (or
    /// 1 / number of families present, when that is larger). 1.0 turns the cap off.
    pub max_family_share: f64,
    /// Share of clusters (and of noise tasks) put into validation.
    pub validation_fraction: f64,
    /// Seed of the split and of the balanced subsampling; changing it reshuffles both.
    pub seed: String,
}

impl Default for SelectConfig {
    fn default() -> Self {
        SelectConfig {
            sft_min_speedup: 1.0,
            sft_min_gain_over_parent: 1.0,
            grpo_rule: GrpoRule::BestSteps,
            grpo_min_parent_speedup: 1.0,
            min_gain_over_compile: 1.0,
            trivial_steps: TrivialSteps::Drop,
            interval_confidence: DEFAULT_CONFIDENCE,
            bootstrap_resamples: DEFAULT_RESAMPLES,
            grpo_best_scope: BestScope::Task,
            grpo_max_prompts_per_parent: 1,
            max_tokens: 65_536,
            env_rule: GrpoRule::FirstSteps,
            chain_min_turns: 2,
            chain_max_turns: 8,
            chain_min_gain: 1.0,
            chain_max_tokens: 32_768,
            tokenizer: None,
            level_proportions: BTreeMap::new(),
            max_family_share: 0.35,
            validation_fraction: 0.05,
            seed: "ksmith-select".to_string(),
        }
    }
}

impl SelectConfig {
    /// The bootstrap the speedups' intervals are drawn with.
    pub fn bootstrap(&self) -> Bootstrap {
        Bootstrap {
            resamples: self.bootstrap_resamples,
            confidence: self.interval_confidence,
        }
    }

    /// Checks every value; does no I/O.
    pub fn validate(&self) -> Result<(), Error> {
        let bad = |key: &str, why: String| {
            Err(Error::Config {
                key: key.to_string(),
                message: why,
            })
        };
        if !(self.sft_min_speedup.is_finite() && self.sft_min_speedup > 0.0) {
            return bad(
                "sft_min_speedup",
                format!("must be a positive number, got {}", self.sft_min_speedup),
            );
        }
        if !(self.sft_min_gain_over_parent.is_finite() && self.sft_min_gain_over_parent > 0.0) {
            return bad(
                "sft_min_gain_over_parent",
                format!(
                    "must be a positive number, got {}",
                    self.sft_min_gain_over_parent
                ),
            );
        }
        if !(self.grpo_min_parent_speedup.is_finite() && self.grpo_min_parent_speedup > 0.0) {
            return bad(
                "grpo_min_parent_speedup",
                format!(
                    "must be a positive number, got {}",
                    self.grpo_min_parent_speedup
                ),
            );
        }
        if !(self.min_gain_over_compile.is_finite() && self.min_gain_over_compile > 0.0) {
            return bad(
                "min_gain_over_compile",
                format!(
                    "must be a positive number, got {}",
                    self.min_gain_over_compile
                ),
            );
        }
        if !(0.5..=0.999).contains(&self.interval_confidence) {
            return bad(
                "interval_confidence",
                format!(
                    "must be between 0.5 and 0.999, got {}",
                    self.interval_confidence
                ),
            );
        }
        if !(100..=100_000).contains(&self.bootstrap_resamples) {
            return bad(
                "bootstrap_resamples",
                format!(
                    "must be between 100 and 100000, got {}",
                    self.bootstrap_resamples
                ),
            );
        }
        if self.max_tokens == 0 {
            return bad("max_tokens", "must be at least 1".to_string());
        }
        if self.chain_min_turns < 2 {
            return bad(
                "chain_min_turns",
                format!(
                    "must be at least 2 (a chain of one step is a single-turn sample), got {}",
                    self.chain_min_turns
                ),
            );
        }
        if self.chain_max_turns < self.chain_min_turns {
            return bad(
                "chain_max_turns",
                format!(
                    "must be at least chain_min_turns ({}), got {}",
                    self.chain_min_turns, self.chain_max_turns
                ),
            );
        }
        if !(self.chain_min_gain.is_finite() && self.chain_min_gain >= 1.0) {
            return bad(
                "chain_min_gain",
                format!("must be a number >= 1.0, got {}", self.chain_min_gain),
            );
        }
        if self.chain_max_tokens == 0 {
            return bad("chain_max_tokens", "must be at least 1".to_string());
        }
        if let Some(path) = &self.tokenizer
            && !path.as_os_str().is_empty()
        {
            return bad(
                "tokenizer",
                format!(
                    "{}: this ksmith was built without tokenizer support; remove the key to \
                     count tokens with the `approx_chars_div_4` approximation",
                    path.display()
                ),
            );
        }
        for (level, share) in &self.level_proportions {
            if !matches!(level.as_str(), "1" | "2" | "3") {
                return bad(
                    "level_proportions",
                    format!("unknown level `{level}`; levels are \"1\", \"2\" and \"3\""),
                );
            }
            if !(share.is_finite() && *share >= 0.0) {
                return bad(
                    "level_proportions",
                    format!("level {level}: share must be >= 0, got {share}"),
                );
            }
        }
        if !self.level_proportions.is_empty() && self.level_proportions.values().sum::<f64>() <= 0.0
        {
            return bad(
                "level_proportions",
                "at least one level needs a positive share (or leave the table empty)".to_string(),
            );
        }
        if !(self.max_family_share > 0.0 && self.max_family_share <= 1.0) {
            return bad(
                "max_family_share",
                format!("must be in (0, 1], got {}", self.max_family_share),
            );
        }
        if !(0.0..1.0).contains(&self.validation_fraction) {
            return bad(
                "validation_fraction",
                format!("must be in [0, 1), got {}", self.validation_fraction),
            );
        }
        Ok(())
    }

    /// The proportion of `level`, when proportions are configured.
    pub(crate) fn level_share(&self, level: u8) -> Option<f64> {
        if self.level_proportions.is_empty() {
            return None;
        }
        Some(
            self.level_proportions
                .get(&level.to_string())
                .copied()
                .unwrap_or(0.0),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid() {
        SelectConfig::default().validate().unwrap();
    }

    #[test]
    fn bad_values_name_their_key() {
        let cases: Vec<(SelectConfig, &str)> = vec![
            (
                SelectConfig {
                    sft_min_speedup: 0.0,
                    ..Default::default()
                },
                "sft_min_speedup",
            ),
            (
                SelectConfig {
                    min_gain_over_compile: f64::NAN,
                    ..Default::default()
                },
                "min_gain_over_compile",
            ),
            (
                SelectConfig {
                    interval_confidence: 1.0,
                    ..Default::default()
                },
                "interval_confidence",
            ),
            (
                SelectConfig {
                    bootstrap_resamples: 10,
                    ..Default::default()
                },
                "bootstrap_resamples",
            ),
            (
                SelectConfig {
                    max_tokens: 0,
                    ..Default::default()
                },
                "max_tokens",
            ),
            (
                SelectConfig {
                    chain_min_turns: 1,
                    ..Default::default()
                },
                "chain_min_turns",
            ),
            (
                SelectConfig {
                    chain_min_turns: 4,
                    chain_max_turns: 3,
                    ..Default::default()
                },
                "chain_max_turns",
            ),
            (
                SelectConfig {
                    chain_min_gain: 0.9,
                    ..Default::default()
                },
                "chain_min_gain",
            ),
            (
                SelectConfig {
                    chain_max_tokens: 0,
                    ..Default::default()
                },
                "chain_max_tokens",
            ),
            (
                SelectConfig {
                    validation_fraction: 1.0,
                    ..Default::default()
                },
                "validation_fraction",
            ),
            (
                SelectConfig {
                    max_family_share: 0.0,
                    ..Default::default()
                },
                "max_family_share",
            ),
            (
                SelectConfig {
                    level_proportions: [("4".to_string(), 1.0)].into(),
                    ..Default::default()
                },
                "level_proportions",
            ),
            (
                SelectConfig {
                    level_proportions: [("1".to_string(), 0.0)].into(),
                    ..Default::default()
                },
                "level_proportions",
            ),
        ];
        for (cfg, key) in cases {
            let err = cfg.validate().unwrap_err().to_string();
            assert!(err.contains(key), "{key}: {err}");
        }
    }

    #[test]
    fn a_tokenizer_path_is_refused_with_the_reason() {
        let cfg = SelectConfig {
            tokenizer: Some(PathBuf::from("/models/qwen/tokenizer.json")),
            ..Default::default()
        };
        let err = cfg.validate().unwrap_err().to_string();
        assert!(err.contains("built without tokenizer support"), "{err}");
        assert!(err.contains("/models/qwen/tokenizer.json"), "{err}");
    }

    /// The section as documented for `configs/default.toml`.
    const DOCUMENTED: &str = r#"
[select]
sft_min_speedup = 1.0
sft_min_gain_over_parent = 1.0
grpo_rule = "best_steps"
grpo_min_parent_speedup = 1.0
min_gain_over_compile = 1.0
trivial_steps = "drop"
interval_confidence = 0.95
bootstrap_resamples = 1000
grpo_best_scope = "task"
grpo_max_prompts_per_parent = 1
max_tokens = 65536
env_rule = "first_steps"
chain_min_turns = 2
chain_max_turns = 8
chain_min_gain = 1.0
chain_max_tokens = 32768
level_proportions = {}
max_family_share = 0.35
validation_fraction = 0.05
seed = "ksmith-select"
"#;

    #[test]
    fn the_documented_section_is_the_defaults() {
        let cfg = ksmith_core::config::Config::parse(DOCUMENTED, "doc").unwrap();
        let sel: SelectConfig = cfg.section("select").unwrap();
        assert_eq!(sel, SelectConfig::default());
        let other = DOCUMENTED.replace("\"best_steps\"", "\"all_steps\"");
        let cfg = ksmith_core::config::Config::parse(&other, "doc").unwrap();
        let sel: SelectConfig = cfg.section("select").unwrap();
        assert_eq!(sel.grpo_rule, GrpoRule::AllSteps);
        let other = DOCUMENTED.replace("\"drop\"", "\"keep\"");
        let cfg = ksmith_core::config::Config::parse(&other, "doc").unwrap();
        let sel: SelectConfig = cfg.section("select").unwrap();
        assert_eq!(sel.trivial_steps, TrivialSteps::Keep);
        let other = DOCUMENTED.replace("\"drop\"", "\"sometimes\"");
        let cfg = ksmith_core::config::Config::parse(&other, "doc").unwrap();
        assert!(cfg.section::<SelectConfig>("select").is_err());
    }

    #[test]
    fn unknown_keys_are_rejected_by_the_config_loader() {
        let cfg = ksmith_core::config::Config::parse("[select]\nmax_token = 5\n", "t").unwrap();
        let err = cfg.section::<SelectConfig>("select").unwrap_err();
        assert!(err.to_string().contains("max_token"), "{err}");
    }
}
