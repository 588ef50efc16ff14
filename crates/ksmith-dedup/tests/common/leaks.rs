//! Leaks of a KernelBench-format problem into a crawled file, in the eight ways a benchmark
//! problem ends up in public code: verbatim, renamed and reformatted, variables renamed,
//! constants changed, embedded in a larger file, class renamed, wrapped, class only. Used by
//! the decontamination tests (on problems written for them) and by the `plant_leaks` example
//! (on a real benchmark checkout, for measurements). Everything here is written for this
//! project; edits are made on tokens, so strings and comments are never rewritten by accident.

#![allow(dead_code)]

use std::collections::HashMap;

use ksmith_embed::Program;
use ksmith_embed::lexer::{Token, TokenKind, tokenize};
use ksmith_embed::program::{enclosing_bracket, opens_parameters};
use ksmith_embed::slice::{Slice, TopKind, top_level};

/// How a problem leaked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Leak {
    /// The file as it is.
    Verbatim,
    /// The class renamed and the file reformatted (indentation, spacing, comments).
    RenamedReformatted,
    /// Parameters, local variables and attributes of the class renamed.
    VariablesRenamed,
    /// The module-level constants (sizes, factors) changed.
    ConstantsChanged,
    /// Pasted between other modules of a larger file.
    Embedded,
    /// The class renamed.
    ClassRenamed,
    /// The class used by a wrapper module (the leak is the wrapper).
    Wrapped,
    /// Only the imports and the class with its helpers: no constants, no input functions.
    ClassOnly,
}

/// Every way, in a fixed order.
pub(crate) const ALL: [Leak; 8] = [
    Leak::Verbatim,
    Leak::RenamedReformatted,
    Leak::VariablesRenamed,
    Leak::ConstantsChanged,
    Leak::Embedded,
    Leak::ClassRenamed,
    Leak::Wrapped,
    Leak::ClassOnly,
];

impl Leak {
    /// A short name (folder names, tables).
    pub(crate) fn name(self) -> &'static str {
        match self {
            Leak::Verbatim => "verbatim",
            Leak::RenamedReformatted => "renamed_reformatted",
            Leak::VariablesRenamed => "variables_renamed",
            Leak::ConstantsChanged => "constants_changed",
            Leak::Embedded => "embedded",
            Leak::ClassRenamed => "class_renamed",
            Leak::Wrapped => "wrapped",
            Leak::ClassOnly => "class_only",
        }
    }
}

/// A leaked file and the class that carries the leak.
#[derive(Debug, Clone)]
pub(crate) struct Leaked {
    /// The file's text.
    pub text: String,
    /// The class whose module is the leak.
    pub class: String,
}

const CLASS_NAMES: &[&str] = &[
    "FusedBlock",
    "KernelOp",
    "CustomLayer",
    "Net",
    "MyModule",
    "Head",
    "Mixer",
    "Unit",
];
const WORDS: &[&str] = &[
    "inp", "feat", "val", "tmp", "acc", "hid", "res", "buf", "z", "w", "dim", "n", "layer", "op",
    "blk", "fac", "k", "q",
];

/// Leaks `problem` (a KernelBench-format program with `class Model`) in the way `how`;
/// `host` is unrelated module code for [`Leak::Embedded`] (classes only, no input functions).
pub(crate) fn leak(problem: &str, how: Leak, host: &[String], seed: usize) -> Leaked {
    let new_name = CLASS_NAMES[seed % CLASS_NAMES.len()];
    match how {
        Leak::Verbatim => same(problem),
        Leak::RenamedReformatted => Leaked {
            text: reformat(&rename_name(problem, "Model", new_name)),
            class: new_name.to_string(),
        },
        Leak::VariablesRenamed => same(&rename_variables(problem, seed)),
        Leak::ConstantsChanged => same(&change_constants(problem)),
        Leak::Embedded => {
            let (before, after) = host.split_at(host.len() / 2);
            let mut text = String::from(
                "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n\n",
            );
            for h in before {
                text.push_str(h);
                text.push_str("\n\n");
            }
            text.push_str(problem);
            text.push_str("\n\n");
            for h in after {
                text.push_str(h);
                text.push_str("\n\n");
            }
            same(&text)
        }
        Leak::ClassRenamed => Leaked {
            text: rename_name(problem, "Model", new_name),
            class: new_name.to_string(),
        },
        Leak::Wrapped => Leaked {
            text: format!(
                "{problem}\n\n\nclass Wrapped{new_name}(torch.nn.Module):\n    def __init__(self, *args, **kwargs):\n        super().__init__()\n        self.inner = Model(*args, **kwargs)\n\n    def forward(self, *inputs):\n        return self.inner(*inputs)\n"
            ),
            class: format!("Wrapped{new_name}"),
        },
        Leak::ClassOnly => same(&class_only(problem)),
    }
}

fn same(text: &str) -> Leaked {
    Leaked {
        text: text.to_string(),
        class: "Model".to_string(),
    }
}

/// Byte offset of a token in `src` (tokens are slices of it; layout tokens have no text).
fn offset(src: &str, t: &Token<'_>) -> Option<usize> {
    let base = src.as_ptr() as usize;
    let p = t.text.as_ptr() as usize;
    (!t.text.is_empty() && p >= base && p <= base + src.len()).then(|| p - base)
}

/// `src` with some tokens replaced: `edits` maps a token index to its new text.
fn apply(src: &str, toks: &[Token<'_>], edits: &HashMap<usize, String>) -> String {
    let mut out = String::with_capacity(src.len() + 64);
    let mut at = 0;
    for (i, t) in toks.iter().enumerate() {
        let (Some(new), Some(start)) = (edits.get(&i), offset(src, t)) else {
            continue;
        };
        out.push_str(&src[at..start]);
        out.push_str(new);
        at = start + t.text.len();
    }
    out.push_str(&src[at..]);
    out
}

/// Every name token `from` renamed to `to`.
fn rename_name(src: &str, from: &str, to: &str) -> String {
    let toks = tokenize(src);
    let edits: HashMap<usize, String> = toks
        .iter()
        .enumerate()
        .filter(|(_, t)| t.kind == TokenKind::Name && t.text == from)
        .map(|(i, _)| (i, to.to_string()))
        .collect();
    apply(src, &toks, &edits)
}

/// Indentation halved, no space after commas, a comment before every `def` and `class`, and
/// blank lines doubled.
fn reformat(src: &str) -> String {
    let toks = tokenize(src);
    // Byte positions of the single spaces that follow commas (never inside strings: those are
    // tokens, and the gap between two tokens holds only spaces, comments and line breaks).
    let mut cut: Vec<usize> = Vec::new();
    for (i, t) in toks.iter().enumerate() {
        if t.is_op(",")
            && let (Some(a), Some(next)) = (offset(src, t), toks.get(i + 1))
            && let Some(b) = offset(src, next)
            && src.get(a + 1..b) == Some(" ")
        {
            cut.push(a + 1);
        }
    }
    let mut spaced = String::with_capacity(src.len());
    let mut k = 0;
    for (pos, ch) in src.char_indices() {
        if k < cut.len() && cut[k] == pos {
            k += 1;
            continue;
        }
        spaced.push(ch);
    }
    let mut text = String::new();
    for line in spaced.lines() {
        let indent = line.len() - line.trim_start_matches(' ').len();
        let body = &line[indent..];
        if body.starts_with("def ") || body.starts_with("class ") {
            text.push_str(&" ".repeat(indent / 2));
            text.push_str("# ---\n");
        }
        if body.is_empty() {
            text.push('\n');
        }
        text.push_str(&" ".repeat(indent / 2));
        text.push_str(body);
        text.push('\n');
    }
    text
}

/// The parameters (but `self`), local variables and `self.` attributes of the `Model` class
/// renamed consistently; keyword arguments of calls keep their names.
fn rename_variables(src: &str, seed: usize) -> String {
    let p = Program::parse(src);
    let toks = tokenize(src);
    // Program tokens drop docstrings; map the class range back to raw tokens by offset.
    let Some(class) = Slice::of(&p).entry else {
        return src.to_string();
    };
    let first = p.tokens[class.clone()].iter().find_map(|t| offset(src, t));
    let last = p.tokens[class].iter().rev().find_map(|t| offset(src, t));
    let (Some(first), Some(last)) = (first, last) else {
        return src.to_string();
    };
    let inside: Vec<usize> = (0..toks.len())
        .filter(|&i| offset(src, &toks[i]).is_some_and(|o| o >= first && o <= last))
        .collect();
    let keep = |n: &str| {
        matches!(
            n,
            "self" | "cls" | "forward" | "__init__" | "Model" | "super"
        ) || ksmith_embed::program::is_keyword(n)
            || ksmith_embed::program::is_builtin(n)
            || p.import_aliases.contains(n)
    };
    let mut locals: Vec<&str> = Vec::new();
    let mut attrs: Vec<&str> = Vec::new();
    for &i in &inside {
        let t = toks[i];
        if t.kind != TokenKind::Name || keep(t.text) {
            continue;
        }
        let prev = i.checked_sub(1).map(|j| toks[j]);
        let next = toks.get(i + 1);
        if prev.is_some_and(|p| p.is_op(".")) {
            let owner = i.checked_sub(2).map(|j| toks[j].text);
            if owner == Some("self") && next.is_some_and(|n| n.is_op("=")) {
                attrs.push(t.text);
            }
            continue;
        }
        if is_parameter(&toks, i) || is_assignment_target(&toks, i) {
            locals.push(t.text);
        }
    }
    let mut names: Vec<&str> = locals.into_iter().chain(attrs.iter().copied()).collect();
    names.sort_unstable();
    names.dedup();
    let mut map: HashMap<&str, String> = HashMap::new();
    for (k, n) in names.iter().enumerate() {
        map.insert(n, format!("{}{}", WORDS[(k + seed) % WORDS.len()], k));
    }
    let mut edits = HashMap::new();
    for &i in &inside {
        let t = toks[i];
        let Some(new) = map.get(t.text) else {
            continue;
        };
        if t.kind != TokenKind::Name {
            continue;
        }
        let prev = i.checked_sub(1).map(|j| toks[j]);
        if prev.is_some_and(|p| p.is_op(".")) {
            let owner = i.checked_sub(2).map(|j| toks[j].text);
            if owner == Some("self") && attrs.contains(&t.text) {
                edits.insert(i, new.clone());
            }
            continue;
        }
        let kwarg = toks.get(i + 1).is_some_and(|n| n.is_op("="))
            && prev.is_some_and(|p| p.is_op("(") || p.is_op(","))
            && enclosing_bracket(&toks, i).is_some()
            && !is_parameter(&toks, i);
        if !kwarg {
            edits.insert(i, new.clone());
        }
    }
    apply(src, &toks, &edits)
}

/// True when token `i` is a plain name among the targets of an assignment line
/// (`a, b = ...`, `x = ...`).
fn is_assignment_target(toks: &[Token<'_>], i: usize) -> bool {
    let mut start = i;
    while start > 0 && !toks[start - 1].is_layout() {
        start -= 1;
    }
    let end = toks[i..]
        .iter()
        .position(|t| t.is_layout())
        .map_or(toks.len(), |e| i + e);
    let mut depth = 0i32;
    let Some(eq) = (start..end).find(|&j| {
        let t = toks[j];
        match t.text {
            "(" | "[" | "{" if t.kind == TokenKind::Op => depth += 1,
            ")" | "]" | "}" if t.kind == TokenKind::Op => depth -= 1,
            _ => {}
        }
        depth == 0 && t.is_op("=")
    }) else {
        return false;
    };
    let plain = (i == start || toks[i - 1].is_op(",") || toks[i - 1].is_op("("))
        && toks
            .get(i + 1)
            .is_some_and(|n| n.is_op(",") || n.is_op("=") || n.is_op(")"));
    i < eq
        && plain
        && !toks[start..i]
            .iter()
            .any(|t| t.kind == TokenKind::Name && t.text == "self")
}

/// True when token `i` is a parameter name in a `def` header.
fn is_parameter(toks: &[Token<'_>], i: usize) -> bool {
    enclosing_bracket(toks, i).is_some_and(|j| opens_parameters(toks, j))
        && i.checked_sub(1).is_some_and(|p| {
            let prev = toks[p];
            prev.is_op("(") || prev.is_op(",") || prev.is_op("*") || prev.is_op("**")
        })
}

/// Numbers of module-level assignments changed (integers doubled, floats times 1.5).
fn change_constants(src: &str) -> String {
    let p = Program::parse(src);
    let toks = tokenize(src);
    let mut ranges = Vec::new();
    for s in top_level(&p) {
        if s.kind == TopKind::Assign {
            let first = p.tokens[s.range.clone()]
                .iter()
                .find_map(|t| offset(src, t));
            let last = p.tokens[s.range.clone()]
                .iter()
                .rev()
                .find_map(|t| offset(src, t));
            if let (Some(a), Some(b)) = (first, last) {
                ranges.push((a, b));
            }
        }
    }
    let mut edits = HashMap::new();
    for (i, t) in toks.iter().enumerate() {
        if t.kind != TokenKind::Number {
            continue;
        }
        let Some(o) = offset(src, t) else { continue };
        if !ranges.iter().any(|&(a, b)| o >= a && o <= b) {
            continue;
        }
        let new = if let Ok(v) = t.text.parse::<i64>() {
            (if v == 0 { 1 } else { v * 2 }).to_string()
        } else if let Ok(v) = t.text.parse::<f64>() {
            format!("{:?}", v * 1.5)
        } else {
            continue;
        };
        edits.insert(i, new);
    }
    apply(src, &toks, &edits)
}

/// The imports, then the class and the statements it reaches, in file order.
fn class_only(src: &str) -> String {
    let p = Program::parse(src);
    let slice = Slice::of(&p);
    let keep: Vec<std::ops::Range<usize>> = top_level(&p)
        .into_iter()
        .filter(|s| s.kind == TopKind::Import || slice.ranges().any(|r| r == s.range))
        .map(|s| s.range)
        .collect();
    let mut out = String::new();
    for r in keep {
        let first = p.tokens[r.clone()].iter().find_map(|t| offset(src, t));
        let last = p.tokens[r].iter().rev().find(|t| !t.text.is_empty());
        if let (Some(a), Some(l)) = (first, last)
            && let Some(b) = offset(src, l)
        {
            out.push_str(&src[a..b + l.text.len()]);
            out.push_str("\n\n");
        }
    }
    out
}
