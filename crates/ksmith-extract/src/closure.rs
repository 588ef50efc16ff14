//! The dependency closure of an entry class and an order to inline it in that runs.
//!
//! Membership follows every read (eager or lazy). Order only has to satisfy what runs while the
//! program is being defined: a statement that reads a name eagerly (a base class, a decorator,
//! a default value, a module-level call) needs that definition before it, and when the
//! definition is a function or a module-level value (whose code runs then), everything that one
//! reaches too. Lazy reads (inside function bodies) may point anywhere, so cycles between
//! functions are fine. A cycle among eager needs is reported.

use std::collections::{BTreeSet, HashMap, HashSet};

use crate::imports::{Binding, Target, is_allowed};
use crate::index::StmtKind;
use crate::resolve::{Found, Repo};

/// A node of the closure: (file index, statement index).
pub(crate) type NodeId = (usize, usize);

/// A text replacement inside a statement: byte range (file offsets) and new text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Edit {
    /// Start byte in the file.
    pub(crate) start: usize,
    /// End byte in the file.
    pub(crate) end: usize,
    /// Replacement text.
    pub(crate) text: String,
}

/// Why a closure cannot be emitted, in order of precedence when there are several.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Problem {
    /// A statement of the closure has a syntax error.
    SyntaxError {
        /// File.
        path: String,
        /// 1-based line.
        line: u32,
    },
    /// A statement nests deeper than the analysis allows.
    TooDeep {
        /// File.
        path: String,
        /// 1-based line.
        line: u32,
    },
    /// An import of a package off the allow-list is needed.
    NotAllowed(String),
    /// A repository-local import leads nowhere.
    MissingImport(String),
    /// A global name nothing defines.
    Undefined(String),
    /// Two different definitions would bind the same name in the flattened program.
    NameConflict(String),
    /// A repository module object is used as a value (not through `module.attr`).
    ModuleReference(String),
    /// Definitions need each other while the program is being defined.
    Cycle(String),
}

impl Problem {
    /// True when this is a rule refusing the module rather than a failure.
    pub(crate) fn is_rejection(&self) -> bool {
        matches!(self, Problem::NotAllowed(_))
    }

    /// The reason recorded in the row.
    pub(crate) fn reason(&self) -> String {
        match self {
            Problem::SyntaxError { path, line } => format!("syntax_error at {path}:{line}"),
            Problem::TooDeep { path, line } => format!("too_deeply_nested at {path}:{line}"),
            Problem::NotAllowed(p) => format!("import_not_allowed: {p}"),
            Problem::MissingImport(i) => format!("unresolved_import: {i}"),
            Problem::Undefined(n) => format!("undefined_name: {n}"),
            Problem::NameConflict(n) => format!("name_conflict: {n}"),
            Problem::ModuleReference(n) => format!("module_reference: {n}"),
            Problem::Cycle(n) => format!("dependency_cycle: {n}"),
        }
    }
}

/// Who binds a name of the flattened program.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Binder {
    Node(NodeId),
    Import(String),
    Alias(String),
}

/// The closure of an entry class, ready to emit.
#[derive(Debug, Clone, Default)]
pub(crate) struct Plan {
    /// Statements in emission order (the entry included).
    pub(crate) order: Vec<NodeId>,
    /// Text replacements per statement.
    pub(crate) edits: HashMap<NodeId, Vec<Edit>>,
    /// `alias = name` lines to emit right after a statement.
    pub(crate) aliases: HashMap<NodeId, Vec<(String, String)>>,
    /// Import lines (deduplicated; `__future__` first when emitted).
    pub(crate) imports: BTreeSet<String>,
    /// The original name of the entry is read somewhere in the closure.
    pub(crate) entry_name_read: bool,
}

/// Builder state.
struct Closure<'r> {
    repo: &'r Repo,
    entry: NodeId,
    included: HashSet<NodeId>,
    queue: Vec<NodeId>,
    edges: Vec<(NodeId, NodeId, bool)>,
    namespace: HashMap<String, Binder>,
    problems: Vec<Problem>,
    plan: Plan,
}

/// Builds the closure of the class at `entry`, renamed to `Model`.
pub(crate) fn plan(repo: &Repo, entry: NodeId) -> Result<Plan, Problem> {
    let mut c = Closure {
        repo,
        entry,
        included: HashSet::new(),
        queue: Vec::new(),
        edges: Vec::new(),
        namespace: HashMap::new(),
        problems: Vec::new(),
        plan: Plan::default(),
    };
    c.register("Model", Binder::Node(entry));
    c.include(entry);
    while let Some(node) = c.queue.pop() {
        c.visit(node);
    }
    // Names the program adds itself.
    for reserved in ["get_inputs", "get_init_inputs"] {
        if c.namespace.contains_key(reserved) {
            c.problems.push(Problem::NameConflict(reserved.to_string()));
        }
    }
    if let Some(binder) = c.namespace.get("torch")
        && *binder != Binder::Import("object torch".to_string())
    {
        c.problems.push(Problem::NameConflict("torch".to_string()));
    }
    if let Some(p) = c.problems.iter().min() {
        return Err(p.clone());
    }
    c.plan.order = c.order()?;
    Ok(c.plan)
}

impl<'r> Closure<'r> {
    fn include(&mut self, node: NodeId) {
        if self.included.insert(node) {
            self.queue.push(node);
        }
    }

    fn register(&mut self, name: &str, binder: Binder) {
        match self.namespace.get(name) {
            None => {
                self.namespace.insert(name.to_string(), binder);
            }
            Some(existing) => {
                let same = match (existing, &binder) {
                    (Binder::Node(a), Binder::Node(b)) => a.0 == b.0,
                    (Binder::Import(a), Binder::Import(b)) => a == b,
                    (Binder::Alias(a), Binder::Alias(b)) => a == b,
                    _ => false,
                };
                if !same {
                    self.problems.push(Problem::NameConflict(name.to_string()));
                }
            }
        }
    }

    fn visit(&mut self, node: NodeId) {
        let repo = self.repo;
        let (fi, si) = node;
        let file = &repo.files[fi];
        let stmt = &file.stmts[si];
        if let Some(line) = stmt.error_line {
            self.problems.push(Problem::SyntaxError {
                path: file.path.clone(),
                line,
            });
            return;
        }
        if stmt.names.too_deep {
            self.problems.push(Problem::TooDeep {
                path: file.path.clone(),
                line: stmt.line,
            });
            return;
        }
        for d in &stmt.names.defines {
            let name = if node == self.entry && d == "Model" {
                continue;
            } else {
                d.as_str()
            };
            self.register(name, Binder::Node(node));
        }
        for nested in &stmt.names.nested {
            if nested.local {
                self.edit(node, nested.start, nested.end, "pass".to_string());
            } else {
                for b in &nested.bindings {
                    let package = b.target.top_package().unwrap_or("");
                    if !b.target.is_future() && !is_allowed(package, &repo.allowed) {
                        self.problems.push(Problem::NotAllowed(package.to_string()));
                    }
                }
            }
        }
        for site in &stmt.names.sites {
            let eager = stmt
                .names
                .reads
                .iter()
                .find(|r| r.name == site.base)
                .is_some_and(|r| r.eager);
            let mut found = repo.lookup(fi, si, &site.base, eager);
            let mut replaced = false;
            for (attr, end) in &site.chain {
                match found {
                    Found::Module { file, ref path } => {
                        found = repo.lookup_in_module(file, path, attr);
                    }
                    _ => break,
                }
                match &found {
                    Found::Module { .. } => continue,
                    Found::Def { .. } | Found::External { .. } => {
                        let local = self.use_found(node, attr, found.clone(), eager);
                        if let Some(local) = local {
                            self.edit(node, site.start, *end, local);
                        }
                        replaced = true;
                        break;
                    }
                    Found::NotAllowed(p) => {
                        self.problems.push(Problem::NotAllowed(p.clone()));
                        replaced = true;
                        break;
                    }
                    Found::MissingImport(i) => {
                        self.problems.push(Problem::MissingImport(i.clone()));
                        replaced = true;
                        break;
                    }
                    _ => {
                        self.problems
                            .push(Problem::Undefined(format!("{}.{attr}", site.base)));
                        replaced = true;
                        break;
                    }
                }
            }
            if !replaced {
                match found {
                    Found::Module { .. } => {
                        self.problems
                            .push(Problem::ModuleReference(site.base.clone()));
                    }
                    other => {
                        // The base is not a module after all (e.g. shadowed): treat as a read.
                        self.use_found(node, &site.base, other, eager);
                    }
                }
            }
        }
        for read in &stmt.names.reads {
            if !read.bare {
                continue;
            }
            let found = repo.lookup(fi, si, &read.name, read.eager);
            if let Found::Module { .. } = found {
                self.problems
                    .push(Problem::ModuleReference(read.name.clone()));
                continue;
            }
            self.use_found(node, &read.name, found, read.eager);
        }
    }

    /// Records what a read of `local` in `node` needs; returns the name it has in the program.
    fn use_found(
        &mut self,
        node: NodeId,
        local: &str,
        found: Found,
        eager: bool,
    ) -> Option<String> {
        match found {
            Found::Def { file, stmt, name } => {
                let target = (file, stmt);
                if target == self.entry {
                    self.plan.entry_name_read = true;
                }
                self.include(target);
                self.edges.push((node, target, eager));
                if name != local {
                    // Read under another name than the definition's (an import alias): bind
                    // the alias too, right after the definition.
                    self.alias_later(target, local, &name);
                }
                Some(name)
            }
            Found::External { binding } => {
                let (line, identity) = import_line(&binding, local);
                self.register(local, Binder::Import(identity));
                self.plan.imports.insert(line);
                Some(local.to_string())
            }
            Found::NotAllowed(p) => {
                self.problems.push(Problem::NotAllowed(p));
                None
            }
            Found::MissingImport(i) => {
                self.problems.push(Problem::MissingImport(i));
                None
            }
            Found::Broken { file } => {
                let f = &self.repo.files[file];
                self.problems.push(Problem::SyntaxError {
                    path: f.path.clone(),
                    line: f.error_line.unwrap_or(1),
                });
                None
            }
            Found::Undefined => {
                self.problems.push(Problem::Undefined(local.to_string()));
                None
            }
            Found::Module { .. } => {
                self.problems
                    .push(Problem::ModuleReference(local.to_string()));
                None
            }
            Found::Itself => {
                if node == self.entry {
                    self.plan.entry_name_read = true;
                }
                None
            }
            Found::Builtin => None,
        }
    }

    fn alias_later(&mut self, target: NodeId, alias: &str, name: &str) {
        let list = self.plan.aliases.entry(target).or_default();
        if !list.iter().any(|(a, _)| a == alias) {
            list.push((alias.to_string(), name.to_string()));
        }
        self.register(
            alias,
            Binder::Alias(format!("{}:{}:{name}", target.0, target.1)),
        );
    }

    fn edit(&mut self, node: NodeId, start: usize, end: usize, text: String) {
        let edits = self.plan.edits.entry(node).or_default();
        if !edits.iter().any(|e| e.start == start) {
            edits.push(Edit { start, end, text });
        }
    }

    /// A topological order of the eager needs, ties broken by (entry last, file, position).
    fn order(&self) -> Result<Vec<NodeId>, Problem> {
        let mut out_edges: HashMap<NodeId, Vec<(NodeId, bool)>> = HashMap::new();
        for &(a, b, eager) in &self.edges {
            out_edges.entry(a).or_default().push((b, eager));
        }
        let is_class =
            |n: NodeId| matches!(self.repo.files[n.0].stmts[n.1].kind, StmtKind::Class(_));
        // before[a]: nodes that must precede a.
        let mut before: HashMap<NodeId, HashSet<NodeId>> = HashMap::new();
        for &a in &self.included {
            let mut need = HashSet::new();
            let mut stack: Vec<(NodeId, bool)> = out_edges
                .get(&a)
                .map(|v| {
                    v.iter()
                        .filter(|(_, e)| *e)
                        .map(|(b, _)| (*b, true))
                        .collect()
                })
                .unwrap_or_default();
            // (node, reached only through eager edges of classes)
            while let Some((n, eager_path)) = stack.pop() {
                if n == a || !need.insert(n) {
                    continue;
                }
                let follow_all = !eager_path || !is_class(n);
                if let Some(next) = out_edges.get(&n) {
                    for &(m, e) in next {
                        if follow_all {
                            stack.push((m, false));
                        } else if e {
                            stack.push((m, true));
                        }
                    }
                }
            }
            before.insert(a, need);
        }
        let key = |n: &NodeId| (*n == self.entry, n.0, self.repo.files[n.0].stmts[n.1].start);
        let mut remaining: Vec<NodeId> = self.included.iter().copied().collect();
        remaining.sort_by_key(key);
        let mut placed: HashSet<NodeId> = HashSet::new();
        let mut order = Vec::with_capacity(remaining.len());
        while !remaining.is_empty() {
            let pick = remaining.iter().position(|n| {
                before
                    .get(n)
                    .is_none_or(|need| need.iter().all(|m| placed.contains(m)))
            });
            let Some(i) = pick else {
                let names: Vec<String> =
                    remaining.iter().map(|n| node_name(self.repo, *n)).collect();
                return Err(Problem::Cycle(names.join(", ")));
            };
            let n = remaining.remove(i);
            placed.insert(n);
            order.push(n);
        }
        Ok(order)
    }
}

/// The import line for a binding read as `local`, and the identity of what it binds.
fn import_line(binding: &Binding, local: &str) -> (String, String) {
    // What the name is bound to: `import torch.nn as nn` and `from torch import nn` bind the
    // same object.
    let identity = match &binding.target {
        Target::Module { path, .. } => format!("object {path}"),
        Target::Name {
            level: 0,
            module,
            name,
        } => format!("object {module}.{name}"),
        Target::Name {
            level,
            module,
            name,
        } => format!("relative {level} {module}.{name}"),
        Target::Star { module, .. } => format!("star {module}"),
    };
    (binding.line_as(local), identity)
}

/// A readable name for a statement: `path::first_defined_name`.
pub(crate) fn node_name(repo: &Repo, node: NodeId) -> String {
    let f = &repo.files[node.0];
    let s = &f.stmts[node.1];
    let name = match &s.kind {
        StmtKind::Class(info) => info.name.clone(),
        _ => s
            .names
            .defines
            .first()
            .cloned()
            .unwrap_or_else(|| format!("<line {}>", s.line)),
    };
    format!("{}::{name}", f.path)
}
