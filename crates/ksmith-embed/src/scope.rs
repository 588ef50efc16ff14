//! Which global names a piece of Python reads, with Python's scoping, from tokens alone.
//!
//! A name read inside a function is global unless the function binds it (a parameter, an
//! assignment target, a `for`/`with`/`except` target, a comprehension or lambda variable, an
//! import, a nested `def` or `class`) and does not declare it `global`. Class bodies are scopes
//! that their methods do not see, as in Python. The analysis over-approximates local bindings
//! (a name bound anywhere in a function is local in all of it), which errs towards reading
//! fewer globals; it never panics on broken code.
//!
//! This is what keeps a parameter named like a module constant (`def __init__(self,
//! in_channels)` next to `in_channels = 64` in a KernelBench file) from pulling the constant
//! into what a class computes.

use std::collections::HashSet;
use std::ops::Range;

use crate::lexer::{Token, TokenKind};
use crate::program::is_keyword;

/// A logical line: its tokens (no layout) and its indentation depth.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Line {
    /// First token.
    pub start: usize,
    /// One past the last token (the `Newline` itself is not included).
    pub end: usize,
    /// Indentation depth (0 at the top level of the analysed range).
    pub depth: usize,
}

/// The logical lines of `range`, with depths relative to the range's start.
pub fn lines(toks: &[Token<'_>], range: Range<usize>) -> Vec<Line> {
    let mut out = Vec::new();
    let mut depth: usize = 0;
    let mut start: Option<usize> = None;
    let end = range.end.min(toks.len());
    for (i, t) in toks.iter().enumerate().take(end).skip(range.start) {
        match t.kind {
            TokenKind::Indent | TokenKind::Dedent | TokenKind::Newline => {
                if let Some(s) = start.take() {
                    out.push(Line {
                        start: s,
                        end: i,
                        depth,
                    });
                }
                match t.kind {
                    TokenKind::Indent => depth += 1,
                    TokenKind::Dedent => depth = depth.saturating_sub(1),
                    _ => {}
                }
            }
            _ => {
                if start.is_none() {
                    start = Some(i);
                }
            }
        }
    }
    if let Some(s) = start {
        out.push(Line {
            start: s,
            end,
            depth,
        });
    }
    out
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ScopeKind {
    Outer,
    Class,
    Function,
}

#[derive(Debug)]
struct Scope<'a> {
    kind: ScopeKind,
    parent: usize,
    bound: HashSet<&'a str>,
    globals: HashSet<&'a str>,
    loads: Vec<&'a str>,
}

impl<'a> Scope<'a> {
    fn new(kind: ScopeKind, parent: usize) -> Self {
        Scope {
            kind,
            parent,
            bound: HashSet::new(),
            globals: HashSet::new(),
            loads: Vec::new(),
        }
    }
}

/// The global names that the code in `range` reads (sorted, without repeats).
///
/// Names bound at the outer level of `range` itself (a top-level statement's own name) count
/// as read when they are read; the caller decides what they refer to.
pub fn global_reads<'a>(toks: &[Token<'a>], range: Range<usize>) -> Vec<&'a str> {
    let mut scopes: Vec<Scope<'a>> = vec![Scope::new(ScopeKind::Outer, 0)];
    // (scope, depth of its body lines)
    let mut stack: Vec<(usize, usize)> = vec![(0, 0)];
    for line in lines(toks, range) {
        while stack.len() > 1 && stack.last().is_some_and(|&(_, d)| line.depth < d) {
            stack.pop();
        }
        let current = stack.last().map_or(0, |s| s.0);
        if let Some((scope, rest)) = open_scope(toks, line, current, &mut scopes) {
            stack.push((scope, line.depth + 1));
            if let Some(rest) = rest {
                // A one-line body: `def f(x): return x`.
                statement(toks, rest, scope, &mut scopes);
            }
        } else {
            statement(toks, line.start..line.end, current, &mut scopes);
        }
    }
    // Resolve from the innermost scopes outwards: a scope created later is never an ancestor
    // of an earlier one, so walking backwards visits children before their parents.
    let mut free: Vec<Vec<&'a str>> = vec![Vec::new(); scopes.len()];
    for id in (0..scopes.len()).rev() {
        let s = &scopes[id];
        let mut names: Vec<&'a str> = std::mem::take(&mut free[id]);
        names.extend(s.loads.iter().copied());
        // A `global` declaration refers to the module-level name even when only written.
        names.extend(s.globals.iter().copied());
        if id == 0 {
            free[0] = names;
            break;
        }
        let unresolved: Vec<&'a str> = names
            .into_iter()
            .filter(|n| s.globals.contains(n) || !s.bound.contains(n))
            .collect();
        // A function's free names skip enclosing class scopes.
        let mut target = s.parent;
        while target != 0
            && scopes[target].kind == ScopeKind::Class
            && s.kind == ScopeKind::Function
        {
            target = scopes[target].parent;
        }
        free[target].extend(unresolved);
    }
    let mut out = std::mem::take(&mut free[0]);
    out.sort_unstable();
    out.dedup();
    out
}

/// When `line` opens a `def` or `class`, records its header in `current` and returns the new
/// scope and the tokens of a body written on the same line.
fn open_scope<'a>(
    toks: &[Token<'a>],
    line: Line,
    current: usize,
    scopes: &mut Vec<Scope<'a>>,
) -> Option<(usize, Option<Range<usize>>)> {
    let mut i = line.start;
    if toks.get(i).is_some_and(|t| t.text == "async") {
        i += 1;
    }
    let head = toks.get(i)?;
    if head.kind != TokenKind::Name || !matches!(head.text, "def" | "class") {
        return None;
    }
    let kind = if head.text == "def" {
        ScopeKind::Function
    } else {
        ScopeKind::Class
    };
    let name = toks.get(i + 1).filter(|t| t.kind == TokenKind::Name)?;
    scopes[current].bound.insert(name.text);
    let id = scopes.len();
    scopes.push(Scope::new(kind, current));
    // The header ends at the first `:` outside brackets.
    let mut depth = 0i32;
    let mut colon = line.end;
    for (j, t) in toks.iter().enumerate().take(line.end).skip(i + 2) {
        if t.kind != TokenKind::Op {
            continue;
        }
        match t.text {
            "(" | "[" | "{" => depth += 1,
            ")" | "]" | "}" => depth -= 1,
            ":" if depth <= 0 => {
                colon = j;
                break;
            }
            _ => {}
        }
    }
    if kind == ScopeKind::Function {
        parameters(toks, i + 2..colon, current, id, scopes);
    } else {
        scan(toks, i + 2..colon, current, scopes);
    }
    let rest = (colon + 1 < line.end).then(|| colon + 1..line.end);
    Some((id, rest))
}

/// A `def` header after the name: parameter names bind in `inner`, annotations and defaults
/// are read in `outer`.
fn parameters<'a>(
    toks: &[Token<'a>],
    range: Range<usize>,
    outer: usize,
    inner: usize,
    scopes: &mut [Scope<'a>],
) {
    let mut depth = 0i32;
    let mut expect_name = true;
    let mut j = range.start;
    while j < range.end {
        let t = toks[j];
        if t.kind == TokenKind::Op {
            match t.text {
                "(" | "[" | "{" => {
                    depth += 1;
                    if depth == 1 {
                        expect_name = true;
                        j += 1;
                        continue;
                    }
                }
                ")" | "]" | "}" => depth -= 1,
                "," if depth == 1 => {
                    expect_name = true;
                    j += 1;
                    continue;
                }
                "*" | "**" | "/" if depth == 1 && expect_name => {
                    j += 1;
                    continue;
                }
                _ => {}
            }
        }
        if depth == 1 && expect_name && t.kind == TokenKind::Name {
            scopes[inner].bound.insert(t.text);
            expect_name = false;
            j += 1;
            continue;
        }
        expect_name = false;
        // Annotations, defaults and the return annotation: one token at a time.
        scan(toks, j..j + 1, outer, scopes);
        j += 1;
    }
}

/// One statement (not a `def`/`class` header) in `scope`.
fn statement<'a>(toks: &[Token<'a>], range: Range<usize>, scope: usize, scopes: &mut [Scope<'a>]) {
    let Some(first) = toks.get(range.start) else {
        return;
    };
    if first.kind == TokenKind::Name {
        match first.text {
            "import" | "from" => {
                for name in crate::program::import_bindings(&toks[range.clone()]) {
                    scopes[scope].bound.insert(name);
                }
                return;
            }
            "global" => {
                for t in &toks[range.start + 1..range.end] {
                    if t.kind == TokenKind::Name {
                        scopes[scope].globals.insert(t.text);
                    }
                }
                return;
            }
            "nonlocal" => return,
            "for" | "async" => {
                bind_between(toks, range.clone(), "for", "in", scope, scopes);
                scan(toks, range, scope, scopes);
                return;
            }
            "with" | "except" => {
                bind_after_as(toks, range.clone(), scope, scopes);
                scan(toks, range, scope, scopes);
                return;
            }
            _ => {}
        }
    }
    // Compound headers with a body on the same line: `if x: y = 1`.
    if first.kind == TokenKind::Name
        && matches!(
            first.text,
            "if" | "elif" | "else" | "while" | "try" | "finally"
        )
        && let Some(colon) = top_level_op(toks, range.clone(), ":")
    {
        scan(toks, range.start..colon, scope, scopes);
        if colon + 1 < range.end {
            statement(toks, colon + 1..range.end, scope, scopes);
        }
        return;
    }
    // Assignments: every part before a top-level `=` is a target.
    let mut start = range.start;
    for (j, op) in top_level_ops(toks, range.clone()) {
        if op == "=" {
            target(toks, start..j, scope, scopes);
            start = j + 1;
        } else if is_augmented(op) {
            target(toks, start..j, scope, scopes);
            scan(toks, start..j, scope, scopes);
            start = j + 1;
        }
    }
    scan(toks, start..range.end, scope, scopes);
}

fn is_augmented(op: &str) -> bool {
    matches!(
        op,
        "+=" | "-="
            | "*="
            | "/="
            | "//="
            | "%="
            | "**="
            | "@="
            | "&="
            | "|="
            | "^="
            | ">>="
            | "<<="
    )
}

/// The operators outside brackets in `range`, with their positions (brackets left out).
fn top_level_ops<'t, 'a>(
    toks: &'t [Token<'a>],
    range: Range<usize>,
) -> impl Iterator<Item = (usize, &'a str)> + 't {
    let mut depth = 0i32;
    range.filter_map(move |j| {
        let t = toks[j];
        if t.kind != TokenKind::Op {
            return None;
        }
        match t.text {
            "(" | "[" | "{" => depth += 1,
            ")" | "]" | "}" => depth -= 1,
            op if depth == 0 => return Some((j, op)),
            _ => {}
        }
        None
    })
}

/// The position of the first `op` outside brackets in `range`.
fn top_level_op(toks: &[Token<'_>], range: Range<usize>, op: &str) -> Option<usize> {
    top_level_ops(toks, range)
        .find(|(_, o)| *o == op)
        .map(|(j, _)| j)
}

/// An assignment target: plain names bind; names under an attribute or subscript are read.
/// An annotated target (`x: int`) binds `x` and reads the annotation.
fn target<'a>(toks: &[Token<'a>], range: Range<usize>, scope: usize, scopes: &mut [Scope<'a>]) {
    let (names, annotation) = match top_level_op(toks, range.clone(), ":") {
        Some(c) => (range.start..c, Some(c + 1..range.end)),
        None => (range, None),
    };
    for j in names.clone() {
        let t = toks[j];
        if t.kind != TokenKind::Name || is_keyword(t.text) {
            continue;
        }
        let after_dot = j > names.start && toks[j - 1].is_op(".");
        let before_access = toks
            .get(j + 1)
            .is_some_and(|n| n.is_op(".") || n.is_op("[") || n.is_op("("))
            && j + 1 < names.end;
        if after_dot {
            continue;
        }
        let in_brackets = inside_access(toks, names.start, j);
        if before_access || in_brackets {
            // What a target reads: `a` in `a.b = ...`, `x` and `i` in `x[i] = ...`.
            scopes[scope].loads.push(t.text);
        } else {
            scopes[scope].bound.insert(t.text);
        }
    }
    if let Some(a) = annotation {
        scan(toks, a, scope, scopes);
    }
}

/// True when token `j` (of a target starting at `start`) is inside a subscript or call
/// bracket (`x[i]`, `f(a).b`), not a plain tuple or list of targets.
fn inside_access(toks: &[Token<'_>], start: usize, j: usize) -> bool {
    let mut stack: Vec<bool> = Vec::new();
    for k in start..j {
        let t = toks[k];
        if t.kind != TokenKind::Op {
            continue;
        }
        match t.text {
            "(" | "[" | "{" => {
                let access = k > start
                    && (toks[k - 1].kind == TokenKind::Name
                        || toks[k - 1].is_op(")")
                        || toks[k - 1].is_op("]"));
                stack.push(access);
            }
            ")" | "]" | "}" => {
                stack.pop();
            }
            _ => {}
        }
    }
    stack.iter().any(|a| *a)
}

fn bind_between<'a>(
    toks: &[Token<'a>],
    range: Range<usize>,
    open: &str,
    close: &str,
    scope: usize,
    scopes: &mut [Scope<'a>],
) {
    let Some(from) = range.clone().find(|&j| toks[j].text == open) else {
        return;
    };
    for t in &toks[from + 1..range.end] {
        if t.text == close {
            break;
        }
        if t.kind == TokenKind::Name && !is_keyword(t.text) {
            scopes[scope].bound.insert(t.text);
        }
    }
}

fn bind_after_as<'a>(
    toks: &[Token<'a>],
    range: Range<usize>,
    scope: usize,
    scopes: &mut [Scope<'a>],
) {
    for j in range.clone() {
        if toks[j].text == "as"
            && let Some(n) = toks
                .get(j + 1)
                .filter(|n| n.kind == TokenKind::Name && j + 1 < range.end)
        {
            scopes[scope].bound.insert(n.text);
        }
    }
}

/// Reads in an expression: every name that is not an attribute, a keyword argument's name, a
/// lambda parameter, a comprehension variable or a `:=` target (those three bind in `scope`).
fn scan<'a>(toks: &[Token<'a>], range: Range<usize>, scope: usize, scopes: &mut [Scope<'a>]) {
    let mut depth = 0i32;
    // Binding until this token (lambda parameters up to `:`, comprehension targets up to `in`).
    let mut binding_until: Option<(&str, i32)> = None;
    let end = range.end.min(toks.len());
    for j in range.start..end {
        let t = toks[j];
        match t.kind {
            TokenKind::Op => {
                match t.text {
                    "(" | "[" | "{" => depth += 1,
                    ")" | "]" | "}" => depth -= 1,
                    _ => {}
                }
                if let Some((stop, d)) = binding_until
                    && t.text == stop
                    && depth == d
                {
                    binding_until = None;
                }
                continue;
            }
            TokenKind::Name => {}
            _ => continue,
        }
        if t.text == "lambda" {
            binding_until = Some((":", depth));
            continue;
        }
        if t.text == "for" && depth > 0 {
            binding_until = Some(("in", depth));
            continue;
        }
        if let Some((stop, d)) = binding_until {
            if t.text == stop && depth == d {
                binding_until = None;
            } else if !is_keyword(t.text) {
                scopes[scope].bound.insert(t.text);
            }
            continue;
        }
        if is_keyword(t.text) {
            continue;
        }
        if j > 0 && toks[j - 1].is_op(".") {
            continue;
        }
        let next = toks.get(j + 1);
        if next.is_some_and(|n| n.is_op(":=")) {
            scopes[scope].bound.insert(t.text);
            continue;
        }
        let kwarg = depth > 0
            && next.is_some_and(|n| n.is_op("="))
            && j > 0
            && (toks[j - 1].is_op("(") || toks[j - 1].is_op(","));
        if kwarg {
            continue;
        }
        scopes[scope].loads.push(t.text);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::program::Program;

    fn reads(src: &str) -> Vec<String> {
        let p = Program::parse(src);
        global_reads(&p.tokens, 0..p.tokens.len())
            .into_iter()
            .map(str::to_string)
            .collect()
    }

    #[test]
    fn parameters_and_locals_hide_globals_of_the_same_name() {
        let src = "class Model(nn.Module):\n    def __init__(self, in_channels, k=KERNEL, *args, act: Act = None, **kw):\n        super().__init__()\n        self.conv = nn.Conv2d(in_channels, OUT, k)\n        hidden = in_channels * 2\n        self.n = hidden\n    def forward(self, x):\n        y = [helper(v) for v in x]\n        f = lambda z: z + SHIFT\n        for i, w in enumerate(y):\n            x = x + w * i\n        with ctx() as c:\n            pass\n        return x.view(batch_size, -1) + f(c)\n";
        let r = reads(src);
        for global in [
            "nn",
            "KERNEL",
            "Act",
            "OUT",
            "helper",
            "SHIFT",
            "ctx",
            "batch_size",
            "super",
            "enumerate",
        ] {
            assert!(r.contains(&global.to_string()), "{global} in {r:?}");
        }
        for local in [
            "in_channels",
            "k",
            "args",
            "act",
            "kw",
            "hidden",
            "x",
            "y",
            "v",
            "f",
            "z",
            "i",
            "w",
            "c",
            "self",
            "conv",
        ] {
            assert!(!r.contains(&local.to_string()), "{local} in {r:?}");
        }
    }

    #[test]
    fn class_scope_is_invisible_to_methods_and_global_declarations_count() {
        let src = "class A:\n    scale = 2\n    other = scale + BASE\n    def f(self):\n        global counter\n        counter = 1\n        return scale\n";
        let r = reads(src);
        assert!(
            r.contains(&"scale".to_string()),
            "method reads the global scale: {r:?}"
        );
        assert!(r.contains(&"BASE".to_string()));
        assert!(r.contains(&"counter".to_string()));
        let r = reads("class A:\n    scale = 2\n    other = scale\n");
        assert!(!r.contains(&"scale".to_string()), "{r:?}");
    }

    #[test]
    fn keyword_arguments_attributes_and_one_line_bodies() {
        let r = reads("def f(x): return g(x, dim=DIM).sum(axis=1) + obj.attr\n");
        assert_eq!(r, ["DIM", "g", "obj"]);
        let r = reads("x = y = compute(a[i], b.c)\nz: Tensor = q\nw += 1\n");
        for n in ["compute", "a", "i", "b", "Tensor", "q", "w"] {
            assert!(r.contains(&n.to_string()), "{n}: {r:?}");
        }
        assert!(!r.contains(&"c".to_string()));
    }

    #[test]
    fn broken_code_does_not_panic() {
        for src in [
            "def (",
            "class :\n  def",
            "x = (",
            "lambda",
            "for in",
            "def f(:\n pass",
            ")))",
        ] {
            let _ = reads(src);
        }
    }
}
