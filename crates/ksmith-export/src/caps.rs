//! The length caps of `[export]`: samples over `max_prompt_tokens` or `max_response_tokens` are
//! dropped, or (`over_length = "truncate"`) have their prompt cut to fit; multi-turn
//! conversations over `max_conversation_tokens` (or whose first prompt is over
//! `max_prompt_tokens`) are dropped.
//!
//! Only prompts are ever cut, in the middle of their longest message, with a marker saying how
//! much was cut; an answer over `max_response_tokens` is always dropped, since a cut answer would
//! train the model on a broken program, and a conversation is never cut (a cut one would show
//! reports on programs the model never wrote). Every sample is measured here once; the measured
//! lengths feed the card's statistics.

use std::collections::BTreeMap;

use ksmith_core::chat::ChatMessage;
use ksmith_core::tables::{ChainRow, GrpoRow, SftRow};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::config::ExportConfig;
use crate::conversation::{chain_length, tools_tokens, with_instructions};
use crate::lengths::{SampleLength, TokenCounter};
use crate::tool::Mode;

/// What happens to a sample whose prompt is over `max_prompt_tokens`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OverLength {
    /// The sample is left out.
    Drop,
    /// The prompt's longest message is cut in the middle until the prompt fits.
    Truncate,
}

/// Why a sample was left out by a cap (counted in the report as `<set>/<reason>`).
pub const OVER_MAX_PROMPT_TOKENS: &str = "over_max_prompt_tokens";
/// See [`OVER_MAX_PROMPT_TOKENS`].
pub const OVER_MAX_RESPONSE_TOKENS: &str = "over_max_response_tokens";
/// See [`OVER_MAX_PROMPT_TOKENS`].
pub const OVER_MAX_CONVERSATION_TOKENS: &str = "over_max_conversation_tokens";

/// The samples of one set after the caps, with their lengths.
#[derive(Debug, Clone, Default)]
pub struct Capped<T> {
    /// The samples kept (truncated ones carry their cut prompt).
    pub rows: Vec<T>,
    /// The length of each kept sample, in the order of `rows`.
    pub lengths: Vec<SampleLength>,
    /// Samples left out, by reason.
    pub dropped: BTreeMap<&'static str, u64>,
    /// Samples whose prompt was cut to fit.
    pub truncated: u64,
}

/// One sample's fate.
enum Fate {
    Keep(Vec<ChatMessage>, SampleLength, bool),
    Drop(&'static str),
}

/// Applies the caps to one prompt (plus `extra` tokens the chat template adds to it, such as
/// the tools' schema) and its response length.
fn judge(
    prompt: &[ChatMessage],
    extra: u64,
    response: u64,
    counter: &TokenCounter,
    cfg: &ExportConfig,
) -> Fate {
    if cfg.max_response_tokens > 0 && response > cfg.max_response_tokens {
        return Fate::Drop(OVER_MAX_RESPONSE_TOKENS);
    }
    let tokens = counter.messages(prompt) + extra;
    let cap = cfg.max_prompt_tokens;
    if cap == 0 || tokens <= cap {
        let len = SampleLength {
            prompt: tokens,
            response,
        };
        return Fate::Keep(prompt.to_vec(), len, false);
    }
    if cfg.over_length == OverLength::Drop {
        return Fate::Drop(OVER_MAX_PROMPT_TOKENS);
    }
    if extra >= cap {
        return Fate::Drop(OVER_MAX_PROMPT_TOKENS);
    }
    match truncate(prompt, cap - extra, counter) {
        Some((cut, tokens)) => {
            let len = SampleLength {
                prompt: tokens + extra,
                response,
            };
            Fate::Keep(cut, len, true)
        }
        None => Fate::Drop(OVER_MAX_PROMPT_TOKENS),
    }
}

/// The marker left where text was cut.
fn marker(chars: usize) -> String {
    format!("\n\n[... {chars} characters cut by ksmith export to fit max_prompt_tokens ...]\n\n")
}

/// `text` without `cut` characters from its middle, a marker in their place.
fn cut_middle(text: &str, cut: usize) -> String {
    let chars: Vec<char> = text.chars().collect();
    let keep = chars.len().saturating_sub(cut);
    let head = keep / 2;
    let tail = keep - head;
    let mut out: String = chars[..head].iter().collect();
    out.push_str(&marker(chars.len() - keep));
    out.extend(&chars[chars.len() - tail..]);
    out
}

/// The prompt with its longest message cut in the middle so that it fits `cap` tokens, and its
/// new count; `None` when even an emptied message does not make it fit.
fn truncate(
    prompt: &[ChatMessage],
    cap: u64,
    counter: &TokenCounter,
) -> Option<(Vec<ChatMessage>, u64)> {
    let longest = (0..prompt.len()).max_by_key(|&i| counter.text(&prompt[i].content))?;
    let original = &prompt[longest].content;
    let total_chars = original.chars().count();
    let mut out = prompt.to_vec();
    let mut tokens = counter.messages(&out);
    let mut cut = 0usize;
    // Each round cuts the excess at the message's own characters per token, plus 10%; a
    // tokenizer's count is not linear in characters, so a few rounds may be needed.
    for _ in 0..16 {
        if tokens <= cap {
            return Some((out, tokens));
        }
        if cut >= total_chars {
            return None;
        }
        let message_tokens = counter.text(&out[longest].content).max(1);
        let chars_per_token = out[longest].content.chars().count() as f64 / message_tokens as f64;
        let excess = (tokens - cap) as f64;
        let more = ((excess * chars_per_token * 1.1).ceil() as usize).max(16);
        cut = (cut + more).min(total_chars);
        out[longest].content = cut_middle(original, cut);
        tokens = counter.messages(&out);
    }
    (tokens <= cap).then_some((out, tokens))
}

/// Collects the fates of a set's samples into kept rows and counts.
fn collect<T>(
    rows: &[T],
    fates: Vec<Fate>,
    rebuild: impl Fn(&T, Vec<ChatMessage>) -> T,
) -> Capped<T> {
    let mut out = Capped {
        rows: Vec::with_capacity(rows.len()),
        lengths: Vec::with_capacity(rows.len()),
        dropped: BTreeMap::new(),
        truncated: 0,
    };
    for (row, fate) in rows.iter().zip(fates) {
        match fate {
            Fate::Keep(prompt, len, cut) => {
                out.truncated += u64::from(cut);
                out.rows.push(rebuild(row, prompt));
                out.lengths.push(len);
            }
            Fate::Drop(reason) => *out.dropped.entry(reason).or_default() += 1,
        }
    }
    out
}

/// The SFT samples after the caps. The prompt is every message but the last; the response is
/// the last (the assistant's answer).
pub fn cap_sft(rows: &[SftRow], counter: &TokenCounter, cfg: &ExportConfig) -> Capped<SftRow> {
    let fates: Vec<Fate> = rows
        .par_iter()
        .map(|r| {
            let cut = r.messages.len().saturating_sub(1);
            let (prompt, answer) = r.messages.split_at(cut);
            let response = counter.messages(answer);
            judge(prompt, 0, response, counter, cfg)
        })
        .collect();
    collect(rows, fates, |r, prompt| {
        let mut row = r.clone();
        let answer = row.messages.pop();
        row.messages = prompt;
        row.messages.extend(answer);
        row
    })
}

/// The GRPO prompts after the prompt cap (`max_response_tokens` does not apply: a GRPO sample
/// has no answer). Its response length is the current program's, which an answer rewrites.
pub fn cap_grpo(rows: &[GrpoRow], counter: &TokenCounter, cfg: &ExportConfig) -> Capped<GrpoRow> {
    let prompt_only = ExportConfig {
        max_response_tokens: 0,
        ..cfg.clone()
    };
    let fates: Vec<Fate> = rows
        .par_iter()
        .map(|r| {
            judge(
                &r.prompt,
                0,
                counter.text(&r.parent_program),
                counter,
                &prompt_only,
            )
        })
        .collect();
    collect(rows, fates, |r, prompt| GrpoRow {
        prompt,
        ..r.clone()
    })
}

/// The agent-environment starts of `mode` after the prompt cap: each prompt carries `mode`'s
/// instructions (and, in tool mode, is counted with the tools' schema); the response length is
/// the current program's, as for GRPO.
pub fn cap_env(
    rows: &[GrpoRow],
    mode: Mode,
    counter: &TokenCounter,
    cfg: &ExportConfig,
) -> Capped<GrpoRow> {
    let prompt_only = ExportConfig {
        max_response_tokens: 0,
        ..cfg.clone()
    };
    let extra = tools_tokens(mode, counter);
    let fates: Vec<Fate> = rows
        .par_iter()
        .map(|r| {
            judge(
                &with_instructions(&r.prompt, mode),
                extra,
                counter.text(&r.parent_program),
                counter,
                &prompt_only,
            )
        })
        .collect();
    collect(rows, fates, |r, prompt| GrpoRow {
        prompt,
        ..r.clone()
    })
}

/// The chains whose conversation in `mode` fits: a first prompt over `max_prompt_tokens` or a
/// conversation over `max_conversation_tokens` is dropped, never cut.
pub fn cap_chains(
    rows: &[ChainRow],
    mode: Mode,
    counter: &TokenCounter,
    cfg: &ExportConfig,
) -> Capped<ChainRow> {
    let fates: Vec<Fate> = rows
        .par_iter()
        .map(|r| {
            let len = chain_length(r, mode, counter);
            if cfg.max_prompt_tokens > 0 && len.prompt > cfg.max_prompt_tokens {
                Fate::Drop(OVER_MAX_PROMPT_TOKENS)
            } else if cfg.max_conversation_tokens > 0
                && len.prompt + len.response > cfg.max_conversation_tokens
            {
                Fate::Drop(OVER_MAX_CONVERSATION_TOKENS)
            } else {
                Fate::Keep(Vec::new(), len, false)
            }
        })
        .collect();
    collect(rows, fates, |r, _| r.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(prompt: u64, response: u64, over: OverLength) -> ExportConfig {
        ExportConfig {
            max_prompt_tokens: prompt,
            max_response_tokens: response,
            over_length: over,
            ..Default::default()
        }
    }

    fn prompt(user_chars: usize) -> Vec<ChatMessage> {
        vec![
            ChatMessage::new("system", "s".repeat(40)),
            ChatMessage::new("user", format!("HEAD{}TAIL", "u".repeat(user_chars))),
        ]
    }

    #[test]
    fn under_the_caps_nothing_changes() {
        let c = TokenCounter::Approx;
        let p = prompt(100);
        match judge(&p, 0, 10, &c, &cfg(1000, 1000, OverLength::Drop)) {
            Fate::Keep(kept, len, cut) => {
                assert_eq!(kept, p);
                assert_eq!(len.prompt, c.messages(&p));
                assert!(!cut);
            }
            Fate::Drop(r) => panic!("dropped: {r}"),
        }
    }

    #[test]
    fn over_long_answers_are_dropped_whatever_the_policy() {
        let c = TokenCounter::Approx;
        for over in [OverLength::Drop, OverLength::Truncate] {
            assert!(matches!(
                judge(&prompt(10), 0, 501, &c, &cfg(0, 500, over)),
                Fate::Drop(OVER_MAX_RESPONSE_TOKENS)
            ));
        }
    }

    #[test]
    fn over_long_prompts_are_dropped_or_cut_in_the_middle_to_fit() {
        let c = TokenCounter::Approx;
        let p = prompt(4000);
        assert!(matches!(
            judge(&p, 0, 1, &c, &cfg(300, 0, OverLength::Drop)),
            Fate::Drop(OVER_MAX_PROMPT_TOKENS)
        ));
        match judge(&p, 0, 1, &c, &cfg(300, 0, OverLength::Truncate)) {
            Fate::Keep(kept, len, cut) => {
                assert!(cut);
                assert!(len.prompt <= 300, "{}", len.prompt);
                assert_eq!(len.prompt, c.messages(&kept));
                assert!(len.prompt > 225, "cut no more than needed: {}", len.prompt);
                assert_eq!(kept[0], p[0], "the shorter message is untouched");
                let user = &kept[1].content;
                assert!(user.starts_with("HEAD") && user.ends_with("TAIL"), "{user}");
                assert!(user.contains("characters cut by ksmith export"), "{user}");
            }
            Fate::Drop(r) => panic!("dropped: {r}"),
        }
        // A cap that not even an emptied message can meet: dropped.
        let tiny = vec![
            ChatMessage::new("system", "s".repeat(400)),
            ChatMessage::new("user", "u".repeat(40)),
        ];
        assert!(matches!(
            judge(&tiny, 0, 1, &c, &cfg(20, 0, OverLength::Truncate)),
            Fate::Drop(OVER_MAX_PROMPT_TOKENS)
        ));
    }

    #[test]
    fn the_template_share_counts_against_the_prompt_cap() {
        let c = TokenCounter::Approx;
        let p = prompt(1000);
        let plain = c.messages(&p);
        let cap = cfg(plain + 10, 0, OverLength::Truncate);
        // Without extra tokens the prompt fits; with 50 it is cut to leave them room.
        assert!(matches!(judge(&p, 0, 1, &c, &cap), Fate::Keep(_, _, false)));
        match judge(&p, 50, 1, &c, &cap) {
            Fate::Keep(kept, len, true) => {
                assert_eq!(len.prompt, c.messages(&kept) + 50);
                assert!(len.prompt <= plain + 10, "{}", len.prompt);
            }
            _ => panic!("not cut"),
        }
        // Extra tokens alone over the cap: dropped.
        assert!(matches!(
            judge(&p, plain + 10, 1, &c, &cap),
            Fate::Drop(OVER_MAX_PROMPT_TOKENS)
        ));
    }

    #[test]
    fn cutting_keeps_character_boundaries() {
        let text = "é".repeat(10) + &"ü".repeat(10);
        let cut = cut_middle(&text, 6);
        assert!(cut.starts_with(&"é".repeat(7)) && cut.ends_with(&"ü".repeat(7)));
        assert!(cut.contains("6 characters cut"));
    }
}
