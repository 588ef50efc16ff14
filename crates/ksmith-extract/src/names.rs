//! Free-name analysis of one top-level statement, with Python's scoping rules.
//!
//! For a statement at module level this finds the global names it reads (and whether each is
//! read while the module runs, "eager", or only later when a function runs), the names it binds
//! at module level, the `alias.attr` chains on names bound by repository-local imports (so they
//! can be rewritten when the program is flattened) and the imports nested inside it.
//!
//! Everything found carries an [`Owner`]: the [`Member`] it is in (a method of a top-level
//! class, an alias in its body, a registry decorator of a top-level definition), or none.
//! Extraction keeps a member that nothing in the program needs only when what it needs can be
//! inlined; see `closure`.
//! Imports inside a `try` whose handlers catch `ImportError` are marked as having a fallback,
//! and imports under `if TYPE_CHECKING:` as never running. The uses of names bound to the
//! read-only packages (`os`, `sys`) are recorded with their attribute paths, so a use that is
//! not a read can be refused.
//!
//! Scoping: function, lambda and comprehension bodies are scopes; a name bound anywhere in a
//! function (parameter, assignment, `for`/`with`/`except` target, nested `def`/`class`, import,
//! walrus, `del`) is local to it unless declared `global`/`nonlocal`; class bodies are scopes
//! whose names methods do not see. Default values, decorators, annotations and base classes
//! are evaluated in the enclosing scope.

use std::collections::{HashMap, HashSet};

use tree_sitter::{Node, TreeCursor};

use crate::imports::{Binding, ImportKinds, bindings_of};
use crate::index::find_word;
use crate::syntax::{Kinds, text};

/// Where code of a top-level statement is: `Some(i)` in the `i`-th [`Member`] (the body of a
/// method of a top-level class, a class-body alias, a registry decorator; see
/// [`StmtNames::members`]), `None` anywhere else (the rest of the class body, its other
/// decorators and default values, any other statement).
pub(crate) type Owner = Option<u16>;

/// A global name read by a statement (one entry per name and owner).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Read {
    /// The name.
    pub(crate) name: String,
    /// Read while the module body runs (not only inside a function body).
    pub(crate) eager: bool,
    /// Read at least once other than as the base of a recorded attribute chain.
    pub(crate) bare: bool,
    /// Where it is read.
    pub(crate) owner: Owner,
    /// Byte offsets (in the file) of its bare reads, for renaming what it refers to.
    pub(crate) at: Vec<u32>,
}

/// A part of a top-level statement that is read only when needed (see `closure`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Member {
    /// The name it is needed by: a method's or an alias's name; for a registration, the
    /// decorator's text, which nothing can name.
    pub(crate) name: String,
    /// Byte range of what is replaced when it is not kept: a method's body (the block after
    /// `def ...:`), an alias's whole statement, a registration's decorator.
    pub(crate) span: (usize, usize),
    /// What it is.
    pub(crate) kind: MemberKind,
}

/// The kinds of [`Member`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MemberKind {
    /// A method defined directly in the body of a top-level class.
    Method,
    /// `name = other` or `name = a.b` in the body of a top-level class: a method in all but
    /// syntax (`decode = decode_function`).
    Alias,
    /// A registry decorator of a top-level class or function (`@BACKBONES.register_module()`,
    /// `@REGISTRY.register`): it records the definition somewhere and returns it unchanged.
    Registration,
}

/// What protects a nested import.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Guard {
    /// Nothing: the import runs and must succeed.
    None,
    /// It is in the body of a `try` whose handlers catch `ImportError`: when it cannot be
    /// inlined, the program takes the handler's fallback.
    Fallback,
    /// It is under `if TYPE_CHECKING:` and never runs.
    TypeChecking,
    /// It is in a handler of a `try` that catches `ImportError`: it runs only when an import
    /// of the `try` body fails.
    Handler,
}

/// A use of a name bound to a read-only package (`os`, `os.environ`, `sys`, ...).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PackageUse {
    /// The name used.
    pub(crate) base: String,
    /// The attributes taken from it, dotted (`environ.get`), empty for a bare use.
    pub(crate) path: String,
    /// It is assigned to or deleted (`os.environ["X"] = ...`).
    pub(crate) store: bool,
    /// Where.
    pub(crate) owner: Owner,
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
    /// Where.
    pub(crate) owner: Owner,
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
    /// Where.
    pub(crate) owner: Owner,
    /// What protects it.
    pub(crate) guard: Guard,
}

/// What the analysis of one statement found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct StmtNames {
    /// Global names read, sorted by name and owner.
    pub(crate) reads: Vec<Read>,
    /// Names bound at module level.
    pub(crate) defines: Vec<String>,
    /// Each module-level binding of a name: the name and its byte offset in the file.
    pub(crate) define_at: Vec<(String, u32)>,
    /// Attribute chains on locally imported modules.
    pub(crate) sites: Vec<AttrSite>,
    /// Imports nested inside the statement.
    pub(crate) nested: Vec<NestedImport>,
    /// The parts read only when needed: the methods and aliases of a top-level class and the
    /// registry decorators of a top-level class or function.
    pub(crate) members: Vec<Member>,
    /// Byte ranges of the names a method or alias can be needed by: attribute names
    /// (`x.name`), names read in a class body (`forward = _impl`) and strings that are
    /// identifiers (`getattr(self, "name")`).
    pub(crate) mentions: Vec<(u32, u32, Owner)>,
    /// Uses of names bound to read-only packages.
    pub(crate) package_uses: Vec<PackageUse>,
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
    owner: Owner,
    /// Byte offset of the name in the file, when it is a slice of the file's text.
    at: Option<u32>,
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
    /// Names bound by imports of read-only packages: their uses are recorded.
    read_only_names: HashSet<&'s str>,
    kinds: &'c dyn ImportKinds,
    out_defines: Vec<&'s str>,
    sites: Vec<AttrSite>,
    nested: Vec<NestedImport>,
    members: Vec<Member>,
    mentions: Vec<(u32, u32, Owner)>,
    package_uses: Vec<PackageUse>,
    /// Where the code being visited is.
    owner: Owner,
    /// The method whose `def` is visited next.
    next_method: Owner,
    /// Inside `try` bodies that fall back on `ImportError`.
    fallback_depth: u32,
    /// Inside `if TYPE_CHECKING:` blocks.
    type_checking_depth: u32,
    /// Inside handlers of `try` statements that catch `ImportError`.
    handler_depth: u32,
    /// Inside an assignment or `del` target.
    store_depth: u32,
    /// Inside an annotation.
    annotation_depth: u32,
    too_deep: bool,
}

impl<'s, 't, 'c> Analyzer<'s, 't, 'c> {
    /// An analyzer for the file `src` whose tree is rooted at `root`.
    ///
    /// `candidates` are the names bound by the file's top-level repository-local imports,
    /// `read_only_names` those bound by its top-level imports of read-only packages; `kinds`
    /// tells what an import target is.
    pub(crate) fn new(
        src: &'s str,
        root: Node<'t>,
        candidates: HashSet<&'s str>,
        read_only_names: HashSet<&'s str>,
        kinds: &'c dyn ImportKinds,
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
            read_only_names,
            kinds,
            out_defines: Vec::new(),
            sites: Vec::new(),
            nested: Vec::new(),
            members: Vec::new(),
            mentions: Vec::new(),
            package_uses: Vec::new(),
            owner: None,
            next_method: None,
            fallback_depth: 0,
            type_checking_depth: 0,
            handler_depth: 0,
            store_depth: 0,
            annotation_depth: 0,
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
        self.owner = None;
        self.next_method = None;
        self.fallback_depth = 0;
        self.type_checking_depth = 0;
        self.handler_depth = 0;
        self.store_depth = 0;
        self.annotation_depth = 0;
        self.visit_stmt(node);
        let module = self
            .scopes
            .pop()
            .unwrap_or_else(|| Scope::new(ScopeKind::Module));
        let mut reads: HashMap<(&'s str, Owner), Read> = HashMap::new();
        let mut live_sites = vec![false; self.sites.len()];
        for p in module.pending {
            if let Some(i) = p.site
                && let Some(slot) = live_sites.get_mut(i)
            {
                *slot = true;
            }
            let entry = reads.entry((p.name, p.owner)).or_insert_with(|| Read {
                name: p.name.to_string(),
                eager: false,
                bare: false,
                owner: p.owner,
                at: Vec::new(),
            });
            entry.eager |= p.eager;
            entry.bare |= p.site.is_none();
            if p.site.is_none()
                && let Some(at) = p.at
            {
                entry.at.push(at);
            }
        }
        let mut reads: Vec<Read> = reads.into_values().collect();
        reads.sort_by(|a, b| (&a.name, a.owner).cmp(&(&b.name, b.owner)));
        let sites = std::mem::take(&mut self.sites)
            .into_iter()
            .zip(live_sites)
            .filter_map(|(s, live)| live.then_some(s))
            .collect();
        let mut defines: Vec<String> = Vec::new();
        let mut define_at: Vec<(String, u32)> = Vec::new();
        for d in self.out_defines.drain(..) {
            if !defines.iter().any(|x| x == d) {
                defines.push(d.to_string());
            }
            if let Some(at) = offset_in(self.src, d) {
                define_at.push((d.to_string(), at));
            }
        }
        for r in &mut reads {
            r.at.sort_unstable();
            r.at.dedup();
        }
        StmtNames {
            reads,
            defines,
            define_at,
            sites,
            nested: std::mem::take(&mut self.nested),
            members: std::mem::take(&mut self.members),
            mentions: std::mem::take(&mut self.mentions),
            package_uses: std::mem::take(&mut self.package_uses),
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
        let owner = self.owner;
        let at = offset_in(self.src, name);
        self.scope().pending.push(Pending {
            name,
            eager,
            via_function: false,
            global: false,
            site,
            owner,
            at,
        });
    }

    /// Visits an annotation (of a parameter, a return value or a variable).
    fn visit_annotation(&mut self, node: Node<'t>) {
        self.annotation_depth += 1;
        self.visit(node);
        self.annotation_depth -= 1;
    }

    /// The names a string annotation reads (`"Optional[nn.Module]"` reads `Optional` and
    /// `nn`), as reads that only happen later. Nested literals (`Literal['a']`) name nothing.
    fn read_annotation_string(&mut self, node: Node<'t>) {
        let src = self.src;
        let t = text(src, node);
        let Some(open) = t.find(['"', '\'']) else {
            return;
        };
        let quote = t.as_bytes()[open];
        let width = if t[open..].starts_with(if quote == b'"' { "\"\"\"" } else { "\'\'\'" }) {
            3
        } else {
            1
        };
        let start = node.start_byte() + open + width;
        let end = (node.end_byte()).saturating_sub(width).max(start);
        let Some(inner) = src.get(start..end) else {
            return;
        };
        let bytes = inner.as_bytes();
        let mut i = 0;
        while i < bytes.len() {
            let c = bytes[i];
            if c == b'"' || c == b'\'' {
                i += 1;
                while i < bytes.len() && bytes[i] != c {
                    i += 1;
                }
                i += 1;
            } else if c.is_ascii_alphanumeric() || c == b'_' {
                let word = i;
                while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                    i += 1;
                }
                let after_dot = word > 0 && bytes[word - 1] == b'.';
                if !after_dot
                    && !c.is_ascii_digit()
                    && let Some(name) = src.get(start + word..start + i)
                {
                    let function_depth = self.function_depth;
                    self.function_depth = function_depth.max(1);
                    self.read(name, None);
                    self.function_depth = function_depth;
                }
            } else {
                i += 1;
            }
        }
    }

    /// Records that `node`'s text may name a method.
    fn mention(&mut self, node: Node<'t>) {
        self.mentions
            .push((node.start_byte() as u32, node.end_byte() as u32, self.owner));
    }

    /// Records a use of a name bound to a read-only package.
    fn package_use(&mut self, base: &str, path: String) {
        self.package_uses.push(PackageUse {
            base: base.to_string(),
            path,
            store: self.store_depth > 0,
            owner: self.owner,
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
                if self
                    .scopes
                    .last()
                    .is_some_and(|s| s.kind == ScopeKind::Class)
                {
                    // `forward = _impl` in a class body names a method.
                    self.mention(node);
                }
                if self.read_only_names.contains(name) {
                    self.package_use(name, String::new());
                }
                self.read(name, None);
            }
        } else if (kind == k.subscript || kind == k.generic_type)
            && self.annotation_depth > 0
            && node
                .named_child(0)
                .is_some_and(|v| text(self.src, v).ends_with("Literal"))
        {
            // `Literal["fast"]` holds values, not names.
            let outer = std::mem::take(&mut self.annotation_depth);
            self.visit_children(node);
            self.annotation_depth = outer;
        } else if kind == k.string && self.annotation_depth > 0 {
            // A string annotation (`-> "Encoder"`) is never evaluated, but it names things
            // that should exist (type checkers and pyflakes resolve it): its names are lazy
            // reads.
            self.read_annotation_string(node);
        } else if kind == k.string {
            // `getattr(self, "name")` names a method.
            if is_identifier_string(text(self.src, node)) {
                // The name between the quotes.
                let (start, end) = (node.start_byte() + 1, node.end_byte() - 1);
                self.mentions.push((start as u32, end as u32, self.owner));
            }
            self.visit_children(node);
        } else if kind == k.try_statement {
            self.visit_try(node);
        } else if kind == k.if_statement && is_type_checking(node, self.src) {
            self.visit_type_checking(node);
        } else if kind == k.attribute {
            self.visit_attribute(node);
        } else if kind == k.keyword_argument {
            if let Some(v) = node.child_by_field_id(k.f_value) {
                self.visit(v);
            }
        } else if kind == k.decorated_definition {
            let top_level = self.scopes.len() == 1 && self.owner.is_none();
            let range = self.children(node);
            for i in range.clone() {
                let (child, field) = self.buf[i];
                if field == Some(k.f_definition) {
                    continue;
                }
                let registration = if top_level && child.kind_id() == k.decorator {
                    self.registration(child)
                } else {
                    None
                };
                match registration.and_then(|m| self.push_member(m)) {
                    Some(index) => self.visit_owned(child, index),
                    None => self.visit(child),
                }
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
            self.store_depth += 1;
            self.visit_children(node);
            self.store_depth -= 1;
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
        // Walk down the chain to its base: (attribute name node, end of the chain up to it).
        let mut chain: Vec<(Node<'t>, usize)> = Vec::new();
        let mut current = node;
        while current.kind_id() == k.attribute {
            let (Some(obj), Some(attr)) = (
                current.child_by_field_id(k.f_object),
                current.child_by_field_id(k.f_attribute),
            ) else {
                self.visit_children(current);
                return;
            };
            self.mention(attr);
            chain.push((attr, current.end_byte()));
            current = obj;
        }
        chain.reverse();
        if current.kind_id() != k.identifier {
            self.visit(current);
            return;
        }
        let base = text(self.src, current);
        if self.read_only_names.contains(base) {
            let path: Vec<&str> = chain.iter().map(|(a, _)| text(self.src, *a)).collect();
            self.package_use(base, path.join("."));
        }
        if self.candidates.contains(base) {
            let index = self.sites.len();
            self.sites.push(AttrSite {
                start: current.start_byte(),
                base: base.to_string(),
                chain: chain
                    .iter()
                    .map(|(a, end)| (text(self.src, *a).to_string(), *end))
                    .collect(),
                owner: self.owner,
            });
            self.read(base, Some(index));
        } else {
            self.read(base, None);
        }
    }

    fn visit_function(&mut self, node: Node<'t>) {
        let k = self.k;
        let method = self.next_method.take();
        // Defaults and annotations run in the enclosing scope.
        let params = node.child_by_field_id(k.f_parameters);
        if let Some(params) = params {
            self.visit_param_defaults(params);
        }
        if let Some(ret) = node.child_by_field_id(k.f_return_type) {
            self.visit_annotation(ret);
        }
        if let Some(name) = node.child_by_field_id(k.f_name) {
            let name = text(self.src, name);
            self.bind(name);
        }
        let outer = self.owner;
        self.owner = method.or(outer);
        self.visit_function_scope(params, node.child_by_field_id(k.f_body));
        self.owner = outer;
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
                    self.visit_annotation(t);
                }
            } else if kind == k.typed_parameter
                && let Some(t) = p.child_by_field_id(k.f_type)
            {
                self.visit_annotation(t);
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
        let top_level = self.scopes.len() == 1 && self.owner.is_none();
        self.push_scope(ScopeKind::Class);
        if let Some(body) = node.child_by_field_id(k.f_body) {
            if top_level {
                self.visit_methods(body);
            } else {
                self.visit(body);
            }
        }
        self.pop_scope();
    }

    /// Visits the body of a top-level class, recording its methods and aliases and owning what
    /// is inside each to it.
    fn visit_methods(&mut self, body: Node<'t>) {
        let range = self.children(body);
        for i in range.clone() {
            let (child, _) = self.buf[i];
            match self.class_member(child) {
                Some(member) => {
                    let kind = member.kind;
                    let Some(index) = self.push_member(member) else {
                        self.visit(child);
                        continue;
                    };
                    if kind == MemberKind::Method {
                        // The `def`'s body is the method's; its decorators and defaults are not.
                        self.next_method = Some(index);
                        self.visit(child);
                        self.next_method = None;
                    } else {
                        self.visit_owned(child, index);
                    }
                }
                None => self.visit(child),
            }
        }
        self.buf.truncate(range.start);
    }

    /// The member a statement of a top-level class body is, if any: a method, or an alias.
    fn class_member(&self, child: Node<'t>) -> Option<Member> {
        let k = self.k;
        let def = if child.kind_id() == k.decorated_definition {
            child.child_by_field_id(k.f_definition)?
        } else {
            child
        };
        if def.kind_id() == k.function_definition {
            let name = def.child_by_field_id(k.f_name)?;
            let block = def.child_by_field_id(k.f_body)?;
            return Some(Member {
                name: text(self.src, name).to_string(),
                span: (block.start_byte(), block.end_byte()),
                kind: MemberKind::Method,
            });
        }
        if child.kind_id() != k.expression_statement || child.named_child_count() != 1 {
            return None;
        }
        let assignment = child.named_child(0)?;
        if assignment.kind_id() != k.assignment || assignment.child_by_field_id(k.f_type).is_some()
        {
            return None;
        }
        let left = assignment.child_by_field_id(k.f_left)?;
        let right = assignment.child_by_field_id(k.f_right)?;
        (left.kind_id() == k.identifier && self.is_dotted_name(right)).then(|| Member {
            name: text(self.src, left).to_string(),
            span: (child.start_byte(), child.end_byte()),
            kind: MemberKind::Alias,
        })
    }

    /// True for `name` or `a.b.c`.
    fn is_dotted_name(&self, node: Node<'t>) -> bool {
        let k = self.k;
        let mut current = node;
        while current.kind_id() == k.attribute {
            match current.child_by_field_id(k.f_object) {
                Some(object) => current = object,
                None => return false,
            }
        }
        current.kind_id() == k.identifier
    }

    /// The registration a decorator of a top-level definition is, if any:
    /// `@X.register_module()`, `@X.register_module`, `@X.register(...)`, `@X.register`.
    fn registration(&self, decorator: Node<'t>) -> Option<Member> {
        let k = self.k;
        let expr = decorator.named_child(0)?;
        let callee = if expr.kind_id() == k.call {
            expr.child_by_field_id(k.f_function)?
        } else {
            expr
        };
        if callee.kind_id() != k.attribute || !self.is_dotted_name(callee) {
            return None;
        }
        let attr = text(self.src, callee.child_by_field_id(k.f_attribute)?);
        // From `@` to the end of the expression: the node may hold the line's end too.
        let span = (decorator.start_byte(), expr.end_byte());
        matches!(attr, "register_module" | "register").then(|| Member {
            name: self.src.get(span.0..span.1).unwrap_or_default().to_string(),
            span,
            kind: MemberKind::Registration,
        })
    }

    /// Records a member; its index, or `None` when there are too many to index.
    fn push_member(&mut self, member: Member) -> Option<u16> {
        let index = u16::try_from(self.members.len()).ok()?;
        self.members.push(member);
        Some(index)
    }

    /// Visits `node` as the code of member `index`.
    fn visit_owned(&mut self, node: Node<'t>, index: u16) {
        let outer = self.owner;
        self.owner = Some(index);
        self.visit(node);
        self.owner = outer;
    }

    /// A `try` statement: when a handler catches `ImportError`, the imports of its body have a
    /// fallback.
    fn visit_try(&mut self, node: Node<'t>) {
        let k = self.k;
        let mut c = node.walk();
        let falls_back = node
            .named_children(&mut c)
            .any(|h| h.kind_id() == k.except_clause && catches_import_error(h, self.src));
        let range = self.children(node);
        for i in range.clone() {
            let (child, field) = self.buf[i];
            let body = field == Some(k.f_body) && falls_back;
            let handler = child.kind_id() == k.except_clause && falls_back;
            self.fallback_depth += u32::from(body);
            self.handler_depth += u32::from(handler);
            self.visit(child);
            self.fallback_depth -= u32::from(body);
            self.handler_depth -= u32::from(handler);
        }
        self.buf.truncate(range.start);
    }

    /// `if TYPE_CHECKING:`: its block never runs (its `else` does).
    fn visit_type_checking(&mut self, node: Node<'t>) {
        let k = self.k;
        let range = self.children(node);
        for i in range.clone() {
            let (child, field) = self.buf[i];
            let dead = field == Some(k.f_consequence);
            self.type_checking_depth += u32::from(dead);
            self.visit(child);
            self.type_checking_depth -= u32::from(dead);
        }
        self.buf.truncate(range.start);
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
            self.visit_annotation(t);
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
            // attribute, subscript, or anything else: an expression that is read, and changed.
            self.store_depth += 1;
            self.visit(node);
            self.store_depth -= 1;
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
        let local = bindings.iter().any(|b| self.kinds.is_local(&b.target));
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
                if b.target
                    .top_package()
                    .is_some_and(|p| self.kinds.is_read_only(p))
                {
                    self.read_only_names.insert(name);
                }
                self.bind(name);
            }
        }
        let guard = if self.type_checking_depth > 0 {
            Guard::TypeChecking
        } else if self.fallback_depth > 0 {
            Guard::Fallback
        } else if self.handler_depth > 0 {
            Guard::Handler
        } else {
            Guard::None
        };
        self.nested.push(NestedImport {
            start: node.start_byte(),
            end: node.end_byte(),
            bindings,
            local,
            owner: self.owner,
            guard,
        });
    }

    /// Finds `name` as a slice of the source inside `node`, so it borrows from the source.
    fn src_slice_of(&self, name: &str, node: Node<'t>) -> Option<&'s str> {
        let start = node.start_byte() + find_word(text(self.src, node), name)?;
        self.src.get(start..start + name.len())
    }
}

/// The byte offset of `part` in `src` when `part` is a slice of it (names are read from the
/// file's text, so their position is where their slice starts).
fn offset_in(src: &str, part: &str) -> Option<u32> {
    let start = src.as_ptr() as usize;
    let at = (part.as_ptr() as usize).checked_sub(start)?;
    (at + part.len() <= src.len() && src.get(at..at + part.len()) == Some(part))
        .then(|| u32::try_from(at).ok())
        .flatten()
}

/// True when an `except` clause catches `ImportError`: bare, or naming it, a subclass
/// (`ModuleNotFoundError`) or a base (`Exception`, `BaseException`).
fn catches_import_error(clause: Node<'_>, src: &str) -> bool {
    let mut c = clause.walk();
    let mut values = clause.children_by_field_name("value", &mut c).peekable();
    if values.peek().is_none() {
        return true;
    }
    values.any(|v| {
        let t = text(src, v);
        [
            "ImportError",
            "ModuleNotFoundError",
            "Exception",
            "BaseException",
        ]
        .iter()
        .any(|e| find_word(t, e).is_some())
    })
}

/// True for `if TYPE_CHECKING:` and `if typing.TYPE_CHECKING:`.
fn is_type_checking(node: Node<'_>, src: &str) -> bool {
    let k = Kinds::get();
    node.child_by_field_id(k.f_condition).is_some_and(|c| {
        let t = text(src, c);
        t == "TYPE_CHECKING" || t.ends_with(".TYPE_CHECKING")
    })
}

/// True for a string literal whose text is an identifier (`"forward"`, `'name'`).
fn is_identifier_string(literal: &str) -> bool {
    let inner = literal
        .strip_prefix(['"', '\''])
        .and_then(|s| s.strip_suffix(['"', '\'']));
    inner.is_some_and(crate::index::is_identifier)
}
