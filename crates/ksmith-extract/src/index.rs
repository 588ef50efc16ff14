//! The symbol index of one file: its top-level statements, what each binds and reads, its
//! imports and the facts about its classes that extraction needs. Built in one pass over the
//! tree, after which the tree is dropped.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use tree_sitter::Node;

use ksmith_core::tables::ModuleReason;

use crate::calls::{self, CallSite};
use crate::imports::{Binding, ImportKinds, Target, bindings_of};

/// Call sites kept per file (a generated file may hold far more).
const MAX_CALLS: usize = 20_000;
use crate::names::{Analyzer, StmtNames};
use crate::python_rules::first_violation;
use crate::syntax::{Kinds, ParseFailure, first_error_line, parse, text};

/// Why a whole file could not be indexed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum FileProblem {
    /// Larger than `max_file_bytes`.
    TooLarge(u64),
    /// Holds NUL bytes.
    Binary,
    /// Not valid UTF-8.
    NotUtf8,
    /// The parser ran past its time budget.
    ParseTimeout,
    /// The parser gave up.
    Unparsable,
}

impl FileProblem {
    /// The reason's code.
    pub(crate) fn code(&self) -> ModuleReason {
        match self {
            FileProblem::TooLarge(_) => ModuleReason::FileTooLarge,
            FileProblem::Binary => ModuleReason::BinaryFile,
            FileProblem::NotUtf8 => ModuleReason::NotUtf8,
            FileProblem::ParseTimeout => ModuleReason::ParseTimeout,
            FileProblem::Unparsable => ModuleReason::Unparsable,
        }
    }

    /// The reason recorded in a row.
    pub(crate) fn reason(&self, path: &str) -> String {
        match self {
            FileProblem::TooLarge(n) => format!("file_too_large: {path} ({n} bytes)"),
            FileProblem::Binary => format!("binary_file: {path}"),
            FileProblem::NotUtf8 => format!("not_utf8: {path}"),
            FileProblem::ParseTimeout => format!("parse_timeout: {path}"),
            FileProblem::Unparsable => format!("unparsable: {path}"),
        }
    }
}

/// A parameter of a method.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Param {
    /// Its name.
    pub(crate) name: String,
    /// Source text of its default value.
    pub(crate) default: Option<String>,
    /// How it is passed.
    pub(crate) kind: ParamKind,
    /// Source text of its annotation (`bool` in `flag: bool`).
    pub(crate) annotation: Option<String>,
}

/// How a parameter is passed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ParamKind {
    /// Positional or keyword.
    Positional,
    /// `*args`.
    VarArgs,
    /// After `*` or `*args`.
    KeywordOnly,
    /// `**kwargs`.
    VarKeywords,
}

/// `__init__` or `forward` of a class.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Method {
    /// Parameters without `self`.
    pub(crate) params: Vec<Param>,
    /// Decorated `@abstractmethod` or its body only raises `NotImplementedError`.
    pub(crate) is_abstract: bool,
    /// Tensor ranks seen in the body: `b, c, h, w = x.shape` gives `("x", 4)`.
    pub(crate) ranks: Vec<(String, u32)>,
}

/// What extraction needs to know about a top-level class.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ClassInfo {
    /// The class name.
    pub(crate) name: String,
    /// Byte range of the name identifier (for the rename to `Model`).
    pub(crate) name_range: (usize, usize),
    /// Base classes as dotted names (`None` for anything else, e.g. `Generic[T]`).
    pub(crate) bases: Vec<Option<String>>,
    /// `metaclass=ABCMeta` is given.
    pub(crate) abstract_meta: bool,
    /// Its own `__init__`.
    pub(crate) init: Option<Method>,
    /// Its own `forward`.
    pub(crate) forward: Option<Method>,
    /// The class body binds `forward` other than by `def`.
    pub(crate) forward_assigned: bool,
    /// Layer names mentioned in the class (`Conv1d`, `LSTM`, ...), for input rank guesses.
    pub(crate) mentions: Vec<&'static str>,
}

/// What a top-level statement is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum StmtKind {
    /// A class definition (possibly decorated).
    Class(Box<ClassInfo>),
    /// A function definition (possibly decorated).
    Function,
    /// An assignment; for `Name = a.b.c` (one name bound to a dotted name) the dotted name,
    /// so base classes can be followed through aliases (`Base = nn.Module`).
    Assign(Option<String>),
    /// An `import` or `from ... import` statement directly at module level.
    Import(Vec<Binding>),
    /// An `if`/`try`/`for`/`with`/`while` block at module level.
    Compound,
    /// Never inlined: docstrings, bare expressions, `if __name__ == "__main__":`.
    Skip,
}

/// One top-level statement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Stmt {
    /// Byte range in the file.
    pub(crate) start: usize,
    /// End byte.
    pub(crate) end: usize,
    /// 1-based first line.
    pub(crate) line: u32,
    /// What it is.
    pub(crate) kind: StmtKind,
    /// Names it binds and reads.
    pub(crate) names: StmtNames,
    /// Line of its first syntax error, if any.
    pub(crate) error_line: Option<u32>,
}

impl Stmt {
    /// The class name of a class statement, empty for any other.
    pub(crate) fn class_name(&self) -> &str {
        match &self.kind {
            StmtKind::Class(c) => &c.name,
            _ => "",
        }
    }
}

/// The index of one file.
#[derive(Debug, Clone)]
pub(crate) struct FileIndex {
    /// Path relative to the repository root.
    pub(crate) path: String,
    /// Dotted module name from the repository root (`pkg.sub.mod`, `pkg` for `pkg/__init__.py`).
    pub(crate) module: String,
    /// The package relative imports start from.
    pub(crate) package: String,
    /// The source text (empty when the file has a problem).
    pub(crate) source: String,
    /// Top-level statements in file order.
    pub(crate) stmts: Vec<Stmt>,
    /// Statements defining each name, in file order.
    pub(crate) defs: HashMap<String, Vec<usize>>,
    /// Import bindings of each name: (statement index, binding).
    pub(crate) imports: HashMap<String, Vec<(usize, Binding)>>,
    /// `from x import *` targets.
    pub(crate) stars: Vec<Target>,
    /// Why the file could not be indexed.
    pub(crate) problem: Option<FileProblem>,
    /// 1-based line of the first syntax error in the file.
    pub(crate) error_line: Option<u32>,
    /// The file has `from __future__ import annotations`: its annotations are never
    /// evaluated, and a program inlining its statements needs the same import.
    pub(crate) future_annotations: bool,
    /// Calls of capitalized names (classes being built), for constructor arguments.
    pub(crate) calls: Vec<CallSite>,
}

/// True for a name Python can import: an identifier (letters, digits and `_`, not starting
/// with a digit). `net.v1`, `my-models` and `` are not.
pub(crate) fn is_identifier(s: &str) -> bool {
    !s.starts_with(|c: char| c.is_ascii_digit())
        && !s.is_empty()
        && s.chars().all(|c| c.is_alphanumeric() || c == '_')
}

/// The module path components of a file (`a/b/c.py` -> `[a, b, c]`, `a/__init__.py` -> `[a]`)
/// and the index of the first component of its importable tail: the longest suffix of
/// identifiers. A file whose own name is not an identifier (`net.v1.2.py`, `...py`) has an
/// empty tail (the index is the length); a folder that is not one (`my-models/x.py`) cuts the
/// tail below it (`x`).
pub(crate) fn module_components(path: &str) -> (Vec<&str>, usize) {
    let trimmed = path.strip_suffix(".py").unwrap_or(path);
    // Empty components (`pkg/.py`) are names Python cannot import either.
    let mut parts: Vec<&str> = trimmed.split('/').collect();
    if parts.last() == Some(&"__init__") {
        parts.pop();
    }
    let tail = parts
        .iter()
        .rposition(|p| !is_identifier(p))
        .map_or(0, |i| i + 1);
    (parts, tail)
}

/// The dotted module name of a file's importable tail and the package its relative imports
/// start from (`a/b/c.py` -> `a.b.c`, `a.b`; `a/__init__.py` -> `a`, `a`). A file Python cannot
/// import has an empty module name; its package is still its folder's importable tail, so a
/// script's relative imports resolve as they would with that folder as a package.
pub(crate) fn module_of_path(path: &str) -> (String, String) {
    let (parts, tail) = module_components(path);
    let is_package = path == "__init__.py" || path.ends_with("/__init__.py");
    let folder_end = if is_package {
        parts.len()
    } else {
        parts.len().saturating_sub(1)
    };
    let folder = &parts[..folder_end];
    let folder_tail = folder
        .iter()
        .rposition(|p| !is_identifier(p))
        .map_or(0, |i| i + 1);
    let package = folder[folder_tail..].join(".");
    if tail >= parts.len() {
        return (String::new(), package);
    }
    (parts[tail..].join("."), package)
}

/// Names of torch layers whose presence hints at the rank of the input.
const MENTIONS: &[&str] = &[
    "Conv1d",
    "Conv3d",
    "BatchNorm1d",
    "BatchNorm3d",
    "MaxPool1d",
    "MaxPool3d",
    "AvgPool1d",
    "AvgPool3d",
    "InstanceNorm1d",
    "InstanceNorm3d",
    "LSTM",
    "GRU",
    "RNN",
    "Embedding",
    "MultiheadAttention",
    "Conv2d",
];

impl FileIndex {
    fn empty(path: &str, problem: Option<FileProblem>) -> FileIndex {
        let (module, package) = module_of_path(path);
        FileIndex {
            path: path.to_string(),
            module,
            package,
            source: String::new(),
            stmts: Vec::new(),
            defs: HashMap::new(),
            imports: HashMap::new(),
            stars: Vec::new(),
            problem,
            error_line: None,
            future_annotations: false,
            calls: Vec::new(),
        }
    }

    /// Indexes one file. `kinds` tells what an import target is (inside the repository, a
    /// read-only package).
    pub(crate) fn build(
        path: &str,
        bytes: &[u8],
        kinds: &dyn ImportKinds,
        limits: &Limits,
    ) -> FileIndex {
        if bytes.len() as u64 > limits.max_file_bytes {
            return FileIndex::empty(path, Some(FileProblem::TooLarge(bytes.len() as u64)));
        }
        if bytes.contains(&0) {
            return FileIndex::empty(path, Some(FileProblem::Binary));
        }
        let Ok(source) = std::str::from_utf8(bytes) else {
            return FileIndex::empty(path, Some(FileProblem::NotUtf8));
        };
        let tree = match parse(source, limits.parse_budget) {
            Ok(t) => t,
            Err(ParseFailure::Timeout) => {
                return FileIndex::empty(path, Some(FileProblem::ParseTimeout));
            }
            Err(ParseFailure::NoTree) => {
                return FileIndex::empty(path, Some(FileProblem::Unparsable));
            }
        };
        let mut index = FileIndex::empty(path, None);
        let root = tree.root_node();
        index.error_line = first_error_line(root);
        index.fill(source, root, kinds, limits.max_depth);
        index.source = source.to_string();
        index
    }

    fn fill(&mut self, src: &str, root: Node<'_>, kinds: &dyn ImportKinds, max_depth: u32) {
        let k = Kinds::get();
        let mut cursor = root.walk();
        let top: Vec<Node<'_>> = root
            .named_children(&mut cursor)
            .filter(|n| n.kind_id() != k.comment)
            .collect();
        // Imports first: names bound by repository-local imports are the candidates for
        // attribute-chain rewriting, names bound to read-only packages have their uses recorded.
        let mut candidates: HashSet<&str> = HashSet::new();
        let mut read_only_names: HashSet<&str> = HashSet::new();
        for node in &top {
            let kind = node.kind_id();
            if kind == k.import_statement
                || kind == k.import_from_statement
                || kind == k.future_import_statement
            {
                for b in bindings_of(*node, src) {
                    let set = if kinds.is_local(&b.target) {
                        &mut candidates
                    } else if b
                        .target
                        .top_package()
                        .is_some_and(|p| kinds.is_read_only(p))
                    {
                        &mut read_only_names
                    } else {
                        continue;
                    };
                    if let Some(pos) = find_word(text(src, *node), &b.local) {
                        let start = node.start_byte() + pos;
                        if let Some(s) = src.get(start..start + b.local.len()) {
                            set.insert(s);
                        }
                    }
                }
            }
        }
        self.calls = calls::collect(&top, src, MAX_CALLS);
        let mut analyzer = Analyzer::new(src, root, candidates, read_only_names, kinds, max_depth);
        for node in top {
            let kind = node.kind_id();
            let stmt_kind = if kind == k.import_statement
                || kind == k.import_from_statement
                || kind == k.future_import_statement
            {
                StmtKind::Import(bindings_of(node, src))
            } else if kind == k.class_definition && node.has_error() {
                // The parser may have mistaken the header; read it from the text.
                match broken_classes(node, src).into_iter().next() {
                    Some((_, info)) => StmtKind::Class(Box::new(info)),
                    None => StmtKind::Class(Box::new(class_info(node, src))),
                }
            } else if kind == k.class_definition {
                StmtKind::Class(Box::new(class_info(node, src)))
            } else if kind == k.decorated_definition {
                match node.child_by_field_id(k.f_definition) {
                    Some(def) if def.kind_id() == k.class_definition => {
                        StmtKind::Class(Box::new(class_info(def, src)))
                    }
                    Some(_) => StmtKind::Function,
                    None => StmtKind::Skip,
                }
            } else if kind == k.function_definition {
                StmtKind::Function
            } else if kind == k.expression_statement {
                match node.named_child(0) {
                    Some(c) if c.kind_id() == k.assignment => StmtKind::Assign(alias_of(c, src)),
                    Some(c) if c.kind_id() == k.augmented_assignment => StmtKind::Assign(None),
                    _ => StmtKind::Skip,
                }
            } else if kind == k.if_statement && is_main_guard(node, src) {
                StmtKind::Skip
            } else if node.is_error() {
                // A region the parser could not make sense of: classes that start in it are
                // recorded (with the error) so they get a row instead of vanishing.
                for (line, info) in broken_classes(node, src) {
                    self.stmts.push(Stmt {
                        start: node.start_byte(),
                        end: node.end_byte(),
                        line,
                        kind: StmtKind::Class(Box::new(info)),
                        names: StmtNames::default(),
                        error_line: Some(line),
                    });
                }
                continue;
            } else if !node.is_named() {
                StmtKind::Skip
            } else if matches!(
                node.kind(),
                "if_statement"
                    | "try_statement"
                    | "for_statement"
                    | "while_statement"
                    | "with_statement"
            ) {
                StmtKind::Compound
            } else {
                StmtKind::Skip
            };
            let names = match &stmt_kind {
                StmtKind::Import(_) | StmtKind::Skip => StmtNames::default(),
                _ => analyzer.statement(node),
            };
            let index = self.stmts.len();
            match &stmt_kind {
                StmtKind::Import(bindings) => {
                    for b in bindings {
                        if b.target.is_future() && b.local == "annotations" {
                            self.future_annotations = true;
                        }
                        if let Target::Star { .. } = b.target {
                            self.stars.push(b.target.clone());
                        } else {
                            self.imports
                                .entry(b.local.clone())
                                .or_default()
                                .push((index, b.clone()));
                        }
                    }
                }
                _ => {
                    for d in &names.defines {
                        self.defs.entry(d.clone()).or_default().push(index);
                    }
                }
            }
            // tree-sitter accepts what CPython refuses (Python 2, tab/space mixes, empty
            // blocks, ...): such a statement counts as a syntax error too.
            let error_line = first_error_line(node).or_else(|| match &stmt_kind {
                StmtKind::Import(_) | StmtKind::Skip => None,
                _ => first_violation(node, src),
            });
            if let Some(line) = error_line {
                self.error_line = Some(self.error_line.map_or(line, |l| l.min(line)));
            }
            self.stmts.push(Stmt {
                start: node.start_byte(),
                end: node.end_byte(),
                line: node.start_position().row as u32 + 1,
                kind: stmt_kind,
                names,
                error_line,
            });
        }
    }
}

/// Limits applied while indexing.
#[derive(Debug, Clone)]
pub(crate) struct Limits {
    /// Files larger than this are not parsed.
    pub(crate) max_file_bytes: u64,
    /// Time budget of one parse.
    pub(crate) parse_budget: Duration,
    /// Deepest syntax nesting analysed.
    pub(crate) max_depth: u32,
}

/// Byte offset of `word` as a whole identifier in `hay`.
pub(crate) fn find_word(hay: &str, word: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(pos) = hay.get(from..)?.find(word) {
        let at = from + pos;
        let before_ok = hay[..at]
            .chars()
            .next_back()
            .is_none_or(|c| !(c.is_alphanumeric() || c == '_'));
        let after_ok = hay[at + word.len()..]
            .chars()
            .next()
            .is_none_or(|c| !(c.is_alphanumeric() || c == '_'));
        if before_ok && after_ok {
            return Some(at);
        }
        from = at + word.len();
    }
    None
}

fn is_main_guard(node: Node<'_>, src: &str) -> bool {
    let k = Kinds::get();
    node.child_by_field_id(k.f_condition).is_some_and(|c| {
        let t = text(src, c);
        t.contains("__name__") && t.contains("__main__")
    })
}

/// The dotted name an assignment `Name = a.b.c` binds `Name` to (no annotation, one target).
fn alias_of(assignment: Node<'_>, src: &str) -> Option<String> {
    let k = Kinds::get();
    if assignment.child_by_field_id(k.f_type).is_some() {
        return None;
    }
    let left = assignment.child_by_field_id(k.f_left)?;
    let right = assignment.child_by_field_id(k.f_right)?;
    if left.kind_id() != k.identifier {
        return None;
    }
    dotted(right, src)
}

/// A dotted name (`a.b.C`) from an identifier or attribute chain, or `None`.
fn dotted(node: Node<'_>, src: &str) -> Option<String> {
    let k = Kinds::get();
    if node.kind_id() == k.identifier {
        return Some(text(src, node).to_string());
    }
    if node.kind_id() == k.attribute {
        let obj = node.child_by_field_id(k.f_object)?;
        let attr = node.child_by_field_id(k.f_attribute)?;
        let mut base = dotted(obj, src)?;
        base.push('.');
        base.push_str(text(src, attr));
        return Some(base);
    }
    None
}

fn class_info(node: Node<'_>, src: &str) -> ClassInfo {
    let k = Kinds::get();
    let name_node = node.child_by_field_id(k.f_name);
    let name = name_node
        .map(|n| text(src, n).to_string())
        .unwrap_or_default();
    let name_range = name_node
        .map(|n| (n.start_byte(), n.end_byte()))
        .unwrap_or((0, 0));
    let mut bases = Vec::new();
    let mut abstract_meta = false;
    if let Some(sup) = node.child_by_field_id(k.f_superclasses) {
        let mut c = sup.walk();
        for arg in sup.named_children(&mut c) {
            if arg.kind_id() == k.keyword_argument {
                let is_meta = arg
                    .child_by_field_id(k.f_name)
                    .is_some_and(|n| text(src, n) == "metaclass");
                let value = arg.child_by_field_id(k.f_value).map(|v| text(src, v));
                if is_meta && value.is_some_and(|v| v.contains("ABCMeta")) {
                    abstract_meta = true;
                }
            } else if arg.kind_id() != k.comment {
                bases.push(dotted(arg, src));
            }
        }
    }
    let mut init = None;
    let mut forward = None;
    let mut forward_assigned = false;
    if let Some(body) = node.child_by_field_id(k.f_body) {
        let mut c = body.walk();
        for item in body.named_children(&mut c) {
            let (def, decorators) = if item.kind_id() == k.decorated_definition {
                let decorators: Vec<String> = {
                    let mut dc = item.walk();
                    item.named_children(&mut dc)
                        .filter(|d| d.kind_id() == k.decorator)
                        .map(|d| text(src, d).to_string())
                        .collect()
                };
                (item.child_by_field_id(k.f_definition), decorators)
            } else {
                (Some(item), Vec::new())
            };
            let Some(def) = def else { continue };
            if def.kind_id() == k.function_definition {
                let fname = def
                    .child_by_field_id(k.f_name)
                    .map(|n| text(src, n))
                    .unwrap_or("");
                if fname == "__init__" || fname == "forward" {
                    let method = method_info(def, src, &decorators);
                    if fname == "__init__" {
                        init = Some(method);
                    } else {
                        forward = Some(method);
                    }
                }
            } else if def.kind_id() == k.expression_statement {
                let t = text(src, def);
                if let Some(rest) = t.strip_prefix("forward")
                    && rest.trim_start().starts_with('=')
                {
                    forward_assigned = true;
                }
            }
        }
    }
    let class_text = text(src, node);
    let mentions = MENTIONS
        .iter()
        .copied()
        .filter(|m| class_text.contains(m))
        .collect();
    ClassInfo {
        name,
        name_range,
        bases,
        abstract_meta,
        init,
        forward,
        forward_assigned,
        mentions,
    }
}

fn method_info(def: Node<'_>, src: &str, decorators: &[String]) -> Method {
    let k = Kinds::get();
    let mut params = Vec::new();
    if let Some(ps) = def.child_by_field_id(k.f_parameters) {
        let mut keyword_only = false;
        let mut c = ps.walk();
        for p in ps.named_children(&mut c) {
            let kind = p.kind_id();
            let param = if kind == k.identifier {
                Some(Param {
                    name: text(src, p).to_string(),
                    default: None,
                    kind: ParamKind::Positional,
                    annotation: None,
                })
            } else if kind == k.default_parameter || kind == k.typed_default_parameter {
                p.child_by_field_id(k.f_name).map(|n| Param {
                    name: text(src, n).to_string(),
                    default: p
                        .child_by_field_id(k.f_value)
                        .map(|v| text(src, v).to_string()),
                    kind: ParamKind::Positional,
                    annotation: None,
                })
            } else if kind == k.typed_parameter {
                p.named_child(0).map(|n| {
                    if n.kind_id() == k.list_splat_pattern {
                        Param {
                            name: text(src, n).trim_start_matches('*').to_string(),
                            default: None,
                            kind: ParamKind::VarArgs,
                            annotation: None,
                        }
                    } else if n.kind_id() == k.dictionary_splat_pattern {
                        Param {
                            name: text(src, n).trim_start_matches('*').to_string(),
                            default: None,
                            kind: ParamKind::VarKeywords,
                            annotation: None,
                        }
                    } else {
                        Param {
                            name: text(src, n).to_string(),
                            default: None,
                            kind: ParamKind::Positional,
                            annotation: None,
                        }
                    }
                })
            } else if kind == k.list_splat_pattern {
                Some(Param {
                    name: text(src, p).trim_start_matches('*').to_string(),
                    default: None,
                    kind: ParamKind::VarArgs,
                    annotation: None,
                })
            } else if kind == k.dictionary_splat_pattern {
                Some(Param {
                    name: text(src, p).trim_start_matches('*').to_string(),
                    default: None,
                    kind: ParamKind::VarKeywords,
                    annotation: None,
                })
            } else if kind == k.keyword_separator {
                keyword_only = true;
                None
            } else {
                None
            };
            if let Some(mut param) = param {
                if kind == k.typed_parameter || kind == k.typed_default_parameter {
                    param.annotation = p
                        .child_by_field_name("type")
                        .map(|t| text(src, t).to_string());
                }
                if param.kind == ParamKind::VarArgs {
                    keyword_only = true;
                } else if keyword_only && param.kind == ParamKind::Positional {
                    param.kind = ParamKind::KeywordOnly;
                }
                params.push(param);
            }
        }
    }
    if params
        .first()
        .is_some_and(|p| p.kind == ParamKind::Positional && (p.name == "self" || p.name == "cls"))
    {
        params.remove(0);
    }
    let mut is_abstract = decorators.iter().any(|d| d.contains("abstractmethod"));
    let mut ranks = Vec::new();
    if let Some(body) = def.child_by_field_id(k.f_body) {
        let mut c = body.walk();
        let stmts: Vec<Node<'_>> = body
            .named_children(&mut c)
            .filter(|s| s.kind_id() != k.comment)
            .filter(|s| {
                // Docstrings do not count.
                !(s.kind_id() == k.expression_statement
                    && s.named_child(0).is_some_and(|e| e.kind_id() == k.string))
            })
            .collect();
        if stmts.len() == 1
            && stmts[0].kind_id() == k.raise_statement
            && text(src, stmts[0]).contains("NotImplementedError")
        {
            is_abstract = true;
        }
        collect_ranks(body, src, &mut ranks);
    }
    Method {
        params,
        is_abstract,
        ranks,
    }
}

/// Finds `a, b, c = x.shape` / `x.size()` in a body (iteratively) and records x's rank.
fn collect_ranks(body: Node<'_>, src: &str, out: &mut Vec<(String, u32)>) {
    let k = Kinds::get();
    let mut stack = vec![body];
    let mut steps = 0usize;
    while let Some(node) = stack.pop() {
        steps += 1;
        if steps > 20_000 {
            return;
        }
        if node.kind_id() == k.assignment {
            if let (Some(l), Some(r)) = (
                node.child_by_field_id(k.f_left),
                node.child_by_field_id(k.f_right),
            ) && (l.kind_id() == k.pattern_list || l.kind_id() == k.tuple_pattern)
            {
                let rank = l.named_child_count() as u32;
                let rt = text(src, r);
                let base = rt
                    .strip_suffix(".shape")
                    .or_else(|| rt.strip_suffix(".size()"));
                if let Some(base) = base
                    && base.chars().all(|c| c.is_alphanumeric() || c == '_')
                    && !out.iter().any(|(n, _)| n == base)
                {
                    out.push((base.to_string(), rank));
                }
            }
            continue;
        }
        if node.kind_id() == k.function_definition || node.kind_id() == k.class_definition {
            continue;
        }
        let mut c = node.walk();
        for child in node.named_children(&mut c) {
            stack.push(child);
        }
    }
}

/// Classes whose `class Name(bases):` header lies inside an ERROR region, found from the text.
fn broken_classes(node: Node<'_>, src: &str) -> Vec<(u32, ClassInfo)> {
    let first_line = node.start_position().row as u32 + 1;
    let mut out = Vec::new();
    for (i, line) in text(src, node).lines().enumerate() {
        let Some(rest) = line.strip_prefix("class ") else {
            continue;
        };
        let name: String = rest
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        if name.is_empty() {
            continue;
        }
        let after = &rest[name.len()..];
        let bases = after
            .strip_prefix('(')
            .and_then(|b| b.split(')').next())
            .map(|b| {
                b.split(',')
                    .map(|x| x.trim())
                    .filter(|x| !x.is_empty() && !x.contains('='))
                    .map(|x| {
                        x.chars()
                            .all(|c| c.is_alphanumeric() || c == '_' || c == '.')
                            .then(|| x.to_string())
                    })
                    .collect()
            })
            .unwrap_or_default();
        out.push((
            first_line + i as u32,
            ClassInfo {
                name,
                name_range: (0, 0),
                bases,
                abstract_meta: false,
                init: None,
                forward: None,
                forward_assigned: false,
                mentions: Vec::new(),
            },
        ));
    }
    out
}
