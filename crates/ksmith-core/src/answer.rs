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
//! This is the one reader of answers on the Rust side: the rollout applies answers with
//! [`apply_answer`], export finds an answer's code with [`code_spans`] (to show its prose) and
//! select splits programs with [`crate::evolve_block`]. The trainers' reward reads answers with a Python copy of these rules
//! (`python/ksmith/answer.py`); both run the cases of `tests/data/answer_cases.json` with
//! identical expected programs.

use std::ops::Range;

use crate::evolve_block::{Block, ENTRY_POINT, has_marker, split_block};
use crate::tables::{EditFormat, EditOutcome};

/// The line opening a SEARCH/REPLACE block.
pub const SEARCH: &str = "<<<<<<< SEARCH";
/// The line between a block's SEARCH and REPLACE parts.
pub const DIVIDER: &str = "=======";
/// The line closing a SEARCH/REPLACE block.
pub const REPLACE: &str = ">>>>>>> REPLACE";
/// What opens and closes a fenced code block (at the start of a line, after indentation).
pub const FENCE: &str = "```";

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
    let (format, body) = if is_diff(answer) {
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

/// Whether an answer is read as SEARCH/REPLACE blocks: it has an opening or a closing marker
/// (otherwise it is read as a fenced rewrite).
pub fn is_diff(answer: &str) -> bool {
    answer.contains(SEARCH) || answer.contains(REPLACE)
}

/// One SEARCH/REPLACE pair.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchReplace {
    /// Lines to find.
    pub search: Vec<String>,
    /// Lines to put instead.
    pub replace: Vec<String>,
    /// The answer's lines (0-based) it stands on, its marker lines included.
    pub lines: Range<usize>,
}

/// A marker line of a SEARCH/REPLACE block (the whole line, surrounding whitespace aside).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Marker {
    Search,
    Divider,
    Replace,
}

impl Marker {
    fn of(line: &str) -> Option<Marker> {
        match line.trim() {
            SEARCH => Some(Marker::Search),
            DIVIDER => Some(Marker::Divider),
            REPLACE => Some(Marker::Replace),
            _ => None,
        }
    }
}

/// Where a scan of SEARCH/REPLACE blocks stands.
enum DiffState {
    Outside,
    /// In the SEARCH part of the block opened on the line.
    Search(usize, Vec<String>),
    /// In the REPLACE part of the block opened on the line.
    Replace(usize, Vec<String>, Vec<String>),
}

/// The SEARCH/REPLACE blocks of an answer as one pass reads them.
struct DiffScan {
    /// The closed blocks.
    blocks: Vec<SearchReplace>,
    /// The first misplaced marker or unclosed block, phrased for the teacher.
    error: Option<String>,
    /// The lines of stray markers and of blocks that were opened but not closed properly.
    broken: Vec<Range<usize>>,
}

impl DiffScan {
    /// Keeps the first error, numbered after the blocks closed so far.
    fn fail(&mut self, what: &str) {
        if self.error.is_none() {
            let n = self.blocks.len() + 1;
            self.error = Some(format!("SEARCH/REPLACE block #{n}{what}"));
        }
    }

    /// A misplaced marker `line` (`m`, on line `at`) inside the block opened on line `start`:
    /// the block is broken up to the marker, and a SEARCH marker opens the next block.
    fn misplaced(&mut self, start: usize, at: usize, m: Marker, what: &str) -> DiffState {
        self.fail(what);
        if m == Marker::Search {
            self.broken.push(start..at);
            DiffState::Search(at, Vec::new())
        } else {
            self.broken.push(start..at + 1);
            DiffState::Outside
        }
    }
}

/// Reads the SEARCH/REPLACE blocks of `answer`. After a misplaced marker it goes on, so that
/// [`code_spans`] still finds the code after it; only the first error is kept, as
/// [`parse_diff`] reports it.
fn scan_diff(answer: &str) -> DiffScan {
    let mut scan = DiffScan {
        blocks: Vec::new(),
        error: None,
        broken: Vec::new(),
    };
    let mut state = DiffState::Outside;
    let mut count = 0;
    for (i, line) in answer.lines().enumerate() {
        count = i + 1;
        let t = line.trim();
        state = match (state, Marker::of(line)) {
            (DiffState::Outside, Some(Marker::Search)) => DiffState::Search(i, Vec::new()),
            (DiffState::Outside, Some(_)) => {
                scan.fail(&format!(": `{t}` without a preceding `{SEARCH}`"));
                scan.broken.push(i..i + 1);
                DiffState::Outside
            }
            (DiffState::Outside, None) => DiffState::Outside,
            (DiffState::Search(start, s), Some(Marker::Divider)) => {
                DiffState::Replace(start, s, Vec::new())
            }
            (DiffState::Search(start, _), Some(m)) => {
                scan.misplaced(start, i, m, &format!(": `{t}` before the `{DIVIDER}` line"))
            }
            (DiffState::Search(start, mut s), None) => {
                s.push(line.to_string());
                DiffState::Search(start, s)
            }
            (DiffState::Replace(start, s, r), Some(Marker::Replace)) => {
                scan.blocks.push(SearchReplace {
                    search: trim_blank(s),
                    replace: trim_blank(r),
                    lines: start..i + 1,
                });
                DiffState::Outside
            }
            (DiffState::Replace(start, _, _), Some(m)) => {
                scan.misplaced(start, i, m, &format!(": `{t}` before the `{REPLACE}` line"))
            }
            (DiffState::Replace(start, s, mut r), None) => {
                r.push(line.to_string());
                DiffState::Replace(start, s, r)
            }
        };
    }
    if let DiffState::Search(start, _) | DiffState::Replace(start, _, _) = state {
        scan.fail(&format!(" is not closed by `{REPLACE}`"));
        scan.broken.push(start..count);
    }
    scan
}

/// Reads every SEARCH/REPLACE block of an answer; the first misplaced marker, unclosed block
/// or empty SEARCH part is an error.
pub fn parse_diff(answer: &str) -> Result<Vec<SearchReplace>, String> {
    let scan = scan_diff(answer);
    if let Some(e) = scan.error {
        return Err(e);
    }
    for (i, e) in scan.blocks.iter().enumerate() {
        if e.search.is_empty() {
            return Err(format!(
                "SEARCH/REPLACE block #{} has an empty SEARCH part",
                i + 1
            ));
        }
    }
    Ok(scan.blocks)
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

/// A fenced code block of an answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fenced {
    /// The language tag, lower-cased (empty when none).
    pub tag: String,
    /// The code between the fences (ending with a newline when the block is closed).
    pub code: String,
    /// Whether a closing fence ends it.
    pub closed: bool,
    /// The answer's lines (0-based) it stands on, its fence lines included.
    pub lines: Range<usize>,
}

/// The fenced code blocks of an answer, in order.
pub fn fenced_blocks(answer: &str) -> Vec<Fenced> {
    let mut out = Vec::new();
    let mut current: Option<(usize, String, Vec<&str>)> = None;
    let mut count = 0;
    for (i, line) in answer.lines().enumerate() {
        count = i + 1;
        let t = line.trim_start();
        match current.take() {
            None => {
                if let Some(tag) = t.strip_prefix(FENCE) {
                    current = Some((i, tag.trim().to_ascii_lowercase(), Vec::new()));
                }
            }
            Some((start, tag, mut body)) => {
                if t.starts_with(FENCE) {
                    let mut code = body.join("\n");
                    code.push('\n');
                    out.push(Fenced {
                        tag,
                        code,
                        closed: true,
                        lines: start..i + 1,
                    });
                } else {
                    body.push(line);
                    current = Some((start, tag, body));
                }
            }
        }
    }
    if let Some((start, tag, body)) = current {
        out.push(Fenced {
            tag,
            code: body.join("\n"),
            closed: false,
            lines: start..count,
        });
    }
    out
}

/// The lines (0-based ranges, in order, not overlapping) that the reader takes as code rather
/// than words: every fenced block with its fences and, in an answer read as SEARCH/REPLACE
/// blocks ([`is_diff`]), every block with its markers (a broken one up to where it breaks, a
/// stray marker line). What is left is the answer's prose.
pub fn code_spans(answer: &str) -> Vec<Range<usize>> {
    let mut spans: Vec<Range<usize>> = fenced_blocks(answer).into_iter().map(|f| f.lines).collect();
    if is_diff(answer) {
        let scan = scan_diff(answer);
        spans.extend(scan.blocks.into_iter().map(|b| b.lines));
        spans.extend(scan.broken);
    }
    spans.sort_by_key(|r| (r.start, r.end));
    let mut merged: Vec<Range<usize>> = Vec::with_capacity(spans.len());
    for r in spans {
        match merged.last_mut() {
            Some(last) if r.start <= last.end => last.end = last.end.max(r.end),
            _ => merged.push(r),
        }
    }
    merged
}

fn rewrite_body(block: &Block<'_>, answer: &str) -> Result<String, (EditOutcome, String)> {
    let blocks = fenced_blocks(answer);
    let closed: Vec<&Fenced> = blocks
        .iter()
        .filter(|b| {
            b.closed
                && !b.code.trim().is_empty()
                && matches!(b.tag.as_str(), "python" | "py" | "python3" | "")
        })
        .collect();
    let chosen = closed
        .iter()
        .find(|b| b.code.contains(ENTRY_POINT) || has_marker(&b.code))
        .or_else(|| closed.iter().max_by_key(|b| b.code.len()));
    let Some(chosen) = chosen else {
        let why = if blocks.iter().any(|b| !b.closed) {
            "the answer has a code fence that is never closed"
        } else {
            "the answer has neither a fenced ```python code block nor SEARCH/REPLACE blocks"
        };
        return Err((EditOutcome::Unparseable, why.into()));
    };
    let code = &chosen.code;
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

/// The shared answer cases, for the tests.
#[cfg(test)]
#[path = "../tests/support/answer_cases.rs"]
mod answer_cases;

#[cfg(test)]
mod tests {
    use super::*;

    use super::answer_cases;

    /// The cases the reward's reader (`python/ksmith/answer.py`) runs too, with the same
    /// expected outcome, format and program.
    #[test]
    fn the_shared_cases() {
        let cases = answer_cases::cases();
        assert!(cases.len() >= 50);
        for c in cases {
            let name = &c.name;
            let r = apply_answer(
                &c.parent,
                &c.answer,
                c.finish_reason.as_deref(),
                c.max_chars,
            );
            let outcome = EditOutcome::parse(&c.outcome).unwrap();
            let format = c.format.as_deref().map(|f| EditFormat::parse(f).unwrap());
            assert_eq!(
                (r.outcome, r.format),
                (outcome, format),
                "{name}: {:?}",
                r.error
            );
            assert_eq!(r.program, c.program, "{name}");
            match (&r.error, c.error.as_deref()) {
                (None, _) => assert_eq!(outcome, EditOutcome::Applied, "{name}"),
                (Some(e), needle) => {
                    assert!(e.contains(needle.unwrap_or_default()), "{name}: {e}")
                }
            }
        }
    }

    /// Lines of `answer` outside its code spans.
    fn words(answer: &str) -> Vec<&str> {
        let spans = code_spans(answer);
        answer
            .lines()
            .enumerate()
            .filter(|(i, _)| !spans.iter().any(|r| r.contains(i)))
            .map(|(_, l)| l)
            .collect()
    }

    /// Over the shared cases: the code spans hold every fenced block and every SEARCH/REPLACE
    /// block the reader reads, what is left holds no marker or fence line, and no line an
    /// applied answer adds to the program is left as words.
    #[test]
    fn code_spans_cover_what_the_reader_reads_and_leave_the_words() {
        for c in answer_cases::cases() {
            let (name, answer) = (&c.name, &c.answer);
            let spans = code_spans(answer);
            let covered =
                |r: &Range<usize>| spans.iter().any(|s| s.start <= r.start && r.end <= s.end);
            for f in fenced_blocks(answer) {
                assert!(
                    covered(&f.lines),
                    "{name}: fence {:?} in {spans:?}",
                    f.lines
                );
            }
            if let (true, Ok(blocks)) = (is_diff(answer), parse_diff(answer)) {
                for b in blocks {
                    assert!(
                        covered(&b.lines),
                        "{name}: block {:?} in {spans:?}",
                        b.lines
                    );
                }
            }
            for w in words(answer) {
                assert!(!w.trim_start().starts_with(FENCE), "{name}: `{w}`");
                assert!(!is_diff(answer) || Marker::of(w).is_none(), "{name}: `{w}`");
            }
            if let Some(program) = &c.program {
                let old: Vec<&str> = c.parent.lines().map(str::trim).collect();
                for line in program.lines().map(str::trim) {
                    if line.is_empty() || old.contains(&line) {
                        continue;
                    }
                    assert!(
                        !words(answer).iter().any(|w| w.trim() == line),
                        "{name}: `{line}` is code the answer wrote, left as words"
                    );
                }
            }
        }
    }

    #[test]
    fn code_spans_of_broken_and_mixed_answers() {
        // Not a SEARCH/REPLACE answer: a Markdown heading underline is words.
        assert_eq!(words("Plan\n=======\nfuse"), ["Plan", "=======", "fuse"]);
        // Fenced SEARCH/REPLACE blocks and a <think> section's words.
        let answer = "<think>try it</think>\nFuse.\n```python\n<<<<<<< SEARCH\na\n=======\nb\n\
                      >>>>>>> REPLACE\n```\nDone.";
        assert_eq!(words(answer), ["<think>try it</think>", "Fuse.", "Done."]);
        // A block broken by a second SEARCH line, then a good one; an unclosed last one.
        let answer = "A\n<<<<<<< SEARCH\nx\n<<<<<<< SEARCH\ny\n=======\nz\n>>>>>>> REPLACE\nB\n\
                      <<<<<<< SEARCH\nw";
        assert_eq!(code_spans(answer), [1..8, 9..11]);
        assert_eq!(words(answer), ["A", "B"]);
        assert!(
            parse_diff(answer)
                .unwrap_err()
                .contains("block #1: `<<<<<<< SEARCH` before")
        );
        // A stray closing marker is code; an unclosed fence runs to the end.
        assert_eq!(words("A\n>>>>>>> REPLACE\nB\n```\nC"), ["A", "B"]);
    }
}
