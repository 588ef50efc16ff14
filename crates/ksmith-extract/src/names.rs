//! Free-name analysis of one top-level statement, with Python's scoping rules.
//!
//! For a statement at module level this finds the global names it reads (and whether each is
//! read while the module runs, "eager", or only later when a function runs), the names it binds
//! at module level, the `alias.attr` chains on names bound by repository-local imports (so they
//! can be rewritten when the program is flattened) and the imports nested inside it.
//!
//! Scoping: function, lambda and comprehension bodies are scopes; a name bound anywhere in a
//! function (parameter, assignment, `for`/`with`/`except` target, nested `def`/`class`, import,
//! walrus, `del`) is local to it unless declared `global`/`nonlocal`; class bodies are scopes
//! whose names methods do not see. Default values, decorators, annotations and base classes
//! are evaluated in the enclosing scope.

use std::collections::{HashMap, HashSet};

use tree_sitter::{Node, TreeCursor};

use crate::imports::{Binding, Target, bindings_of};
use crate::syntax::{Kinds, text};

/// A global name read by a statement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Read {
    /// The name.
    pub(crate) name: String,
    /// Read while the module body runs (not only inside a function body).
    pub(crate) eager: bool,
    /// Read at least once other than as the base of a recorded attribute chain.
    pub(crate) bare: bool,
}

/// An attribute chain `base.a.b` whose base is bound by a repository-local import.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct AttrSite {
    /// Byte offset of the base identifier (in the file).
    pub(crate) start: usize,
    /// The base name.
    pub(crate) base: String,
    /// The attributes, innermost first, each with the end byte of the chain up to it.
    pub(crate) chain: Vec<(String, usize)>,
}

/// An import statement that is not a direct child of the module.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct NestedImport {
    /// Byte range of the import statement in the file.
    pub(crate) start: usize,
    /// End byte.
    pub(crate) end: usize,
    /// What it binds.
    pub(crate) bindings: Vec<Binding>,
    /// True when it imports from the repository itself.
    pub(crate) local: bool,
}

/// What the analysis of one statement found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct StmtNames {
    /// Global names read, sorted by name.
    pub(crate) reads: Vec<Read>,
    /// Names bound at module level.
    pub(crate) defines: Vec<String>,
    /// Attribute chains on locally imported modules.
    pub(crate) sites: Vec<AttrSite>,
    /// Imports nested inside the statement.
    pub(crate) nested: Vec<NestedImport>,
    /// The statement nests deeper than the analysis allows; the result is incomplete.
    pub(crate) too_deep: bool,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum ScopeKind {
    Module,
    Function,
    Class,
    Comprehension,
}

struct Pending<'s> {
    name: &'s str,
    eager: bool,
    via_function: bool,
    /// Declared `global` in a scope it passed through: no enclosing scope captures it.
    global: bool,
    site: Option<usize>,
}

struct Scope<'s> {
    kind: ScopeKind,
    bound: HashSet<&'s str>,
    declared_global: Vec<&'s str>,
    pending: Vec<Pending<'s>>,
}

impl<'s> Scope<'s> {
    fn new(kind: ScopeKind) -> Self {
        Scope {
            kind,
            bound: HashSet::new(),
            declared_global: Vec::new(),
            pending: Vec::new(),
        }
    }
}

/// Analyses statements of one file.
pub(crate) struct Analyzer<'s, 't, 'c> {
    src: &'s str,
    k: &'static Kinds,
    cursor: TreeCursor<'t>,
    buf: Vec<(Node<'t>, Option<u16>)>,
    scopes: Vec<Scope<'s>>,
    function_depth: u32,
    depth: u32,
    max_depth: u32,
    /// Names bound by repository-local imports: attribute chains on them are recorded.
    candidates: HashSet<&'s str>,
    is_local: &'c dyn Fn(&Target) -> bool,
    out_defines: Vec<&'s str>,
    sites: Vec<AttrSite>,
    nested: Vec<NestedImport>,
    too_deep: bool,
}

impl<'s, 't, 'c> Analyzer<'s, 't, 'c> {
    /// An analyzer for the file `src` whose tree is rooted at `root`.
    ///
    /// `candidates` are the names bound by the file's top-level repository-local imports;
    /// `is_local` tells whether an import target is in the repository.
    pub(crate) fn new(
        src: &'s str,
        root: Node<'t>,
        candidates: HashSet<&'s str>,
        is_local: &'c dyn Fn(&Target) -> bool,
        max_depth: u32,
    ) -> Self {
        Analyzer {
            src,
            k: Kinds::get(),
            cursor: root.walk(),
            buf: Vec::with_capacity(256),
            scopes: Vec::new(),
            function_depth: 0,
            depth: 0,
            max_depth,
            candidates,
            is_local,
            out_defines: Vec::new(),
            sites: Vec::new(),
            nested: Vec::new(),
            too_deep: false,
        }
    }

    /// Analyses one top-level statement.
    pub(crate) fn statement(&mut self, node: Node<'t>) -> StmtNames {
        self.scopes.clear();
        self.scopes.push(Scope::new(ScopeKind::Module));
        self.function_depth = 0;
        self.depth = 0;
        self.too_deep = false;
        self.visit_stmt(node);
        let module = self
            .scopes
            .pop()
            .unwrap_or_else(|| Scope::new(ScopeKind::Module));
        let mut reads: HashMap<&'s str, Read> = HashMap::new();
        let mut live_sites = vec![false; self.sites.len()];
        for p in module.pending {
            if let Some(i) = p.site
                && let Some(slot) = live_sites.get_mut(i)
            {
                *slot = true;
            }
            let entry = reads.entry(p.name).or_insert_with(|| Read {
                name: p.name.to_string(),
                eager: false,
                bare: false,
            });
            entry.eager |= p.eager;
            entry.bare |= p.site.is_none();
        }
        let mut reads: Vec<Read> = reads.into_values().collect();
        reads.sort_by(|a, b| a.name.cmp(&b.name));
        let sites = std::mem::take(&mut self.sites)
            .into_iter()
            .zip(live_sites)
            .filter_map(|(s, live)| live.then_some(s))
            .collect();
        let mut defines: Vec<String> = Vec::new();
        for d in self.out_defines.drain(..) {
            if !defines.iter().any(|x| x == d) {
                defines.push(d.to_string());
            }
        }
        StmtNames {
            reads,
            defines,
            sites,
            nested: std::mem::take(&mut self.nested),
            too_deep: self.too_deep,
        }
    }

    /// Pushes the named children of `node` on the buffer and returns their index range.
    fn children(&mut self, node: Node<'t>) -> std::ops::Range<usize> {
        let start = self.buf.len();
        self.cursor.reset(node);
        if self.cursor.goto_first_child() {
            loop {
                let n = self.cursor.node();
                if n.is_named() && n.kind_id() != self.k.comment {
                    let field = self.cursor.field_id().map(|f| f.get());
                    self.buf.push((n, field));
                }
                if !self.cursor.goto_next_sibling() {
                    break;
                }
            }
        }
        start..self.buf.len()
    }

    fn enter(&mut self) -> bool {
        self.depth += 1;
        if self.depth > self.max_depth {
            self.too_deep = true;
            return false;
        }
        true
    }

    fn leave(&mut self) {
        self.depth -= 1;
    }

    fn scope(&mut self) -> &mut Scope<'s> {
        let last = self.scopes.len() - 1;
        &mut self.scopes[last]
    }

    fn read(&mut self, name: &'s str, site: Option<usize>) {
        let eager = self.function_depth == 0;
        self.scope().pending.push(Pending {
            name,
            eager,
            via_function: false,
            global: false,
            site,
        });
    }

    fn bind(&mut self, name: &'s str) {
        // A walrus inside a comprehension binds in the enclosing non-comprehension scope; other
        // bindings bind in the current scope.
        let scope = self.scope();
        scope.bound.insert(name);
        if scope.kind == ScopeKind::Module {
            self.out_defines.push(name);
        }
    }

    fn push_scope(&mut self, kind: ScopeKind) {
        self.scopes.push(Scope::new(kind));
    }

    fn pop_scope(&mut self) {
        let Some(scope) = self.scopes.pop() else {
            return;
        };
        let kind = scope.kind;
        let Some(parent) = self.scopes.last_mut() else {
            return;
        };
        for mut p in scope.pending {
            if !p.global {
                if scope.declared_global.contains(&p.name) {
                    p.global = true;
                } else if scope.bound.contains(p.name)
                    && (kind != ScopeKind::Class || !p.via_function)
                {
                    continue;
                }
            }
            // Class scopes do not nest: whatever leaves a scope is no longer read from the
            // body of the class around it.
            p.via_function = true;
            parent.pending.push(p);
        }
    }

    fn visit_children(&mut self, node: Node<'t>) {
        let range = self.children(node);
        for i in range.clone() {
            let (child, _) = self.buf[i];
            self.visit(child);
        }
        self.buf.truncate(range.start);
    }

    fn visit_stmt(&mut self, node: Node<'t>) {
        self.visit(node);
    }

    /// Visits a node in expression or statement position.
    fn visit(&mut self, node: Node<'t>) {
        if !self.enter() {
            return;
        }
        let k = self.k;
        let kind = node.kind_id();
        if kind == k.identifier {
            let name = text(self.src, node);
            if !name.is_empty() {
                self.read(name, None);
            }
        } else if kind == k.attribute {
            self.visit_attribute(node);
        } else if kind == k.keyword_argument {
            if let Some(v) = node.child_by_field_id(k.f_value) {
                self.visit(v);
            }
        } else if kind == k.decorated_definition {
            let range = self.children(node);
            for i in range.clone() {
                let (child, field) = self.buf[i];
                if field == Some(k.f_definition) {
                    continue;
                }
                self.visit(child);
            }
            self.buf.truncate(range.start);
            if let Some(def) = node.child_by_field_id(k.f_definition) {
                self.visit(def);
            }
        } else if kind == k.function_definition {
            self.visit_function(node);
        } else if kind == k.class_definition {
            self.visit_class(node);
        } else if kind == k.lambda {
            self.visit_lambda(node);
        } else if kind == k.list_comprehension
            || kind == k.set_comprehension
            || kind == k.dictionary_comprehension
            || kind == k.generator_expression
        {
            self.visit_comprehension(node);
        } else if kind == k.assignment {
            self.visit_assignment(node);
        } else if kind == k.augmented_assignment {
            if let Some(r) = node.child_by_field_id(k.f_right) {
                self.visit(r);
            }
            if let Some(l) = node.child_by_field_id(k.f_left) {
                self.visit(l);
                self.bind_target(l);
            }
        } else if kind == k.for_statement {
            self.visit_binding(node, k.f_left);
        } else if kind == k.with_item {
            if let Some(v) = node.child_by_field_id(k.f_value) {
                self.visit(v);
            }
        } else if kind == k.as_pattern || kind == k.except_clause {
            self.visit_binding(node, k.f_alias);
        } else if kind == k.named_expression {
            if let Some(v) = node.child_by_field_id(k.f_value) {
                self.visit(v);
            }
            if let Some(n) = node.child_by_field_id(k.f_name) {
                self.bind_walrus(text(self.src, n));
            }
        } else if kind == k.global_statement || kind == k.nonlocal_statement {
            let range = self.children(node);
            for i in range.clone() {
                let (child, _) = self.buf[i];
                if child.kind_id() == k.identifier {
                    let name = text(self.src, child);
                    if kind == k.global_statement {
                        self.scope().declared_global.push(name);
                    }
                }
            }
            self.buf.truncate(range.start);
        } else if kind == k.delete_statement {
            let range = self.children(node);
            for i in range.clone() {
                let (child, _) = self.buf[i];
                self.visit(child);
            }
            self.buf.truncate(range.start);
        } else if kind == k.import_statement
            || kind == k.import_from_statement
            || kind == k.future_import_statement
        {
            self.visit_import(node);
        } else if kind == k.member_type {
            if let Some(first) = node.named_child(0) {
                self.visit(first);
            }
        } else if kind == k.case_pattern {
            // Match patterns are not analysed (rare in model code).
        } else if kind == k.comment {
        } else {
            self.visit_children(node);
        }
        self.leave();
    }

    fn visit_attribute(&mut self, node: Node<'t>) {
        let k = self.k;
        // Walk down the chain to its base.
        let mut chain: Vec<(String, usize)> = Vec::new();
        let mut current = node;
        loop {
            if current.kind_id() == k.attribute {
                let (Some(obj), Some(attr)) = (
                    current.child_by_field_id(k.f_object),
                    current.child_by_field_id(k.f_attribute),
                ) else {
                    self.visit_children(current);
                    return;
                };
                chain.push((text(self.src, attr).to_string(), current.end_byte()));
                current = obj;
            } else {
                break;
            }
        }
        if current.kind_id() == k.identifier {
            let base = text(self.src, current);
            if self.candidates.contains(base) {
                chain.reverse();
                let index = self.sites.len();
                self.sites.push(AttrSite {
                    start: current.start_byte(),
                    base: base.to_string(),
                    chain,
                });
                self.read(base, Some(index));
                return;
            }
            self.read(base, None);
            return;
        }
        self.visit(current);
    }

    fn visit_function(&mut self, node: Node<'t>) {
        let k = self.k;
        // Defaults and annotations run in the enclosing scope.
        let params = node.child_by_field_id(k.f_parameters);
        if let Some(params) = params {
            self.visit_param_defaults(params);
        }
        if let Some(ret) = node.child_by_field_id(k.f_return_type) {
            self.visit(ret);
        }
        if let Some(name) = node.child_by_field_id(k.f_name) {
            let name = text(self.src, name);
            self.bind(name);
        }
        self.visit_function_scope(params, node.child_by_field_id(k.f_body));
    }

    fn visit_lambda(&mut self, node: Node<'t>) {
        let k = self.k;
        let params = node.child_by_field_id(k.f_parameters);
        if let Some(params) = params {
            self.visit_param_defaults(params);
        }
        self.visit_function_scope(params, node.child_by_field_id(k.f_body));
    }

    /// The function's own scope (of a `def` or a `lambda`): its parameters bound, its body read.
    fn visit_function_scope(&mut self, params: Option<Node<'t>>, body: Option<Node<'t>>) {
        self.push_scope(ScopeKind::Function);
        self.function_depth += 1;
        if let Some(params) = params {
            self.bind_params(params);
        }
        if let Some(body) = body {
            self.visit(body);
        }
        self.function_depth -= 1;
        self.pop_scope();
    }

    fn visit_param_defaults(&mut self, params: Node<'t>) {
        let k = self.k;
        let range = self.children(params);
        for i in range.clone() {
            let (p, _) = self.buf[i];
            let kind = p.kind_id();
            if kind == k.default_parameter || kind == k.typed_default_parameter {
                if let Some(v) = p.child_by_field_id(k.f_value) {
                    self.visit(v);
                }
                if let Some(t) = p.child_by_field_id(k.f_type) {
                    self.visit(t);
                }
            } else if kind == k.typed_parameter
                && let Some(t) = p.child_by_field_id(k.f_type)
            {
                self.visit(t);
            }
        }
        self.buf.truncate(range.start);
    }

    fn bind_params(&mut self, params: Node<'t>) {
        let k = self.k;
        let range = self.children(params);
        for i in range.clone() {
            let (p, _) = self.buf[i];
            let kind = p.kind_id();
            if kind == k.identifier {
                self.bind(text(self.src, p));
            } else if kind == k.default_parameter || kind == k.typed_default_parameter {
                if let Some(n) = p.child_by_field_id(k.f_name) {
                    self.bind_target(n);
                }
            } else if kind == k.typed_parameter
                || kind == k.list_splat_pattern
                || kind == k.dictionary_splat_pattern
            {
                let mut c = p.walk();
                let names: Vec<Node<'t>> = p
                    .named_children(&mut c)
                    .filter(|n| n.kind_id() != k.member_type && n.kind_id() != self.k.comment)
                    .collect();
                for n in names {
                    if n.kind_id() == k.identifier {
                        self.bind(text(self.src, n));
                    } else if (n.kind_id() == k.list_splat_pattern
                        || n.kind_id() == k.dictionary_splat_pattern)
                        && let Some(inner) = n.named_child(0)
                    {
                        self.bind(text(self.src, inner));
                    }
                }
            } else if kind == k.tuple_pattern {
                self.bind_target(p);
            }
        }
        self.buf.truncate(range.start);
    }

    fn visit_class(&mut self, node: Node<'t>) {
        let k = self.k;
        if let Some(bases) = node.child_by_field_id(k.f_superclasses) {
            self.visit(bases);
        }
        if let Some(name) = node.child_by_field_id(k.f_name) {
            let name = text(self.src, name);
            self.bind(name);
        }
        self.push_scope(ScopeKind::Class);
        if let Some(body) = node.child_by_field_id(k.f_body) {
            self.visit(body);
        }
        self.pop_scope();
    }

    fn visit_comprehension(&mut self, node: Node<'t>) {
        let k = self.k;
        let range = self.children(node);
        // The first iterable is evaluated in the enclosing scope.
        let mut first_iter = true;
        for i in range.clone() {
            let (child, _) = self.buf[i];
            if child.kind_id() == k.for_in_clause && first_iter {
                first_iter = false;
                if let Some(r) = child.child_by_field_id(k.f_right) {
                    self.visit(r);
                }
            }
        }
        self.push_scope(ScopeKind::Comprehension);
        let mut first = true;
        for i in range.clone() {
            let (child, _) = self.buf[i];
            if child.kind_id() == k.for_in_clause {
                if let Some(l) = child.child_by_field_id(k.f_left) {
                    self.bind_target(l);
                }
                if !first {
                    let mut c = child.walk();
                    let rights: Vec<Node<'t>> =
                        child.children_by_field_name("right", &mut c).collect();
                    for r in rights {
                        if r.is_named() {
                            self.visit(r);
                        }
                    }
                }
                first = false;
            } else {
                self.visit(child);
            }
        }
        self.pop_scope();
        self.buf.truncate(range.start);
    }

    fn visit_assignment(&mut self, node: Node<'t>) {
        let k = self.k;
        if let Some(r) = node.child_by_field_id(k.f_right) {
            if r.kind_id() == k.assignment {
                self.visit_assignment(r);
            } else {
                self.visit(r);
            }
        }
        if let Some(t) = node.child_by_field_id(k.f_type) {
            self.visit(t);
        }
        if let Some(l) = node.child_by_field_id(k.f_left) {
            self.bind_target(l);
        }
    }

    /// Visits the children of `node` in order, binding the one in field `target` (the loop
    /// variable of `for`, the alias of `as`) and reading the others.
    fn visit_binding(&mut self, node: Node<'t>, target: u16) {
        let range = self.children(node);
        for i in range.clone() {
            let (child, field) = self.buf[i];
            if field == Some(target) {
                self.bind_target(child);
            } else {
                self.visit(child);
            }
        }
        self.buf.truncate(range.start);
    }

    /// Binds the names of an assignment target; reads the parts that are reads
    /// (`a.b = ...` reads `a`, `a[i] = ...` reads `a` and `i`).
    fn bind_target(&mut self, node: Node<'t>) {
        if !self.enter() {
            return;
        }
        let k = self.k;
        let kind = node.kind_id();
        if kind == k.identifier {
            let name = text(self.src, node);
            self.bind(name);
        } else if kind == k.pattern_list
            || kind == k.tuple_pattern
            || kind == k.list_pattern
            || kind == k.tuple
            || kind == k.list
            || kind == k.parenthesized_expression
            || kind == k.list_splat_pattern
            || kind == k.list_splat
            || kind == k.as_pattern_target
        {
            let range = self.children(node);
            for i in range.clone() {
                let (child, _) = self.buf[i];
                self.bind_target(child);
            }
            self.buf.truncate(range.start);
        } else {
            // attribute, subscript, or anything else: an expression that is read.
            self.visit(node);
        }
        self.leave();
    }

    fn bind_walrus(&mut self, name: &'s str) {
        let Some(index) = self
            .scopes
            .iter()
            .rposition(|s| s.kind != ScopeKind::Comprehension)
        else {
            return;
        };
        self.scopes[index].bound.insert(name);
        if self.scopes[index].kind == ScopeKind::Module {
            self.out_defines.push(name);
        }
    }

    fn visit_import(&mut self, node: Node<'t>) {
        let bindings = bindings_of(node, self.src);
        let local = bindings.iter().any(|b| (self.is_local)(&b.target));
        let at_module = self.scopes.len() == 1;
        for b in &bindings {
            if b.local == "*" {
                continue;
            }
            let Some(name) = self.src_slice_of(&b.local, node) else {
                continue;
            };
            if local {
                // Repository-local: the import becomes inlined definitions; the name stays a
                // global read resolved through the nested binding.
                self.candidates.insert(name);
                if at_module {
                    self.bind(name);
                }
                self.read(name, None);
            } else {
                self.bind(name);
            }
        }
        self.nested.push(NestedImport {
            start: node.start_byte(),
            end: node.end_byte(),
            bindings,
            local,
        });
    }

    /// Finds `name` as a slice of the source inside `node`, so it borrows from the source.
    fn src_slice_of(&self, name: &str, node: Node<'t>) -> Option<&'s str> {
        let hay = text(self.src, node);
        let mut from = 0;
        while let Some(pos) = hay.get(from..)?.find(name) {
            let at = from + pos;
            let before_ok = hay[..at]
                .chars()
                .next_back()
                .is_none_or(|c| !(c.is_alphanumeric() || c == '_'));
            let after_ok = hay[at + name.len()..]
                .chars()
                .next()
                .is_none_or(|c| !(c.is_alphanumeric() || c == '_'));
            if before_ok && after_ok {
                let start = node.start_byte() + at;
                return self.src.get(start..start + name.len());
            }
            from = at + name.len();
        }
        None
    }
}
