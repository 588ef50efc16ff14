//! The chat-completions wire format: request bodies and the parsing of answers.

use ksmith_core::chat::{ChatError, ChatMessage, ChatRequest, ChatResponse};
use serde::{Deserialize, Serialize};

#[derive(Serialize)]
struct Body<'a> {
    model: &'a str,
    messages: &'a [ChatMessage],
    temperature: f64,
    top_p: f64,
    max_tokens: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    seed: Option<u64>,
    stream: bool,
}

/// The JSON body sent for `request` to `model` with the generation cap `max_tokens`.
///
/// Field order is fixed, so the same request always gives the same bytes (the cache key is
/// derived from them).
pub fn request_body(model: &str, request: &ChatRequest, max_tokens: u32) -> String {
    let body = Body {
        model,
        messages: &request.messages,
        temperature: request.temperature,
        top_p: request.top_p,
        max_tokens,
        seed: request.seed,
        stream: false,
    };
    serde_json::to_string(&body).unwrap_or_default()
}

#[derive(Deserialize)]
struct Completion {
    model: Option<String>,
    choices: Option<Vec<Choice>>,
    usage: Option<Usage>,
    error: Option<serde_json::Value>,
}

#[derive(Deserialize)]
struct Choice {
    message: Option<Message>,
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct Message {
    content: Option<String>,
    reasoning_content: Option<String>,
    reasoning: Option<String>,
}

#[derive(Deserialize)]
struct Usage {
    prompt_tokens: Option<u64>,
    completion_tokens: Option<u64>,
}

fn excerpt(text: &str) -> String {
    const MAX: usize = 300;
    if text.len() <= MAX {
        return text.to_string();
    }
    let mut end = MAX;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}... ({} bytes)", &text[..end], text.len())
}

/// Parses a chat-completions answer body. `fallback_model` names the model when the body does
/// not. Anything that is not a completion with at least one choice carrying a message is
/// [`ChatError::Malformed`], with an excerpt of the body.
pub fn parse_completion(body: &str, fallback_model: &str) -> Result<ChatResponse, ChatError> {
    let parsed: Completion = serde_json::from_str(body)
        .map_err(|e| ChatError::Malformed(format!("not JSON ({e}): {}", excerpt(body))))?;
    if let Some(err) = parsed.error {
        return Err(ChatError::Malformed(format!(
            "error object instead of a completion: {}",
            excerpt(&err.to_string())
        )));
    }
    let choice = parsed
        .choices
        .and_then(|c| c.into_iter().next())
        .ok_or_else(|| ChatError::Malformed(format!("no choices: {}", excerpt(body))))?;
    let message = choice.message.ok_or_else(|| {
        ChatError::Malformed(format!("choice without message: {}", excerpt(body)))
    })?;
    let reasoning = message
        .reasoning_content
        .or(message.reasoning)
        .filter(|r| !r.is_empty());
    let content = message.content.unwrap_or_default();
    if content.is_empty()
        && reasoning.is_none()
        && choice.finish_reason.as_deref() != Some("length")
    {
        return Err(ChatError::Malformed(format!(
            "empty message: {}",
            excerpt(body)
        )));
    }
    let usage = parsed.usage;
    Ok(ChatResponse {
        content,
        reasoning,
        finish_reason: choice.finish_reason,
        model: parsed
            .model
            .filter(|m| !m.is_empty())
            .unwrap_or_else(|| fallback_model.to_string()),
        prompt_tokens: usage.as_ref().and_then(|u| u.prompt_tokens).unwrap_or(0),
        completion_tokens: usage
            .as_ref()
            .and_then(|u| u.completion_tokens)
            .unwrap_or(0),
        cached: false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_content_reasoning_and_usage() {
        let body = r#"{"id":"x","model":"m1","choices":[{"index":0,"message":{"role":"assistant","content":"hi","reasoning_content":"think"},"finish_reason":"stop"}],"usage":{"prompt_tokens":7,"completion_tokens":3}}"#;
        let r = parse_completion(body, "fallback").unwrap();
        assert_eq!(r.content, "hi");
        assert_eq!(r.reasoning.as_deref(), Some("think"));
        assert_eq!(r.finish_reason.as_deref(), Some("stop"));
        assert_eq!(
            (r.model.as_str(), r.prompt_tokens, r.completion_tokens),
            ("m1", 7, 3)
        );
        let body =
            r#"{"choices":[{"message":{"content":"a","reasoning":"r"},"finish_reason":"length"}]}"#;
        let r = parse_completion(body, "fb").unwrap();
        assert_eq!(r.reasoning.as_deref(), Some("r"));
        assert_eq!(r.model, "fb");
        assert_eq!(r.finish_reason.as_deref(), Some("length"));
    }

    #[test]
    fn garbage_is_malformed_with_an_excerpt() {
        for body in [
            "<html>502</html>",
            "{\"choices\":[]}",
            "{\"object\":\"chat.completion\"}",
            "{\"choices\":[{\"finish_reason\":\"stop\"}]}",
            "{\"error\":{\"message\":\"overloaded\"}}",
            "{\"choices\":[{\"message\":{\"content\":null},\"finish_reason\":\"stop\"}]}",
        ] {
            match parse_completion(body, "m") {
                Err(ChatError::Malformed(m)) => assert!(!m.is_empty(), "{body}"),
                other => panic!("{body}: {other:?}"),
            }
        }
    }

    #[test]
    fn body_is_stable_and_carries_the_sampling_parameters() {
        let req = ChatRequest {
            messages: vec![ChatMessage::new("user", "q")],
            temperature: 0.6,
            top_p: 0.95,
            max_tokens: 100,
            seed: Some(5),
        };
        let a = request_body("m", &req, 50);
        assert_eq!(a, request_body("m", &req, 50));
        let v: serde_json::Value = serde_json::from_str(&a).unwrap();
        assert_eq!(v["max_tokens"], 50);
        assert_eq!(v["seed"], 5);
        assert_eq!(v["temperature"], 0.6);
        assert_eq!(v["messages"][0]["content"], "q");
    }
}
