//! Optional LLM-assisted repair: ask a chat model for new `get_inputs()` / `get_init_inputs()`
//! when the rules could not make a module run. The answer is only a proposal: it is run in the
//! sandbox like any program (with the rules' repair on top) and kept only if it runs.

use ksmith_core::chat::{ChatMessage, ChatRequest};
use ksmith_core::tables::ProbeRow;

use crate::config::ProbeConfig;

/// Longest program text put into a prompt; longer programs are not sent.
pub const MAX_PROGRAM_CHARS: usize = 24_000;

const SYSTEM: &str = "You fix the test inputs of PyTorch programs. A program defines \
class Model(nn.Module), get_init_inputs() returning the constructor arguments as a list, and \
get_inputs() returning the forward inputs as a list of tensors. Answer with one ```python code \
block that defines only get_init_inputs() and get_inputs(), small CPU tensors, no other code.";

/// The chat request for a module that failed, or `None` when the program is too long.
pub fn build_request(program: &str, row: &ProbeRow, cfg: &ProbeConfig) -> Option<ChatRequest> {
    if program.len() > MAX_PROGRAM_CHARS {
        return None;
    }
    let error = format!(
        "{}: {}",
        row.error_class.as_deref().unwrap_or("Error"),
        row.error_message.as_deref().unwrap_or("")
    );
    let user = format!(
        "This program fails when run as Model(*get_init_inputs())(*get_inputs()):\n\n\
         ```python\n{program}\n```\n\nError:\n{error}\n\n\
         Write get_init_inputs() and get_inputs() so that it runs."
    );
    Some(ChatRequest {
        messages: vec![
            ChatMessage::new("system", SYSTEM),
            ChatMessage::new("user", user),
        ],
        temperature: cfg.llm_temperature,
        top_p: 1.0,
        max_tokens: cfg.llm_max_tokens,
        seed: Some(cfg.seed),
    })
}

/// The code of an answer: its fenced code blocks that define one of the two functions (or the
/// whole answer when it has no fence but defines one), `None` when there is nothing usable.
pub fn extract_code(answer: &str) -> Option<String> {
    let defines = |s: &str| s.contains("def get_inputs") || s.contains("def get_init_inputs");
    let mut blocks = Vec::new();
    let mut rest = answer;
    while let Some(start) = rest.find("```") {
        let after = &rest[start + 3..];
        let body_start = after.find('\n').map(|i| i + 1).unwrap_or(after.len());
        let body = &after[body_start..];
        let Some(end) = body.find("```") else { break };
        if defines(&body[..end]) {
            blocks.push(body[..end].trim_end().to_string());
        }
        rest = &body[end + 3..];
    }
    if blocks.is_empty() && !answer.contains("```") && defines(answer) {
        blocks.push(answer.trim().to_string());
    }
    if blocks.is_empty() {
        None
    } else {
        Some(blocks.join("\n\n") + "\n")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn code_comes_from_the_fenced_block_that_defines_the_functions() {
        let answer = "Here:\n```python\nimport torch\ndef get_inputs():\n    return [torch.rand(2)]\n```\nand\n```\nprint(1)\n```";
        let code = extract_code(answer).unwrap();
        assert!(code.contains("def get_inputs"));
        assert!(!code.contains("print(1)"));
        assert_eq!(extract_code("no code here"), None);
        assert_eq!(extract_code("```python\nx = 1\n```"), None);
        let bare = extract_code("def get_init_inputs():\n    return [3]").unwrap();
        assert!(bare.starts_with("def get_init_inputs"));
    }

    #[test]
    fn long_programs_are_not_sent() {
        let row = crate::rows::failed_row_for_tests();
        let cfg = ProbeConfig::default();
        assert!(build_request("x", &row, &cfg).is_some());
        let long = "x".repeat(MAX_PROGRAM_CHARS + 1);
        assert!(build_request(&long, &row, &cfg).is_none());
        let req = build_request("PROGRAM", &row, &cfg).unwrap();
        assert!(req.messages[1].content.contains("PROGRAM"));
        assert!(req.messages[1].content.contains("boom"));
    }
}
