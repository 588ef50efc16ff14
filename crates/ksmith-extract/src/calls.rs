//! Call sites of a file: where the repository itself builds its classes (`Attention(dim,
//! heads=8)` in another class's `__init__`, a factory, a `__main__` block, a test), with each
//! argument's value when it is constant ([`crate::consts`]): a literal, a parameter of the
//! enclosing function whose default is one (`def __init__(self, dim=64): self.attn =
//! Attention(dim)` builds it with 64; a default of `None` is unknown, the function resolves it
//! later), a name the function or the file binds once to a constant, a loop variable over
//! `range(...)` at its first iteration, and arithmetic over those (`int(embed_dim * 2 **
//! i_layer)`, `num_heads[i_layer]`). Extract prefers these arguments to guesses (`guess`).
//!
//! A call of one of its own parameters in an `__init__` (`self.downsample =
//! downsample(input_resolution, dim=dim)` in `BasicLayer.__init__(self, ..., downsample=None)`)
//! is kept too: it builds whatever class a call site of the enclosing class passes for that
//! parameter (`BasicLayer(..., downsample=PatchMerging if i < n - 1 else None)`), which every
//! argument records in [`CallArg::classes`].

use std::collections::HashMap;

use tree_sitter::Node;

use crate::consts::{self, Env, Origin};
use crate::syntax::{Kinds, text};

/// One argument of a call site.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CallArg {
    /// The keyword it is passed by, `None` when positional.
    pub(crate) keyword: Option<String>,
    /// Its value as Python source, when known to be constant.
    pub(crate) value: Option<String>,
    /// Where a known value came from besides the call itself, when it is not a literal:
    /// `default of dim`, `local prompt_embed_dim`, `constant SIZE`, `first iteration of i`, or the
    /// evaluated expression in backquotes.
    pub(crate) via: Option<String>,
    /// When the value is unknown here: the parameter of the enclosing `__init__` it passes on
    /// (`Block(dim, heads=num_heads)` inside `Stage.__init__(self, dim, num_heads)`), whose value
    /// is the one the enclosing class is built with.
    pub(crate) passes: Option<String>,
    /// When the value is a call of a class (`transformer=TwoWayTransformer(depth=2,
    /// embedding_dim=prompt_embed_dim)`, `PreNorm(dim, LinearAttention(dim))`) whose arguments
    /// are each known, or pass on a parameter of the enclosing `__init__`, or are such a call
    /// themselves: that call, with its arguments folded like the site's own. `value` is its
    /// source with the folded values once all of them are known ([`Ctor::complete`]), `None`
    /// until then.
    pub(crate) ctor: Option<Ctor>,
    /// The classes it passes uncalled, as bare names the calling file binds
    /// (`downsample=PatchMerging`, `PatchMerging if last else None`): a class-valued parameter
    /// the callee's `__init__` may call.
    pub(crate) classes: Vec<String>,
    /// Its expression on one line (at most 60 characters), for a guess to say what it replaces.
    pub(crate) expr: String,
}

impl CallArg {
    /// Whether its value is unknown here but may be given by the value the enclosing class is
    /// built with: it passes on a parameter of the enclosing `__init__`, or it is a constructor
    /// call with such an argument.
    pub(crate) fn waits(&self) -> bool {
        self.value.is_none()
            && (self.passes.is_some()
                || self
                    .ctor
                    .as_ref()
                    .is_some_and(|c| c.args.iter().any(CallArg::waits)))
    }

    /// Makes a constructor-call value unknown (its class cannot be resolved, or the program
    /// cannot have it): the argument is then guessed like any unknown one.
    pub(crate) fn forget_ctor(&mut self) {
        if self.ctor.take().is_some() {
            self.value = None;
            self.via = None;
        }
    }
}

/// A constructor call passed as an argument, every argument of it known or waiting for the
/// value the enclosing class is built with ([`CallArg::waits`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Ctor {
    /// The called class, a bare name as the calling file binds it.
    pub(crate) callee: String,
    /// Its arguments.
    pub(crate) args: Vec<CallArg>,
    /// The repository class it builds, once extract has resolved the name ((file, statement)).
    pub(crate) class: Option<(usize, usize)>,
}

impl Ctor {
    /// Whether every argument's value is known.
    pub(crate) fn complete(&self) -> bool {
        self.args.iter().all(|a| a.value.is_some())
    }

    /// The call's source with the folded argument values, each class called by the name
    /// `name_of` gives it (the name it has in the emitted program).
    pub(crate) fn render(&self, name_of: &dyn Fn(&Ctor) -> String) -> String {
        let args: Vec<String> = self
            .args
            .iter()
            .map(|a| {
                let value = match &a.ctor {
                    Some(inner) => inner.render(name_of),
                    None => a.value.clone().unwrap_or_default(),
                };
                match &a.keyword {
                    Some(k) => format!("{k}={value}"),
                    None => value,
                }
            })
            .collect();
        format!("{}({})", name_of(self), args.join(", "))
    }

    /// This call and the constructor calls among its arguments, outermost first.
    pub(crate) fn all(&self) -> Vec<&Ctor> {
        let mut out = vec![self];
        for a in &self.args {
            if let Some(inner) = &a.ctor {
                out.extend(inner.all());
            }
        }
        out
    }
}

/// A scope's constant names, and when the scope is an `__init__`, its parameters that the body
/// does not bind again.
struct Scope {
    env: Env,
    init_params: Vec<String>,
}

/// A call `Name(...)` or `a.Name(...)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CallSite {
    /// The called name (the last attribute of a dotted callee).
    pub(crate) callee: String,
    /// The callee is a bare name (resolved through the file's bindings), not an attribute.
    pub(crate) bare: bool,
    /// For an attribute callee (`nn.Conv2d`), the first name of the object it is read from
    /// (`nn`): a call of another package's same-named class is no call site of the repository's.
    pub(crate) receiver: Option<String>,
    /// Index of the top-level statement it is in.
    pub(crate) stmt: usize,
    /// 1-based line.
    pub(crate) line: u32,
    /// Its arguments; a call with `*args` or `**kwargs` keeps the ones before them.
    pub(crate) args: Vec<CallArg>,
    /// It passes `*args` or `**kwargs`: arguments after the known ones are unknown.
    pub(crate) open: bool,
    /// The callee is a parameter of the enclosing `__init__` (`downsample(...)`), not a class:
    /// it builds the class a call site of the enclosing class passes for that parameter.
    pub(crate) param: bool,
    /// For a call of a parameter, once extract has bound it to a class at a call site of the
    /// enclosing class: that binding, as provenance reads it (`downsample= of BasicLayer at
    /// :560`).
    pub(crate) through: Option<String>,
}

impl CallSite {
    /// Where the call is, as provenance reads it: `call path:line`, followed by `via
    /// <through>` for a call of a class-valued parameter.
    pub(crate) fn place(&self, path: &str) -> String {
        match &self.through {
            Some(through) => format!("call {path}:{} via {through}", self.line),
            None => format!("call {path}:{}", self.line),
        }
    }
}

/// Every call in `top` (the file's top-level statements, in order) whose callee starts with an
/// uppercase letter (a class, by Python's naming convention) or is a parameter of the enclosing
/// `__init__`, at most `limit` of them.
pub(crate) fn collect(top: &[Node<'_>], src: &str, limit: usize) -> Vec<CallSite> {
    let k = Kinds::get();
    let mut out = Vec::new();
    let mut module = Vec::new();
    for node in top {
        bindings(*node, src, &mut module, 0);
    }
    // The constant names of each scope: the file's, then one per function met.
    let mut scopes: Vec<Scope> = vec![Scope {
        env: apply(&module, src, &Env::new(), Origin::Module),
        init_params: Vec::new(),
    }];
    for (si, node) in top.iter().enumerate() {
        // (node, index of the innermost enclosing scope)
        let mut stack: Vec<(Node<'_>, usize)> = vec![(*node, 0)];
        while let Some((n, scope)) = stack.pop() {
            if out.len() >= limit {
                return out;
            }
            let mut inner = scope;
            if n.kind_id() == k.function_definition {
                let made = function_env(n, src, &scopes[scope].env);
                scopes.push(made);
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

/// A name bound in a scope, in the order the scope's text binds them.
enum Bind<'t> {
    /// A parameter with its default.
    Param(String, Node<'t>),
    /// `name = value`.
    Assign(String, Node<'t>),
    /// `for name in range(...)` (the `range` call).
    Loop(String, Node<'t>),
    /// Any other binding: the name's value is unknown.
    Other(String),
}

impl Bind<'_> {
    fn name(&self) -> &str {
        match self {
            Bind::Param(n, _) | Bind::Assign(n, _) | Bind::Loop(n, _) | Bind::Other(n) => n,
        }
    }
}

/// The constant names inside function `def`: those of `parent` (the enclosing scope), then its
/// parameters with a constant default other than `None`, then the names its body binds once to
/// a constant; a name bound twice or otherwise is unknown there.
fn function_env(def: Node<'_>, src: &str, parent: &Env) -> Scope {
    let k = Kinds::get();
    let mut binds = Vec::new();
    let is_init = def
        .child_by_field_id(k.f_name)
        .is_some_and(|n| text(src, n) == "__init__");
    if let Some(params) = def.child_by_field_id(k.f_parameters) {
        let mut c = params.walk();
        for p in params.named_children(&mut c) {
            if p.kind_id() == k.default_parameter || p.kind_id() == k.typed_default_parameter {
                if let (Some(name), Some(value)) = (
                    p.child_by_field_id(k.f_name),
                    p.child_by_field_id(k.f_value),
                ) {
                    binds.push(Bind::Param(text(src, name).to_string(), value));
                }
            } else {
                names_in(p, src, &mut binds);
            }
        }
    }
    let params = binds.len();
    if let Some(body) = def.child_by_field_id(k.f_body) {
        bindings(body, src, &mut binds, 0);
    }
    let init_params = if is_init {
        binds[..params]
            .iter()
            .map(Bind::name)
            .filter(|n| *n != "self" && binds.iter().filter(|b| b.name() == *n).count() == 1)
            .map(str::to_string)
            .collect()
    } else {
        Vec::new()
    };
    Scope {
        env: apply(&binds, src, parent, Origin::Local),
        init_params,
    }
}

/// `parent` updated with `binds` in order: a name bound once to a constant gets its value
/// (`origin` for assignments), any other bound name is removed.
fn apply(binds: &[Bind<'_>], src: &str, parent: &Env, origin: Origin) -> Env {
    let mut counts: HashMap<&str, usize> = HashMap::new();
    for b in binds {
        *counts.entry(b.name()).or_default() += 1;
    }
    let mut env = parent.clone();
    for b in binds {
        let name = b.name();
        let known = if counts.get(name).copied().unwrap_or(0) > 1 {
            None
        } else {
            match b {
                // A default is evaluated where the function is defined.
                Bind::Param(_, value) => consts::eval(*value, src, parent)
                    .filter(|v| *v != consts::Value::None)
                    .map(|v| (v, Origin::Default)),
                Bind::Assign(_, value) => {
                    consts::eval(*value, src, &env).map(|v| (v, origin.clone()))
                }
                Bind::Loop(_, range) => range_start(*range, src, &env),
                Bind::Other(_) => None,
            }
        };
        match known {
            Some(v) => {
                env.insert(name.to_string(), v);
            }
            None => {
                env.remove(name);
            }
        }
    }
    env
}

/// The first value of `range(...)`.
fn range_start(call: Node<'_>, src: &str, env: &Env) -> Option<(consts::Value, Origin)> {
    let list = call.child_by_field_name("arguments")?;
    let mut c = list.walk();
    let args: Vec<Node<'_>> = list.named_children(&mut c).collect();
    let start = match args.as_slice() {
        [_] => consts::Value::Int(0),
        [first, _, ..] => consts::eval(*first, src, env)?,
        [] => return None,
    };
    Some((start, Origin::FirstIteration))
}

/// Whether `node` is a call of the builtin `range`.
fn is_range(node: Node<'_>, src: &str) -> bool {
    node.kind() == "call"
        && node
            .child_by_field_name("function")
            .is_some_and(|f| f.kind() == "identifier" && text(src, f) == "range")
}

/// Every identifier under `node` (a pattern, a parameter, an import), as an unknown binding.
fn names_in(node: Node<'_>, src: &str, out: &mut Vec<Bind<'_>>) {
    if node.kind() == "identifier" {
        out.push(Bind::Other(text(src, node).to_string()));
        return;
    }
    if matches!(node.kind(), "attribute" | "subscript") {
        return;
    }
    let mut c = node.walk();
    for child in node.named_children(&mut c) {
        names_in(child, src, out);
    }
}

/// The bindings of `node` and what it contains, in text order, without entering nested
/// functions, classes and lambdas (their names are bound, their bodies are other scopes).
fn bindings<'t>(node: Node<'t>, src: &str, out: &mut Vec<Bind<'t>>, depth: u32) {
    let k = Kinds::get();
    if depth > 200 {
        return;
    }
    let kind = node.kind();
    match kind {
        "function_definition" | "class_definition" => {
            if let Some(name) = node.child_by_field_id(k.f_name) {
                out.push(Bind::Other(text(src, name).to_string()));
            }
            return;
        }
        "lambda" => return,
        "import_statement"
        | "import_from_statement"
        | "global_statement"
        | "nonlocal_statement"
        | "delete_statement" => {
            names_in(node, src, out);
            return;
        }
        "assignment" => {
            let left = node.child_by_field_id(k.f_left);
            let right = node.child_by_field_id(k.f_right);
            match (left, right) {
                (Some(l), Some(r)) if l.kind() == "identifier" && r.kind() != "assignment" => {
                    out.push(Bind::Assign(text(src, l).to_string(), r));
                }
                (Some(l), _) => names_in(l, src, out),
                _ => {}
            }
            if let Some(r) = right {
                bindings(r, src, out, depth + 1);
            }
            return;
        }
        "augmented_assignment" | "named_expression" | "as_pattern_target" => {
            if let Some(l) = node
                .child_by_field_id(k.f_left)
                .or_else(|| node.child_by_field_id(k.f_name))
            {
                names_in(l, src, out);
            } else if kind == "as_pattern_target" {
                names_in(node, src, out);
            }
        }
        "for_statement" | "for_in_clause" => {
            let left = node.child_by_field_id(k.f_left);
            let right = node.child_by_field_id(k.f_right);
            match (left, right) {
                (Some(l), Some(r)) if l.kind() == "identifier" && is_range(r, src) => {
                    out.push(Bind::Loop(text(src, l).to_string(), r));
                }
                (Some(l), _) => names_in(l, src, out),
                _ => {}
            }
        }
        _ => {}
    }
    let mut c = node.walk();
    for child in node.named_children(&mut c) {
        if (kind == "for_statement" || kind == "for_in_clause")
            && node.child_by_field_id(k.f_left) == Some(child)
        {
            continue;
        }
        bindings(child, src, out, depth + 1);
    }
}

fn call_site(call: Node<'_>, src: &str, stmt: usize, scope: &Scope) -> Option<CallSite> {
    let k = Kinds::get();
    let function = call.child_by_field_id(k.f_function)?;
    let (callee, bare) = if function.kind_id() == k.identifier {
        (text(src, function), true)
    } else if function.kind_id() == k.attribute {
        (text(src, function.child_by_field_id(k.f_attribute)?), false)
    } else {
        return None;
    };
    let param =
        bare && scope.init_params.iter().any(|p| p == callee) && !scope.env.contains_key(callee);
    if !param && !callee.starts_with(|c: char| c.is_ascii_uppercase()) {
        return None;
    }
    let list = call.child_by_field_id(k.f_arguments)?;
    if list.kind_id() != k.argument_list {
        return None;
    }
    let (args, open) = arguments(list, src, scope, 0);
    let receiver = (!bare)
        .then(|| function.child_by_field_id(k.f_object))
        .flatten()
        .map(|o| {
            let t = text(src, o);
            t.split(['.', '(', '['])
                .next()
                .unwrap_or(t)
                .trim()
                .to_string()
        });
    Some(CallSite {
        callee: callee.to_string(),
        bare,
        receiver,
        stmt,
        line: call.start_position().row as u32 + 1,
        args,
        open,
        param,
        through: None,
    })
}

/// How deep constructor calls nested in arguments are read (`A(b=B(c=C()))`).
const CTOR_DEPTH: u32 = 3;

/// The arguments of the argument list `list`, and whether it passes `*args` or `**kwargs`
/// (arguments after the known ones are unknown then). `depth`: how many constructor calls
/// this list is nested in.
fn arguments(list: Node<'_>, src: &str, scope: &Scope, depth: u32) -> (Vec<CallArg>, bool) {
    let k = Kinds::get();
    let env = &scope.env;
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
            let Some(value) = a.child_by_field_id(k.f_value) else {
                continue;
            };
            (name, value)
        } else {
            if open {
                // A positional argument after `*args`: its position is unknown.
                continue;
            }
            (None, a)
        };
        let passes = (value_node.kind_id() == k.identifier)
            .then(|| text(src, value_node))
            .filter(|n| scope.init_params.iter().any(|p| p == n) && !env.contains_key(*n))
            .map(str::to_string);
        let mut ctor = None;
        let (value, via) = if is_literal(value_node, src) {
            (Some(text(src, value_node).to_string()), None)
        } else if value_node.kind_id() == k.identifier {
            let name = text(src, value_node);
            match env.get(name) {
                Some((v, origin)) => (Some(v.source()), Some(origin.describe(name))),
                None => (None, None),
            }
        } else if let Some(made) = (depth < CTOR_DEPTH)
            .then(|| constructor(value_node, src, scope, depth + 1))
            .flatten()
        {
            let value = made.complete().then(|| made.render(&|c| c.callee.clone()));
            ctor = Some(made);
            (value, None)
        } else {
            match consts::eval(value_node, src, env) {
                Some(v) => (
                    Some(v.source()),
                    Some(format!("`{}`", short(text(src, value_node)))),
                ),
                None => (None, None),
            }
        };
        args.push(CallArg {
            keyword,
            value,
            via,
            passes,
            ctor,
            classes: class_refs(value_node, src, env, 0),
            expr: short(text(src, value_node)),
        });
    }
    (args, open)
}

/// `node` as a constructor call: a bare capitalized name called with arguments (no
/// `*args`/`**kwargs`) that are each known or wait for the enclosing class's values
/// ([`CallArg::waits`]).
fn constructor(node: Node<'_>, src: &str, scope: &Scope, depth: u32) -> Option<Ctor> {
    let k = Kinds::get();
    if node.kind() != "call" {
        return None;
    }
    let function = node.child_by_field_id(k.f_function)?;
    let callee = text(src, function);
    if function.kind_id() != k.identifier || !callee.starts_with(|c: char| c.is_ascii_uppercase()) {
        return None;
    }
    let list = node.child_by_field_id(k.f_arguments)?;
    if list.kind_id() != k.argument_list {
        return None;
    }
    let (args, open) = arguments(list, src, scope, depth);
    (!open && args.iter().all(|a| a.value.is_some() || a.waits())).then(|| Ctor {
        callee: callee.to_string(),
        args,
        class: None,
    })
}

/// The classes `node` passes uncalled: a capitalized bare name that is no constant, or such
/// names among the branches of a conditional expression (`B if last else None`; only the branch
/// taken when the condition is constant).
fn class_refs(node: Node<'_>, src: &str, env: &Env, depth: u32) -> Vec<String> {
    let k = Kinds::get();
    if depth > 8 {
        return Vec::new();
    }
    let named: Vec<Node<'_>> = {
        let mut c = node.walk();
        node.named_children(&mut c)
            .filter(|n| n.kind_id() != k.comment)
            .collect()
    };
    match node.kind() {
        "identifier" => {
            let name = text(src, node);
            if name.starts_with(|c: char| c.is_ascii_uppercase()) && !env.contains_key(name) {
                vec![name.to_string()]
            } else {
                Vec::new()
            }
        }
        "parenthesized_expression" if named.len() == 1 => class_refs(named[0], src, env, depth + 1),
        "conditional_expression" if named.len() == 3 => {
            match consts::eval(named[1], src, env).and_then(|v| v.truth()) {
                Some(true) => class_refs(named[0], src, env, depth + 1),
                Some(false) => class_refs(named[2], src, env, depth + 1),
                None => {
                    let mut out = class_refs(named[0], src, env, depth + 1);
                    for name in class_refs(named[2], src, env, depth + 1) {
                        if !out.contains(&name) {
                            out.push(name);
                        }
                    }
                    out
                }
            }
        }
        _ => Vec::new(),
    }
}

/// An expression's text on one line, at most 60 characters.
fn short(t: &str) -> String {
    let one: String = t.split_whitespace().collect::<Vec<_>>().join(" ");
    if one.chars().count() > 60 {
        format!("{}...", one.chars().take(57).collect::<String>())
    } else {
        one
    }
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
