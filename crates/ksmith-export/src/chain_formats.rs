//! The multi-turn SFT formats, built from `ChainRow` ([`crate::conversation`] renders them).
//!
//! - verl (`MultiTurnSFTDataset`: `data.messages_key`, `data.tools_key`) and TRL (`SFTTrainer`
//!   reads a `messages` column and a per-row `tools` column) take the same columns: `messages`
//!   whose assistant messages carry `tool_calls` (arguments as a struct, so chat templates
//!   render a JSON object) and whose `tool` messages carry the reports, and `tools`, the
//!   `evaluate` schema. No `prompt`, `completion` or `text` column (TRL's SFT tokenizer would
//!   take the prompt-completion branch).
//! - OpenRLHF (`--data.multiturn`) has no tool calls and no `tools` argument: the whole text
//!   conversation in `input`.

use ksmith_core::tables::ChainRow;
use serde::{Deserialize, Serialize};

use crate::conversation::{ToolMessage, text_conversation, tool_conversation};
use crate::formats::{DATASET_SCHEMA_VERSION, Measured, Message, messages};
use crate::tool::{ToolSchema, evaluate_tool};

/// Lineage and metrics of a multi-turn sample (`meta`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChainInfo {
    /// Row index within its split.
    pub index: i64,
    /// `train` or `validation`.
    pub split: String,
    /// Stable sample id.
    pub sample_id: String,
    /// The task.
    pub task_id: String,
    /// The island whose best step ends the chain.
    pub island: i64,
    /// The steps, in order.
    pub step_ids: Vec<String>,
    /// The steps' iterations, in order.
    pub iterations: Vec<i64>,
    /// The step whose program the first prompt shows; null for the reference.
    pub start_step_id: Option<String>,
    /// Speedup over eager of the program the first prompt shows, when known.
    pub start_speedup: Option<f64>,
    /// Speedup over eager of the last (best) program, when timed.
    pub end_speedup: Option<f64>,
    /// Functional family.
    pub family: String,
    /// Difficulty level.
    pub level: i64,
    /// Cluster (-1 = noise).
    pub cluster: i64,
    /// Tokens of the conversation.
    pub tokens: i64,
    /// Tokens of its prompt (system with the instructions and tools, user).
    pub prompt_tokens: i64,
    /// Tokens of the rest (answers, calls, reports, the last message).
    pub response_tokens: i64,
    /// How tokens were counted.
    pub token_counter: String,
    /// The teacher model of the last step.
    pub teacher: String,
    /// Source repository.
    pub repo: String,
    /// Its license.
    pub license: Option<String>,
    /// [`DATASET_SCHEMA_VERSION`].
    pub schema_version: String,
}

/// The lineage of a chain at `index` within its split.
pub fn chain_info(row: &ChainRow, index: usize, m: Measured<'_>) -> ChainInfo {
    ChainInfo {
        index: index as i64,
        split: row.split.as_str().to_string(),
        sample_id: row.sample_id.clone(),
        task_id: row.task_id.clone(),
        island: i64::from(row.island),
        step_ids: row.turns.iter().map(|t| t.step_id.clone()).collect(),
        iterations: row.turns.iter().map(|t| i64::from(t.iteration)).collect(),
        start_step_id: row.start_step_id.clone(),
        start_speedup: row.start_speedup,
        end_speedup: row.last().and_then(|t| t.speedup),
        family: row.family.clone(),
        level: i64::from(row.level),
        cluster: i64::from(row.cluster),
        tokens: (m.length.prompt + m.length.response) as i64,
        prompt_tokens: m.length.prompt as i64,
        response_tokens: m.length.response as i64,
        token_counter: m.counter.to_string(),
        teacher: row.teacher.clone(),
        repo: row.repo.clone(),
        license: row.license.clone(),
        schema_version: DATASET_SCHEMA_VERSION.to_string(),
    }
}

/// A verl or TRL multi-turn SFT row.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSftRow {
    /// The conversation with `evaluate` calls and reports.
    pub messages: Vec<ToolMessage>,
    /// The tools the conversation may call (the `evaluate` schema).
    pub tools: Vec<ToolSchema>,
    /// Lineage and metrics.
    pub meta: ChainInfo,
}

/// An OpenRLHF multi-turn SFT row.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OpenrlhfSftMultiturnRow {
    /// The whole conversation (`--data.input_key input --data.multiturn`).
    pub input: Vec<Message>,
    /// Lineage and metrics.
    pub meta: ChainInfo,
}

/// The tool-call SFT row of `row` (verl and TRL).
pub fn tool_sft(row: &ChainRow, meta: ChainInfo) -> ToolSftRow {
    ToolSftRow {
        messages: tool_conversation(row),
        tools: vec![evaluate_tool()],
        meta,
    }
}

/// The OpenRLHF multi-turn SFT row of `row`.
pub fn openrlhf_sft_multiturn(row: &ChainRow, meta: ChainInfo) -> OpenrlhfSftMultiturnRow {
    OpenrlhfSftMultiturnRow {
        input: messages(&text_conversation(row)),
        meta,
    }
}
