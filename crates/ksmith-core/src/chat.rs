//! The chat-model contract, for the teacher of rollouts and the optional LLM repair of probe.
//!
//! Stages that talk to an LLM are generic over [`ChatClient`]; the OpenAI-compatible HTTP client
//! (`ksmith-teacher`) implements it and the CLI wires it in.

use serde::{Deserialize, Serialize};

/// One chat message.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ChatMessage {
    /// `system`, `user` or `assistant`.
    pub role: String,
    /// The text.
    pub content: String,
}

impl ChatMessage {
    /// A message with `role` and `content`.
    pub fn new(role: &str, content: impl Into<String>) -> Self {
        ChatMessage {
            role: role.to_string(),
            content: content.into(),
        }
    }
}

/// A chat-completions request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatRequest {
    /// The conversation.
    pub messages: Vec<ChatMessage>,
    /// Sampling temperature.
    pub temperature: f64,
    /// Nucleus sampling.
    pub top_p: f64,
    /// Cap on generated tokens.
    pub max_tokens: u32,
    /// Seed passed to the endpoint, so cached and resumed runs ask the same question.
    pub seed: Option<u64>,
}

/// A chat-completions answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatResponse {
    /// The answer text.
    pub content: String,
    /// The reasoning text of thinking models, when the endpoint returns one.
    pub reasoning: Option<String>,
    /// `stop`, `length`, ... as the endpoint reports it.
    pub finish_reason: Option<String>,
    /// Which model answered.
    pub model: String,
    /// Prompt tokens, as reported by the endpoint.
    pub prompt_tokens: u64,
    /// Completion tokens, as reported by the endpoint.
    pub completion_tokens: u64,
    /// True when the answer came from the response cache.
    pub cached: bool,
}

/// Why a chat request failed after all retries.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ChatError {
    /// Connection failures, timeouts, 429 and 5xx after the last retry.
    #[error("teacher unreachable after {attempts} attempts: {message}")]
    Unreachable {
        /// Attempts made.
        attempts: u32,
        /// The last error.
        message: String,
    },
    /// The endpoint answered with something that is not a chat completion.
    #[error("teacher answered garbage: {0}")]
    Malformed(String),
    /// The endpoint refused the request (4xx other than 429).
    #[error("teacher refused the request: {0}")]
    Refused(String),
}

/// Something that answers chat requests. Shared between threads.
pub trait ChatClient: Send + Sync {
    /// Sends one request.
    fn chat(&self, request: &ChatRequest) -> Result<ChatResponse, ChatError>;

    /// What the client did so far (requests, cache hits, retries, tokens), as named counters for
    /// the report of the stage that used it. None by default.
    fn report_counters(&self) -> Vec<(&'static str, u64)> {
        Vec::new()
    }

    /// How many requests it sends at once at most (its concurrency limit), when it has one.
    fn concurrency(&self) -> Option<usize> {
        None
    }
}
