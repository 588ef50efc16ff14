//! Sample lengths in tokens: the counter (a Hugging Face `tokenizer.json`, or the `chars / 4`
//! approximation of [`ksmith_core::tokens`]), each sample's prompt and response length, the
//! statistics the dataset card states (median, p99, max) and the trainer settings that fit them.
//!
//! A prompt's count is its messages' tokens plus [`TEMPLATE_TOKENS_PER_MESSAGE`] per message
//! for the chat template's role markers (the trainers count `apply_chat_template` output, which
//! no tokenizer file alone reproduces); the settings add a margin on top (see [`Fit`]).

use std::path::{Path, PathBuf};

use ksmith_core::chat::ChatMessage;
use ksmith_core::tokens::{APPROX_CHARS_DIV_4, approx_message_tokens, approx_tokens};
use serde::{Deserialize, Serialize};

use crate::error::Error;

/// Tokens counted per message for the chat template (role markers, separators) when a real
/// tokenizer counts the content; current templates (ChatML, Llama 3) spend 4 to 6.
pub const TEMPLATE_TOKENS_PER_MESSAGE: u64 = 6;

/// How tokens are counted.
pub enum TokenCounter {
    /// `ceil(chars / 4)` per text, plus 4 per message ([`ksmith_core::tokens`]).
    Approx,
    /// A Hugging Face tokenizer loaded from `tokenizer.json`.
    Tokenizer {
        /// The file it was loaded from.
        path: PathBuf,
        /// The tokenizer.
        tokenizer: Box<tokenizers::Tokenizer>,
    },
}

impl TokenCounter {
    /// The counter of `[export] tokenizer`: the approximation when `path` is empty, else the
    /// tokenizer in that file (an unreadable file is an error naming it).
    pub fn load(path: &Path) -> Result<Self, Error> {
        if path.as_os_str().is_empty() {
            return Ok(TokenCounter::Approx);
        }
        let tokenizer = tokenizers::Tokenizer::from_file(path).map_err(|e| Error::Tokenizer {
            path: path.to_path_buf(),
            message: e.to_string(),
        })?;
        Ok(TokenCounter::Tokenizer {
            path: path.to_path_buf(),
            tokenizer: Box::new(tokenizer),
        })
    }

    /// The name recorded with every count: `approx_chars_div_4`, or `tokenizer:<file>` (the
    /// file's parent folder and name, which for a downloaded model names the model).
    pub fn name(&self) -> String {
        match self {
            TokenCounter::Approx => APPROX_CHARS_DIV_4.to_string(),
            TokenCounter::Tokenizer { path, .. } => {
                let parts: Vec<String> = path
                    .iter()
                    .rev()
                    .take(2)
                    .map(|p| p.to_string_lossy().into_owned())
                    .collect();
                let shown: Vec<&str> = parts.iter().rev().map(String::as_str).collect();
                format!("tokenizer:{}", shown.join("/"))
            }
        }
    }

    /// True for the approximation.
    pub fn is_approx(&self) -> bool {
        matches!(self, TokenCounter::Approx)
    }

    /// Tokens of one text.
    pub fn text(&self, text: &str) -> u64 {
        match self {
            TokenCounter::Approx => approx_tokens(text),
            // Encoding a plain string cannot fail for a loaded tokenizer; were it to, the
            // approximation stands in rather than a zero.
            TokenCounter::Tokenizer { tokenizer, .. } => tokenizer
                .encode_fast(text, false)
                .map(|e| e.len() as u64)
                .unwrap_or_else(|_| approx_tokens(text)),
        }
    }

    /// Tokens of one message, the chat template's share included.
    pub fn message(&self, content: &str) -> u64 {
        match self {
            TokenCounter::Approx => approx_message_tokens(content),
            TokenCounter::Tokenizer { .. } => self.text(content) + TEMPLATE_TOKENS_PER_MESSAGE,
        }
    }

    /// Tokens of a conversation, the chat template's share included.
    pub fn messages(&self, messages: &[ChatMessage]) -> u64 {
        messages.iter().map(|m| self.message(&m.content)).sum()
    }
}

/// One sample's length in tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SampleLength {
    /// The prompt (system and user messages).
    pub prompt: u64,
    /// The response: the answer (SFT), or the current program an answer rewrites (GRPO).
    pub response: u64,
}

/// Median, 99th percentile and maximum of a list of lengths.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stats {
    /// Median (the lower middle value for an even count).
    pub median: u64,
    /// 99th percentile (nearest rank).
    pub p99: u64,
    /// Maximum.
    pub max: u64,
}

impl Stats {
    /// The statistics of `values` (all zero when empty).
    pub fn of(mut values: Vec<u64>) -> Self {
        if values.is_empty() {
            return Stats::default();
        }
        values.sort_unstable();
        let n = values.len();
        let rank = |q: f64| values[((q * n as f64).ceil() as usize).clamp(1, n) - 1];
        Stats {
            median: rank(0.5),
            p99: rank(0.99),
            max: values[n - 1],
        }
    }
}

/// The length statistics of one dataset.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lengths {
    /// How tokens were counted.
    pub counter: String,
    /// Samples measured.
    pub samples: u64,
    /// Prompt tokens.
    pub prompt: Stats,
    /// Response tokens (SFT: the answer; GRPO: the current program an answer rewrites).
    pub response: Stats,
    /// Prompt plus response tokens.
    pub total: Stats,
}

impl Lengths {
    /// The statistics of `samples`, counted by `counter`.
    pub fn of(counter: &str, samples: &[SampleLength]) -> Self {
        Lengths {
            counter: counter.to_string(),
            samples: samples.len() as u64,
            prompt: Stats::of(samples.iter().map(|s| s.prompt).collect()),
            response: Stats::of(samples.iter().map(|s| s.response).collect()),
            total: Stats::of(samples.iter().map(|s| s.prompt + s.response).collect()),
        }
    }
}

/// Trainer settings that fit every sample: the longest length plus a margin, rounded up to a
/// multiple of [`Fit::ROUND`]. The margin covers what the count cannot see: 20% for the
/// `chars / 4` approximation (BPE tokenizers average 3.5 to 4.5 characters per token on code),
/// 5% with a real tokenizer (the chat template's exact tokens).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fit {
    /// Prompt length (verl `data.max_prompt_length`).
    pub prompt: u64,
    /// Response length (verl `data.max_response_length`, TRL `max_completion_length`,
    /// OpenRLHF `--rollout.max_new_tokens`).
    pub response: u64,
    /// Whole sequence (verl SFT `data.max_length`, TRL SFT `max_length`, OpenRLHF
    /// `--data.max_len`).
    pub total: u64,
}

impl Fit {
    /// Settings are rounded up to a multiple of this.
    pub const ROUND: u64 = 256;
    /// An RL answer rewrites the current program: room for this many times the longest one.
    pub const RL_RESPONSE_FACTOR: u64 = 2;

    fn settle(tokens: u64, approx: bool) -> u64 {
        let margin = if approx { tokens / 5 } else { tokens / 20 };
        (tokens + margin).max(1).div_ceil(Self::ROUND) * Self::ROUND
    }

    /// The settings for SFT data: the longest prompt, answer and conversation.
    pub fn sft(l: &Lengths, approx: bool) -> Self {
        Fit {
            prompt: Self::settle(l.prompt.max, approx),
            response: Self::settle(l.response.max, approx),
            total: Self::settle(l.total.max, approx),
        }
    }

    /// Tokens of one evaluator report at most:
    /// [`ksmith_core::evaluation::ERROR_TAIL_CHARS`] characters of error log at about 3
    /// characters per token, the JSON around it and the chat template's markers.
    pub const REPORT_TOKENS: u64 = 768;

    /// The settings for agent episodes of at most `turns` evaluations: the longest prompt, and
    /// per turn [`Fit::RL_RESPONSE_FACTOR`] times the longest current program plus a report.
    pub fn agent(l: &Lengths, approx: bool, turns: u32) -> Self {
        let prompt = Self::settle(l.prompt.max, approx);
        let per_turn = l.response.max * Self::RL_RESPONSE_FACTOR + Self::REPORT_TOKENS;
        let response = Self::settle(per_turn * u64::from(turns), approx);
        Fit {
            prompt,
            response,
            total: prompt + response,
        }
    }

    /// The settings for RL prompts: the longest prompt, and [`Fit::RL_RESPONSE_FACTOR`] times
    /// the longest current program for the answer.
    pub fn rl(l: &Lengths, approx: bool) -> Self {
        let prompt = Self::settle(l.prompt.max, approx);
        let response = Self::settle(l.response.max * Self::RL_RESPONSE_FACTOR, approx);
        Fit {
            prompt,
            response,
            total: prompt + response,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_are_nearest_rank() {
        assert_eq!(Stats::of(vec![]), Stats::default());
        assert_eq!(
            Stats::of(vec![5]),
            Stats {
                median: 5,
                p99: 5,
                max: 5
            }
        );
        let s = Stats::of((1..=200).rev().collect());
        assert_eq!((s.median, s.p99, s.max), (100, 198, 200));
    }

    #[test]
    fn fits_round_up_with_a_margin() {
        let l = Lengths {
            counter: "x".into(),
            samples: 2,
            prompt: Stats {
                median: 0,
                p99: 0,
                max: 1000,
            },
            response: Stats {
                median: 0,
                p99: 0,
                max: 300,
            },
            total: Stats {
                median: 0,
                p99: 0,
                max: 1250,
            },
        };
        // 1000 + 20% = 1200 -> 1280; 300 + 60 = 360 -> 512; 1250 + 250 = 1500 -> 1536.
        assert_eq!(
            Fit::sft(&l, true),
            Fit {
                prompt: 1280,
                response: 512,
                total: 1536
            }
        );
        // A real tokenizer: 5%: 1050 -> 1280, 315 -> 512, 1312 -> 1536.
        assert_eq!(Fit::sft(&l, false).total, 1536);
        // RL: the answer gets twice the longest current program: 600 + 120 -> 768.
        let rl = Fit::rl(&l, true);
        assert_eq!((rl.prompt, rl.response, rl.total), (1280, 768, 2048));
        // An agent episode of 3 turns: 3 x (600 + 768) = 4104, +20% = 4924 -> 5120.
        let agent = Fit::agent(&l, true, 3);
        assert_eq!((agent.prompt, agent.response), (1280, 5120));
        assert_eq!(agent.total, 6400);
    }

    #[test]
    fn the_approximation_matches_the_core_counter() {
        let c = TokenCounter::Approx;
        let msgs = vec![
            ChatMessage::new("system", "x".repeat(10)),
            ChatMessage::new("user", "y".repeat(40)),
        ];
        assert_eq!(
            c.messages(&msgs),
            ksmith_core::tokens::approx_conversation_tokens(&msgs)
        );
        assert_eq!(c.name(), "approx_chars_div_4");
        assert!(c.is_approx());
    }

    #[test]
    fn a_missing_tokenizer_file_is_an_error_naming_it() {
        let Err(err) = TokenCounter::load(Path::new("/nonexistent/tokenizer.json")) else {
            panic!("loaded a missing file");
        };
        assert!(
            err.to_string().contains("/nonexistent/tokenizer.json"),
            "{err}"
        );
    }
}
