//! The trainers' schemas: one row type per dataset format, built from `SftRow` / `GrpoRow`.
//!
//! Pitfalls these types avoid (see the trainers' loaders):
//! - verl RL needs `reward_model.ground_truth` on every row and reads `extra_info.index`;
//!   `prompt` is `list<struct<role, content>>`.
//! - TRL's SFT tokenizer picks the prompt-completion branch whenever a `prompt` column exists,
//!   so the `messages` datasets (verl SFT) have no `prompt`, `completion` or `text` column.
//! - TRL passes every GRPO dataset column except `prompt` to reward functions as a keyword
//!   argument: no column is named `completion`, `completion_ids`, `prompts`, `completions`,
//!   `trainer_state`, `log_extra`, `log_metric` or `environments`.
//! - OpenRLHF's source key is `datasource` (no underscore); labels are strings; with
//!   `--apply_chat_template`, an SFT `input` that is a message list needs an `output` that is
//!   a message list too.
//! - No Arrow `map` type anywhere (the `datasets` library cannot load it); optional values are
//!   nullable fields, never absent ones, so every shard has one schema.

use serde::{Deserialize, Serialize};

use ksmith_core::chat::ChatMessage;
use ksmith_core::evaluation::Stamp;
use ksmith_core::evolve_block::ENTRY_POINT;
use ksmith_core::tables::{GrpoRow, SftRow, SpeedLabels};

use crate::config::ExportConfig;
use crate::ground_truth::GroundTruth;
use crate::lengths::SampleLength;
use crate::tool::Mode;

/// Version of the exported schemas, written into every file's metadata and every card.
pub const DATASET_SCHEMA_VERSION: &str = "1.5.0";

/// A dataset format (one folder under `<workdir>/datasets/`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Format {
    /// verl RL (PPO/GRPO): `data_source`, `prompt`, `ability`, `reward_model`, `extra_info`.
    VerlRl,
    /// verl multi-turn SFT: `messages` (+ `meta`).
    VerlSft,
    /// TRL SFT, conversational prompt-completion: `prompt` and `completion` message lists.
    TrlSft,
    /// TRL SFT, standard prompt-completion: `prompt` and `completion` strings.
    TrlSftStandard,
    /// TRL GRPO, conversational prompt-only: `prompt` + reward columns.
    TrlGrpo,
    /// OpenRLHF PPO/GRPO: `input` (messages), `label` (JSON string), `datasource`.
    OpenrlhfRl,
    /// OpenRLHF SFT: `input` and `output` message lists.
    OpenrlhfSft,
    /// verl multi-turn SFT of chains: `messages` with `evaluate` tool calls and tool reports,
    /// `tools` (+ `meta`).
    VerlSftMultiturn,
    /// TRL SFT of chains: the same `messages` and `tools` columns (+ `meta`).
    TrlSftMultiturn,
    /// OpenRLHF multi-turn SFT of chains: the whole conversation in `input` (answers in text,
    /// reports as user messages) (+ `meta`).
    OpenrlhfSftMultiturn,
    /// verl agent RL: the verl RL columns plus `agent_name` (`tool_agent`) and
    /// `extra_info.tools_kwargs` (the `evaluate` tool's ground truth).
    VerlAgent,
    /// TRL GRPO with an environment (`environment_factory`): `prompt`, `ground_truth`,
    /// `data_source`, `meta`.
    TrlEnv,
    /// OpenRLHF agent RL (`--train.agent_func_path`): `input`, `label`, `datasource`, `meta`.
    OpenrlhfAgent,
}

/// Which selected table a format is built from (and, for the multi-turn ones, how its
/// conversations talk to the evaluator).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// `sft.parquet`.
    Sft,
    /// `grpo.parquet`.
    Grpo,
    /// `chains.parquet`.
    Chains(Mode),
    /// `env.parquet`.
    Env(Mode),
}

impl Source {
    /// Every source, in a fixed order.
    pub const ALL: [Source; 6] = [
        Source::Sft,
        Source::Grpo,
        Source::Chains(Mode::Tools),
        Source::Chains(Mode::Text),
        Source::Env(Mode::Tools),
        Source::Env(Mode::Text),
    ];

    /// The set in select's outcome (`sft`, `grpo`, `chains`, `env`).
    pub fn set(self) -> &'static str {
        match self {
            Source::Sft => "sft",
            Source::Grpo => "grpo",
            Source::Chains(_) => "chains",
            Source::Env(_) => "env",
        }
    }

    /// The name of the measured samples in the report's counters (`sft`, `grpo`,
    /// `chains_tools`, `chains_text`, `env_tools`, `env_text`).
    pub fn key(self) -> &'static str {
        match self {
            Source::Sft => "sft",
            Source::Grpo => "grpo",
            Source::Chains(Mode::Tools) => "chains_tools",
            Source::Chains(Mode::Text) => "chains_text",
            Source::Env(Mode::Tools) => "env_tools",
            Source::Env(Mode::Text) => "env_text",
        }
    }

    /// True for sources whose samples are prompts to answer (RL), not conversations to learn.
    pub fn is_rl(self) -> bool {
        matches!(self, Source::Grpo | Source::Env(_))
    }
}

impl Format {
    /// Every format, in a fixed order.
    pub const ALL: [Format; 13] = [
        Format::VerlRl,
        Format::VerlSft,
        Format::TrlSft,
        Format::TrlSftStandard,
        Format::TrlGrpo,
        Format::OpenrlhfRl,
        Format::OpenrlhfSft,
        Format::VerlSftMultiturn,
        Format::TrlSftMultiturn,
        Format::OpenrlhfSftMultiturn,
        Format::VerlAgent,
        Format::TrlEnv,
        Format::OpenrlhfAgent,
    ];

    /// The config key (`verl_rl`, ...).
    pub fn key(self) -> &'static str {
        match self {
            Format::VerlRl => "verl_rl",
            Format::VerlSft => "verl_sft",
            Format::TrlSft => "trl_sft",
            Format::TrlSftStandard => "trl_sft_standard",
            Format::TrlGrpo => "trl_grpo",
            Format::OpenrlhfRl => "openrlhf_rl",
            Format::OpenrlhfSft => "openrlhf_sft",
            Format::VerlSftMultiturn => "verl_sft_multiturn",
            Format::TrlSftMultiturn => "trl_sft_multiturn",
            Format::OpenrlhfSftMultiturn => "openrlhf_sft_multiturn",
            Format::VerlAgent => "verl_agent",
            Format::TrlEnv => "trl_env",
            Format::OpenrlhfAgent => "openrlhf_agent",
        }
    }

    /// The dataset's folder name under `<workdir>/datasets/`.
    pub fn folder(self) -> String {
        self.key().replace('_', "-")
    }

    /// Which table the format is built from.
    pub fn source(self) -> Source {
        match self {
            Format::VerlRl | Format::TrlGrpo | Format::OpenrlhfRl => Source::Grpo,
            Format::VerlSft | Format::TrlSft | Format::TrlSftStandard | Format::OpenrlhfSft => {
                Source::Sft
            }
            Format::VerlSftMultiturn | Format::TrlSftMultiturn => Source::Chains(Mode::Tools),
            Format::OpenrlhfSftMultiturn => Source::Chains(Mode::Text),
            Format::VerlAgent | Format::TrlEnv => Source::Env(Mode::Tools),
            Format::OpenrlhfAgent => Source::Env(Mode::Text),
        }
    }
}

/// One chat message in the exported files: `struct<role: string, content: string>`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    /// `system`, `user` or `assistant`.
    pub role: String,
    /// The text.
    pub content: String,
}

/// The exported form of chat messages.
pub(crate) fn messages(msgs: &[ChatMessage]) -> Vec<Message> {
    msgs.iter()
        .map(|m| Message {
            role: m.role.clone(),
            content: m.content.clone(),
        })
        .collect()
}

/// verl's `reward_model` struct.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RewardModel {
    /// `rule`: scored by the reward function, not by a model.
    pub style: String,
    /// The [`GroundTruth`] as a JSON string.
    pub ground_truth: String,
}

/// Lineage and metrics of a GRPO prompt (verl `extra_info`; `meta` elsewhere).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GrpoInfo {
    /// Row index within its split (verl reads `extra_info.index`).
    pub index: i64,
    /// `train` or `validation`.
    pub split: String,
    /// Stable sample id.
    pub sample_id: String,
    /// The selection rule (`best_steps`, `all_steps`, `first_steps`).
    pub selection: String,
    /// The task.
    pub task_id: String,
    /// The step whose prompt this is.
    pub step_id: String,
    /// The step of the current program; null when it is the reference.
    pub parent_step_id: Option<String>,
    /// Iteration of the step.
    pub iteration: i64,
    /// Island of the step.
    pub island: i64,
    /// Functional family.
    pub family: String,
    /// Difficulty level.
    pub level: i64,
    /// Cluster (-1 = noise).
    pub cluster: i64,
    /// The current program's speedup over eager during the rollout.
    pub parent_speedup: Option<f64>,
    /// The current program's runtime in ms during the rollout.
    pub parent_runtime_ms: Option<f64>,
    /// Eager runtime in ms during the rollout.
    pub eager_runtime_ms: Option<f64>,
    /// Device of the rollout timings.
    pub hardware: String,
    /// The current program's speedup over eager with its confidence interval and its share of
    /// speed-of-light (see the card's speed labels).
    pub parent_labels: SpeedLabels,
    /// What the current program's timings were measured on and how.
    pub stamp: Stamp,
    /// The class the answer must define.
    pub entry_point: String,
    /// Prompt tokens, the chat template's share included.
    pub prompt_tokens: i64,
    /// Tokens of the current program (an answer rewrites it).
    pub current_program_tokens: i64,
    /// How tokens were counted.
    pub token_counter: String,
    /// Source repository.
    pub repo: String,
    /// Its license.
    pub license: Option<String>,
    /// [`DATASET_SCHEMA_VERSION`].
    pub schema_version: String,
}

/// Lineage and metrics of an SFT sample (`meta`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SftInfo {
    /// Row index within its split.
    pub index: i64,
    /// `train` or `validation`.
    pub split: String,
    /// Stable sample id.
    pub sample_id: String,
    /// `correctness` or `performance`.
    pub kind: String,
    /// The task.
    pub task_id: String,
    /// The step.
    pub step_id: String,
    /// The parent step; null for first steps.
    pub parent_step_id: Option<String>,
    /// Iteration of the step.
    pub iteration: i64,
    /// Functional family.
    pub family: String,
    /// Difficulty level.
    pub level: i64,
    /// Cluster (-1 = noise).
    pub cluster: i64,
    /// Tokens of the conversation (prompt and answer).
    pub tokens: i64,
    /// Tokens of the prompt (system and user messages), the chat template's share included.
    pub prompt_tokens: i64,
    /// Tokens of the answer.
    pub response_tokens: i64,
    /// How tokens were counted.
    pub token_counter: String,
    /// Speedup of the answer's program over eager, when timed.
    pub speedup: Option<f64>,
    /// Speedup of the parent over eager, when timed.
    pub parent_speedup: Option<f64>,
    /// The answer's speedups over eager and over its parent with their confidence intervals
    /// and its share of speed-of-light (see the card's speed labels).
    pub labels: SpeedLabels,
    /// What the answer's program was measured on and how.
    pub stamp: Stamp,
    /// The teacher model.
    pub teacher: String,
    /// Source repository.
    pub repo: String,
    /// Its license.
    pub license: Option<String>,
    /// [`DATASET_SCHEMA_VERSION`].
    pub schema_version: String,
}

/// A verl RL row.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VerlRlRow {
    /// Reward routing key.
    pub data_source: String,
    /// The chat prompt.
    pub prompt: Vec<Message>,
    /// Task category.
    pub ability: String,
    /// `style` and the JSON `ground_truth`.
    pub reward_model: RewardModel,
    /// Lineage and metrics.
    pub extra_info: GrpoInfo,
}

/// A verl SFT row.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VerlSftRow {
    /// The conversation (system, user, assistant).
    pub messages: Vec<Message>,
    /// Lineage and metrics.
    pub meta: SftInfo,
}

/// A TRL conversational prompt-completion SFT row.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrlSftRow {
    /// System and user messages.
    pub prompt: Vec<Message>,
    /// The assistant message.
    pub completion: Vec<Message>,
    /// Lineage and metrics.
    pub meta: SftInfo,
}

/// A TRL standard prompt-completion SFT row.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrlSftStandardRow {
    /// System and user text joined by a blank line.
    pub prompt: String,
    /// The answer text.
    pub completion: String,
    /// Lineage and metrics.
    pub meta: SftInfo,
}

/// A TRL GRPO row: the prompt, and columns that reach the reward function as keyword
/// arguments (`ground_truth`, `data_source`, `meta`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrlGrpoRow {
    /// The chat prompt.
    pub prompt: Vec<Message>,
    /// The [`GroundTruth`] JSON.
    pub ground_truth: String,
    /// Reward routing key.
    pub data_source: String,
    /// Lineage and metrics.
    pub meta: GrpoInfo,
}

/// An OpenRLHF prompt row.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OpenrlhfRlRow {
    /// The chat prompt (use `--apply_chat_template`).
    pub input: Vec<Message>,
    /// The [`GroundTruth`] JSON.
    pub label: String,
    /// Reward routing key.
    pub datasource: String,
    /// Lineage and metrics.
    pub meta: GrpoInfo,
}

/// An OpenRLHF SFT row.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OpenrlhfSftRow {
    /// System and user messages.
    pub input: Vec<Message>,
    /// The assistant message.
    pub output: Vec<Message>,
    /// Lineage and metrics.
    pub meta: SftInfo,
}

/// How a sample was measured: its lengths and the counter's name.
#[derive(Debug, Clone, Copy)]
pub struct Measured<'a> {
    /// The sample's lengths.
    pub length: SampleLength,
    /// The counter's name.
    pub counter: &'a str,
}

/// The lineage of a GRPO row at `index` within its split.
pub fn grpo_info(row: &GrpoRow, index: usize, m: Measured<'_>) -> GrpoInfo {
    GrpoInfo {
        index: index as i64,
        split: row.split.as_str().to_string(),
        sample_id: row.sample_id.clone(),
        selection: row.selection.as_str().to_string(),
        task_id: row.task_id.clone(),
        step_id: row.step_id.clone(),
        parent_step_id: row.parent_step_id.clone(),
        iteration: i64::from(row.iteration),
        island: i64::from(row.island),
        family: row.family.clone(),
        level: i64::from(row.level),
        cluster: i64::from(row.cluster),
        parent_speedup: row.parent_speedup,
        parent_runtime_ms: row.parent_runtime_ms,
        eager_runtime_ms: row.eager_runtime_ms,
        hardware: row.hardware.clone(),
        parent_labels: row.parent_labels.clone(),
        stamp: row.stamp.clone(),
        entry_point: ENTRY_POINT.to_string(),
        prompt_tokens: m.length.prompt as i64,
        current_program_tokens: m.length.response as i64,
        token_counter: m.counter.to_string(),
        repo: row.repo.clone(),
        license: row.license.clone(),
        schema_version: DATASET_SCHEMA_VERSION.to_string(),
    }
}

/// The lineage of an SFT row at `index` within its split.
pub fn sft_info(row: &SftRow, index: usize, m: Measured<'_>) -> SftInfo {
    SftInfo {
        index: index as i64,
        split: row.split.as_str().to_string(),
        sample_id: row.sample_id.clone(),
        kind: row.kind.as_str().to_string(),
        task_id: row.task_id.clone(),
        step_id: row.step_id.clone(),
        parent_step_id: row.parent_step_id.clone(),
        iteration: i64::from(row.iteration),
        family: row.family.clone(),
        level: i64::from(row.level),
        cluster: i64::from(row.cluster),
        tokens: (m.length.prompt + m.length.response) as i64,
        prompt_tokens: m.length.prompt as i64,
        response_tokens: m.length.response as i64,
        token_counter: m.counter.to_string(),
        speedup: row.speedup,
        parent_speedup: row.parent_speedup,
        labels: row.labels.clone(),
        stamp: row.stamp.clone(),
        teacher: row.teacher.clone(),
        repo: row.repo.clone(),
        license: row.license.clone(),
        schema_version: DATASET_SCHEMA_VERSION.to_string(),
    }
}

/// Splits an SFT conversation into the prompt (everything before the last message) and the
/// answer (the last, assistant, message).
fn prompt_and_answer(row: &SftRow) -> (Vec<Message>, Vec<Message>) {
    let all = messages(&row.messages);
    let cut = all.len().saturating_sub(1);
    let (p, a) = all.split_at(cut);
    (p.to_vec(), a.to_vec())
}

/// The verl RL row of `row`.
pub fn verl_rl(row: &GrpoRow, meta: GrpoInfo, cfg: &ExportConfig) -> VerlRlRow {
    VerlRlRow {
        data_source: cfg.data_source.clone(),
        prompt: messages(&row.prompt),
        ability: cfg.ability.clone(),
        reward_model: RewardModel {
            style: "rule".to_string(),
            ground_truth: GroundTruth::of(row, &cfg.tolerances).to_json(),
        },
        extra_info: meta,
    }
}

/// The TRL GRPO row of `row`.
pub fn trl_grpo(row: &GrpoRow, meta: GrpoInfo, cfg: &ExportConfig) -> TrlGrpoRow {
    TrlGrpoRow {
        prompt: messages(&row.prompt),
        ground_truth: GroundTruth::of(row, &cfg.tolerances).to_json(),
        data_source: cfg.data_source.clone(),
        meta,
    }
}

/// The OpenRLHF prompt row of `row`.
pub fn openrlhf_rl(row: &GrpoRow, meta: GrpoInfo, cfg: &ExportConfig) -> OpenrlhfRlRow {
    OpenrlhfRlRow {
        input: messages(&row.prompt),
        label: GroundTruth::of(row, &cfg.tolerances).to_json(),
        datasource: cfg.data_source.clone(),
        meta,
    }
}

/// The verl SFT row of `row`.
pub fn verl_sft(row: &SftRow, meta: SftInfo) -> VerlSftRow {
    VerlSftRow {
        messages: messages(&row.messages),
        meta,
    }
}

/// The TRL conversational SFT row of `row`.
pub fn trl_sft(row: &SftRow, meta: SftInfo) -> TrlSftRow {
    let (prompt, completion) = prompt_and_answer(row);
    TrlSftRow {
        prompt,
        completion,
        meta,
    }
}

/// The TRL standard SFT row of `row`: the prompt messages' texts joined by a blank line.
pub fn trl_sft_standard(row: &SftRow, meta: SftInfo) -> TrlSftStandardRow {
    let (prompt, completion) = prompt_and_answer(row);
    TrlSftStandardRow {
        prompt: prompt
            .iter()
            .map(|m| m.content.as_str())
            .collect::<Vec<_>>()
            .join("\n\n"),
        completion: completion
            .into_iter()
            .map(|m| m.content)
            .collect::<Vec<_>>()
            .join("\n\n"),
        meta,
    }
}

/// The OpenRLHF SFT row of `row`.
pub fn openrlhf_sft(row: &SftRow, meta: SftInfo) -> OpenrlhfSftRow {
    let (input, output) = prompt_and_answer(row);
    OpenrlhfSftRow {
        input,
        output,
        meta,
    }
}
