//! The `[export]` section of the configuration.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::caps::OverLength;
use crate::error::Error;
use crate::formats::Format;

/// Configuration of the export stage (`[export]`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ExportConfig {
    /// Which datasets to write, one folder each under `<workdir>/datasets/`: `verl_rl`,
    /// `verl_sft`, `trl_sft`, `trl_sft_standard`, `trl_grpo`, `openrlhf_rl`, `openrlhf_sft`
    /// (single turn), `verl_sft_multiturn`, `trl_sft_multiturn`, `openrlhf_sft_multiturn`
    /// (chains as conversations with the evaluator), `verl_agent`, `trl_env`,
    /// `openrlhf_agent` (agent RL with the evaluator as the environment).
    pub formats: Vec<Format>,
    /// Pretty name of the datasets in their cards.
    pub pretty_name: String,
    /// The `data_source` (verl) / `datasource` (OpenRLHF) value: the key trainers route
    /// rewards by.
    pub data_source: String,
    /// The verl `ability` value.
    pub ability: String,
    /// Most rows per Parquet shard (`data/<split>-0000i-of-0000N.parquet`).
    pub shard_rows: usize,
    /// Rows per Parquet row group (the Hugging Face viewer reads one row group at a time;
    /// keep groups under ~100 MB).
    pub row_group_rows: usize,
    /// zstd compression level (1 to 22).
    pub zstd_level: i32,
    /// Correctness tolerances `[atol, rtol]` per output dtype, written into every GRPO
    /// ground truth for the reward function.
    pub tolerances: BTreeMap<String, [f64; 2]>,
    /// License in the card's YAML; empty derives it from the samples (one license, or
    /// `other` when they differ).
    pub license: String,
    /// Formats that must have rows: the stage fails when one of them has none. Any other
    /// format without rows is left out (no folder), with a warning that says which selection
    /// rule gave nothing and why.
    pub required_formats: Vec<Format>,
    /// A Hugging Face `tokenizer.json` (the target model's) to count tokens with for the
    /// length statistics, the caps and the cards' trainer settings; empty counts
    /// `ceil(chars / 4)` plus 4 per message (`approx_chars_div_4`).
    pub tokenizer: PathBuf,
    /// Samples whose prompt is over this many tokens are dropped or cut (`over_length`);
    /// 0 = no cap.
    pub max_prompt_tokens: u64,
    /// SFT samples whose answer is over this many tokens are dropped (an answer is never cut);
    /// 0 = no cap.
    pub max_response_tokens: u64,
    /// What happens to a prompt over `max_prompt_tokens`: `drop` the sample, or `truncate`
    /// (cut its longest message in the middle, with a marker, until it fits).
    pub over_length: OverLength,
    /// Multi-turn SFT conversations over this many tokens are dropped (never cut); 0 = no cap.
    pub max_conversation_tokens: u64,
    /// Most evaluations (assistant turns) per agent episode: the agent datasets' cards size the
    /// response for it and pass it to each trainer.
    pub agent_max_turns: u32,
}

impl Default for ExportConfig {
    fn default() -> Self {
        ExportConfig {
            formats: Format::ALL.to_vec(),
            pretty_name: "Kernel-Smith Triton kernel evolution".to_string(),
            data_source: "ksmith/triton_kernel".to_string(),
            ability: "triton_kernel_optimization".to_string(),
            shard_rows: 20_000,
            row_group_rows: 1_000,
            zstd_level: 3,
            tolerances: [
                ("float32".to_string(), [1e-4, 1e-4]),
                ("float64".to_string(), [1e-4, 1e-4]),
                ("float16".to_string(), [1e-2, 1e-2]),
                ("bfloat16".to_string(), [1e-2, 1e-2]),
            ]
            .into(),
            license: String::new(),
            required_formats: Vec::new(),
            tokenizer: PathBuf::new(),
            max_prompt_tokens: 0,
            max_response_tokens: 0,
            over_length: OverLength::Drop,
            max_conversation_tokens: 0,
            agent_max_turns: 4,
        }
    }
}

impl ExportConfig {
    /// Checks every value; does no I/O.
    pub fn validate(&self) -> Result<(), Error> {
        let bad = |key: &str, message: String| {
            Err(Error::Config {
                key: key.to_string(),
                message,
            })
        };
        if self.formats.is_empty() {
            return bad("formats", "name at least one format".to_string());
        }
        let mut seen = std::collections::HashSet::new();
        for f in &self.formats {
            if !seen.insert(*f) {
                return bad("formats", format!("`{}` is listed twice", f.key()));
            }
        }
        if self.shard_rows == 0 {
            return bad("shard_rows", "must be at least 1".to_string());
        }
        if self.row_group_rows == 0 {
            return bad("row_group_rows", "must be at least 1".to_string());
        }
        if !(1..=22).contains(&self.zstd_level) {
            return bad(
                "zstd_level",
                format!("must be in 1..=22, got {}", self.zstd_level),
            );
        }
        if self.agent_max_turns == 0 {
            return bad("agent_max_turns", "must be at least 1".to_string());
        }
        if self.data_source.trim().is_empty() {
            return bad("data_source", "must not be empty".to_string());
        }
        if let Some(f) = self
            .required_formats
            .iter()
            .find(|f| !self.formats.contains(f))
        {
            return bad(
                "required_formats",
                format!("`{}` is required but not in `formats`", f.key()),
            );
        }
        for (dtype, [atol, rtol]) in &self.tolerances {
            if !(atol.is_finite() && rtol.is_finite() && *atol >= 0.0 && *rtol >= 0.0) {
                return bad(
                    "tolerances",
                    format!("{dtype}: atol and rtol must be >= 0, got [{atol}, {rtol}]"),
                );
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_list_every_format() {
        let cfg = ExportConfig::default();
        cfg.validate().unwrap();
        assert_eq!(cfg.formats.len(), Format::ALL.len());
    }

    #[test]
    fn bad_values_name_their_key() {
        let cases = [
            (
                ExportConfig {
                    formats: vec![],
                    ..Default::default()
                },
                "formats",
            ),
            (
                ExportConfig {
                    formats: vec![Format::VerlRl, Format::VerlRl],
                    ..Default::default()
                },
                "formats",
            ),
            (
                ExportConfig {
                    shard_rows: 0,
                    ..Default::default()
                },
                "shard_rows",
            ),
            (
                ExportConfig {
                    zstd_level: 0,
                    ..Default::default()
                },
                "zstd_level",
            ),
            (
                ExportConfig {
                    agent_max_turns: 0,
                    ..Default::default()
                },
                "agent_max_turns",
            ),
            (
                ExportConfig {
                    tolerances: [("float32".to_string(), [-1.0, 0.0])].into(),
                    ..Default::default()
                },
                "tolerances",
            ),
            (
                ExportConfig {
                    formats: vec![Format::VerlSft],
                    required_formats: vec![Format::VerlRl],
                    ..Default::default()
                },
                "required_formats",
            ),
        ];
        for (cfg, key) in cases {
            let err = cfg.validate().unwrap_err().to_string();
            assert!(err.contains(key), "{key}: {err}");
        }
    }

    /// The section as documented for `configs/default.toml`.
    const DOCUMENTED: &str = r#"
[export]
formats = ["verl_rl", "verl_sft", "trl_sft", "trl_sft_standard", "trl_grpo", "openrlhf_rl", "openrlhf_sft", "verl_sft_multiturn", "trl_sft_multiturn", "openrlhf_sft_multiturn", "verl_agent", "trl_env", "openrlhf_agent"]
pretty_name = "Kernel-Smith Triton kernel evolution"
data_source = "ksmith/triton_kernel"
ability = "triton_kernel_optimization"
shard_rows = 20000
row_group_rows = 1000
zstd_level = 3
tolerances = { float32 = [1e-4, 1e-4], float64 = [1e-4, 1e-4], float16 = [1e-2, 1e-2], bfloat16 = [1e-2, 1e-2] }
license = ""
required_formats = []
tokenizer = ""
max_prompt_tokens = 0
max_response_tokens = 0
over_length = "drop"
max_conversation_tokens = 0
agent_max_turns = 4
"#;

    #[test]
    fn the_documented_section_is_the_defaults() {
        let cfg = ksmith_core::config::Config::parse(DOCUMENTED, "doc").unwrap();
        let e: ExportConfig = cfg.section("export").unwrap();
        assert_eq!(e, ExportConfig::default());
    }

    #[test]
    fn formats_parse_from_toml_and_typos_fail() {
        let cfg = ksmith_core::config::Config::parse(
            "[export]\nformats = [\"verl_rl\", \"trl_grpo\"]\n",
            "t",
        )
        .unwrap();
        let e: ExportConfig = cfg.section("export").unwrap();
        assert_eq!(e.formats, vec![Format::VerlRl, Format::TrlGrpo]);
        let cfg =
            ksmith_core::config::Config::parse("[export]\nformats = [\"verl\"]\n", "t").unwrap();
        assert!(cfg.section::<ExportConfig>("export").is_err());
    }
}
