//! Name resolution across the files of one repository: module paths, imports (absolute and
//! relative, aliases, re-exports, star imports) and `nn.Module` detection.

use std::collections::{HashMap, HashSet};
use std::sync::{Mutex, OnceLock};

use crate::builtins::is_builtin;
use crate::calls::CallSite;
use crate::guess::is_literal_text;
use crate::imports::{Binding, ImportKinds, Target, is_allowed};
use crate::index::{
    ClassInfo, FileIndex, Method, Param, ParamKind, Stmt, StmtKind, module_components,
};
use crate::names::{Guard, NestedImport};
use crate::sites::ClassUses;

/// How deep import chains and base-class chains are followed.
const MAX_HOPS: u32 = 24;

/// Where the modules of a repository are, from the file paths alone.
#[derive(Debug, Default)]
pub(crate) struct ModuleMap {
    /// Dotted name from the repository root -> file.
    full: HashMap<String, usize>,
    /// Every importable dotted name (from the root and from each non-package folder) -> files.
    names: HashMap<String, Vec<usize>>,
    /// Dotted names of folders holding Python files (namespace or regular packages).
    dirs: HashSet<String>,
    /// First components of every importable name.
    tops: HashSet<String>,
    /// First components of names from the repository root.
    root_tops: HashSet<String>,
    /// The allow-list, consulted when a local name shadows an allowed package.
    allowed: Vec<String>,
    /// Packages allowed for their read-only uses only.
    read_only: Vec<String>,
}

impl ModuleMap {
    /// Builds the map for `paths` (relative, `/`-separated); `allowed` and `read_only` are the
    /// packages programs may import, fully or for reading only.
    pub(crate) fn new(paths: &[&str], allowed: &[String], read_only: &[String]) -> ModuleMap {
        let mut map = ModuleMap {
            allowed: allowed.to_vec(),
            read_only: read_only.to_vec(),
            ..Default::default()
        };
        let package_dirs: HashSet<&str> = paths
            .iter()
            .filter_map(|p| p.strip_suffix("/__init__.py"))
            .collect();
        for (i, path) in paths.iter().enumerate() {
            // Components, not a split of the dotted name: a folder or file name may hold dots.
            let (parts, tail) = module_components(path);
            if tail >= parts.len() {
                continue;
            }
            if tail == 0 {
                map.full.insert(parts.join("."), i);
                map.root_tops.insert(parts[0].to_string());
            }
            for start in tail..parts.len() {
                // A name starting at `start` is importable when the folder above it is not a
                // package (scripts folders, `src/` layouts, repositories without __init__.py).
                if start > 0 && package_dirs.contains(parts[..start].join("/").as_str()) {
                    continue;
                }
                let name = parts[start..].join(".");
                map.tops.insert(parts[start].to_string());
                map.names.entry(name).or_default().push(i);
                for end in start + 1..parts.len() {
                    map.dirs.insert(parts[start..end].join("."));
                }
            }
        }
        for files in map.names.values_mut() {
            files.sort_by_key(|&i| (paths[i].matches('/').count(), paths[i]));
        }
        map
    }

    /// The file of a dotted module name.
    pub(crate) fn file(&self, dotted: &str) -> Option<usize> {
        self.full
            .get(dotted)
            .copied()
            .or_else(|| self.names.get(dotted).and_then(|v| v.first().copied()))
    }

    /// True when a dotted name is a folder (package) of the repository.
    pub(crate) fn is_dir(&self, dotted: &str) -> bool {
        self.dirs.contains(dotted)
    }
}

impl ImportKinds for ModuleMap {
    fn is_local(&self, target: &Target) -> bool {
        let Some(top) = target.top_package() else {
            return !matches!(target, Target::Name { level: 0, .. });
        };
        if !self.tops.contains(top) {
            return false;
        }
        // A local file that merely shares its name with an allowed package (a `math.py` in a
        // scripts folder) does not shadow it unless it sits at the repository root.
        let known = is_allowed(top, &self.allowed) || self.read_only.iter().any(|p| p == top);
        !known || self.root_tops.contains(top)
    }

    fn is_read_only(&self, package: &str) -> bool {
        !is_allowed(package, &self.allowed) && self.read_only.iter().any(|p| p == package)
    }
}

/// The absolute dotted module a possibly relative import names, seen from `file`.
pub(crate) fn absolutize(file: &FileIndex, level: u32, module: &str) -> Option<String> {
    if level == 0 {
        return Some(module.to_string());
    }
    let mut base: Vec<&str> = if file.package.is_empty() {
        Vec::new()
    } else {
        file.package.split('.').collect()
    };
    for _ in 1..level {
        base.pop()?;
    }
    if !module.is_empty() {
        base.push(module);
    }
    Some(base.join("."))
}

/// What a name resolves to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Found {
    /// A top-level statement of a repository file, defining `name`.
    Def {
        /// File index.
        file: usize,
        /// Statement index.
        stmt: usize,
        /// The name as that file defines it.
        name: String,
    },
    /// A package import; `binding` says what, `local` is the name it has in the reading file.
    External {
        /// The binding (its `local` is the name in the file that declares it).
        binding: Binding,
    },
    /// A module of the repository (a file, or a folder without `__init__.py`).
    Module {
        /// The file, when there is one.
        file: Option<usize>,
        /// Its dotted name.
        path: String,
    },
    /// A Python builtin.
    Builtin,
    /// The statement reading the name defines it itself.
    Itself,
    /// An import of a package off the allow-list.
    NotAllowed(String),
    /// A repository-local import that leads nowhere.
    MissingImport(String),
    /// A repository-local import of a name that a file with syntax errors may have lost.
    Broken {
        /// The file with the errors.
        file: usize,
    },
    /// Nothing defines it.
    Undefined,
}

/// A repository: its files' indexes and module map.
pub(crate) struct Repo {
    /// The indexes, in path order.
    pub(crate) files: Vec<FileIndex>,
    /// The module map.
    pub(crate) map: ModuleMap,
    /// The allow-list of top-level packages.
    pub(crate) allowed: Vec<String>,
    /// Per file: the installed package it belongs to (`timm==1.0.31`), none for the
    /// repository's own files.
    pub(crate) labels: Vec<Option<String>>,
    module_memo: Mutex<HashMap<(usize, usize), bool>>,
    class_uses: OnceLock<ClassUses>,
}

/// Facts about a class needed to emit it.
#[derive(Debug, Clone)]
pub(crate) struct ClassFacts {
    /// `__init__` of the class or its nearest repository ancestor.
    pub(crate) init: Option<Method>,
    /// `forward` of the class or its nearest repository ancestor.
    pub(crate) forward: Option<Method>,
    /// A torch layer the class derives from (e.g. `Conv2d`) when no repository class in the
    /// chain defines `forward`/`__init__`.
    pub(crate) torch_base: Option<String>,
    /// Layer names mentioned in the class and its repository ancestors.
    pub(crate) mentions: Vec<&'static str>,
    /// Declared abstract through `metaclass=ABCMeta` or an `ABC` base.
    pub(crate) abstract_class: bool,
}

/// An annotation of a simple value: a number, a flag, a string, or a tuple or list of them
/// (`Optional` of one too).
fn is_simple_type(annotation: &str) -> bool {
    let t: String = annotation.chars().filter(|c| !c.is_whitespace()).collect();
    let t = t.trim_start_matches("typing.");
    let t = t
        .strip_prefix("Optional[")
        .and_then(|r| r.strip_suffix(']'))
        .unwrap_or(t);
    let head = t.split(['[', '|']).next().unwrap_or("");
    matches!(
        head,
        "int" | "float" | "bool" | "str" | "tuple" | "list" | "Tuple" | "List" | "Sequence"
    )
}

/// torch.nn classes that are modules without a `forward`.
const NO_FORWARD: &[&str] = &[
    "Module",
    "ModuleList",
    "ModuleDict",
    "ParameterList",
    "ParameterDict",
];

/// If `full` names a `torch.nn` module class (`torch.nn.Conv2d`,
/// `torch.nn.modules.conv.Conv2d`, `torch.jit.ScriptModule`), its class name.
pub(crate) fn torch_module_class(full: &str) -> Option<&str> {
    if full == "torch.jit.ScriptModule" {
        return Some("Module");
    }
    let rest = full.strip_prefix("torch.nn.")?;
    let parts: Vec<&str> = rest.split('.').collect();
    let (last, middle) = parts.split_last()?;
    let middle_ok = matches!(middle, [] | ["modules", ..]);
    let upper = last.chars().next().is_some_and(|c| c.is_ascii_uppercase());
    let not_module = matches!(
        *last,
        "Parameter" | "Buffer" | "UninitializedParameter" | "UninitializedBuffer"
    );
    (middle_ok && upper && !not_module).then_some(*last)
}

impl Repo {
    /// A repository from its indexed files.
    pub(crate) fn new(files: Vec<FileIndex>, map: ModuleMap, allowed: Vec<String>) -> Repo {
        let labels = vec![None; files.len()];
        Repo {
            files,
            map,
            allowed,
            labels,
            module_memo: Mutex::new(HashMap::new()),
            class_uses: OnceLock::new(),
        }
    }

    /// The repository with the installed package each file belongs to (see `labels`).
    pub(crate) fn with_labels(mut self, labels: Vec<Option<String>>) -> Repo {
        self.labels = labels;
        self
    }

    /// Resolves `name` as read by statement `stmt` of `file`; `eager` reads see only the
    /// definitions above the statement.
    pub(crate) fn lookup(&self, file: usize, stmt: usize, name: &str, eager: bool) -> Found {
        let f = &self.files[file];
        if let Some(s) = f.stmts.get(stmt) {
            for nested in s.names.nested.iter().filter(|n| n.local) {
                if let Some(b) = nested.bindings.iter().rev().find(|b| b.local == name) {
                    if nested.guard == Guard::TypeChecking
                        || self.falls_back(file, nested)
                        || self.handler_is_dead(s, nested)
                    {
                        // Never run (kept as written), or replaced by `name = None; raise
                        // ImportError(...)`: the statement binds it itself.
                        return Found::Itself;
                    }
                    return self.resolve_binding(file, b, 0);
                }
            }
        }
        let self_kind_lazy = f
            .stmts
            .get(stmt)
            .is_some_and(|s| matches!(s.kind, StmtKind::Class(_) | StmtKind::Function));
        let defs = f.defs.get(name);
        let def = defs.and_then(|d| {
            let mut candidates = d.iter().copied().filter(|&i| i != stmt || self_kind_lazy);
            if eager {
                candidates.rfind(|&i| i <= stmt)
            } else {
                candidates.next_back()
            }
        });
        if def == Some(stmt) {
            return Found::Itself;
        }
        let import = f.imports.get(name).and_then(|v| {
            if eager {
                v.iter().rfind(|(i, _)| *i < stmt)
            } else {
                v.last()
            }
        });
        if def.is_none() && import.is_none() && defs.is_some_and(|d| d.contains(&stmt)) {
            // Only the reading statement binds it (a function in a `try` block reading a name
            // the block binds): it is defined with the statement.
            return Found::Itself;
        }
        match (def, import) {
            (Some(d), Some((i, b))) => {
                if *i > d {
                    return self.resolve_binding(file, b, 0);
                }
                return Found::Def {
                    file,
                    stmt: d,
                    name: name.to_string(),
                };
            }
            (Some(d), None) => {
                return Found::Def {
                    file,
                    stmt: d,
                    name: name.to_string(),
                };
            }
            (None, Some((_, b))) => return self.resolve_binding(file, b, 0),
            (None, None) => {}
        }
        // Later definitions of an eager read (e.g. a class used before its definition in a
        // default) still make the name known.
        if eager && let Some(found) = self.lookup_in_file(file, name, 0) {
            return found;
        }
        if is_builtin(name) {
            return Found::Builtin;
        }
        if let Some(found) = self.lookup_stars(file, name, 0) {
            return found;
        }
        Found::Undefined
    }

    fn lookup_stars(&self, file: usize, name: &str, hops: u32) -> Option<Found> {
        let f = &self.files[file];
        for star in &f.stars {
            let Target::Star { level, module } = star else {
                continue;
            };
            if self.map.is_local(star) {
                let abs = absolutize(f, *level, module)?;
                if let Some(target) = self.map.file(&abs)
                    && let Some(found) = self.lookup_in_file(target, name, hops + 1)
                {
                    return Some(found);
                }
            } else {
                let package = star.top_package().unwrap_or("").to_string();
                if !is_allowed(&package, &self.allowed) {
                    return Some(Found::NotAllowed(package));
                }
                return Some(Found::External {
                    binding: Binding {
                        local: "*".to_string(),
                        target: star.clone(),
                    },
                });
            }
        }
        None
    }

    /// A name at the top level of a module file, as other files import it.
    pub(crate) fn lookup_in_file(&self, file: usize, name: &str, hops: u32) -> Option<Found> {
        if hops > MAX_HOPS {
            return None;
        }
        let f = &self.files[file];
        let def = f.defs.get(name).and_then(|d| d.last().copied());
        let import = f.imports.get(name).and_then(|v| v.last());
        match (def, import) {
            (Some(d), Some((i, b))) if *i > d => {
                return Some(self.resolve_binding(file, b, hops + 1));
            }
            (Some(d), _) => {
                return Some(Found::Def {
                    file,
                    stmt: d,
                    name: name.to_string(),
                });
            }
            (None, Some((_, b))) => return Some(self.resolve_binding(file, b, hops + 1)),
            (None, None) => {}
        }
        // A submodule of a package.
        let sub = if f.module.is_empty() {
            name.to_string()
        } else {
            format!("{}.{name}", f.module)
        };
        if f.path.ends_with("__init__.py") {
            if let Some(sf) = self.map.file(&sub) {
                return Some(Found::Module {
                    file: Some(sf),
                    path: sub,
                });
            }
            if self.map.is_dir(&sub) {
                return Some(Found::Module {
                    file: None,
                    path: sub,
                });
            }
        }
        self.lookup_stars(file, name, hops + 1)
    }

    /// True when a nested repository-local import of `file` has a fallback (`except
    /// ImportError:`) and cannot be inlined: something it names is missing or off the
    /// allow-list. The program then takes the fallback, as Python would.
    pub(crate) fn falls_back(&self, file: usize, nested: &NestedImport) -> bool {
        nested.guard == Guard::Fallback
            && nested
                .bindings
                .iter()
                .any(|b| match self.resolve_binding(file, b, 0) {
                    Found::NotAllowed(_)
                    | Found::MissingImport(_)
                    | Found::Broken { .. }
                    | Found::Undefined => true,
                    // A repository definition that itself needs a package off the allow-list (a
                    // wrapper of a compiled extension): the import would fail the same way.
                    Found::Def { file, stmt, .. } => {
                        self.reaches_refused((file, stmt), &mut HashSet::new(), 0)
                    }
                    _ => false,
                })
    }

    /// True when a top-level statement reads, directly or through the repository definitions it
    /// reads (up to [`MAX_HOPS`] deep), a name bound by an import of a package off the
    /// allow-list.
    fn reaches_refused(
        &self,
        (file, stmt): (usize, usize),
        seen: &mut HashSet<(usize, usize)>,
        hops: u32,
    ) -> bool {
        if hops > MAX_HOPS || !seen.insert((file, stmt)) {
            return false;
        }
        let Some(s) = self.files.get(file).and_then(|f| f.stmts.get(stmt)) else {
            return false;
        };
        s.names
            .reads
            .iter()
            .any(|r| match self.lookup(file, stmt, &r.name, r.eager) {
                Found::NotAllowed(_) => true,
                Found::Def { file, stmt, .. } => self.reaches_refused((file, stmt), seen, hops + 1),
                _ => false,
            })
    }

    /// True when a nested import is in an `except ImportError` handler that never runs: every
    /// name it binds is bound in the `try` body by an import of an allowed package, which
    /// succeeds in the program's environment. Inlining it would only bind its names twice
    /// (`try: from torch.nn.functional import rms_norm` / `except ImportError: from .fast_norm
    /// import rms_norm`).
    pub(crate) fn handler_is_dead(&self, stmt: &Stmt, nested: &NestedImport) -> bool {
        nested.guard == Guard::Handler
            && nested.bindings.iter().all(|b| {
                stmt.names.nested.iter().any(|tried| {
                    tried.guard == Guard::Fallback
                        && !tried.local
                        && tried.bindings.iter().any(|t| {
                            t.local == b.local
                                && t.target
                                    .top_package()
                                    .is_some_and(|p| is_allowed(p, &self.allowed))
                        })
                })
            })
    }

    /// What an import binding of `file` refers to.
    pub(crate) fn resolve_binding(&self, file: usize, binding: &Binding, hops: u32) -> Found {
        if hops > MAX_HOPS {
            return Found::MissingImport(binding.line_as(&binding.local));
        }
        if !self.map.is_local(&binding.target) {
            let package = binding.target.top_package().unwrap_or("").to_string();
            // A read-only package is external too; each use is checked where it is read.
            if binding.target.is_future()
                || is_allowed(&package, &self.allowed)
                || self.map.is_read_only(&package)
            {
                return Found::External {
                    binding: binding.clone(),
                };
            }
            return Found::NotAllowed(package);
        }
        let f = &self.files[file];
        let missing = || Found::MissingImport(binding.line_as(&binding.local));
        match &binding.target {
            Target::Module { path, .. } => match self.map.file(path) {
                Some(mf) => Found::Module {
                    file: Some(mf),
                    path: path.clone(),
                },
                None if self.map.is_dir(path) => Found::Module {
                    file: None,
                    path: path.clone(),
                },
                None => missing(),
            },
            Target::Name {
                level,
                module,
                name,
            } => {
                let Some(abs) = absolutize(f, *level, module) else {
                    return missing();
                };
                let sub = if abs.is_empty() {
                    name.clone()
                } else {
                    format!("{abs}.{name}")
                };
                if let Some(target) = self.map.file(&abs)
                    && let Some(found) = self.lookup_in_file(target, name, hops + 1)
                    && !matches!(found, Found::Undefined)
                {
                    return found;
                }
                if let Some(sf) = self.map.file(&sub) {
                    return Found::Module {
                        file: Some(sf),
                        path: sub,
                    };
                }
                if self.map.is_dir(&sub) {
                    return Found::Module {
                        file: None,
                        path: sub,
                    };
                }
                match self.map.file(&abs) {
                    Some(target) if self.files[target].error_line.is_some() => {
                        Found::Broken { file: target }
                    }
                    _ => missing(),
                }
            }
            Target::Star { .. } => missing(),
        }
    }

    /// Resolves `attr` inside a module found earlier (a file or a namespace folder).
    pub(crate) fn lookup_in_module(&self, file: Option<usize>, path: &str, attr: &str) -> Found {
        let sub = format!("{path}.{attr}");
        if let Some(f) = file
            && let Some(found) = self.lookup_in_file(f, attr, 0)
        {
            return found;
        }
        if let Some(sf) = self.map.file(&sub) {
            return Found::Module {
                file: Some(sf),
                path: sub,
            };
        }
        if self.map.is_dir(&sub) {
            return Found::Module {
                file: None,
                path: sub,
            };
        }
        Found::Undefined
    }

    /// The calls in the repository that build the class at `class` (a bare name resolving to
    /// it, or `x.Name(...)` when no other class of the repository has that name and `x` is not
    /// a package import), with the index of the file each is in.
    pub(crate) fn call_sites(&self, class: (usize, usize)) -> Vec<(usize, &CallSite)> {
        let name = match self.class_at(class.0, class.1) {
            Some(info) => info.name.as_str(),
            None => return Vec::new(),
        };
        let unique = self
            .files
            .iter()
            .map(|f| {
                f.stmts
                    .iter()
                    .filter(|s| matches!(&s.kind, StmtKind::Class(c) if c.name == name))
                    .count()
            })
            .sum::<usize>()
            == 1;
        let mut out = Vec::new();
        for (fi, f) in self.files.iter().enumerate() {
            for site in f.calls.iter().filter(|c| c.callee == name && !c.param) {
                let builds = if site.bare {
                    match self.lookup(fi, site.stmt, name, false) {
                        Found::Def { file, stmt, .. } => (file, stmt) == class,
                        Found::Itself => (fi, site.stmt) == class,
                        _ => false,
                    }
                } else {
                    // `nn.Conv2d(...)` builds torch's class, not the repository's `Conv2d`.
                    unique
                        && !site.receiver.as_deref().is_some_and(|r| {
                            matches!(
                                self.lookup(fi, site.stmt, r, false),
                                Found::External { .. } | Found::NotAllowed(_) | Found::Builtin
                            )
                        })
                };
                if builds {
                    out.push((fi, site));
                }
            }
        }
        out
    }

    /// The repository class the call `site` of file `fi` builds: the one its bare name resolves
    /// to, or for `x.Name(...)` the only class of the repository named so (when `x` is not a
    /// package import), as [`Repo::call_sites`] tells them.
    pub(crate) fn built_class(&self, fi: usize, site: &CallSite) -> Option<(usize, usize)> {
        if site.param {
            return None;
        }
        if site.bare {
            return match self.lookup(fi, site.stmt, &site.callee, false) {
                Found::Def { file, stmt, .. } => {
                    self.class_at(file, stmt).is_some().then_some((file, stmt))
                }
                Found::Itself => self
                    .class_at(fi, site.stmt)
                    .is_some()
                    .then_some((fi, site.stmt)),
                _ => None,
            };
        }
        let mut named = self.files.iter().enumerate().flat_map(|(f, file)| {
            file.stmts
                .iter()
                .enumerate()
                .filter(|(_, s)| matches!(&s.kind, StmtKind::Class(c) if c.name == site.callee))
                .map(move |(s, _)| (f, s))
        });
        let class = named.next()?;
        let external = site.receiver.as_deref().is_some_and(|r| {
            matches!(
                self.lookup(fi, site.stmt, r, false),
                Found::External { .. } | Found::NotAllowed(_) | Found::Builtin
            )
        });
        (named.next().is_none() && !external).then_some(class)
    }

    /// Resolves a dotted base-class name as seen from statement `stmt` of `file`, following
    /// aliases (`Base = nn.Module`, `B = A`, `nn_ = torch.nn`) up to [`MAX_HOPS`] deep, so a
    /// cycle of aliases ends as unknown.
    fn resolve_dotted(&self, file: usize, stmt: usize, dotted: &str) -> DottedTarget {
        self.resolve_dotted_inner(file, stmt, dotted, 0)
    }

    fn resolve_dotted_inner(
        &self,
        file: usize,
        stmt: usize,
        dotted: &str,
        hops: u32,
    ) -> DottedTarget {
        let mut parts = dotted.split('.');
        let Some(first) = parts.next() else {
            return DottedTarget::Unknown;
        };
        let rest: Vec<&str> = parts.collect();
        let mut found = self.lookup(file, stmt, first, true);
        if let Found::Def { file, stmt, .. } = found
            && let Some(StmtKind::Assign(Some(alias))) = self
                .files
                .get(file)
                .and_then(|f| f.stmts.get(stmt))
                .map(|s| &s.kind)
        {
            if hops >= MAX_HOPS {
                return DottedTarget::Unknown;
            }
            let target = std::iter::once(alias.as_str())
                .chain(rest.iter().copied())
                .collect::<Vec<_>>()
                .join(".");
            return self.resolve_dotted_inner(file, stmt, &target, hops + 1);
        }
        for (i, attr) in rest.iter().enumerate() {
            match found {
                Found::Module { file, ref path } => {
                    found = self.lookup_in_module(file, path, attr);
                }
                Found::External { ref binding } => {
                    let base = match &binding.target {
                        Target::Module { path, .. } => path.clone(),
                        Target::Name { module, name, .. } => format!("{module}.{name}"),
                        Target::Star { module, .. } => module.clone(),
                    };
                    let full = std::iter::once(base.as_str())
                        .chain(rest[i..].iter().copied())
                        .collect::<Vec<_>>()
                        .join(".");
                    return DottedTarget::External(full);
                }
                _ => return DottedTarget::Unknown,
            }
        }
        match found {
            Found::Def { file, stmt, .. } => DottedTarget::Class(file, stmt),
            Found::External { binding } => DottedTarget::External(match &binding.target {
                Target::Module { path, .. } => path.clone(),
                Target::Name { module, name, .. } => format!("{module}.{name}"),
                Target::Star { module, .. } => format!("{module}.{first}"),
            }),
            _ => DottedTarget::Unknown,
        }
    }

    /// The name of the class defined by statement `stmt` of `file`, when it defines one.
    pub(crate) fn class_name_at(&self, file: usize, stmt: usize) -> Option<&str> {
        self.class_at(file, stmt).map(|c| c.name.as_str())
    }

    /// Where the repository uses classes as values (see [`ClassUses`]), indexed on first use.
    pub(crate) fn class_uses(&self) -> &ClassUses {
        self.class_uses.get_or_init(|| ClassUses::build(self))
    }

    /// The parameters of the `__init__` the class at (`file`, `stmt`) defines itself.
    pub(crate) fn own_init_params(&self, file: usize, stmt: usize) -> Option<&[Param]> {
        self.class_at(file, stmt)?
            .init
            .as_ref()
            .map(|m| m.params.as_slice())
    }

    fn class_at(&self, file: usize, stmt: usize) -> Option<&ClassInfo> {
        match &self.files.get(file)?.stmts.get(stmt)?.kind {
            StmtKind::Class(info) => Some(info),
            _ => None,
        }
    }

    /// True when the class at (`file`, `stmt`) holds configuration values that a call site may
    /// build as a constructor argument (`Whisper(ModelDimensions(n_mels=80, ...))`): not a
    /// module, and a `@dataclass`, a `NamedTuple`, or a class whose own `__init__` takes only
    /// simple values (each annotated with a simple type or defaulting to a literal). The probe
    /// takes such an object apart into its fields (`config_args.py`).
    pub(crate) fn is_config_class(&self, file: usize, stmt: usize) -> bool {
        let Some(info) = self.class_at(file, stmt) else {
            return false;
        };
        if self.is_nn_module(file, stmt) {
            return false;
        }
        let at = &self.files[file].stmts[stmt];
        let text = self.files[file].source.get(at.start..at.end).unwrap_or("");
        let dataclass = text
            .lines()
            .take_while(|l| l.trim_start().starts_with('@'))
            .any(|l| l.contains("dataclass"));
        let named_tuple = info
            .bases
            .iter()
            .flatten()
            .any(|b| b == "NamedTuple" || b.ends_with(".NamedTuple"));
        dataclass
            || named_tuple
            || info.init.as_ref().is_some_and(|init| {
                !init.params.is_empty()
                    && init.params.iter().all(|p| {
                        matches!(p.kind, ParamKind::Positional | ParamKind::KeywordOnly)
                            && (p.annotation.as_deref().is_some_and(is_simple_type)
                                || p.default.as_deref().is_some_and(is_literal_text))
                    })
            })
    }

    /// True when the class at (`file`, `stmt`) derives from `torch.nn.Module`, directly, through
    /// an alias, or through repository classes in any file.
    pub(crate) fn is_nn_module(&self, file: usize, stmt: usize) -> bool {
        self.is_nn_module_inner(file, stmt, 0)
    }

    fn is_nn_module_inner(&self, file: usize, stmt: usize, hops: u32) -> bool {
        if hops > MAX_HOPS {
            return false;
        }
        if let Ok(memo) = self.module_memo.lock()
            && let Some(&known) = memo.get(&(file, stmt))
        {
            return known;
        }
        let Some(info) = self.class_at(file, stmt) else {
            return false;
        };
        let mut result = false;
        for base in info.bases.iter().flatten() {
            match self.resolve_dotted(file, stmt, base) {
                DottedTarget::External(full) => {
                    if torch_module_class(&full).is_some() {
                        result = true;
                    }
                }
                DottedTarget::Class(f2, s2) => {
                    if (f2, s2) != (file, stmt) && self.is_nn_module_inner(f2, s2, hops + 1) {
                        result = true;
                    }
                }
                DottedTarget::Unknown => {}
            }
            if result {
                break;
            }
        }
        if let Ok(mut memo) = self.module_memo.lock() {
            memo.insert((file, stmt), result);
        }
        result
    }

    /// `__init__`, `forward` and the torch base of a class, looking through its repository
    /// ancestors (depth first, left to right, as a simple MRO).
    pub(crate) fn class_facts(&self, file: usize, stmt: usize) -> ClassFacts {
        let mut facts = ClassFacts {
            init: None,
            forward: None,
            torch_base: None,
            mentions: Vec::new(),
            abstract_class: false,
        };
        let mut seen = HashSet::new();
        self.collect_facts(file, stmt, &mut facts, &mut seen, 0);
        facts
    }

    fn collect_facts(
        &self,
        file: usize,
        stmt: usize,
        facts: &mut ClassFacts,
        seen: &mut HashSet<(usize, usize)>,
        hops: u32,
    ) {
        if hops > MAX_HOPS || !seen.insert((file, stmt)) {
            return;
        }
        let Some(info) = self.class_at(file, stmt) else {
            return;
        };
        if hops == 0 && info.abstract_meta {
            facts.abstract_class = true;
        }
        if facts.init.is_none() {
            facts.init = info.init.clone();
        }
        if facts.forward.is_none() {
            if let Some(fwd) = &info.forward {
                facts.forward = Some(fwd.clone());
            } else if info.forward_assigned {
                facts.forward = Some(Method {
                    params: Vec::new(),
                    is_abstract: false,
                    ranks: Vec::new(),
                });
            }
        }
        for m in &info.mentions {
            if !facts.mentions.contains(m) {
                facts.mentions.push(m);
            }
        }
        for base in info.bases.iter().flatten() {
            match self.resolve_dotted(file, stmt, base) {
                DottedTarget::Class(f2, s2) => self.collect_facts(f2, s2, facts, seen, hops + 1),
                DottedTarget::External(full) => {
                    if hops == 0 && (full == "abc.ABC" || full.ends_with(".ABC")) {
                        facts.abstract_class = true;
                    }
                    if let Some(cls) = torch_module_class(&full)
                        && facts.torch_base.is_none()
                        && !NO_FORWARD.contains(&cls)
                    {
                        facts.torch_base = Some(cls.to_string());
                    }
                }
                DottedTarget::Unknown => {}
            }
        }
    }
}

/// What a dotted base-class name refers to.
enum DottedTarget {
    /// A class statement of the repository.
    Class(usize, usize),
    /// A package path such as `torch.nn.Module`.
    External(String),
    /// Anything else.
    Unknown,
}
