//! Turning a teacher's answer into a candidate program.
//!
//! The answer is either SEARCH/REPLACE blocks (`<<<<<<< SEARCH` / `=======` /
//! `>>>>>>> REPLACE`) or a fenced code block with the new editable block (or the whole program
//! with its markers). `<think>` sections are not part of the answer. Only the editable block may
//! change. SEARCH texts are matched exactly (trailing whitespace ignored), then line by line with
//! whitespace normalized (the replacement is re-indented by the indentation difference, counted
//! in characters). Every failure has an outcome and a message that goes into the next prompt:
//! nothing is skipped silently, and an edit applies completely or not at all.
//!
//! The trainers' reward reads answers with a Python copy of these rules (`python/ksmith/answer.py`);
//! both run the cases of `tests/data/answer_cases.json` with identical expected programs.

use ksmith_core::tables::{EditFormat, EditOutcome};

use crate::block::{Block, ENTRY_POINT, has_marker, split_block};

/// What became of an answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EditResult {
    /// The recognised format, when one was.
    pub format: Option<EditFormat>,
    /// The outcome (`Applied` when `program` is set).
    pub outcome: EditOutcome,
    /// The candidate program.
    pub program: Option<String>,
    /// Why the edit failed, phrased for the teacher.
    pub error: Option<String>,
}

impl EditResult {
    fn failed(format: Option<EditFormat>, outcome: EditOutcome, error: String) -> Self {
        EditResult {
            format,
            outcome,
            program: None,
            error: Some(error),
        }
    }
}

/// Applies `answer` to `parent`. `finish_reason` is the teacher's (`length` means truncated);
/// programs longer than `max_chars` bytes are refused.
pub fn apply_answer(
    parent: &str,
    answer: &str,
    finish_reason: Option<&str>,
    max_chars: usize,
) -> EditResult {
    if finish_reason == Some("length") {
        return EditResult::failed(
            None,
            EditOutcome::Truncated,
            "the answer was cut off at the token limit before it ended; give a shorter answer \
             (SEARCH/REPLACE blocks instead of a full rewrite)"
                .into(),
        );
    }
    let block = match split_block(parent) {
        Ok(b) => b,
        Err(e) => {
            return EditResult::failed(
                None,
                EditOutcome::Unparseable,
                format!("the parent program has no editable block: {e}"),
            );
        }
    };
    let answer = match strip_think(answer) {
        Ok(a) => a,
        Err(e) => return EditResult::failed(None, EditOutcome::Unparseable, e),
    };
    let answer = answer.as_str();
    let (format, body) = if answer.contains("<<<<<<< SEARCH") || answer.contains(">>>>>>> REPLACE")
    {
        let edits = match parse_diff(answer) {
            Ok(e) => e,
            Err(e) => {
                return EditResult::failed(Some(EditFormat::Diff), EditOutcome::Unparseable, e);
            }
        };
        match apply_diff(&block, &edits) {
            Ok(body) => (EditFormat::Diff, body),
            Err((outcome, e)) => return EditResult::failed(Some(EditFormat::Diff), outcome, e),
        }
    } else {
        match rewrite_body(&block, answer) {
            Ok(body) => (EditFormat::FullRewrite, body),
            Err((outcome, e)) => {
                let format =
                    (outcome != EditOutcome::Unparseable).then_some(EditFormat::FullRewrite);
                return EditResult::failed(format, outcome, e);
            }
        }
    };
    let program = block.with_body(&body);
    if program == parent {
        return EditResult::failed(
            Some(format),
            EditOutcome::NoOp,
            "the edit leaves the program unchanged; propose an actual change".into(),
        );
    }
    if normalized_lines(&program) == normalized_lines(parent) {
        return EditResult::failed(
            Some(format),
            EditOutcome::NoOp,
            "the edit only changes whitespace; propose an actual change".into(),
        );
    }
    if program.len() > max_chars {
        return EditResult::failed(
            Some(format),
            EditOutcome::TooLong,
            format!(
                "the program would be {} bytes, above the limit of {max_chars}",
                program.len()
            ),
        );
    }
    EditResult {
        format: Some(format),
        outcome: EditOutcome::Applied,
        program: Some(program),
        error: None,
    }
}

/// `answer` without its `<think>` sections (and without what comes before a `</think>` that has
/// no opening tag: a serving engine that put the opening tag in the prompt); an error for a
/// section that is never closed.
pub fn strip_think(answer: &str) -> Result<String, String> {
    const OPEN: &str = "<think>";
    const CLOSE: &str = "</think>";
    let mut out = String::with_capacity(answer.len());
    let mut rest = answer;
    while let Some(i) = rest.find(OPEN) {
        out.push_str(&rest[..i]);
        rest = &rest[i + OPEN.len()..];
        let Some(j) = rest.find(CLOSE) else {
            return Err("the answer ends inside an unfinished <think> section".into());
        };
        rest = &rest[j + CLOSE.len()..];
    }
    out.push_str(rest);
    Ok(match out.rfind(CLOSE) {
        Some(k) => out[k + CLOSE.len()..].to_string(),
        None => out,
    })
}

/// One SEARCH/REPLACE pair.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchReplace {
    /// Lines to find.
    pub search: Vec<String>,
    /// Lines to put instead.
    pub replace: Vec<String>,
}

/// Reads every SEARCH/REPLACE block of an answer.
pub fn parse_diff(answer: &str) -> Result<Vec<SearchReplace>, String> {
    enum State {
        Outside,
        Search(Vec<String>),
        Replace(Vec<String>, Vec<String>),
    }
    let mut state = State::Outside;
    let mut out = Vec::new();
    for line in answer.lines() {
        let t = line.trim();
        state = match state {
            State::Outside => {
                if t == "<<<<<<< SEARCH" {
                    State::Search(Vec::new())
                } else if t == "=======" || t == ">>>>>>> REPLACE" {
                    return Err(format!(
                        "SEARCH/REPLACE block #{}: `{t}` without a preceding `<<<<<<< SEARCH`",
                        out.len() + 1
                    ));
                } else {
                    State::Outside
                }
            }
            State::Search(mut s) => {
                if t == "=======" {
                    State::Replace(s, Vec::new())
                } else if t == "<<<<<<< SEARCH" || t == ">>>>>>> REPLACE" {
                    return Err(format!(
                        "SEARCH/REPLACE block #{}: `{t}` before the `=======` line",
                        out.len() + 1
                    ));
                } else {
                    s.push(line.to_string());
                    State::Search(s)
                }
            }
            State::Replace(s, mut r) => {
                if t == ">>>>>>> REPLACE" {
                    out.push(SearchReplace {
                        search: trim_blank(s),
                        replace: trim_blank(r),
                    });
                    State::Outside
                } else if t == "<<<<<<< SEARCH" || t == "=======" {
                    return Err(format!(
                        "SEARCH/REPLACE block #{}: `{t}` before the `>>>>>>> REPLACE` line",
                        out.len() + 1
                    ));
                } else {
                    r.push(line.to_string());
                    State::Replace(s, r)
                }
            }
        };
    }
    if !matches!(state, State::Outside) {
        return Err(format!(
            "SEARCH/REPLACE block #{} is not closed by `>>>>>>> REPLACE`",
            out.len() + 1
        ));
    }
    for (i, e) in out.iter().enumerate() {
        if e.search.is_empty() {
            return Err(format!(
                "SEARCH/REPLACE block #{} has an empty SEARCH part",
                i + 1
            ));
        }
    }
    Ok(out)
}

fn trim_blank(mut lines: Vec<String>) -> Vec<String> {
    while lines.last().is_some_and(|l| l.trim().is_empty()) {
        lines.pop();
    }
    let lead = lines.iter().take_while(|l| l.trim().is_empty()).count();
    lines.drain(..lead);
    lines
}

fn norm(line: &str) -> String {
    line.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn normalized_lines(text: &str) -> Vec<String> {
    text.lines().map(norm).filter(|l| !l.is_empty()).collect()
}

/// The indentation of `line`, in characters (a tab or a no-break space counts one).
fn indent(line: &str) -> usize {
    line.chars().take_while(|c| c.is_whitespace()).count()
}

/// Where `search` occurs in `lines`: exact match first (trailing whitespace ignored), then a
/// whitespace-normalized one. Returns the start line and the indentation shift to apply.
fn find(lines: &[String], search: &[String]) -> Option<(usize, isize)> {
    let n = search.len();
    if n == 0 || n > lines.len() {
        return None;
    }
    let exact = (0..=lines.len() - n).find(|&i| {
        lines[i..i + n]
            .iter()
            .zip(search)
            .all(|(a, b)| a.trim_end() == b.trim_end())
    });
    if let Some(i) = exact {
        return Some((i, 0));
    }
    let wanted: Vec<String> = search.iter().map(|l| norm(l)).collect();
    let i = (0..=lines.len() - n).find(|&i| {
        lines[i..i + n]
            .iter()
            .zip(&wanted)
            .all(|(a, b)| norm(a) == *b)
    })?;
    let k = search
        .iter()
        .position(|l| !l.trim().is_empty())
        .unwrap_or(0);
    Some((
        i,
        indent(&lines[i + k]) as isize - indent(&search[k]) as isize,
    ))
}

fn reindent(line: &str, shift: isize) -> String {
    if shift == 0 || line.trim().is_empty() {
        return line.to_string();
    }
    if shift > 0 {
        format!("{}{line}", " ".repeat(shift as usize))
    } else {
        let lead = indent(line).min(shift.unsigned_abs());
        line.chars().skip(lead).collect()
    }
}

fn to_lines(text: &str) -> Vec<String> {
    text.lines().map(str::to_string).collect()
}

fn bigrams(s: &str) -> Vec<(char, char)> {
    let c: Vec<char> = norm(s).chars().collect();
    c.windows(2).map(|w| (w[0], w[1])).collect()
}

/// Dice similarity of character bigrams, for "closest line" hints.
fn similarity(a: &str, b: &str) -> f64 {
    let (x, mut y) = (bigrams(a), bigrams(b));
    if x.is_empty() || y.is_empty() {
        return 0.0;
    }
    let total = x.len() + y.len();
    let mut common = 0;
    for g in &x {
        if let Some(p) = y.iter().position(|h| h == g) {
            y.swap_remove(p);
            common += 1;
        }
    }
    2.0 * common as f64 / total as f64
}

fn closest_hint(lines: &[String], search: &[String]) -> String {
    let Some(first) = search.iter().find(|l| !l.trim().is_empty()) else {
        return String::new();
    };
    let best = lines
        .iter()
        .enumerate()
        .map(|(i, l)| (similarity(first, l), i))
        .max_by(|a, b| a.0.total_cmp(&b.0));
    match best {
        Some((score, i)) if score > 0.3 => format!(
            " Its first line `{}` is closest to line {} of the block: `{}`.",
            first.trim(),
            i + 1,
            lines[i].trim()
        ),
        _ => format!(
            " No line of the block resembles its first line `{}`.",
            first.trim()
        ),
    }
}

fn apply_diff(block: &Block<'_>, edits: &[SearchReplace]) -> Result<String, (EditOutcome, String)> {
    let mut lines = to_lines(block.body);
    let outside: Vec<String> = to_lines(block.prefix)
        .into_iter()
        .chain(to_lines(block.suffix))
        .collect();
    for (k, e) in edits.iter().enumerate() {
        if e.search.iter().chain(&e.replace).any(|l| has_marker(l)) {
            return Err((
                EditOutcome::OutsideBlock,
                format!(
                    "SEARCH/REPLACE block #{} touches an EVOLVE-BLOCK marker line; only the code between the markers may change",
                    k + 1
                ),
            ));
        }
        match find(&lines, &e.search) {
            Some((at, shift)) => {
                let replacement: Vec<String> =
                    e.replace.iter().map(|l| reindent(l, shift)).collect();
                lines.splice(at..at + e.search.len(), replacement);
            }
            None if find(&outside, &e.search).is_some() => {
                return Err((
                    EditOutcome::OutsideBlock,
                    format!(
                        "SEARCH/REPLACE block #{} matches code outside the EVOLVE block; only the code between `# EVOLVE-BLOCK-START` and `# EVOLVE-BLOCK-END` may change (put new imports inside the block)",
                        k + 1
                    ),
                ));
            }
            None => {
                return Err((
                    EditOutcome::SearchNotFound,
                    format!(
                        "SEARCH/REPLACE block #{} was not found in the EVOLVE block (no edit was applied).{} Copy SEARCH lines exactly from the current program.",
                        k + 1,
                        closest_hint(&lines, &e.search)
                    ),
                ));
            }
        }
    }
    let mut body = lines.join("\n");
    if !body.is_empty() {
        body.push('\n');
    }
    Ok(body)
}

/// The fenced code blocks of an answer: (language tag, content, closed).
fn fenced_blocks(answer: &str) -> Vec<(String, String, bool)> {
    let mut out = Vec::new();
    let mut current: Option<(String, Vec<&str>)> = None;
    for line in answer.lines() {
        let t = line.trim_start();
        match current.take() {
            None => {
                if let Some(tag) = t.strip_prefix("```") {
                    current = Some((tag.trim().to_ascii_lowercase(), Vec::new()));
                }
            }
            Some((tag, mut body)) => {
                if t.starts_with("```") {
                    let mut text = body.join("\n");
                    text.push('\n');
                    out.push((tag, text, true));
                } else {
                    body.push(line);
                    current = Some((tag, body));
                }
            }
        }
    }
    if let Some((tag, body)) = current {
        out.push((tag, body.join("\n"), false));
    }
    out
}

fn rewrite_body(block: &Block<'_>, answer: &str) -> Result<String, (EditOutcome, String)> {
    let blocks = fenced_blocks(answer);
    let closed: Vec<&(String, String, bool)> = blocks
        .iter()
        .filter(|b| {
            b.2 && !b.1.trim().is_empty()
                && matches!(b.0.as_str(), "python" | "py" | "python3" | "")
        })
        .collect();
    let chosen = closed
        .iter()
        .find(|b| b.1.contains(ENTRY_POINT) || has_marker(&b.1))
        .or_else(|| closed.iter().max_by_key(|b| b.1.len()));
    let Some(chosen) = chosen else {
        let why = if blocks.iter().any(|b| !b.2) {
            "the answer has a code fence that is never closed"
        } else {
            "the answer has neither a fenced ```python code block nor SEARCH/REPLACE blocks"
        };
        return Err((EditOutcome::Unparseable, why.into()));
    };
    let code = &chosen.1;
    if !has_marker(code) {
        return Ok(code.clone());
    }
    let inner = split_block(code).map_err(|e| {
        (
            EditOutcome::Unparseable,
            format!("the code in the answer has broken EVOLVE-BLOCK markers: {e}"),
        )
    })?;
    for (part, mine, theirs) in [
        ("before", block.prefix, inner.prefix),
        ("after", block.suffix, inner.suffix),
    ] {
        let (a, b) = (normalized_lines(mine), normalized_lines(theirs));
        if a != b {
            let first = a
                .iter()
                .zip(&b)
                .find(|(x, y)| x != y)
                .map(|(x, y)| format!("`{x}` became `{y}`"))
                .unwrap_or_else(|| "lines were added or removed".into());
            return Err((
                EditOutcome::OutsideBlock,
                format!(
                    "the rewrite changes the code {part} the EVOLVE block ({first}); only the code between the markers may change (put new imports inside the block)"
                ),
            ));
        }
    }
    Ok(inner.body.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    /// A text of the case file: a string, or lines joined with a newline.
    fn text(v: &Value) -> String {
        match v {
            Value::String(s) => s.clone(),
            Value::Array(lines) => lines
                .iter()
                .map(|l| l.as_str().expect("a line is a string"))
                .collect::<Vec<_>>()
                .join("\n"),
            other => panic!("not a text: {other}"),
        }
    }

    /// The cases the reward's reader (`python/ksmith/answer.py`) runs too, with the same
    /// expected outcome, format and program.
    #[test]
    fn the_shared_cases() {
        let file: Value =
            serde_json::from_str(include_str!("../tests/data/answer_cases.json")).unwrap();
        let cases = file["cases"].as_array().unwrap();
        assert!(cases.len() >= 50);
        for c in cases {
            let name = c["name"].as_str().unwrap();
            let parent = text(&file["parents"][c["parent"].as_str().unwrap()]);
            let max_chars = c
                .get("max_chars")
                .map_or(usize::MAX, |m| m.as_u64().unwrap() as usize);
            let r = apply_answer(
                &parent,
                &text(&c["answer"]),
                c.get("finish_reason").and_then(Value::as_str),
                max_chars,
            );
            let outcome = EditOutcome::parse(c["outcome"].as_str().unwrap()).unwrap();
            let format = c["format"].as_str().map(|f| EditFormat::parse(f).unwrap());
            assert_eq!(
                (r.outcome, r.format),
                (outcome, format),
                "{name}: {:?}",
                r.error
            );
            let program = (!c["program"].is_null()).then(|| text(&c["program"]));
            assert_eq!(r.program, program, "{name}");
            match (&r.error, c.get("error").and_then(Value::as_str)) {
                (None, _) => assert_eq!(outcome, EditOutcome::Applied, "{name}"),
                (Some(e), needle) => {
                    assert!(e.contains(needle.unwrap_or_default()), "{name}: {e}")
                }
            }
        }
    }
}
