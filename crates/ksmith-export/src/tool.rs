//! The evaluator as a tool: the `evaluate` tool's schema, the report it answers with, and the
//! instructions that tell a model how to work with it, shared by the multi-turn SFT formats (a
//! chain of rollout steps rendered as a conversation) and the agent-environment formats (the
//! starts of RL episodes).
//!
//! Two ways of talking to the evaluator:
//! - tool calls (verl, TRL): the assistant calls `evaluate` with the complete program and the
//!   tool message is the report;
//! - text (OpenRLHF's agent loop, which has no tool calls): every answer is read as the
//!   single-turn answers are (SEARCH/REPLACE blocks or a fenced program) and the next user
//!   message is the report.
//!
//! The Python side (`python/ksmith/environment.py`) builds the same report from the reward
//! function's result and declares the same schema; the trainer tests check both against these
//! datasets.

use ksmith_core::answer::code_spans;
use ksmith_core::evaluation::{ERROR_TAIL_CHARS, EvalStatus};
use ksmith_core::tables::ChainTurn;
use serde::{Deserialize, Serialize};

/// The tool's name.
pub const TOOL_NAME: &str = "evaluate";

/// What the tool does (the schema's `description`).
pub const TOOL_DESCRIPTION: &str = "Compile a Triton program, check it against the PyTorch \
    reference on fresh random inputs and time it on the GPU evaluator; returns a JSON report.";

/// What the tool's one argument is.
pub const PROGRAM_DESCRIPTION: &str = "The complete program: imports, Triton kernels and class \
    ModelNew, with the editable block between the # EVOLVE-BLOCK-START and # EVOLVE-BLOCK-END \
    lines.";

/// Appended to the system message of tool-call conversations and environments.
pub const TOOL_INSTRUCTIONS: &str = "# Working with the evaluator\n\
    In this conversation you do not answer with SEARCH/REPLACE blocks or code blocks: you \
    submit each program by calling the `evaluate` tool with the complete program (imports, \
    Triton kernels and `class ModelNew`, the editable block between its markers). It compiles, \
    checks and times the program and answers with a JSON report: `status`, `compiled`, \
    `correct`, `speedup` (over PyTorch eager; null when not measured), `hack` and `error` (the \
    end of the error log). Before each call, say in a few sentences what you change and why; \
    revise from the report. When you are done, answer without a tool call: the best program \
    you evaluated is your result.";

/// Appended to the system message of text conversations and environments.
pub const TEXT_INSTRUCTIONS: &str = "# Working with the evaluator\n\
    Every answer you give is evaluated: its program (SEARCH/REPLACE blocks applied to your last \
    program, or one fenced ```python block with the new editable block or the whole program) \
    is compiled, checked and timed, and the next message is the evaluator's JSON report: \
    `status`, `compiled`, `correct`, `speedup` (over PyTorch eager; null when not measured), \
    `hack` and `error` (the end of the error log). Revise from it. When you are done, answer \
    without code: the best program you evaluated is your result.";

/// How a conversation talks to the evaluator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// The assistant calls the `evaluate` tool; tool messages carry the reports.
    Tools,
    /// The assistant answers in text; user messages carry the reports.
    Text,
}

impl Mode {
    /// The instructions appended to the system message.
    pub fn instructions(self) -> &'static str {
        match self {
            Mode::Tools => TOOL_INSTRUCTIONS,
            Mode::Text => TEXT_INSTRUCTIONS,
        }
    }
}

/// A JSON-schema property of type string.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StringProperty {
    /// `string`.
    #[serde(rename = "type")]
    pub kind: String,
    /// What it holds.
    pub description: String,
}

/// The properties of the tool's arguments.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolProperties {
    /// The program to evaluate.
    pub program: StringProperty,
}

/// The JSON schema of the tool's arguments.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolParameters {
    /// `object`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Its properties.
    pub properties: ToolProperties,
    /// The required ones.
    pub required: Vec<String>,
}

/// A function's schema.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FunctionSchema {
    /// [`TOOL_NAME`].
    pub name: String,
    /// [`TOOL_DESCRIPTION`].
    pub description: String,
    /// Its arguments.
    pub parameters: ToolParameters,
}

/// One tool in the OpenAI/Hugging Face form (`{"type": "function", "function": {...}}`): an
/// element of a `tools` column.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSchema {
    /// `function`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The function.
    pub function: FunctionSchema,
}

/// The `evaluate` tool.
pub fn evaluate_tool() -> ToolSchema {
    ToolSchema {
        kind: "function".to_string(),
        function: FunctionSchema {
            name: TOOL_NAME.to_string(),
            description: TOOL_DESCRIPTION.to_string(),
            parameters: ToolParameters {
                kind: "object".to_string(),
                properties: ToolProperties {
                    program: StringProperty {
                        kind: "string".to_string(),
                        description: PROGRAM_DESCRIPTION.to_string(),
                    },
                },
                required: vec!["program".to_string()],
            },
        },
    }
}

/// The tools as JSON (what a chat template renders into the system message, near enough to
/// count its tokens).
pub fn tools_json() -> String {
    serde_json::to_string(&[evaluate_tool()]).unwrap_or_default()
}

/// The evaluator's report on one program: the tool's answer, or the user message after a text
/// answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// The verdict (`correct`, `compile_error`, `incorrect`, ...).
    pub status: String,
    /// Whether it compiled (passed the static checks and built).
    pub compiled: bool,
    /// Whether it is correct.
    pub correct: bool,
    /// Speedup over PyTorch eager (two decimals), when correct and timed.
    pub speedup: Option<f64>,
    /// The hack found, when the verdict is `hacked`.
    pub hack: Option<String>,
    /// The end of the error log ([`ERROR_TAIL_CHARS`]); empty when correct.
    pub error: String,
}

/// The last `n` characters of `text`.
fn tail(text: &str, n: usize) -> &str {
    let count = text.chars().count();
    match text.char_indices().nth(count.saturating_sub(n)) {
        Some((i, _)) if count > n => &text[i..],
        _ => text,
    }
}

impl Report {
    /// The report on a chain's turn.
    pub fn of(turn: &ChainTurn) -> Self {
        Report {
            status: turn.status.as_str().to_string(),
            compiled: !matches!(
                turn.status,
                EvalStatus::StaticRejected | EvalStatus::CompileError
            ),
            correct: turn.correct,
            speedup: turn
                .speedup
                .filter(|_| turn.correct)
                .map(|s| (s * 100.0).round() / 100.0),
            hack: turn.hack.map(|h| h.as_str().to_string()),
            error: if turn.correct {
                String::new()
            } else {
                tail(&turn.error_log, ERROR_TAIL_CHARS).to_string()
            },
        }
    }

    /// The report as compact JSON, keys in declaration order.
    pub fn to_json(&self) -> String {
        // Plain strings, numbers, booleans and nulls always serialize.
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// The last assistant message of a conversation: no tool call and no code, so an agent loop
/// ends there.
pub fn final_message(last: &ChainTurn) -> String {
    let how = match (last.correct, last.speedup) {
        (true, Some(s)) => format!("correct, {s:.2}x faster than PyTorch eager"),
        (true, None) => "correct; its speed was not measured".to_string(),
        (false, _) => "not correct".to_string(),
    };
    format!("Done: the last program I evaluated is my result ({how}).")
}

/// The prose of a teacher's answer: the answer without the lines the answer reader takes as
/// code ([`code_spans`]: fenced code blocks and SEARCH/REPLACE blocks), since in tool calls the
/// program travels as the tool's argument.
pub fn prose(response: &str) -> String {
    let code = code_spans(response);
    let text = response
        .lines()
        .enumerate()
        .filter(|(i, _)| !code.iter().any(|r| r.contains(i)))
        .map(|(_, line)| line)
        .collect::<Vec<_>>()
        .join("\n");
    // Blank lines left where blocks were collapse to one.
    let mut collapsed = String::with_capacity(text.len());
    let mut blank = 0;
    for line in text.trim().lines() {
        if line.trim().is_empty() {
            blank += 1;
            if blank > 1 {
                continue;
            }
        } else {
            blank = 0;
        }
        collapsed.push_str(line);
        collapsed.push('\n');
    }
    collapsed.trim_end().to_string()
}

/// The answer cases the rollout's reader runs, for the tests.
#[cfg(test)]
#[path = "../../ksmith-core/tests/support/answer_cases.rs"]
mod answer_cases;

#[cfg(test)]
mod tests {
    use super::*;
    use ksmith_core::answer::{fenced_blocks, is_diff, parse_diff};
    use ksmith_core::evaluation::HackKind;

    fn turn(status: EvalStatus, correct: bool, speedup: Option<f64>, log: &str) -> ChainTurn {
        ChainTurn {
            step_id: "s".into(),
            iteration: 1,
            response: String::new(),
            program: String::new(),
            status,
            hack: (status == EvalStatus::Hacked).then_some(HackKind::TorchFallback),
            correct,
            speedup,
            error_log: log.into(),
        }
    }

    #[test]
    fn reports_say_compile_correctness_speed_and_the_end_of_the_log() {
        let ok = Report::of(&turn(EvalStatus::Correct, true, Some(1.8367), "warning"));
        assert_eq!(
            ok.to_json(),
            r#"{"status":"correct","compiled":true,"correct":true,"speedup":1.84,"hack":null,"error":""}"#
        );
        // Half away from zero (the Python environment rounds the same way).
        let half = Report::of(&turn(EvalStatus::Correct, true, Some(1.125), ""));
        assert_eq!(half.speedup, Some(1.13));
        let long = format!("{}END", "x".repeat(5000));
        let bad = Report::of(&turn(EvalStatus::CompileError, false, None, &long));
        assert!(!bad.compiled && !bad.correct && bad.speedup.is_none());
        assert_eq!(bad.error.chars().count(), ERROR_TAIL_CHARS);
        assert!(bad.error.ends_with("END"));
        let hacked = Report::of(&turn(EvalStatus::Hacked, false, None, "fallback"));
        assert!(hacked.compiled);
        assert_eq!(hacked.hack.as_deref(), Some("torch_fallback"));
        let rejected = Report::of(&turn(EvalStatus::StaticRejected, false, None, ""));
        assert!(!rejected.compiled);
        // Multi-byte characters are cut whole.
        let accents = "é".repeat(ERROR_TAIL_CHARS + 5);
        assert_eq!(
            tail(&accents, ERROR_TAIL_CHARS).chars().count(),
            ERROR_TAIL_CHARS
        );
    }

    #[test]
    fn prose_drops_code_and_diffs_and_keeps_the_words() {
        let answer = "Fuse the two loads.\n\n```python\nx = 1\n```\n\nThen:\n<<<<<<< SEARCH\na\n\
                      =======\nb\n>>>>>>> REPLACE\n\n\nThis halves traffic.";
        assert_eq!(
            prose(answer),
            "Fuse the two loads.\n\nThen:\n\nThis halves traffic."
        );
        assert_eq!(prose("```python\nonly code\n```"), "");
    }

    /// The prose is the answer without what the answer reader (`ksmith_core::answer`) reads as
    /// code: over the shared answer cases, and where a marker-like line is no marker to it.
    #[test]
    fn prose_leaves_out_exactly_what_the_reader_reads_as_code() {
        let words = |answer: &str| -> Vec<String> {
            let mut code: Vec<std::ops::Range<usize>> =
                fenced_blocks(answer).into_iter().map(|f| f.lines).collect();
            if is_diff(answer) {
                code.extend(
                    parse_diff(answer)
                        .unwrap_or_default()
                        .into_iter()
                        .map(|b| b.lines),
                );
            }
            answer
                .lines()
                .enumerate()
                .filter(|(i, l)| !l.trim().is_empty() && !code.iter().any(|r| r.contains(i)))
                .map(|(_, l)| l.to_string())
                .collect()
        };
        let mut checked = 0;
        for c in answer_cases::cases() {
            // Broken SEARCH/REPLACE answers have no blocks to compare with (and never reach a
            // conversation: no program comes of them).
            if is_diff(&c.answer) && parse_diff(&c.answer).is_err() {
                continue;
            }
            let kept: Vec<String> = prose(&c.answer)
                .lines()
                .filter(|l| !l.trim().is_empty())
                .map(str::to_string)
                .collect();
            assert_eq!(kept, words(&c.answer), "{}", c.name);
            checked += 1;
        }
        assert!(checked >= 50, "{checked}");
        // Not markers to the reader (a marker is the whole line), so not code.
        let answer =
            "Keep `<<<<<<< SEARCH` lines whole.\n<<<<<<< SEARCH\na\n=======\nb\n>>>>>>> REPLACE";
        assert_eq!(prose(answer), "Keep `<<<<<<< SEARCH` lines whole.");
        let answer =
            "<<<<<<< SEARCH (first)\nis prose\n<<<<<<< SEARCH\na\n=======\nb\n>>>>>>> REPLACE";
        assert_eq!(words(answer), ["<<<<<<< SEARCH (first)", "is prose"]);
        assert_eq!(prose(answer), "<<<<<<< SEARCH (first)\nis prose");
    }

    #[test]
    fn the_schema_is_the_openai_function_form() {
        let v: serde_json::Value = serde_json::from_str(&tools_json()).unwrap();
        assert_eq!(v[0]["type"], "function");
        assert_eq!(v[0]["function"]["name"], TOOL_NAME);
        assert_eq!(
            v[0]["function"]["parameters"]["properties"]["program"]["type"],
            "string"
        );
        assert_eq!(v[0]["function"]["parameters"]["required"][0], "program");
    }

    #[test]
    fn the_final_message_has_no_code() {
        let t = turn(EvalStatus::Correct, true, Some(2.0), "");
        let m = final_message(&t);
        assert!(m.contains("2.00x") && !m.contains("```"), "{m}");
        assert!(final_message(&turn(EvalStatus::Correct, true, None, "")).contains("not measured"));
    }
}
