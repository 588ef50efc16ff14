//! The KernelBench contract of a task program that can be checked without running it:
//! `get_init_inputs()` returns the constructor's positional arguments, since the evaluator (like
//! KernelBench) builds the model as `Model(*get_init_inputs())`.
//!
//! The probe writes only that form; this check is where tasks are written (cluster,
//! `import-tasks`), so a program returning `[[args], {kwargs}]` (a form the probe once wrote and
//! a hand-written task may still use) never becomes a task the evaluator cannot build.

use crate::lexer::{Token, TokenKind, tokenize};

/// Why a program breaks the contract, in words; `None` when it keeps it (as far as a static
/// reading can tell: a `return` of an `[args, kwargs]` display is what is refused).
pub fn init_inputs_violation(program: &str) -> Option<String> {
    let tokens = tokenize(program);
    let body = function_body(&tokens, "get_init_inputs")?;
    let mut i = 0;
    while i < body.len() {
        let t = &body[i];
        if t.kind == TokenKind::Name && t.text == "return" && returns_args_kwargs(&body[i + 1..]) {
            return Some(
                "get_init_inputs() returns [args, kwargs]; the evaluator builds \
                 Model(*get_init_inputs()), so it must return the positional arguments"
                    .to_string(),
            );
        }
        i += 1;
    }
    None
}

/// The tokens of the body of the last top-level `def <name>(`.
fn function_body<'t, 'a>(tokens: &'t [Token<'a>], name: &str) -> Option<&'t [Token<'a>]> {
    let mut found = None;
    let mut depth = 0usize; // indentation levels
    for (i, t) in tokens.iter().enumerate() {
        match t.kind {
            TokenKind::Indent => depth += 1,
            TokenKind::Dedent => depth = depth.saturating_sub(1),
            TokenKind::Name
                if depth == 0
                    && t.text == "def"
                    && tokens.get(i + 1).is_some_and(|n| n.text == name) =>
            {
                found = Some(i);
            }
            _ => {}
        }
    }
    let start = found?;
    // The body runs from the first Indent after the header to its matching Dedent.
    let mut j = start;
    while j < tokens.len() && tokens[j].kind != TokenKind::Indent {
        j += 1;
    }
    let begin = j + 1;
    let mut level = 0usize;
    for (k, t) in tokens.iter().enumerate().skip(j) {
        match t.kind {
            TokenKind::Indent => level += 1,
            TokenKind::Dedent => {
                level -= 1;
                if level == 0 {
                    return tokens.get(begin..k);
                }
            }
            _ => {}
        }
    }
    tokens.get(begin..)
}

/// True when the expression starting at `rest[0]` (up to the end of its line) is a list or
/// tuple display of exactly two items, a list or tuple display and a dict display.
fn returns_args_kwargs(rest: &[Token<'_>]) -> bool {
    let line: Vec<&Token<'_>> = rest
        .iter()
        .take_while(|t| t.kind != TokenKind::Newline)
        .collect();
    let (Some(open), Some(close)) = (line.first(), line.last()) else {
        return false;
    };
    let outer_ok = (open.is_op("[") && close.is_op("]")) || (open.is_op("(") && close.is_op(")"));
    if !outer_ok || line.len() < 2 {
        return false;
    }
    // Items at depth 1, split by commas.
    let mut items: Vec<Vec<&Token<'_>>> = vec![Vec::new()];
    let mut depth = 0i32;
    for t in &line[1..line.len() - 1] {
        if t.is_op("[") || t.is_op("(") || t.is_op("{") {
            depth += 1;
        } else if t.is_op("]") || t.is_op(")") || t.is_op("}") {
            depth -= 1;
        }
        if depth == 0 && t.is_op(",") {
            items.push(Vec::new());
        } else if let Some(last) = items.last_mut() {
            last.push(t);
        }
    }
    if items.last().is_some_and(|i| i.is_empty()) {
        items.pop();
    }
    let display = |item: &Vec<&Token<'_>>, open: &str, close: &str| {
        item.first().is_some_and(|t| t.is_op(open)) && item.last().is_some_and(|t| t.is_op(close))
    };
    items.len() == 2
        && (display(&items[0], "[", "]") || display(&items[0], "(", ")"))
        && display(&items[1], "{", "}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn program(init_body: &str) -> String {
        format!(
            "import torch\n\n\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x\n\n\ndef get_inputs():\n    return [[1], {{}}]\n\n\ndef get_init_inputs():\n{init_body}\n"
        )
    }

    #[test]
    fn the_args_kwargs_form_is_refused_and_positional_forms_pass() {
        for bad in [
            "    return [[4, 8], {'heads': 2}]",
            "    return ([4], {})",
            "    _orig = _ksmith_original_get_init_inputs()\n    return [[_orig[0]], {'depth': 2}]",
        ] {
            let v = init_inputs_violation(&program(bad));
            assert!(
                v.as_deref().is_some_and(|s| s.contains("[args, kwargs]")),
                "{bad}: {v:?}"
            );
        }
        for good in [
            "    return [4, 8]",
            "    return [[4, 4], 8]",
            "    return [{'a': 1}, [2]]",
            "    return []",
            "    return [Config(), {'x': 1}, 3]",
            // A constructor argument that is a module the call site builds (extract).
            "    return [256, TwoWayTransformer(depth=2, embedding_dim=256)]",
            "    return [Block(dims=[4, 4]), {'x': 1}]",
        ] {
            assert_eq!(init_inputs_violation(&program(good)), None, "{good}");
        }
        // get_inputs may return anything: only get_init_inputs is the constructor's.
        assert_eq!(init_inputs_violation(&program("    return [4]")), None);
    }
}
