//! A chain of rollout steps as a conversation with the evaluator, and a prompt with the
//! instructions for working with it.
//!
//! Tool calls ([`Mode::Tools`]): system (the step's, plus [`crate::tool::TOOL_INSTRUCTIONS`]),
//! user (the first step's prompt), then per step an assistant message (the prose of the
//! teacher's answer, [`crate::tool::prose`]) calling `evaluate` with the step's program and a
//! tool message with the [`Report`] on it, and a last assistant message without a tool call
//! ([`crate::tool::final_message`]).
//!
//! Text ([`Mode::Text`]): the same, but each assistant message is the teacher's whole answer
//! (edits against the previous program, as the rollout applied them) and the report is a user
//! message.

use ksmith_core::chat::ChatMessage;
use ksmith_core::tables::ChainRow;
use serde::{Deserialize, Serialize};

use crate::lengths::{SampleLength, TokenCounter};
use crate::tool::{Mode, Report, TOOL_NAME, final_message, prose, tools_json};

/// Tokens a chat template spends on the tools besides their schema: the instructions around it
/// in the system message (Qwen 2.5's "# Tools ... <tools></tools> ... <tool_call>" preamble is
/// about 100 tokens; Llama 3.1's JSON-calling preamble about 150).
pub const TOOL_TEMPLATE_TOKENS: u64 = 160;

/// Tokens a chat template spends on each tool call and each tool message besides their content
/// (`<tool_call>` / `<tool_response>` tags, the call's JSON keys).
pub const TOOL_CALL_TOKENS: u64 = 12;

/// The arguments of an `evaluate` call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EvaluateArguments {
    /// The complete program.
    pub program: String,
}

/// The function a tool call calls.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CalledFunction {
    /// `evaluate`.
    pub name: String,
    /// Its arguments (a struct, so chat templates render them as a JSON object).
    pub arguments: EvaluateArguments,
}

/// One tool call of an assistant message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// `function`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The call.
    pub function: CalledFunction,
}

/// One message of a tool-call conversation (the Hugging Face chat form): every field present,
/// `tool_calls` and `name` null where they do not apply.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolMessage {
    /// `system`, `user`, `assistant` or `tool`.
    pub role: String,
    /// The text.
    pub content: String,
    /// The assistant's tool calls.
    pub tool_calls: Option<Vec<ToolCall>>,
    /// The tool a `tool` message answers for.
    pub name: Option<String>,
}

impl ToolMessage {
    fn text(role: &str, content: impl Into<String>) -> Self {
        ToolMessage {
            role: role.to_string(),
            content: content.into(),
            tool_calls: None,
            name: None,
        }
    }

    /// The message as the token counter sees it: the content, then each call as JSON.
    fn counted(&self) -> ChatMessage {
        let mut content = self.content.clone();
        for call in self.tool_calls.iter().flatten() {
            content.push('\n');
            content.push_str(&serde_json::to_string(&call.function).unwrap_or_default());
        }
        ChatMessage::new(&self.role, content)
    }
}

/// `prompt` with `mode`'s instructions at the end of its system message (a system message is
/// added when there is none).
pub fn with_instructions(prompt: &[ChatMessage], mode: Mode) -> Vec<ChatMessage> {
    let mut out = prompt.to_vec();
    match out.first_mut() {
        Some(first) if first.role == "system" => {
            first.content = format!("{}\n\n{}", first.content.trim_end(), mode.instructions());
        }
        _ => out.insert(0, ChatMessage::new("system", mode.instructions())),
    }
    out
}

/// The tool-call conversation of `chain`.
pub fn tool_conversation(chain: &ChainRow) -> Vec<ToolMessage> {
    let mut out: Vec<ToolMessage> = with_instructions(&chain.prompt, Mode::Tools)
        .into_iter()
        .map(|m| ToolMessage::text(&m.role, m.content))
        .collect();
    for turn in &chain.turns {
        out.push(ToolMessage {
            role: "assistant".to_string(),
            content: prose(&turn.response),
            tool_calls: Some(vec![ToolCall {
                kind: "function".to_string(),
                function: CalledFunction {
                    name: TOOL_NAME.to_string(),
                    arguments: EvaluateArguments {
                        program: turn.program.clone(),
                    },
                },
            }]),
            name: None,
        });
        out.push(ToolMessage {
            name: Some(TOOL_NAME.to_string()),
            ..ToolMessage::text("tool", Report::of(turn).to_json())
        });
    }
    if let Some(last) = chain.last() {
        out.push(ToolMessage::text("assistant", final_message(last)));
    }
    out
}

/// The text conversation of `chain`.
pub fn text_conversation(chain: &ChainRow) -> Vec<ChatMessage> {
    let mut out = with_instructions(&chain.prompt, Mode::Text);
    for turn in &chain.turns {
        out.push(ChatMessage::new("assistant", turn.response.clone()));
        out.push(ChatMessage::new("user", Report::of(turn).to_json()));
    }
    if let Some(last) = chain.last() {
        out.push(ChatMessage::new("assistant", final_message(last)));
    }
    out
}

/// How many leading messages of a chain's conversation are its prompt (system and user).
fn prompt_messages(chain: &ChainRow, mode: Mode) -> usize {
    with_instructions(&chain.prompt, mode).len()
}

/// The length of `chain`'s conversation in `mode`: the prompt (with the tools' schema in tool
/// mode, which chat templates render into the system message) and the rest.
pub fn chain_length(chain: &ChainRow, mode: Mode, counter: &TokenCounter) -> SampleLength {
    let messages: Vec<ChatMessage> = match mode {
        Mode::Tools => tool_conversation(chain)
            .iter()
            .map(ToolMessage::counted)
            .collect(),
        Mode::Text => text_conversation(chain),
    };
    let (prompt, rest) = messages.split_at(prompt_messages(chain, mode).min(messages.len()));
    let tags = match mode {
        // A call and a report per turn.
        Mode::Tools => 2 * chain.turns.len() as u64 * TOOL_CALL_TOKENS,
        Mode::Text => 0,
    };
    SampleLength {
        prompt: counter.messages(prompt) + tools_tokens(mode, counter),
        response: counter.messages(rest) + tags,
    }
}

/// Tokens of the tools in a prompt of `mode`: their schema and [`TOOL_TEMPLATE_TOKENS`] (none
/// in text mode).
pub fn tools_tokens(mode: Mode, counter: &TokenCounter) -> u64 {
    match mode {
        Mode::Tools => counter.text(&tools_json()) + TOOL_TEMPLATE_TOKENS,
        Mode::Text => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ksmith_core::evaluation::EvalStatus;
    use ksmith_core::tables::{ChainTurn, Split};

    fn chain() -> ChainRow {
        let turn = |i: u32, correct: bool| ChainTurn {
            step_id: format!("s{i}"),
            iteration: i,
            response: format!("Idea {i}.\n```python\nprogram {i}\n```"),
            program: format!("full program {i}"),
            status: if correct {
                EvalStatus::Correct
            } else {
                EvalStatus::RuntimeError
            },
            hack: None,
            correct,
            speedup: correct.then_some(1.5),
            error_log: if correct { "" } else { "IndexError" }.into(),
        };
        ChainRow {
            sample_id: "c".into(),
            backend: ksmith_core::evaluation::Backend::Triton,
            split: Split::Train,
            task_id: "t".into(),
            island: 0,
            family: "f".into(),
            level: 1,
            cluster: 0,
            prompt: vec![
                ChatMessage::new("system", "Be an expert."),
                ChatMessage::new("user", "Translate this."),
            ],
            start_step_id: None,
            start_speedup: None,
            turns: vec![turn(0, false), turn(1, true)],
            tokens: 0,
            token_counter: "x".into(),
            teacher: "m".into(),
            repo: "r".into(),
            license: None,
        }
    }

    #[test]
    fn tool_conversations_call_evaluate_with_each_program_and_end_without_a_call() {
        let conv = tool_conversation(&chain());
        let roles: Vec<&str> = conv.iter().map(|m| m.role.as_str()).collect();
        assert_eq!(
            roles,
            [
                "system",
                "user",
                "assistant",
                "tool",
                "assistant",
                "tool",
                "assistant"
            ]
        );
        assert!(
            conv[0]
                .content
                .starts_with("Be an expert.\n\n# Working with the evaluator")
        );
        assert_eq!(conv[2].content, "Idea 0.");
        let call = &conv[2].tool_calls.as_ref().unwrap()[0];
        assert_eq!(call.function.name, "evaluate");
        assert_eq!(call.function.arguments.program, "full program 0");
        assert_eq!(conv[3].name.as_deref(), Some("evaluate"));
        assert!(conv[3].content.contains("\"status\":\"runtime_error\""));
        assert!(conv[3].content.contains("IndexError"));
        assert!(conv[5].content.contains("\"speedup\":1.5"));
        assert!(conv[6].tool_calls.is_none() && conv[6].content.starts_with("Done"));
    }

    #[test]
    fn text_conversations_keep_whole_answers_and_report_as_the_user() {
        let conv = text_conversation(&chain());
        let roles: Vec<&str> = conv.iter().map(|m| m.role.as_str()).collect();
        assert_eq!(
            roles,
            [
                "system",
                "user",
                "assistant",
                "user",
                "assistant",
                "user",
                "assistant"
            ]
        );
        assert!(conv[2].content.contains("```python\nprogram 0"));
        assert!(
            conv[0]
                .content
                .contains("SEARCH/REPLACE blocks applied to your last")
        );
    }

    #[test]
    fn lengths_count_the_schema_in_the_prompt_and_the_calls_in_the_rest() {
        let c = TokenCounter::Approx;
        let tools = chain_length(&chain(), Mode::Tools, &c);
        let text = chain_length(&chain(), Mode::Text, &c);
        let plain = c.messages(&with_instructions(&chain().prompt, Mode::Tools));
        assert_eq!(
            tools.prompt,
            plain + c.text(&tools_json()) + TOOL_TEMPLATE_TOKENS
        );
        let calls: Vec<ChatMessage> = tool_conversation(&chain())
            .iter()
            .skip(2)
            .map(ToolMessage::counted)
            .collect();
        assert_eq!(tools.response, c.messages(&calls) + 4 * TOOL_CALL_TOKENS);
        assert!(tools.response > 0 && text.response > 0);
        // A prompt without a system message gets one.
        let p = with_instructions(&[ChatMessage::new("user", "u")], Mode::Text);
        assert_eq!(p[0].role, "system");
        assert_eq!(p.len(), 2);
    }
}
