//! What a program computes: its entry class and the top-level code that class reaches.
//!
//! An extracted program is imports, the entry class (`Model`) and the definitions it needs, an
//! alias line when the class read its own old name, and generated `get_inputs()` /
//! `get_init_inputs()`; a KernelBench problem is imports, `Model`, its helpers, module
//! constants and its own input functions. Comparing whole programs lets imports, generated
//! inputs and constants decide similarity. The [`Slice`] keeps only the entry class and the
//! top-level statements it reads, transitively (with Python scoping, [`crate::scope`]): no
//! imports, no input builders, no constants only the input builders read, no alias lines of
//! the entry (`Foo = Model`).
//!
//! [`body_tokens`] further drops the lines every module has (class and `def` headers,
//! decorators, `super().__init__()`, `pass`), so that similarity of small modules measures what
//! their code does rather than the boilerplate around it.

use std::collections::{HashMap, HashSet};
use std::ops::Range;

use crate::lexer::{Token, TokenKind};
use crate::program::{Program, import_bindings, is_keyword};
use crate::scope::{global_reads, lines};

/// The name of the entry class in extracted programs and KernelBench problems.
pub const ENTRY: &str = "Model";

/// The generated input builders of a KernelBench-format program.
pub const INPUT_BUILDERS: &[&str] = &["get_inputs", "get_init_inputs"];

/// What a top-level statement is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TopKind {
    /// `class` (with its decorators).
    Class,
    /// `def` or `async def` (with its decorators).
    Function,
    /// `import` or `from ... import`.
    Import,
    /// An assignment (`x = ...`, `x: T = ...`, `x += ...`).
    Assign,
    /// Anything else (`if`, `try`, an expression).
    Other,
}

/// One top-level statement of a program.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopStatement<'a> {
    /// Its tokens (decorators and body included, the trailing layout too).
    pub range: Range<usize>,
    /// What it is.
    pub kind: TopKind,
    /// The names it binds at module level.
    pub binds: Vec<&'a str>,
}

/// The top-level statements of a program, in order.
pub fn top_level<'a>(p: &Program<'a>) -> Vec<TopStatement<'a>> {
    let toks = &p.tokens;
    let mut out = Vec::new();
    let mut i = 0;
    while i < toks.len() {
        if toks[i].is_layout() {
            i += 1;
            continue;
        }
        let start = i;
        // Decorator lines belong to the statement they decorate.
        let mut head = i;
        let mut line_end = next_newline(toks, head);
        while toks[head].is_op("@") && line_end + 1 < toks.len() {
            head = line_end + 1;
            while head < toks.len() && toks[head].is_layout() {
                head += 1;
            }
            if head >= toks.len() {
                break;
            }
            line_end = next_newline(toks, head);
        }
        let end = block_end(toks, line_end);
        let head = head.min(toks.len().saturating_sub(1));
        let (kind, binds) = classify(toks, head, line_end.max(head));
        out.push(TopStatement {
            range: start..end,
            kind,
            binds,
        });
        i = end.max(start + 1);
    }
    out
}

/// One past the end of the statement whose header line ends at the `Newline` `line_end`: past
/// the `Dedent` that closes its block, or past the header when it has no block.
fn block_end(toks: &[Token<'_>], line_end: usize) -> usize {
    let mut k = (line_end + 1).min(toks.len());
    if toks.get(k).is_none_or(|t| t.kind != TokenKind::Indent) {
        return k;
    }
    let mut depth = 0usize;
    while k < toks.len() {
        match toks[k].kind {
            TokenKind::Indent => depth += 1,
            TokenKind::Dedent => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return k + 1;
                }
            }
            _ => {}
        }
        k += 1;
    }
    k
}

fn next_newline(toks: &[Token<'_>], from: usize) -> usize {
    toks[from..]
        .iter()
        .position(|t| t.kind == TokenKind::Newline)
        .map_or(toks.len(), |p| from + p)
}

/// Kind and bound names of a statement whose first (non-decorator) line is `head..line_end`.
fn classify<'a>(toks: &[Token<'a>], head: usize, line_end: usize) -> (TopKind, Vec<&'a str>) {
    let first = toks[head];
    let name_after = |k: usize| {
        toks.get(k)
            .filter(|t| t.kind == TokenKind::Name)
            .map(|t| t.text)
    };
    if first.kind == TokenKind::Name {
        match first.text {
            "class" => return (TopKind::Class, name_after(head + 1).into_iter().collect()),
            "def" => {
                return (
                    TopKind::Function,
                    name_after(head + 1).into_iter().collect(),
                );
            }
            "async" if toks.get(head + 1).is_some_and(|t| t.text == "def") => {
                return (
                    TopKind::Function,
                    name_after(head + 2).into_iter().collect(),
                );
            }
            "import" | "from" => {
                return (TopKind::Import, import_bindings(&toks[head..line_end]));
            }
            _ => {}
        }
    }
    if first.kind == TokenKind::Name && is_keyword(first.text) {
        // `if`, `try`, `with`, `for` ...: the definitions and assignments inside bind too.
        return (TopKind::Other, nested_bindings(toks, head, line_end));
    }
    let targets = assignment_targets(&toks[head..line_end]);
    if targets.is_empty() {
        (TopKind::Other, Vec::new())
    } else {
        (TopKind::Assign, targets)
    }
}

/// Names bound by the simple assignment targets of one logical line (`a, b = ...`,
/// `x: int = ...`, `x += ...`): empty when the line is not an assignment.
fn assignment_targets<'a>(line: &[Token<'a>]) -> Vec<&'a str> {
    let mut depth = 0i32;
    let mut cut = None;
    for (j, t) in line.iter().enumerate() {
        if t.kind != TokenKind::Op {
            continue;
        }
        match t.text {
            "(" | "[" | "{" => depth += 1,
            ")" | "]" | "}" => depth -= 1,
            // The first `=`, augmented operator or annotation colon ends the target.
            "=" | ":" | "+=" | "-=" | "*=" | "/=" | "|=" | "&=" | "**=" | "//=" | "@="
                if depth == 0 =>
            {
                cut = Some(j);
                break;
            }
            _ => {}
        }
    }
    let Some(cut) = cut else {
        return Vec::new();
    };
    let targets = &line[..cut];
    targets
        .iter()
        .enumerate()
        .filter(|(j, t)| {
            t.kind == TokenKind::Name
                && !is_keyword(t.text)
                && (*j == 0 || !targets[j - 1].is_op("."))
                && targets
                    .get(j + 1)
                    .is_none_or(|n| !n.is_op(".") && !n.is_op("[") && !n.is_op("("))
        })
        .map(|(_, t)| t.text)
        .collect()
}

/// Names bound inside a compound statement: nested `def`/`class` names, imports and the
/// targets of assignment lines.
fn nested_bindings<'a>(toks: &[Token<'a>], head: usize, line_end: usize) -> Vec<&'a str> {
    let end = block_end(toks, line_end);
    let mut out = Vec::new();
    for line in lines(toks, head..end) {
        let l = &toks[line.start..line.end];
        match l.first().map(|t| t.text) {
            Some("def") | Some("class") => {
                if let Some(n) = l.get(1).filter(|t| t.kind == TokenKind::Name) {
                    out.push(n.text);
                }
            }
            Some("import") | Some("from") => out.extend(import_bindings(l)),
            Some(k) if is_keyword(k) => {}
            _ => out.extend(assignment_targets(l)),
        }
    }
    out.sort_unstable();
    out.dedup();
    out
}

/// The entry class of a program and the top-level statements it reaches (token ranges).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Slice {
    /// The entry class statement; `None` when the program defines no class of that name.
    pub entry: Option<Range<usize>>,
    /// The other statements, in program order: everything the entry reads, transitively, or,
    /// without an entry, every statement that is not an import or an input builder.
    pub helpers: Vec<Range<usize>>,
}

impl Slice {
    /// The slice of `p` with the entry class [`ENTRY`].
    pub fn of(p: &Program<'_>) -> Self {
        Self::named(p, ENTRY)
    }

    /// The slice of `p` with the entry class `entry` (the last class of that name).
    pub fn named(p: &Program<'_>, entry: &str) -> Self {
        let stmts = top_level(p);
        let is_builder = |s: &TopStatement<'_>| {
            s.kind == TopKind::Function && s.binds.iter().any(|b| INPUT_BUILDERS.contains(b))
        };
        let Some(entry_idx) = stmts
            .iter()
            .rposition(|s| s.kind == TopKind::Class && s.binds.first() == Some(&entry))
        else {
            return Slice {
                entry: None,
                helpers: stmts
                    .iter()
                    .filter(|s| s.kind != TopKind::Import && !is_builder(s))
                    .map(|s| s.range.clone())
                    .collect(),
            };
        };
        let mut binders: HashMap<&str, Vec<usize>> = HashMap::new();
        for (i, s) in stmts.iter().enumerate() {
            if s.kind == TopKind::Import || is_builder(s) || i == entry_idx {
                continue;
            }
            for b in &s.binds {
                binders.entry(b).or_default().push(i);
            }
        }
        let mut reached: HashSet<usize> = HashSet::new();
        let mut todo = vec![entry_idx];
        while let Some(i) = todo.pop() {
            for name in global_reads(&p.tokens, stmts[i].range.clone()) {
                for &j in binders.get(name).map_or(&[][..], Vec::as_slice) {
                    if reached.insert(j) {
                        todo.push(j);
                    }
                }
            }
        }
        let mut helpers: Vec<usize> = reached
            .into_iter()
            .filter(|&j| !is_entry_alias(&p.tokens, &stmts[j], entry))
            .collect();
        helpers.sort_unstable();
        Slice {
            entry: Some(stmts[entry_idx].range.clone()),
            helpers: helpers
                .into_iter()
                .map(|j| stmts[j].range.clone())
                .collect(),
        }
    }

    /// The entry's range first (when there is one), then the helpers'.
    pub fn ranges(&self) -> impl Iterator<Item = Range<usize>> + '_ {
        self.entry
            .iter()
            .cloned()
            .chain(self.helpers.iter().cloned())
    }
}

/// `Foo = Model`: the alias line extract writes when the entry class reads its old name.
fn is_entry_alias(toks: &[Token<'_>], s: &TopStatement<'_>, entry: &str) -> bool {
    if s.kind != TopKind::Assign {
        return false;
    }
    let text: Vec<&Token<'_>> = toks[s.range.clone()]
        .iter()
        .filter(|t| !t.is_layout())
        .collect();
    text.len() == 3 && text[1].is_op("=") && text[2].text == entry
}

/// True for a line every module has: a `class` or `def` header (up to its colon), a decorator,
/// a call of a base class's `__init__`, or `pass`.
fn is_boilerplate(line: &[Token<'_>]) -> bool {
    let Some(first) = line.first() else {
        return false;
    };
    if first.is_op("@") || matches!(first.text, "class" | "def" | "async") {
        return true;
    }
    if line.len() == 1 && first.text == "pass" {
        return true;
    }
    line.windows(3)
        .any(|w| w[0].is_op(".") && w[1].text == "__init__" && w[2].is_op("("))
        && (first.text == "super" || line.iter().any(|t| t.text == "self"))
}

/// The tokens of `range` without its boilerplate lines (see [`is_boilerplate`]); a one-line
/// `def f(x): return x` keeps what follows its colon. Layout tokens of kept lines stay.
pub fn body_tokens<'a>(toks: &[Token<'a>], range: Range<usize>) -> Vec<Token<'a>> {
    let mut drop = vec![false; range.len()];
    for line in lines(toks, range.clone()) {
        let l = &toks[line.start..line.end];
        if !is_boilerplate(l) {
            continue;
        }
        let mut cut = line.end;
        if matches!(l.first().map(|t| t.text), Some("class" | "def" | "async")) {
            // Keep a body written after the header's colon.
            let mut depth = 0i32;
            for (j, t) in l.iter().enumerate() {
                match t.text {
                    "(" | "[" | "{" if t.kind == TokenKind::Op => depth += 1,
                    ")" | "]" | "}" if t.kind == TokenKind::Op => depth -= 1,
                    ":" if t.kind == TokenKind::Op && depth == 0 => {
                        cut = line.start + j + 1;
                        break;
                    }
                    _ => {}
                }
            }
        }
        for k in line.start..cut {
            drop[k - range.start] = true;
        }
        // The line's own Newline goes with it when the whole line went.
        if cut == line.end
            && toks
                .get(line.end)
                .is_some_and(|t| t.kind == TokenKind::Newline)
            && line.end < range.end
        {
            drop[line.end - range.start] = true;
        }
    }
    toks[range.clone()]
        .iter()
        .zip(drop)
        .filter(|(_, d)| !d)
        .map(|(t, _)| *t)
        .collect()
}

/// The source text of a program's slice.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SliceText {
    /// The entry class (the whole slice when there is no entry class).
    pub entry: String,
    /// The entry class, then the statements it reaches, separated by blank lines.
    pub all: String,
}

/// The source text of the slice of `src` (the whole program when it has no code).
pub fn slice_texts(src: &str) -> SliceText {
    let p = Program::parse(src);
    let slice = Slice::of(&p);
    let parts: Vec<&str> = slice
        .ranges()
        .filter_map(|r| source_of(src, &p.tokens[r]))
        .collect();
    if parts.is_empty() {
        return SliceText {
            entry: src.to_string(),
            all: src.to_string(),
        };
    }
    let entry = match slice.entry {
        Some(_) => parts[0].to_string(),
        None => parts.join("\n\n"),
    };
    SliceText {
        entry,
        all: parts.join("\n\n"),
    }
}

/// The source text of the slice of `src`: the entry class, then the statements it reaches,
/// separated by blank lines (the whole program when it has no code).
pub fn slice_text(src: &str) -> String {
    slice_texts(src).all
}

/// The stretch of `src` from the first to the last text token of `toks` (which must be slices
/// of `src`).
fn source_of<'s>(src: &'s str, toks: &[Token<'s>]) -> Option<&'s str> {
    let base = src.as_ptr() as usize;
    let within = |t: &&Token<'s>| {
        let p = t.text.as_ptr() as usize;
        !t.text.is_empty() && p >= base && p + t.text.len() <= base + src.len()
    };
    let first = toks.iter().find(within)?;
    let last = toks.iter().rev().find(within)?;
    let start = first.text.as_ptr() as usize - base;
    let end = last.text.as_ptr() as usize - base + last.text.len();
    src.get(start..end)
}

#[cfg(test)]
mod tests {
    use super::*;

    const KB: &str = "import torch\nimport torch.nn as nn\n\nEPS = 1e-5\n\ndef helper(x):\n    return x * SCALE\n\nSCALE = 2.0\nUNUSED = 3\n\nclass Model(nn.Module):\n    \"\"\"Doc.\"\"\"\n    def __init__(self, in_channels, out_channels):\n        super(Model, self).__init__()\n        self.conv = nn.Conv2d(in_channels, out_channels, 3)\n\n    @torch.no_grad()\n    def forward(self, x):\n        return helper(self.conv(x)) + EPS\n\nbatch_size = 16\nin_channels = 3\nout_channels = 8\n\ndef get_inputs():\n    return [torch.randn(batch_size, in_channels, 32, 32)]\n\ndef get_init_inputs():\n    return [in_channels, out_channels]\n";

    fn texts(p: &Program<'_>, r: &Range<usize>) -> String {
        p.tokens[r.clone()]
            .iter()
            .filter(|t| !t.is_layout())
            .map(|t| t.text)
            .collect::<Vec<_>>()
            .join(" ")
    }

    #[test]
    fn top_level_statements_and_what_they_bind() {
        let p = Program::parse(KB);
        let stmts = top_level(&p);
        let kinds: Vec<(TopKind, Vec<&str>)> =
            stmts.iter().map(|s| (s.kind, s.binds.clone())).collect();
        assert_eq!(kinds[0], (TopKind::Import, vec!["torch"]));
        assert_eq!(kinds[2], (TopKind::Assign, vec!["EPS"]));
        assert_eq!(kinds[3], (TopKind::Function, vec!["helper"]));
        assert_eq!(kinds[6], (TopKind::Class, vec!["Model"]));
        assert_eq!(kinds.len(), 12);
        // The decorated method stays inside the class statement.
        assert!(texts(&p, &stmts[6].range).contains("@ torch . no_grad"));
    }

    #[test]
    fn slice_is_the_entry_and_what_it_reads_without_inputs_or_their_constants() {
        let p = Program::parse(KB);
        let s = Slice::of(&p);
        let entry = texts(&p, s.entry.as_ref().unwrap());
        assert!(entry.starts_with("class Model"), "{entry}");
        let helpers: Vec<String> = s.helpers.iter().map(|r| texts(&p, r)).collect();
        assert_eq!(
            helpers,
            vec![
                "EPS = 1e-5".to_string(),
                "def helper ( x ) : return x * SCALE".to_string(),
                "SCALE = 2.0".to_string(),
            ]
        );
        // in_channels / out_channels are parameters, not the module constants.
        assert!(slice_text(KB).starts_with("class Model(nn.Module):"));
        assert!(!slice_text(KB).contains("batch_size"));
    }

    #[test]
    fn extracted_alias_lines_and_programs_without_entry() {
        let src = "import torch\n\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return Old.f(x)\n\n    @staticmethod\n    def f(x):\n        return x\n\nOld = Model\n\ndef get_inputs():\n    return [torch.randn(2)]\n";
        let p = Program::parse(src);
        let s = Slice::of(&p);
        assert!(s.entry.is_some());
        assert!(s.helpers.is_empty(), "{:?}", s.helpers);
        let p = Program::parse(
            "import torch\nx = 1\ndef f():\n    return x\ndef get_inputs():\n    return []\n",
        );
        let s = Slice::of(&p);
        assert_eq!(s.entry, None);
        assert_eq!(s.helpers.len(), 2);
    }

    #[test]
    fn body_tokens_drop_headers_decorators_and_super_init() {
        let p = Program::parse(KB);
        let s = Slice::of(&p);
        let body: Vec<&str> = body_tokens(&p.tokens, s.entry.clone().unwrap())
            .iter()
            .filter(|t| !t.is_layout())
            .map(|t| t.text)
            .collect();
        assert_eq!(
            body.join(" "),
            "self . conv = nn . Conv2d ( in_channels , out_channels , 3 ) return helper ( self . conv ( x ) ) + EPS"
        );
        let p = Program::parse("def f(x): return x + 1\n");
        let body: Vec<&str> = body_tokens(&p.tokens, 0..p.tokens.len())
            .iter()
            .filter(|t| !t.is_layout())
            .map(|t| t.text)
            .collect();
        assert_eq!(body, vec!["return", "x", "+", "1"]);
    }

    #[test]
    fn hostile_programs_slice_without_panicking() {
        for src in [
            "",
            "@",
            "@x\n",
            "class\n",
            "class Model(:\n  def",
            "x = (\n",
            "\u{0}\u{1} = = =",
        ] {
            let p = Program::parse(src);
            let s = Slice::of(&p);
            for r in s.ranges() {
                let _ = body_tokens(&p.tokens, r);
            }
            let _ = slice_text(src);
        }
    }
}
