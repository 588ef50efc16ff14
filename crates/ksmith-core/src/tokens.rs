//! Token counting for the token budgets: the one counter behind the rollout's prompt budget
//! (`[rollout] prompt_token_budget`) and select's sample budget (`[select] max_tokens`), so a
//! prompt the rollout built within its budget is counted the same when it is selected.
//!
//! This build counts tokens with an approximation, named `approx_chars_div_4` everywhere it is
//! recorded: a message costs `ceil(chars / 4)` tokens plus 4 for the chat template's role
//! markers. For English text and Python source, BPE tokenizers of current LLMs average about
//! 3.5 to 4.5 characters per token, so the budget is approximate within roughly 15%; set the
//! budget with that margin.
//!
//! This counter has no real tokenizer (`tokenizer.json`): select refuses a configured
//! `tokenizer` path with "built without tokenizer support", and core (which every crate builds)
//! stays free of the dependency; the `tokenizers` crate with Oniguruma took 254 s to build from
//! scratch at `-j1` on this project's shared 2-core machine. Export, which states the datasets'
//! lengths and the trainer settings that fit them, counts with a configured `tokenizer.json`
//! (`[export] tokenizer`: the pure-Rust build of `tokenizers`, see `ksmith_export::lengths`) and
//! with this approximation otherwise.

use crate::chat::ChatMessage;

/// The name recorded with every count.
pub const APPROX_CHARS_DIV_4: &str = "approx_chars_div_4";

/// Tokens added per message for the chat template's role markers.
const PER_MESSAGE_OVERHEAD: u64 = 4;

/// Approximate tokens of one text.
pub fn approx_tokens(text: &str) -> u64 {
    (text.chars().count() as u64).div_ceil(4)
}

/// Approximate tokens of one message with `content`, template overhead included.
pub fn approx_message_tokens(content: &str) -> u64 {
    approx_tokens(content) + PER_MESSAGE_OVERHEAD
}

/// Approximate tokens of a conversation, template overhead included.
pub fn approx_conversation_tokens(messages: &[ChatMessage]) -> u64 {
    messages
        .iter()
        .map(|m| approx_message_tokens(&m.content))
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_characters_not_bytes() {
        assert_eq!(approx_tokens(""), 0);
        assert_eq!(approx_tokens("abcd"), 1);
        assert_eq!(approx_tokens("abcde"), 2);
        // Four two-byte characters are one approximate token, not two.
        assert_eq!(approx_tokens("éééé"), 1);
    }

    #[test]
    fn conversation_adds_template_overhead() {
        let msgs = vec![
            ChatMessage::new("user", "a".repeat(40)),
            ChatMessage::new("assistant", "b".repeat(8)),
        ];
        assert_eq!(approx_conversation_tokens(&msgs), 10 + 4 + 2 + 4);
    }
}
