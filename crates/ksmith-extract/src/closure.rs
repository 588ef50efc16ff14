//! The dependency closure of an entry class and an order to inline it in that runs.
//!
//! Membership follows every read (eager or lazy). Order only has to satisfy what runs while the
//! program is being defined: a statement that reads a name eagerly (a base class, a decorator,
//! a default value, a module-level call) needs that definition before it, and when the
//! definition is a function or a module-level value (whose code runs then), everything that one
//! reaches too. Lazy reads (inside function bodies) may point anywhere, so cycles between
//! functions are fine. A cycle among eager needs is reported.
//!
//! A class is read member by member. Its code outside methods and the methods anything may
//! call implicitly (`__init__`, `forward`, dunders, the `nn.Module` API it overrides) are
//! needed; any other method, and any alias in its body (`decode = decode_function`, a method
//! in all but syntax), is needed once something needed names it (`x.name`, `getattr(x,
//! "name")`, `forward = name` in a class body). A method nothing names is kept when what it
//! needs can be inlined and adds no definition; otherwise its body becomes
//! `raise NotImplementedError(...)`, saying why, so a helper like `from_pretrained` that
//! imports `transformers` does not reject the class. An alias nothing names is kept unless
//! what it needs cannot be inlined; then it becomes a one-line method that raises. A registry
//! decorator of a definition (`@BACKBONES.register_module()`) only records the definition and
//! returns it: it is kept when its registry adds no definition and no problem, otherwise it is
//! replaced by a comment saying why. Nested imports with a fallback (`try: import apex` / `except
//! ImportError:`) that cannot be inlined become `name = None; raise ImportError(...)`, so the
//! program takes the fallback; imports under `if TYPE_CHECKING:` never run and stay as written.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use ksmith_core::tables::ModuleReason;

use crate::imports::{Binding, ImportKinds, Target, is_allowed, read_only_use};
use crate::index::{StmtKind, find_word};
use crate::names::{Guard, MemberKind, NestedImport, Owner};
use crate::resolve::{Found, Repo};

/// A node of the closure: (file index, statement index).
pub(crate) type NodeId = (usize, usize);

/// What is read as a whole: a statement outside its members (`None`) or one member.
type Unit = (NodeId, Owner);

/// Methods the Python runtime or torch may call on a class without the program naming them
/// (dunders aside): the `nn.Module` API a class may override and `autograd.Function`'s.
const CALLED_IMPLICITLY: &[&str] = &[
    "forward",
    "extra_repr",
    "_apply",
    "_load_from_state_dict",
    "_save_to_state_dict",
    "_get_name",
    "_named_members",
    "_call_impl",
    "_wrapped_call_impl",
    "_replicate_for_data_parallel",
    "state_dict",
    "load_state_dict",
    "get_extra_state",
    "set_extra_state",
    "train",
    "eval",
    "to",
    "cuda",
    "cpu",
    "float",
    "double",
    "half",
    "bfloat16",
    "type",
    "apply",
    "parameters",
    "named_parameters",
    "buffers",
    "named_buffers",
    "children",
    "named_children",
    "modules",
    "named_modules",
    "zero_grad",
    "requires_grad_",
    "register_buffer",
    "register_parameter",
    "register_module",
    "add_module",
    "backward",
    "setup_context",
    "jvp",
    "vjp",
];

/// True for a method that may run without the program naming it.
fn called_implicitly(name: &str) -> bool {
    (name.starts_with("__") && name.ends_with("__") && name.len() > 4)
        || CALLED_IMPLICITLY.contains(&name)
}

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

    /// The reason's code.
    pub(crate) fn code(&self) -> ModuleReason {
        match self {
            Problem::SyntaxError { .. } => ModuleReason::SyntaxError,
            Problem::TooDeep { .. } => ModuleReason::TooDeeplyNested,
            Problem::NotAllowed(_) => ModuleReason::ImportNotAllowed,
            Problem::MissingImport(_) => ModuleReason::UnresolvedImport,
            Problem::Undefined(_) => ModuleReason::UndefinedName,
            Problem::NameConflict(_) => ModuleReason::NameConflict,
            Problem::ModuleReference(_) => ModuleReason::ModuleReference,
            Problem::Cycle(_) => ModuleReason::DependencyCycle,
        }
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
    /// Definitions bound under another name in the program (see [`renames_for`]).
    pub(crate) renames: Renames,
}

/// Builder state.
#[derive(Clone)]
struct Closure<'r> {
    repo: &'r Repo,
    entry: NodeId,
    included: HashSet<NodeId>,
    queue: Vec<Unit>,
    edges: Vec<(NodeId, NodeId, bool)>,
    namespace: HashMap<String, Binder>,
    problems: Vec<Problem>,
    plan: Plan,
    /// Names members may be needed by, found in the units read so far.
    mentioned: HashSet<String>,
    /// Members not read yet, by name: nothing read so far needs them (registrations wait here
    /// under their decorator text, which nothing names).
    pending: HashMap<String, Vec<(NodeId, u16)>>,
    /// Definitions bound under another name in the program: (file, name) -> new name.
    renames: &'r Renames,
    /// Names two different binders would bind, at least one of them a repository definition
    /// (which can be renamed): name -> every binder met.
    conflicts: BTreeMap<String, Vec<Binder>>,
}

/// Definitions renamed to resolve name conflicts: (file index, name as defined) -> new name.
pub(crate) type Renames = BTreeMap<(usize, String), String>;

/// Names the emitted program binds itself, which no inlined definition may take.
const GENERATED: &[&str] = &["get_inputs", "get_init_inputs"];

/// How many times the closure is rebuilt with more renames before a conflict is a problem.
const RENAME_ROUNDS: usize = 4;

/// Builds the closure of the class at `entry`, renamed to `Model`, and of `roots` (classes
/// inlined beside it: those its constructor arguments build, `get_init_inputs()` calls them).
///
/// When two definitions of different files (or a definition and an import, or a name the
/// program generates) would bind the same name, the closure is built again with the
/// definitions that give way renamed (see [`renames_for`]), up to [`RENAME_ROUNDS`] times.
pub(crate) fn plan(repo: &Repo, entry: NodeId, roots: &[NodeId]) -> Result<Plan, Problem> {
    let mut renames = Renames::new();
    for _ in 0..RENAME_ROUNDS {
        let c = build(repo, entry, roots, &renames);
        if c.problems.is_empty() && !c.conflicts.is_empty() {
            let more = renames_for(&c, &renames);
            if !more.is_empty() {
                renames.extend(more);
                continue;
            }
        }
        return finish(c);
    }
    finish(build(repo, entry, roots, &renames))
}

/// One build of the closure with the given renames.
fn build<'r>(repo: &'r Repo, entry: NodeId, roots: &[NodeId], renames: &'r Renames) -> Closure<'r> {
    let mut c = Closure {
        repo,
        entry,
        included: HashSet::new(),
        queue: Vec::new(),
        edges: Vec::new(),
        namespace: HashMap::new(),
        problems: Vec::new(),
        plan: Plan::default(),
        mentioned: HashSet::new(),
        pending: HashMap::new(),
        renames,
        conflicts: BTreeMap::new(),
    };
    c.register("Model", Binder::Node(entry));
    for name in GENERATED {
        c.register(name, Binder::Import(format!("generated {name}")));
    }
    c.include(entry);
    for root in roots {
        c.include(*root);
    }
    c.drain();
    if c.problems.is_empty() {
        c.settle_pending();
    }
    c
}

/// The plan of a finished build, or its first problem (a conflict left is one).
fn finish(mut c: Closure<'_>) -> Result<Plan, Problem> {
    for name in std::mem::take(&mut c.conflicts).into_keys() {
        c.problems.push(Problem::NameConflict(name));
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
    c.plan.renames = c.renames.clone();
    Ok(c.plan)
}

/// The renames that resolve the conflicts of a build: per conflicting name, an import, a name
/// the program generates or `Model` keeps it; else the definition in the entry's file; else
/// the one in the first file (by path). Every other file's definition is renamed to
/// `<name>_<file stem>` (with a number added while that is taken), a name that no statement of
/// the closure mentions and nothing binds, so no read is captured.
fn renames_for(c: &Closure<'_>, done: &Renames) -> Renames {
    let mut out = Renames::new();
    let mut taken: HashSet<String> = c.namespace.keys().cloned().collect();
    taken.extend(done.values().cloned());
    for (name, binders) in &c.conflicts {
        let mut files: Vec<usize> = binders
            .iter()
            .filter_map(|b| match b {
                Binder::Node(n) => Some(n.0),
                _ => None,
            })
            .collect();
        files.sort_unstable();
        files.dedup();
        let movable = binders
            .iter()
            .all(|b| matches!(b, Binder::Node(n) if n != &c.entry));
        let keeper = if !movable || name == "Model" {
            None
        } else if files.contains(&c.entry.0) {
            Some(c.entry.0)
        } else {
            files.first().copied()
        };
        for file in files.into_iter().filter(|f| Some(*f) != keeper) {
            if (file, name.clone()) == (c.entry.0, c.entry_name())
                || done.contains_key(&(file, name.clone()))
            {
                continue;
            }
            let stem = file_stem(&c.repo.files[file].path);
            let base = format!("{name}_{stem}");
            let mut candidate = base.clone();
            let mut n = 2;
            while taken.contains(&candidate) || c.mentions_word(&candidate) {
                candidate = format!("{base}_{n}");
                n += 1;
            }
            taken.insert(candidate.clone());
            out.insert((file, name.clone()), candidate);
        }
    }
    out
}

/// The identifier-safe stem of a file path (`pkg/attend.py` -> `attend`, `pkg/__init__.py` ->
/// `pkg`).
fn file_stem(path: &str) -> String {
    let trimmed = path.strip_suffix(".py").unwrap_or(path);
    let trimmed = trimmed.strip_suffix("/__init__").unwrap_or(trimmed);
    let last = trimmed.rsplit('/').next().unwrap_or(trimmed);
    let stem: String = last
        .chars()
        .map(|c| {
            if c.is_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if stem.is_empty() || stem.starts_with(|c: char| c.is_ascii_digit()) {
        format!("m{stem}")
    } else {
        stem
    }
}

impl<'r> Closure<'r> {
    /// The entry class's own name.
    fn entry_name(&self) -> String {
        self.repo.files[self.entry.0].stmts[self.entry.1]
            .class_name()
            .to_string()
    }

    /// True when the text of a statement of the closure holds `word` as an identifier.
    fn mentions_word(&self, word: &str) -> bool {
        self.included.iter().any(|n| {
            let file = &self.repo.files[n.0];
            let stmt = &file.stmts[n.1];
            file.source
                .get(stmt.start..stmt.end)
                .is_some_and(|t| find_word(t, word).is_some())
        })
    }

    /// Adds a statement: its code outside members and the methods and aliases that may run are
    /// read; the other members wait until something names them, or are decided at the end.
    fn include(&mut self, node: NodeId) {
        if !self.included.insert(node) {
            return;
        }
        self.queue.push((node, None));
        let file = &self.repo.files[node.0];
        if file.future_annotations {
            // Its annotations were written to be never evaluated.
            self.plan
                .imports
                .insert("from __future__ import annotations".to_string());
        }
        let stmt = &file.stmts[node.1];
        for (i, m) in stmt.names.members.iter().enumerate() {
            let i = i as u16;
            let needed = match m.kind {
                MemberKind::Method | MemberKind::Alias => {
                    called_implicitly(&m.name) || self.mentioned.contains(&m.name)
                }
                MemberKind::Registration => false,
            };
            if needed {
                self.queue.push((node, Some(i)));
            } else {
                self.pending
                    .entry(m.name.clone())
                    .or_default()
                    .push((node, i));
            }
        }
    }

    /// Reads queued units until none is left.
    fn drain(&mut self) {
        while let Some(unit) = self.queue.pop() {
            self.visit(unit);
        }
    }

    /// Decides each member nothing needs, in file order: it stays when reading it (and what it
    /// pulls in) adds no problem and no definition; otherwise it is replaced (see
    /// [`Closure::stub`]).
    fn settle_pending(&mut self) {
        loop {
            let next = self
                .pending
                .iter()
                .flat_map(|(name, v)| v.iter().map(move |m| (*m, name)))
                .min()
                .map(|(m, name)| (m, name.clone()));
            let Some(((node, i), name)) = next else {
                return;
            };
            if let Some(list) = self.pending.get_mut(&name) {
                list.retain(|m| *m != (node, i));
                if list.is_empty() {
                    self.pending.remove(&name);
                }
            }
            let mut trial = self.clone();
            trial.queue.push((node, Some(i)));
            trial.drain();
            // Tier one found no problem, so all of the trial's are new; the first is the
            // member's own (it is read first). A method or registration that needs definitions
            // nothing else needs is replaced too: only what `__init__` and `forward` reach is
            // inlined (a registry the program never uses is no exception). An alias is class
            // data as much as a method (an `Enum` member, a default read through `vars()`), so
            // it is replaced only when keeping it would reject the class.
            let added = trial.included.len() - self.included.len();
            let why = match (trial.problems.first(), self.member_kind(node, i)) {
                (Some(problem), _) => Some(problem.reason()),
                (None, _) if added == 0 => None,
                (None, Some(MemberKind::Alias)) => None,
                (None, Some(MemberKind::Registration)) => {
                    Some(format!("the registry needs {added} more definitions"))
                }
                (None, _) => Some(format!(
                    "not called by __init__ or forward, it needs {added} more definitions"
                )),
            };
            match why {
                Some(why) => self.stub(node, i, &why),
                None => *self = trial,
            }
        }
    }

    /// The kind of member `i` of `node`.
    fn member_kind(&self, node: NodeId, i: u16) -> Option<MemberKind> {
        let stmt = &self.repo.files[node.0].stmts[node.1];
        stmt.names.members.get(usize::from(i)).map(|m| m.kind)
    }

    /// Replaces member `i` of `node`, saying why: a method's body by a `raise`, an alias by a
    /// method that raises, a registry decorator by a comment (the definition it returns is
    /// the one it was given, so the program is the same but for the registry).
    fn stub(&mut self, node: NodeId, i: u16, why: &str) {
        let stmt = &self.repo.files[node.0].stmts[node.1];
        let Some(member) = stmt.names.members.get(usize::from(i)) else {
            return;
        };
        let raise = |why: &str| {
            format!(
                "raise NotImplementedError({})",
                python_string(&format!("removed by ksmith: {why}"))
            )
        };
        let text = match member.kind {
            MemberKind::Method => raise(why),
            MemberKind::Alias => {
                format!("def {}(self, *args, **kwargs): {}", member.name, raise(why))
            }
            MemberKind::Registration => {
                let decorator = member.name.split_whitespace().collect::<Vec<_>>().join(" ");
                format!("# removed by ksmith: {decorator} ({why})")
            }
        };
        self.edit(node, member.span.0, member.span.1, text);
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
                    let renameable =
                        matches!(existing, Binder::Node(_)) || matches!(binder, Binder::Node(_));
                    if renameable {
                        let list = self
                            .conflicts
                            .entry(name.to_string())
                            .or_insert_with(|| vec![existing.clone()]);
                        if !list.contains(&binder) {
                            list.push(binder);
                        }
                    } else {
                        self.problems.push(Problem::NameConflict(name.to_string()));
                    }
                }
            }
        }
    }

    /// Reads one unit: registers what the statement defines (with its code outside methods)
    /// and follows everything the unit reads.
    fn visit(&mut self, (node, owner): Unit) {
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
        if owner.is_none() {
            for d in &stmt.names.defines {
                if node == self.entry && d == "Model" {
                    continue;
                }
                match self.renames.get(&(fi, d.clone())) {
                    Some(new) => {
                        let new = new.clone();
                        self.register(&new, Binder::Node(node));
                        for (_, at) in stmt.names.define_at.iter().filter(|(n, _)| n == d) {
                            let at = *at as usize;
                            self.edit(node, at, at + d.len(), new.clone());
                        }
                    }
                    None => self.register(d, Binder::Node(node)),
                }
            }
        }
        for nested in stmt.names.nested.iter().filter(|n| n.owner == owner) {
            self.nested_import(node, nested);
        }
        for site in stmt.names.sites.iter().filter(|s| s.owner == owner) {
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
                        let local = self.use_found((node, owner), attr, found.clone(), eager);
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
                        self.use_found((node, owner), &site.base, other, eager);
                    }
                }
            }
        }
        for read in stmt.names.reads.iter().filter(|r| r.owner == owner) {
            if !read.bare {
                continue;
            }
            let found = repo.lookup(fi, si, &read.name, read.eager);
            if let Found::Module { .. } = found {
                self.problems
                    .push(Problem::ModuleReference(read.name.clone()));
                continue;
            }
            let renamed = match &found {
                Found::Def { file, name, .. } if *name == read.name => {
                    self.renames.get(&(*file, name.clone()))
                }
                Found::Itself if stmt.names.defines.contains(&read.name) => {
                    self.renames.get(&(fi, read.name.clone()))
                }
                _ => None,
            };
            if let Some(new) = renamed {
                for &at in &read.at {
                    let at = at as usize;
                    self.edit(node, at, at + read.name.len(), new.clone());
                }
            }
            self.use_found((node, owner), &read.name, found, read.eager);
        }
        for &(start, end, _) in stmt.names.mentions.iter().filter(|m| m.2 == owner) {
            let Some(name) = file.source.get(start as usize..end as usize) else {
                continue;
            };
            if !self.mentioned.contains(name) {
                self.mentioned.insert(name.to_string());
                for (n, i) in self.pending.remove(name).unwrap_or_default() {
                    self.queue.push((n, Some(i)));
                }
            }
        }
    }

    /// An import inside a statement: a repository-local one becomes `pass` (its definitions
    /// are inlined); an external one must be allowed (or read-only and only read). One with a
    /// fallback that cannot be kept becomes a `raise ImportError`; one under `TYPE_CHECKING`, or
    /// in a handler that never runs, stays (a repository-local one becomes `pass`, uninlined).
    fn nested_import(&mut self, node: NodeId, nested: &NestedImport) {
        let repo = self.repo;
        let stmt = &repo.files[node.0].stmts[node.1];
        if repo.handler_is_dead(stmt, nested) {
            if nested.local {
                self.edit(node, nested.start, nested.end, "pass".to_string());
            }
            return;
        }
        if nested.guard == Guard::TypeChecking {
            // Never runs: type checkers read it, the program does not (nothing is inlined).
            return;
        }
        if nested.local {
            let text = if repo.falls_back(node.0, nested) {
                fallback_text(nested, "a repository module it names is missing")
            } else {
                "pass".to_string()
            };
            self.edit(node, nested.start, nested.end, text);
            return;
        }
        let refused = nested.bindings.iter().find_map(|b| {
            let package = b.target.top_package().unwrap_or("");
            let fine = b.target.is_future()
                || is_allowed(package, &repo.allowed)
                || (repo.map.is_read_only(package)
                    && only_reads(stmt, nested.owner, &b.local, &b.target));
            (!fine).then(|| package.to_string())
        });
        match refused {
            None => {}
            Some(package) if nested.guard == Guard::Fallback => {
                let why = format!("{package} is not available to extracted programs");
                self.edit(node, nested.start, nested.end, fallback_text(nested, &why));
            }
            Some(package) => self.problems.push(Problem::NotAllowed(package)),
        }
    }

    /// Records what a read of `local` in `node` needs; returns the name it has in the program.
    fn use_found(
        &mut self,
        (node, owner): Unit,
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
                let original = name;
                let name = self
                    .renames
                    .get(&(file, original.clone()))
                    .cloned()
                    .unwrap_or_else(|| original.clone());
                if original != local {
                    // Read under another name than the definition's (an import alias): bind
                    // the alias too, right after the definition.
                    self.alias_later(target, local, &name);
                }
                Some(name)
            }
            Found::External { binding } => {
                let package = binding.target.top_package().unwrap_or("");
                let stmt = &self.repo.files[node.0].stmts[node.1];
                if self.repo.map.is_read_only(package)
                    && !only_reads(stmt, owner, local, &binding.target)
                {
                    self.problems.push(Problem::NotAllowed(package.to_string()));
                    return None;
                }
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

/// True when statement `stmt` (within `owner`) uses `local`, bound to `target` of a read-only
/// package, only to read (`os.environ.get(...)`, `os.path.join(...)`) and uses it at all: a
/// name it does not record uses of (bound elsewhere) may be used in any way.
fn only_reads(stmt: &crate::index::Stmt, owner: Owner, local: &str, target: &Target) -> bool {
    let base = match target {
        Target::Module { path, .. } => path.clone(),
        Target::Name { module, name, .. } => format!("{module}.{name}"),
        Target::Star { .. } => return false,
    };
    let mut uses = stmt
        .names
        .package_uses
        .iter()
        .filter(|u| u.owner == owner && u.base == local)
        .peekable();
    uses.peek().is_some()
        && uses.all(|u| {
            let full = if u.path.is_empty() {
                base.clone()
            } else {
                format!("{base}.{}", u.path)
            };
            !u.store && read_only_use(&full)
        })
}

/// The text replacing an import that has a fallback but cannot be kept: the names it binds
/// become `None` and `ImportError` sends the program to the handler, as when the package is
/// not installed.
fn fallback_text(nested: &NestedImport, why: &str) -> String {
    let mut text = String::new();
    for b in nested.bindings.iter().filter(|b| b.local != "*") {
        text.push_str(&b.local);
        text.push_str(" = ");
    }
    if !text.is_empty() {
        text.push_str("None; ");
    }
    text.push_str(&format!("raise ImportError({})", python_string(why)));
    text
}

/// A Python string literal holding `text`.
fn python_string(text: &str) -> String {
    let escaped: String = text
        .chars()
        .map(|c| match c {
            '"' | '\\' => format!("\\{c}"),
            '\n' | '\r' => " ".to_string(),
            c => c.to_string(),
        })
        .collect();
    format!("\"{escaped}\"")
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
    match repo.labels.get(node.0).and_then(|l| l.as_deref()) {
        Some(label) => format!("{label}:{}::{name}", f.path),
        None => format!("{}::{name}", f.path),
    }
}
