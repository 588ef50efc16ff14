//! What a program looks like once tokenized: code tokens without docstrings, canonical token
//! labels that forget user-chosen names and literal values, and the normalized text used for
//! exact deduplication.

use std::collections::HashSet;

use crate::lexer::{Token, TokenKind, tokenize};

/// Python keywords (kept verbatim in canonical labels).
const KEYWORDS: &[&str] = &[
    "False", "None", "True", "and", "as", "assert", "async", "await", "break", "class", "continue",
    "def", "del", "elif", "else", "except", "finally", "for", "from", "global", "if", "import",
    "in", "is", "lambda", "nonlocal", "not", "or", "pass", "raise", "return", "try", "while",
    "with", "yield",
];

/// Builtins and conventional names that are part of the language, not chosen by the author.
const BUILTINS: &[&str] = &[
    "self",
    "cls",
    "super",
    "range",
    "len",
    "int",
    "float",
    "bool",
    "str",
    "list",
    "tuple",
    "dict",
    "set",
    "min",
    "max",
    "sum",
    "abs",
    "zip",
    "enumerate",
    "isinstance",
    "getattr",
    "setattr",
    "hasattr",
    "print",
    "round",
    "pow",
    "map",
    "filter",
    "sorted",
    "reversed",
    "any",
    "all",
    "object",
    "type",
    "iter",
    "next",
    "divmod",
    "slice",
    "__init__",
    "__name__",
];

/// True for a Python keyword.
pub fn is_keyword(name: &str) -> bool {
    // Keywords are 2 to 8 ASCII characters; the length test skips most names at once.
    (2..=8).contains(&name.len()) && KEYWORDS.contains(&name)
}

/// True for a builtin or conventional name (`self`, `range`, `super`, ...).
pub fn is_builtin(name: &str) -> bool {
    (3..=10).contains(&name.len()) && BUILTINS.contains(&name)
}

/// A tokenized program with docstrings removed.
#[derive(Debug, Clone)]
pub struct Program<'a> {
    /// Code tokens: every token except docstring statements (string-only expression statements).
    pub tokens: Vec<Token<'a>>,
    /// Names bound by import statements (`torch`, `nn`, `F`, ...).
    pub import_aliases: HashSet<&'a str>,
}

impl<'a> Program<'a> {
    /// Tokenizes `src` and drops docstrings.
    pub fn parse(src: &'a str) -> Self {
        let tokens = strip_docstrings(tokenize(src));
        let import_aliases = import_aliases(&tokens);
        Program {
            tokens,
            import_aliases,
        }
    }

    /// True when `name` refers to something outside the author's choice: an imported module
    /// alias, a builtin, `self`.
    pub fn is_external(&self, name: &str) -> bool {
        is_builtin(name) || self.import_aliases.contains(name)
    }

    /// The normalized text: tokens joined by one space, layout as `;`, `{` and `}`.
    ///
    /// Two programs that differ only in whitespace, comments, docstrings, line breaks inside
    /// brackets or indentation width have the same normalized text.
    pub fn normalized_text(&self) -> String {
        normalized_text_of(&self.tokens)
    }

    /// The key of exact deduplication: a hash of [`Program::normalized_text`].
    pub fn exact_key(&self) -> [u8; 16] {
        let hash = blake3::hash(self.normalized_text().as_bytes());
        let mut key = [0u8; 16];
        key.copy_from_slice(&hash.as_bytes()[..16]);
        key
    }

    /// A program made of `tokens` (a part of this one, e.g. one class without its headers),
    /// with this program's import aliases.
    pub fn view(&self, tokens: Vec<Token<'a>>) -> Program<'a> {
        Program {
            tokens,
            import_aliases: self.import_aliases.clone(),
        }
    }

    /// Canonical labels of the tokens, one per token (see [`canonical_label`]).
    pub fn canonical_labels(&self) -> Vec<&'a str> {
        (0..self.tokens.len())
            .map(|i| canonical_label(self, i))
            .collect()
    }

    /// The code tokens that carry text (no layout tokens).
    pub fn text_tokens(&self) -> impl Iterator<Item = &Token<'a>> {
        self.tokens.iter().filter(|t| !t.is_layout())
    }
}

/// The normalized text of some tokens (see [`Program::normalized_text`]).
pub fn normalized_text_of(tokens: &[Token<'_>]) -> String {
    let mut out = String::with_capacity(tokens.len() * 4);
    for t in tokens {
        let piece = match t.kind {
            TokenKind::Newline => ";",
            TokenKind::Indent => "{",
            TokenKind::Dedent => "}",
            _ => t.text,
        };
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(piece);
    }
    out
}

/// The canonical label of token `i`: what stays when identifiers chosen by the author and
/// literal values are forgotten.
///
/// - keywords, operators, builtins, `self` and imported aliases (`torch`, `nn`, `F`) stay;
/// - an attribute reached from an external name (`nn.Conv2d`, `torch.nn.functional.relu`)
///   stays, and so does a method called on anything but `self` (`x.view(...)`, `.softmax(`);
/// - a keyword argument name in a call (`dim=`) stays (a parameter's name in a `def` does not);
/// - any other name becomes `ID`, numbers `NUM`, strings `STR`, layout `NL`, `IN`, `DE`.
pub fn canonical_label<'a>(p: &Program<'a>, i: usize) -> &'a str {
    let t = p.tokens[i];
    match t.kind {
        TokenKind::Number => "NUM",
        TokenKind::String => "STR",
        TokenKind::Newline => "NL",
        TokenKind::Indent => "IN",
        TokenKind::Dedent => "DE",
        TokenKind::Op => t.text,
        TokenKind::Name => {
            if is_keyword(t.text) {
                return t.text;
            }
            let prev_is_dot = i > 0 && p.tokens[i - 1].is_op(".");
            if prev_is_dot {
                let root = chain_root(&p.tokens, i);
                let called = p.tokens.get(i + 1).is_some_and(|n| n.is_op("("));
                return match root {
                    Some(r) if r != "self" && r != "cls" && p.is_external(r) => t.text,
                    Some("self") | Some("cls") => "ID",
                    _ if called => t.text,
                    _ => "ID",
                };
            }
            if p.is_external(t.text) {
                return t.text;
            }
            let next_is_eq = p.tokens.get(i + 1).is_some_and(|n| n.is_op("="));
            let prev_opens_arg =
                i > 0 && (p.tokens[i - 1].is_op("(") || p.tokens[i - 1].is_op(","));
            if next_is_eq && prev_opens_arg && in_call_brackets(&p.tokens, i) {
                return t.text;
            }
            "ID"
        }
    }
}

/// The first name of the dotted chain that ends at token `i` (`torch` for `torch.nn.relu`),
/// or `None` when the chain starts with a call or subscript result.
pub fn chain_root<'a>(tokens: &[Token<'a>], i: usize) -> Option<&'a str> {
    let mut j = i;
    loop {
        if j >= 2 && tokens[j - 1].is_op(".") && tokens[j - 2].kind == TokenKind::Name {
            j -= 2;
        } else if j >= 1 && tokens[j - 1].is_op(".") {
            return None;
        } else {
            return Some(tokens[j].text);
        }
    }
}

/// The full dotted chain that ends at token `i` (`torch.nn.functional.relu`).
pub fn dotted_chain(tokens: &[Token<'_>], i: usize) -> String {
    let mut parts = vec![tokens[i].text];
    let mut j = i;
    while j >= 2 && tokens[j - 1].is_op(".") && tokens[j - 2].kind == TokenKind::Name {
        j -= 2;
        parts.push(tokens[j].text);
    }
    if j >= 1 && tokens[j - 1].is_op(".") {
        parts.push("");
    }
    parts.reverse();
    parts.join(".")
}

/// True when token `i` is inside the brackets of a call, not of a `def`'s parameter list (a
/// parameter's name is the author's choice; a keyword argument's name is the callee's API).
fn in_call_brackets(tokens: &[Token<'_>], i: usize) -> bool {
    enclosing_bracket(tokens, i).is_some_and(|j| !opens_parameters(tokens, j))
}

/// The opening bracket that encloses token `i` on its logical line, if any.
pub fn enclosing_bracket(tokens: &[Token<'_>], i: usize) -> Option<usize> {
    let mut depth: i64 = 0;
    for (j, t) in tokens[..i.min(tokens.len())].iter().enumerate().rev() {
        match t.kind {
            TokenKind::Newline | TokenKind::Indent | TokenKind::Dedent => return None,
            TokenKind::Op => match t.text {
                ")" | "]" | "}" => depth += 1,
                "(" | "[" | "{" => {
                    if depth == 0 {
                        return Some(j);
                    }
                    depth -= 1;
                }
                _ => {}
            },
            _ => {}
        }
    }
    None
}

/// True when the bracket at `j` opens a `def`'s parameter list (`def name(`).
pub fn opens_parameters(tokens: &[Token<'_>], j: usize) -> bool {
    j >= 2 && tokens[j - 2].text == "def"
}

/// Removes string-only expression statements (docstrings, and bare strings used as comments).
fn strip_docstrings(tokens: Vec<Token<'_>>) -> Vec<Token<'_>> {
    let mut out = Vec::with_capacity(tokens.len());
    let mut i = 0;
    while i < tokens.len() {
        let at_stmt_start = out.last().is_none_or(|t: &Token<'_>| t.is_layout());
        if at_stmt_start && tokens[i].kind == TokenKind::String {
            let mut j = i;
            while j < tokens.len() && tokens[j].kind == TokenKind::String {
                j += 1;
            }
            if j >= tokens.len() || tokens[j].kind == TokenKind::Newline {
                i = (j + 1).min(tokens.len());
                continue;
            }
        }
        out.push(tokens[i]);
        i += 1;
    }
    out
}

/// Names bound by `import` and `from ... import` statements.
fn import_aliases<'a>(tokens: &[Token<'a>]) -> HashSet<&'a str> {
    let mut names = HashSet::new();
    let mut i = 0;
    while i < tokens.len() {
        let stmt_start = i == 0 || tokens[i - 1].is_layout();
        if stmt_start && tokens[i].kind == TokenKind::Name {
            let end = tokens[i..]
                .iter()
                .position(|t| t.kind == TokenKind::Newline)
                .map_or(tokens.len(), |p| i + p);
            names.extend(import_bindings(&tokens[i..end]));
            i = end + 1;
        } else {
            i += 1;
        }
    }
    names
}

/// The names one statement binds when it is an `import` or `from ... import` statement
/// (`x` for `import a.b as x`, `a` for `import a.b`, `c` for `from a import b as c`); nothing
/// for any other statement.
pub fn import_bindings<'a>(stmt: &[Token<'a>]) -> Vec<&'a str> {
    let mut names = Vec::new();
    match stmt.first().map(|t| t.text) {
        Some("import") => {
            // import a.b.c [as x], d
            for part in stmt[1..].split(|t| t.is_op(",")) {
                if let Some(pos) = part.iter().position(|t| t.text == "as") {
                    if let Some(alias) = part.get(pos + 1) {
                        names.push(alias.text);
                    }
                } else if let Some(first) = part.first() {
                    names.push(first.text);
                }
            }
        }
        Some("from") => {
            if let Some(imp) = stmt.iter().position(|t| t.text == "import") {
                let list: Vec<Token<'a>> = stmt[imp + 1..]
                    .iter()
                    .filter(|t| !t.is_op("(") && !t.is_op(")"))
                    .copied()
                    .collect();
                for part in list.split(|t| t.is_op(",")) {
                    if let Some(pos) = part.iter().position(|t| t.text == "as") {
                        if let Some(alias) = part.get(pos + 1) {
                            names.push(alias.text);
                        }
                    } else if let Some(first) = part.first()
                        && first.kind == TokenKind::Name
                    {
                        names.push(first.text);
                    }
                }
            }
        }
        _ => {}
    }
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\nclass Model(nn.Module):\n    \"\"\"A conv.\"\"\"\n    def __init__(self, c):\n        super().__init__()\n        self.conv = nn.Conv2d(c, 8, 3)  # layer\n\n    def forward(self, x):\n        return F.relu(self.conv(x)).view(x.size(0), -1)\n";

    #[test]
    fn docstrings_comments_and_whitespace_do_not_change_the_exact_key() {
        let b = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\nclass Model(nn.Module):\n  def __init__(self, c):\n    super().__init__()\n    self.conv = nn.Conv2d(c,\n        8, 3)\n  def forward(self, x):\n    'not a docstring position but a bare string'\n    return F.relu(self.conv(x)).view(x.size(0), -1)\n";
        assert_eq!(Program::parse(A).exact_key(), Program::parse(b).exact_key());
        let c = A.replace("8, 3", "8, 5");
        assert_ne!(
            Program::parse(A).exact_key(),
            Program::parse(&c).exact_key()
        );
    }

    #[test]
    fn canonical_labels_forget_names_but_keep_operators() {
        let p = Program::parse(A);
        let labels = p.canonical_labels().join(" ");
        assert!(
            labels.contains("nn . Conv2d ( ID , NUM , NUM )"),
            "{labels}"
        );
        assert!(
            labels.contains("F . relu ( self . ID ( ID ) ) . view ( ID . size ( NUM )"),
            "{labels}"
        );
        assert!(labels.contains("class ID ( nn . Module )"), "{labels}");
        let renamed = A
            .replace("conv", "layer0")
            .replace("(self, x)", "(self, inp)")
            .replace("x)", "inp)")
            .replace("x.size", "inp.size");
        assert_eq!(
            Program::parse(&renamed).canonical_labels(),
            p.canonical_labels()
        );
    }

    #[test]
    fn import_aliases_are_found() {
        let p = Program::parse(
            "import torch, numpy as np\nfrom torch import (nn,\n  Tensor as T)\nimport a.b.c\n",
        );
        for name in ["torch", "np", "nn", "T", "a"] {
            assert!(p.import_aliases.contains(name), "{name}");
        }
        assert!(!p.import_aliases.contains("numpy"));
    }
}
