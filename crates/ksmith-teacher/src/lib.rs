//! Teacher: the OpenAI-compatible chat client that answers the rollout stage's prompts.
//!
//! [`Teacher`] implements [`ksmith_core::chat::ChatClient`] over any `/v1/chat/completions`
//! endpoint (vLLM, SGLang, a hosted API). It picks one of several configured teachers with a
//! weighted choice seeded by the request itself (the same request always goes to the same teacher,
//! whatever the thread order), limits concurrent requests with a semaphore, retries timeouts, 429
//! and 5xx with exponential backoff and jitter, maps other 4xx answers to
//! [`ChatError::Refused`](ksmith_core::chat::ChatError::Refused) and answers that are not a chat
//! completion to [`ChatError::Malformed`](ksmith_core::chat::ChatError::Malformed). Reasoning text of
//! thinking models (`reasoning_content` or `reasoning`) is kept apart from the answer.
//!
//! Every successful answer is stored in a [`ResponseCache`] keyed by the full request (model,
//! messages, sampling parameters, token cap and seed), one file per key written atomically, so a
//! resumed or repeated rollout does not pay twice. Token usage is counted ([`Teacher::usage`]).
//!
//! Invariants: no request is sent twice for the same key while the cache is on and the first
//! answer was good; a failed request never crashes the caller; nothing is global.
//!
//! The `loopback` feature adds [`loopback`], a scripted HTTP server on `127.0.0.1` for tests.
#![deny(missing_docs)]

mod cache;
mod client;
mod config;
mod error;
#[cfg(feature = "loopback")]
pub mod loopback;
mod semaphore;
mod wire;

pub use cache::{ResponseCache, cache_key};
pub use client::{Teacher, TeacherUsage};
pub use config::{EndpointConfig, TEACHER_URL_ENV, TeacherConfig, url_override};
pub use error::TeacherError;
pub use wire::{parse_completion, request_body};
