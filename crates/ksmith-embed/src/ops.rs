//! The operators a program calls: library layers and functions (`nn.Conv2d`, `F.relu`,
//! `torch.matmul`), tensor methods (`.view`, `.softmax`) and operator symbols (`@`, `+`).
//!
//! The input builders `get_inputs` and `get_init_inputs` are skipped: their `torch.randn` calls
//! are not part of the computation.

use crate::lexer::TokenKind;
use crate::program::{Program, chain_root, dotted_chain};

/// One call of an operator.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct OpCall {
    /// How it was written, with the alias (`nn.Conv2d`, `F.relu`, `.view`, `@`).
    pub qualified: String,
    /// Its canonical name: the last part, lowercased (`conv2d`, `relu`, `view`, `@`).
    pub name: String,
}

const INPUT_BUILDERS: &[&str] = &["get_inputs", "get_init_inputs"];
const SYMBOL_OPS: &[&str] = &["@", "+", "-", "*", "/", "**", "+=", "-=", "*=", "/=", "@="];

/// Summary of what a program computes.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProgramSummary {
    /// Operator calls in source order (input builders excluded).
    pub ops: Vec<OpCall>,
    /// Number of `class` statements.
    pub classes: usize,
    /// Number of `for` and `while` statements outside the input builders.
    pub loops: usize,
    /// Number of logical lines outside the input builders.
    pub statements: usize,
}

/// Summarizes the operators and structure of a program.
pub fn summarize(p: &Program<'_>) -> ProgramSummary {
    let toks = &p.tokens;
    let mut s = ProgramSummary::default();
    let mut depth_indent = 0usize;
    let mut skip_until_indent: Option<usize> = None; // skipping a builder body at this depth
    let mut pending_skip = false;
    for i in 0..toks.len() {
        let t = toks[i];
        match t.kind {
            TokenKind::Indent => {
                depth_indent += 1;
                if pending_skip {
                    skip_until_indent = Some(depth_indent);
                    pending_skip = false;
                }
                continue;
            }
            TokenKind::Dedent => {
                if skip_until_indent == Some(depth_indent) {
                    skip_until_indent = None;
                }
                depth_indent = depth_indent.saturating_sub(1);
                continue;
            }
            TokenKind::Newline => continue,
            _ => {}
        }
        let stmt_start = i == 0 || toks[i - 1].is_layout();
        if stmt_start
            && t.text == "def"
            && let Some(name) = toks.get(i + 1)
            && INPUT_BUILDERS.contains(&name.text)
            && skip_until_indent.is_none()
        {
            pending_skip = true;
        }
        if skip_until_indent.is_some() {
            continue;
        }
        if stmt_start {
            s.statements += 1;
            match t.text {
                "class" if t.kind == TokenKind::Name => s.classes += 1,
                "for" | "while" if t.kind == TokenKind::Name => s.loops += 1,
                _ => {}
            }
        }
        if t.kind == TokenKind::Op && SYMBOL_OPS.contains(&t.text) {
            // `-` and `*` as unary/star-args are not arithmetic.
            let prev = if i > 0 { Some(toks[i - 1]) } else { None };
            let binary = prev.is_some_and(|p| {
                matches!(
                    p.kind,
                    TokenKind::Name | TokenKind::Number | TokenKind::String
                ) && !crate::program::is_keyword(p.text)
                    || p.is_op(")")
                    || p.is_op("]")
            });
            if binary {
                s.ops.push(OpCall {
                    qualified: t.text.to_string(),
                    name: t.text.trim_end_matches('=').to_string(),
                });
            }
            continue;
        }
        if t.kind != TokenKind::Name || !toks.get(i + 1).is_some_and(|n| n.is_op("(")) {
            continue;
        }
        if t.text.starts_with("__") {
            continue;
        }
        let prev_is_dot = i > 0 && toks[i - 1].is_op(".");
        if prev_is_dot {
            match chain_root(toks, i) {
                Some("self") | Some("cls") => {}
                Some(root) if p.is_external(root) => s.ops.push(OpCall {
                    qualified: dotted_chain(toks, i),
                    name: t.text.to_ascii_lowercase(),
                }),
                _ => s.ops.push(OpCall {
                    qualified: format!(".{}", t.text),
                    name: t.text.to_ascii_lowercase(),
                }),
            }
        } else if p.import_aliases.contains(t.text) {
            // `from torch.nn.functional import relu; relu(x)`
            s.ops.push(OpCall {
                qualified: t.text.to_string(),
                name: t.text.to_ascii_lowercase(),
            });
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_layers_functions_methods_and_symbols() {
        let src = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\nfrom torch import sigmoid\n\nclass Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.conv = nn.Conv2d(3, 8, 3)\n    def forward(self, x, w):\n        x = F.relu(self.conv(x))\n        for _ in range(2):\n            x = sigmoid(x) * 2\n        return torch.matmul(x.flatten(1), w) @ w\n\ndef get_inputs():\n    return [torch.randn(1, 3, 8, 8), torch.rand(4, 4)]\n\ndef get_init_inputs():\n    return []\n";
        let s = summarize(&Program::parse(src));
        let q: Vec<&str> = s.ops.iter().map(|o| o.qualified.as_str()).collect();
        assert_eq!(
            q,
            vec![
                "nn.Conv2d",
                "F.relu",
                "sigmoid",
                "*",
                "torch.matmul",
                ".flatten",
                "@"
            ]
        );
        assert_eq!(s.ops[0].name, "conv2d");
        assert_eq!(s.classes, 1);
        assert_eq!(s.loops, 1);
        assert!(!q.contains(&"torch.randn"));
    }

    #[test]
    fn unary_minus_and_star_args_are_not_ops() {
        let s = summarize(&Program::parse(
            "import torch\ndef f(*a):\n    return torch.cat([-a[0], *a], -1)\n",
        ));
        let q: Vec<&str> = s.ops.iter().map(|o| o.qualified.as_str()).collect();
        assert_eq!(q, vec!["torch.cat"]);
    }
}
