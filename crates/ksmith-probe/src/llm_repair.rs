//! Optional LLM-assisted repair: ask a chat model for new `get_inputs()` / `get_init_inputs()`
//! when the rules could not make a module run. The answer is only a proposal: it is run in the
//! sandbox like any program (with the rules' repair on top) and kept only if it runs.

use ksmith_core::chat::{ChatClient, ChatMessage, ChatRequest};
use ksmith_core::tables::{ProbeRow, ProbeStatus};

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

/// Asks `chat` for new input functions for the module of the `failed` row: the code to run
/// as the override, or the failed row with a repair step saying why there is none.
pub fn ask(
    program: &str,
    failed: &ProbeRow,
    cfg: &ProbeConfig,
    chat: &dyn ChatClient,
) -> Result<String, Box<ProbeRow>> {
    let mut kept = Box::new(failed.clone());
    let Some(request) = build_request(program, failed, cfg) else {
        kept.repair_steps
            .push("llm: program too long to ask".into());
        return Err(kept);
    };
    let answer = match chat.chat(&request) {
        Ok(a) => a,
        Err(e) => {
            kept.repair_steps.push(format!("llm: no answer ({e})"));
            return Err(kept);
        }
    };
    extract_code(&answer.content).ok_or_else(|| {
        kept.repair_steps
            .push("llm: the answer defines neither get_inputs nor get_init_inputs".into());
        kept
    })
}

/// The module's row once the LLM's override ran as `row`: that row when it runs (after the
/// failed run's repair steps), else the `failed` row with why the answer did not help. Attempts
/// and CPU time add up.
pub fn merge(failed: &ProbeRow, mut row: ProbeRow) -> ProbeRow {
    row.attempts += failed.attempts;
    row.cpu_time_ms += failed.cpu_time_ms;
    if row.status == ProbeStatus::Ok || row.status == ProbeStatus::Nondeterministic {
        let mut steps = failed.repair_steps.clone();
        steps.push("llm: replaced get_inputs/get_init_inputs".into());
        steps.extend(row.repair_steps);
        row.repair_steps = steps;
        row
    } else {
        let mut kept = failed.clone();
        kept.attempts = row.attempts;
        kept.cpu_time_ms = row.cpu_time_ms;
        kept.repair_steps.push(format!(
            "llm: the answer did not run ({}: {})",
            row.status.as_str(),
            row.error_message.unwrap_or_default()
        ));
        kept
    }
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
