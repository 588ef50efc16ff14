//! The rules of CPython's compiler that tree-sitter-python does not enforce.
//!
//! tree-sitter is error-tolerant and also accepts Python 2: a statement can parse without an
//! ERROR node and still be refused by CPython's `compile()`. Every inlined statement is checked
//! here, so an `ok` program always compiles. Checked (each against real CPython in the tests):
//!
//! - indentation: the tokenizer's `TabError` (a line whose indentation compares differently
//!   with tabs as 8 columns and as 1) and `IndentationError` (a dedent to no open level);
//! - a block with no statement (`def f():` followed only by a comment);
//! - Python 2 forms: `print x`, `exec code`, `<>`, `10L`, `0777`, `except E, e:`,
//!   `raise E, "message"`, tuple parameters (`def f((a, b)):`), `async`/`await` as names;
//! - parameters: one without a default after one with a default, a name given twice;
//! - call arguments: a positional argument after a keyword argument or `**`, `*` after `**`,
//!   a keyword given twice;
//! - `return`/`yield` outside a function, `break`/`continue` outside a loop.

use tree_sitter::Node;

use crate::syntax::{Kinds, text};

/// Where a node sits: inside a function body, inside a loop body.
#[derive(Clone, Copy)]
struct Context {
    function: bool,
    function_or_lambda: bool,
    loop_body: bool,
}

/// The 1-based line of the first place where the top-level statement `node` breaks a rule of
/// CPython's compiler, if any. (The messages below are CPython's, for the reader.)
pub(crate) fn first_violation(node: Node<'_>, src: &str) -> Option<u32> {
    let k = Kinds::get();
    let mut found: Option<u32> = None;
    let mut note = |n: Node<'_>, _message: &'static str| {
        let line = n.start_position().row as u32 + 1;
        found = Some(found.map_or(line, |f| f.min(line)));
    };
    // Indentation only needs checking where a tab or form feed could make it ambiguous.
    let tabs = text(src, node).contains(['\t', '\x0c']);
    let mut line_starts: Vec<Node<'_>> = vec![node];
    let top = Context {
        function: false,
        function_or_lambda: false,
        loop_body: false,
    };
    // One depth-first walk with a cursor; `stack` holds (kind, context) of the current node
    // and its ancestors.
    let mut cursor = node.walk();
    let mut stack: Vec<(u16, Context)> = vec![(node.kind_id(), top)];
    loop {
        let n = cursor.node();
        let (kind, ctx) = stack[stack.len() - 1];
        if n.is_named() {
            check_node(n, kind, ctx, src, k, &mut note);
        }
        if cursor.goto_first_child() {
            stack.push(child_entry(&cursor, kind, ctx, top, k));
        } else {
            loop {
                if stack.len() > 1 && cursor.goto_next_sibling() {
                    let (parent_kind, parent_ctx) = stack[stack.len() - 2];
                    let entry = child_entry(&cursor, parent_kind, parent_ctx, top, k);
                    let last = stack.len() - 1;
                    stack[last] = entry;
                    break;
                }
                if stack.len() <= 1 || !cursor.goto_parent() {
                    return match (
                        found,
                        tabs.then(|| indentation(&line_starts, src)).flatten(),
                    ) {
                        (Some(a), Some(b)) => Some(a.min(b)),
                        (a, b) => a.or(b),
                    };
                }
                stack.pop();
            }
        }
        if tabs {
            let child = cursor.node();
            let (parent_kind, _) = stack[stack.len() - 2];
            if child.is_named()
                && ((parent_kind == k.block && child.kind_id() != k.comment)
                    || is_line_start(child.kind_id(), k))
            {
                line_starts.push(child);
            }
        }
    }
}

/// The (kind, context) of the node under `cursor`, a child of a `parent_kind` node whose
/// context is `ctx`: function and class bodies start a new context, loop bodies are in a loop
/// (a loop's `else` is not: `break` there needs an outer loop).
fn child_entry(
    cursor: &tree_sitter::TreeCursor<'_>,
    parent_kind: u16,
    ctx: Context,
    top: Context,
    k: &Kinds,
) -> (u16, Context) {
    let scoping = parent_kind == k.function_definition
        || parent_kind == k.lambda
        || parent_kind == k.class_definition
        || parent_kind == k.for_statement
        || parent_kind == k.while_statement;
    // The field lookup is the costly part of a step: only scoping parents need it.
    let body = scoping && cursor.field_id().map(|f| f.get()) == Some(k.f_body);
    let child = if body && parent_kind == k.function_definition {
        Context {
            function: true,
            function_or_lambda: true,
            loop_body: false,
        }
    } else if body && parent_kind == k.lambda {
        Context {
            function_or_lambda: true,
            ..ctx
        }
    } else if body && parent_kind == k.class_definition {
        top
    } else if body && (parent_kind == k.for_statement || parent_kind == k.while_statement) {
        Context {
            loop_body: true,
            ..ctx
        }
    } else {
        ctx
    };
    (cursor.node().kind_id(), child)
}

/// Clauses and decorators start logical lines of their own.
fn is_line_start(kind: u16, k: &Kinds) -> bool {
    kind == k.elif_clause
        || kind == k.else_clause
        || kind == k.except_clause
        || kind == k.finally_clause
        || kind == k.case_clause
        || kind == k.decorator
}

fn check_node(
    n: Node<'_>,
    kind: u16,
    ctx: Context,
    src: &str,
    k: &Kinds,
    note: &mut impl FnMut(Node<'_>, &'static str),
) {
    if kind == k.block {
        let mut c = n.walk();
        if !n.named_children(&mut c).any(|s| s.kind_id() != k.comment) {
            note(n, "expected an indented block");
        }
    } else if kind == k.print_statement {
        note(n, "Missing parentheses in call to 'print'");
    } else if kind == k.exec_statement {
        note(n, "Missing parentheses in call to 'exec'");
    } else if kind == k.comparison_operator {
        let mut c = n.walk();
        if n.children(&mut c)
            .any(|o| !o.is_named() && o.kind() == "<>")
        {
            note(n, "invalid syntax (<>)");
        }
    } else if kind == k.integer {
        let t = text(src, n);
        if t.ends_with(['l', 'L']) {
            note(n, "invalid decimal literal (Python 2 long)");
        } else if t.len() > 1
            && t.starts_with('0')
            && t.bytes().all(|b| b.is_ascii_digit() || b == b'_')
            && t.bytes().any(|b| b.is_ascii_digit() && b != b'0')
        {
            note(
                n,
                "leading zeros in decimal integer literals are not permitted",
            );
        }
    } else if kind == k.except_clause {
        let mut c = n.walk();
        if n.children_by_field_name("value", &mut c).count() > 1 {
            note(n, "multiple exception types must be parenthesized");
        }
    } else if kind == k.raise_statement {
        let mut c = n.walk();
        if n.named_children(&mut c)
            .any(|e| e.kind_id() == k.expression_list)
        {
            note(n, "invalid syntax (Python 2 raise)");
        }
    } else if kind == k.parameters || kind == k.lambda_parameters {
        check_parameters(n, src, k, note);
    } else if kind == k.argument_list {
        check_arguments(n, src, k, note);
    } else if kind == k.identifier {
        if matches!(text(src, n), "async" | "await") {
            note(n, "invalid syntax (async/await as a name)");
        }
    } else if kind == k.return_statement && !ctx.function {
        note(n, "'return' outside function");
    } else if kind == k.yield_expression && !ctx.function_or_lambda {
        note(n, "'yield' outside function");
    } else if (kind == k.break_statement || kind == k.continue_statement) && !ctx.loop_body {
        note(n, "'break' or 'continue' outside loop");
    }
}

/// The name a parameter binds, if it is a plain one (not a tuple pattern).
fn parameter_name<'s>(p: Node<'_>, src: &'s str, k: &Kinds) -> Option<&'s str> {
    let kind = p.kind_id();
    if kind == k.identifier {
        return Some(text(src, p));
    }
    if kind == k.default_parameter || kind == k.typed_default_parameter {
        return p
            .child_by_field_id(k.f_name)
            .filter(|n| n.kind_id() == k.identifier)
            .map(|n| text(src, n));
    }
    if kind == k.typed_parameter
        || kind == k.list_splat_pattern
        || kind == k.dictionary_splat_pattern
    {
        let mut c = p.walk();
        let inner = p
            .named_children(&mut c)
            .find(|n| n.kind_id() != k.comment)?;
        if inner.kind_id() == k.identifier {
            return Some(text(src, inner));
        }
        return parameter_name(inner, src, k);
    }
    None
}

fn check_parameters(
    params: Node<'_>,
    src: &str,
    k: &Kinds,
    note: &mut impl FnMut(Node<'_>, &'static str),
) {
    let mut seen: Vec<&str> = Vec::new();
    let mut default_seen = false;
    let mut positional = true;
    let mut c = params.walk();
    for p in params.named_children(&mut c) {
        let kind = p.kind_id();
        if kind == k.comment {
            continue;
        }
        let splat = if kind == k.typed_parameter {
            p.named_child(0).map(|n| n.kind_id())
        } else {
            Some(kind)
        };
        if kind == k.tuple_pattern
            || (kind == k.default_parameter
                && p.child_by_field_id(k.f_name)
                    .is_some_and(|n| n.kind_id() == k.tuple_pattern))
        {
            note(p, "invalid syntax (Python 2 tuple parameter)");
            continue;
        }
        if kind == k.keyword_separator
            || splat == Some(k.list_splat_pattern)
            || splat == Some(k.dictionary_splat_pattern)
        {
            positional = false;
        } else if kind == k.default_parameter || kind == k.typed_default_parameter {
            default_seen = true;
        } else if positional && default_seen && (kind == k.identifier || kind == k.typed_parameter)
        {
            note(
                p,
                "parameter without a default follows parameter with a default",
            );
        }
        if let Some(name) = parameter_name(p, src, k) {
            if seen.contains(&name) {
                note(p, "duplicate argument in function definition");
            }
            seen.push(name);
        }
    }
}

fn check_arguments(
    args: Node<'_>,
    src: &str,
    k: &Kinds,
    note: &mut impl FnMut(Node<'_>, &'static str),
) {
    let mut keywords: Vec<&str> = Vec::new();
    let mut keyword_seen = false;
    let mut double_star_seen = false;
    let mut c = args.walk();
    for a in args.named_children(&mut c) {
        let kind = a.kind_id();
        if kind == k.comment {
            continue;
        }
        if kind == k.keyword_argument {
            keyword_seen = true;
            if let Some(name) = a.child_by_field_id(k.f_name).map(|n| text(src, n)) {
                if keywords.contains(&name) {
                    note(a, "keyword argument repeated");
                }
                keywords.push(name);
            }
        } else if kind == k.dictionary_splat {
            double_star_seen = true;
        } else if kind == k.list_splat {
            if double_star_seen {
                note(
                    a,
                    "iterable argument unpacking follows keyword argument unpacking",
                );
            }
        } else if keyword_seen || double_star_seen {
            note(a, "positional argument follows keyword argument");
        }
    }
}

/// The line of the first `TabError` (inconsistent use of tabs and spaces in indentation) or bad
/// dedent of CPython's tokenizer, which checks the indentation of logical lines (`line_starts`:
/// the nodes that begin one, in any order): each is compared with the open levels twice,
/// counting a tab as up to 8 columns and as 1, and the two comparisons must agree.
fn indentation(line_starts: &[Node<'_>], src: &str) -> Option<u32> {
    let mut rows: Vec<(usize, usize)> = line_starts
        .iter()
        .map(|n| {
            (
                n.start_position().row,
                n.start_byte() - n.start_position().column,
            )
        })
        .collect();
    rows.sort_unstable();
    rows.dedup_by_key(|r| r.0);
    let mut levels: Vec<(usize, usize)> = vec![(0, 0)];
    for (row, line_start) in rows {
        let prefix = src.get(line_start..)?;
        let (mut col, mut alt) = (0usize, 0usize);
        for b in prefix.bytes() {
            match b {
                b' ' => {
                    col += 1;
                    alt += 1;
                }
                b'\t' => {
                    col = (col / 8 + 1) * 8;
                    alt += 1;
                }
                b'\x0c' => {
                    col = 0;
                    alt = 0;
                }
                _ => break,
            }
        }
        let line = row as u32 + 1;
        let &(top_col, top_alt) = levels.last()?;
        if col == top_col {
            if alt != top_alt {
                return Some(line); // TabError
            }
        } else if col > top_col {
            if alt <= top_alt {
                return Some(line); // TabError
            }
            levels.push((col, alt));
        } else {
            while levels.len() > 1 && levels.last().is_some_and(|l| col < l.0) {
                levels.pop();
            }
            let &(level_col, level_alt) = levels.last()?;
            if col != level_col {
                // IndentationError: unindent does not match any outer indentation level.
                return Some(line);
            }
            if alt != level_alt {
                return Some(line); // TabError
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpython_check::cpython_verdicts;
    use crate::syntax::{first_error_line, parse};

    /// The first violation in a whole file, after checking tree-sitter itself accepts it.
    fn violation(src: &str) -> Option<u32> {
        let tree = parse(src, std::time::Duration::from_secs(5)).unwrap();
        let root = tree.root_node();
        assert_eq!(first_error_line(root), None, "tree-sitter refuses:\n{src}");
        let mut c = root.walk();
        root.named_children(&mut c)
            .filter_map(|n| first_violation(n, src))
            .min()
    }

    /// Forms tree-sitter accepts and CPython refuses, with the line CPython names (the
    /// integration tests check each against CPython itself).
    const REFUSED: &[(&str, &str, u32)] = &[
        (
            "tab_error",
            "class M:\n    def f(self, x):\n        if x:\n\t    return x\n        return x\n",
            4,
        ),
        (
            "empty_block",
            "class M:\n    def f(self, x):\n        return x\n\n    def g(self):\n        # later\n\nclass N:\n    pass\n",
            5,
        ),
        ("print_statement", "def f(x):\n    print x\n", 2),
        ("exec_statement", "def f(x):\n    exec \"x = 1\"\n", 2),
        ("not_equal_py2", "def f(x):\n    return 1 <> x\n", 2),
        ("long_literal", "def f(x):\n    return x * 10L\n", 2),
        ("leading_zero", "def f(x):\n    return x * 0777\n", 2),
        (
            "except_comma",
            "def f(x):\n    try:\n        return x\n    except ValueError, e:\n        return e\n",
            4,
        ),
        (
            "raise_comma",
            "def f(x):\n    raise ValueError, \"bad\"\n",
            2,
        ),
        ("tuple_parameter", "def f(self, (a, b)):\n    return a\n", 1),
        (
            "async_name",
            "def f(x):\n    async = x\n    return async\n",
            2,
        ),
        ("await_name", "def f(x):\n    return g(await=x)\n", 2),
        ("default_then_required", "def f(a=1, b):\n    return b\n", 1),
        ("duplicate_parameter", "def f(a, a):\n    return a\n", 1),
        (
            "positional_after_keyword",
            "def f(x):\n    return max(key=abs, x)\n",
            2,
        ),
        (
            "positional_after_double_star",
            "def f(x, kw):\n    return max(**kw, x)\n",
            2,
        ),
        (
            "star_after_double_star",
            "def f(x, kw):\n    return max(**kw, *x)\n",
            2,
        ),
        (
            "keyword_repeated",
            "def f(x):\n    return max(x, key=abs, key=len)\n",
            2,
        ),
        ("return_in_class", "class M:\n    return 1\n", 2),
        ("yield_in_class", "class M:\n    x = yield\n", 2),
        (
            "break_outside_loop",
            "def f(x):\n    if x:\n        break\n",
            3,
        ),
        (
            "break_in_loop_else",
            "def f(x):\n    for i in x:\n        pass\n    else:\n        continue\n",
            5,
        ),
    ];

    /// Valid Python 3 near each refused form: none of these may be flagged.
    const ACCEPTED: &[&str] = &[
        "class M:\n\tdef f(self, x):\n\t\tif x:\n\t\t\treturn x\n\t\treturn x\n",
        "def f(x):\n    if x:\n        pass  # fine\n    # a comment line\n    return x\n\t# comment lines do not count\n",
        "def f(x):\n    return 0 + 00 + 0_0 + 1_000 + 0x1F + 0o17 + 0b1 + 1j\n",
        "def f(a, b=1, /, c=2, *args, d, e=3, **kw):\n    return max(*args, a, key=abs, *kw, **kw)\n",
        "def f(x, *, key):\n    return max(x, key=key)\n",
        "def f(x):\n    for i in x:\n        while i:\n            break\n        else:\n            continue\n    else:\n        pass\n    return [y for y in x if y]\n",
        "def f(x):\n    g = lambda: (yield)\n    return g\n",
        "async def f(x):\n    await x\n    async for i in x:\n        yield i\n",
        "def f(x):\n    try:\n        return x\n    except (ValueError, TypeError) as e:\n        raise ValueError(\"bad\") from e\n",
        "def f(x):\n    print(x)\n    exec(\"x = 1\")\n    return 1 != x\n",
        "class M:\n    x = 1\n    def f(self):\n        return self.x\n",
    ];

    #[test]
    fn forms_cpython_refuses_are_found_at_their_line() {
        for (name, src, line) in REFUSED {
            assert_eq!(violation(src), Some(*line), "{name}:\n{src}");
        }
    }

    #[test]
    fn valid_python_is_not_flagged() {
        for src in ACCEPTED {
            assert_eq!(violation(src), None, "{src}");
        }
    }

    #[test]
    fn cpython_agrees_on_every_case() {
        let refused: Vec<&str> = REFUSED.iter().map(|r| r.1).collect();
        for ((name, _, _), verdict) in REFUSED.iter().zip(cpython_verdicts(&refused)) {
            assert!(verdict.is_some(), "CPython compiles {name}");
        }
        assert_eq!(cpython_verdicts(ACCEPTED), vec![None; ACCEPTED.len()]);
    }
}
