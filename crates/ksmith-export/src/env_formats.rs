//! The agent-environment formats' own row type: verl's agent RL row. The TRL and OpenRLHF
//! environment datasets have the GRPO rows' columns ([`crate::formats::trl_grpo`],
//! [`crate::formats::openrlhf_rl`]), with the prompt carrying the instructions for working
//! with the evaluator.
//!
//! verl 0.9's agent loop runs the row's `agent_name` (`tool_agent`: the built-in
//! `ToolAgentLoop`) with the tools of `actor_rollout_ref.rollout.multi_turn.tool_config_path`
//! (`python/ksmith/trainers/verl_tools.yaml`), and hands each tool the row's
//! `extra_info.tools_kwargs.<tool>.create_kwargs`: here the `evaluate` tool's ground truth,
//! the same JSON as `reward_model.ground_truth`.

use ksmith_core::tables::GrpoRow;
use serde::{Deserialize, Serialize};

use crate::config::ExportConfig;
use crate::formats::{GrpoInfo, Message, RewardModel, messages};
use crate::ground_truth::GroundTruth;

/// verl's agent loop for tool calls.
pub const VERL_TOOL_AGENT: &str = "tool_agent";

/// What verl passes to the `evaluate` tool when it creates one for a call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EvaluateCreateKwargs {
    /// The [`GroundTruth`] JSON: the task, the reference, the program the episode starts from.
    pub ground_truth: String,
}

/// The `evaluate` tool's keyword arguments.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EvaluateKwargs {
    /// Passed to the tool's `create`.
    pub create_kwargs: EvaluateCreateKwargs,
}

/// verl's per-sample tool arguments, by tool name.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolsKwargs {
    /// The `evaluate` tool's.
    pub evaluate: EvaluateKwargs,
}

/// verl `extra_info` of an agent row: `index` and `tools_kwargs` (read by verl), and the
/// lineage and metrics of the start.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentInfo {
    /// Row index within its split (verl reads `extra_info.index`).
    pub index: i64,
    /// The tools' arguments (verl reads `extra_info.tools_kwargs`).
    pub tools_kwargs: ToolsKwargs,
    /// Lineage and metrics.
    pub meta: GrpoInfo,
}

/// A verl agent RL row.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VerlAgentRow {
    /// Reward routing key.
    pub data_source: String,
    /// The agent loop ([`VERL_TOOL_AGENT`]).
    pub agent_name: String,
    /// The chat prompt, with the instructions for the `evaluate` tool.
    pub prompt: Vec<Message>,
    /// Task category.
    pub ability: String,
    /// `style` and the JSON `ground_truth`.
    pub reward_model: RewardModel,
    /// `index`, `tools_kwargs` and the lineage.
    pub extra_info: AgentInfo,
}

/// The verl agent row of the environment start `row` (its prompt already carries the
/// instructions).
pub fn verl_agent(row: &GrpoRow, meta: GrpoInfo, cfg: &ExportConfig) -> VerlAgentRow {
    let ground_truth = GroundTruth::of(row, &cfg.tolerances).to_json();
    VerlAgentRow {
        data_source: cfg.data_source.clone(),
        agent_name: VERL_TOOL_AGENT.to_string(),
        prompt: messages(&row.prompt),
        ability: cfg.ability.clone(),
        reward_model: RewardModel {
            style: "rule".to_string(),
            ground_truth: ground_truth.clone(),
        },
        extra_info: AgentInfo {
            index: meta.index,
            tools_kwargs: ToolsKwargs {
                evaluate: EvaluateKwargs {
                    create_kwargs: EvaluateCreateKwargs { ground_truth },
                },
            },
            meta,
        },
    }
}
