//! Call sites of a file: where the repository itself builds its classes (`Attention(dim,
//! heads=8)` in another class's `__init__`, a factory, a `__main__` block, a test), with each
//! argument's value when it is a literal or a parameter of the enclosing function whose default
//! is one (`def __init__(self, dim=64): self.attn = Attention(dim)` builds it with 64).
//! Extract prefers these arguments to guesses (`guess`).

use std::collections::HashMap;

use tree_sitter::Node;

use crate::syntax::{Kinds, text};

/// One argument of a call site.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CallArg {
    /// The keyword it is passed by, `None` when positional.
    pub(crate) keyword: Option<String>,
    /// Its value as Python source, when known to be a literal.
    pub(crate) value: Option<String>,
    /// Where a known value came from besides the call itself: the parameter of the enclosing
    /// function whose default it is.
    pub(crate) via_default: Option<String>,
}

/// A call `Name(...)` or `a.Name(...)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CallSite {
    /// The called name (the last attribute of a dotted callee).
    pub(crate) callee: String,
    /// The callee is a bare name (resolved through the file's bindings), not an attribute.
    pub(crate) bare: bool,
    /// Index of the top-level statement it is in.
    pub(crate) stmt: usize,
    /// 1-based line.
    pub(crate) line: u32,
    /// Its arguments; a call with `*args` or `**kwargs` keeps the ones before them.
    pub(crate) args: Vec<CallArg>,
    /// It passes `*args` or `**kwargs`: arguments after the known ones are unknown.
    pub(crate) open: bool,
}

/// Every call in `top` (the file's top-level statements, in order) whose callee starts with an
/// uppercase letter (a class, by Python's naming convention), at most `limit` of them.
pub(crate) fn collect(top: &[Node<'_>], src: &str, limit: usize) -> Vec<CallSite> {
    let k = Kinds::get();
    let mut out = Vec::new();
    for (si, node) in top.iter().enumerate() {
        // (node, defaults of the innermost enclosing function's parameters)
        let mut stack: Vec<(Node<'_>, usize)> = vec![(*node, 0)];
        let mut scopes: Vec<HashMap<String, String>> = vec![HashMap::new()];
        while let Some((n, scope)) = stack.pop() {
            if out.len() >= limit {
                return out;
            }
            let mut inner = scope;
            if n.kind_id() == k.function_definition {
                scopes.push(literal_defaults(n, src));
                inner = scopes.len() - 1;
            } else if n.kind() == "call"
                && let Some(site) = call_site(n, src, si, &scopes[scope])
            {
                out.push(site);
            }
            let mut c = n.walk();
            for child in n.named_children(&mut c) {
                stack.push((child, inner));
            }
        }
    }
    out
}

/// The parameters of a function whose default is a literal, with its source.
fn literal_defaults(def: Node<'_>, src: &str) -> HashMap<String, String> {
    let k = Kinds::get();
    let mut out = HashMap::new();
    let Some(params) = def.child_by_field_id(k.f_parameters) else {
        return out;
    };
    let mut c = params.walk();
    for p in params.named_children(&mut c) {
        if p.kind_id() == k.default_parameter || p.kind_id() == k.typed_default_parameter {
            let (Some(name), Some(value)) = (
                p.child_by_field_id(k.f_name),
                p.child_by_field_id(k.f_value),
            ) else {
                continue;
            };
            if is_literal(value, src) {
                out.insert(text(src, name).to_string(), text(src, value).to_string());
            }
        }
    }
    out
}

fn call_site(
    call: Node<'_>,
    src: &str,
    stmt: usize,
    defaults: &HashMap<String, String>,
) -> Option<CallSite> {
    let k = Kinds::get();
    let function = call.child_by_field_id(k.f_function)?;
    let (callee, bare) = if function.kind_id() == k.identifier {
        (text(src, function), true)
    } else if function.kind_id() == k.attribute {
        (text(src, function.child_by_field_id(k.f_attribute)?), false)
    } else {
        return None;
    };
    if !callee.starts_with(|c: char| c.is_ascii_uppercase()) {
        return None;
    }
    let list = call.child_by_field_id(k.f_arguments)?;
    if list.kind_id() != k.argument_list {
        return None;
    }
    let mut args = Vec::new();
    let mut open = false;
    let mut c = list.walk();
    for a in list.named_children(&mut c) {
        if a.kind_id() == k.comment {
            continue;
        }
        if a.kind_id() == k.list_splat || a.kind_id() == k.dictionary_splat {
            open = true;
            continue;
        }
        let (keyword, value_node) = if a.kind_id() == k.keyword_argument {
            let name = a
                .child_by_field_id(k.f_name)
                .map(|n| text(src, n).to_string());
            (name, a.child_by_field_id(k.f_value)?)
        } else {
            if open {
                // A positional argument after `*args`: its position is unknown.
                continue;
            }
            (None, a)
        };
        let (value, via_default) = if is_literal(value_node, src) {
            (Some(text(src, value_node).to_string()), None)
        } else if value_node.kind_id() == k.identifier {
            let name = text(src, value_node);
            match defaults.get(name) {
                Some(d) => (Some(d.clone()), Some(name.to_string())),
                None => (None, None),
            }
        } else {
            (None, None)
        };
        args.push(CallArg {
            keyword,
            value,
            via_default,
        });
    }
    Some(CallSite {
        callee: callee.to_string(),
        bare,
        stmt,
        line: call.start_position().row as u32 + 1,
        args,
        open,
    })
}

/// True for a literal Python writes back as the same value: numbers (signed), `True`, `False`,
/// `None`, plain strings, and tuples or lists of those.
pub(crate) fn is_literal(node: Node<'_>, src: &str) -> bool {
    let k = Kinds::get();
    match node.kind() {
        "integer" | "float" | "true" | "false" | "none" => true,
        "string" => {
            let t = text(src, node);
            !t.starts_with(['f', 'F']) && !t.contains('{') && node.named_child_count() <= 3
        }
        "unary_operator" => node
            .named_child(0)
            .is_some_and(|n| matches!(n.kind(), "integer" | "float")),
        "tuple" | "list" | "parenthesized_expression" => {
            let mut c = node.walk();
            let items: Vec<Node<'_>> = node
                .named_children(&mut c)
                .filter(|n| n.kind_id() != k.comment)
                .collect();
            (node.kind() != "parenthesized_expression" || items.len() == 1)
                && items.iter().all(|n| is_literal(*n, src))
        }
        _ => false,
    }
}
