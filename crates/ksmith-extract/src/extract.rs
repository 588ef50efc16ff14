//! Extraction of one repository, table-free: files in, module rows out.

use std::collections::HashSet;
use std::time::Duration;

use ksmith_core::ids::{IdHasher, content_id};
use ksmith_core::tables::{ModuleReason, ModuleRow, ModuleStatus};
use rayon::prelude::*;

use crate::calls::{CallSite, Ctor};
use crate::closure::{self, NodeId};
use crate::config::ExtractConfig;
use crate::contain::contained;
use crate::emit;
use crate::guess;
use crate::index::{FileIndex, Limits, StmtKind};
use crate::library::Library;
use crate::resolve::{ModuleMap, Repo};
use crate::sites;

/// Provenance of a repository, copied into every row.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RepoInfo {
    /// Name of the repository (as in `repos.parquet`).
    pub repo: String,
    /// Pinned commit.
    pub commit: String,
    /// SPDX license id.
    pub license: Option<String>,
    /// Star count.
    pub stars: Option<i64>,
}

impl RepoInfo {
    /// The row of the class `class_name` at `path:line` of this repository, without a program
    /// (no id yet: [`assign_ids`] gives them), with why it is not ok as a code and in words.
    /// Every `ModuleRow` extract writes starts here.
    pub fn module_row(
        &self,
        path: &str,
        class_name: &str,
        line: u32,
        status: ModuleStatus,
        reason: Option<(ModuleReason, String)>,
    ) -> ModuleRow {
        let (reason_code, reason) = reason.unzip();
        ModuleRow {
            id: String::new(),
            repo: self.repo.clone(),
            commit: self.commit.clone(),
            path: path.to_string(),
            class_name: class_name.to_string(),
            line,
            status,
            reason,
            reason_code,
            program: None,
            deps: Vec::new(),
            imports: Vec::new(),
            lines: 0,
            license: self.license.clone(),
            stars: self.stars,
            arg_sources: Vec::new(),
        }
    }
}

/// One Python file of a repository.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceFile {
    /// Path relative to the repository root, `/`-separated.
    pub path: String,
    /// Its bytes (decoded as UTF-8; anything else gets a `not_utf8` row).
    pub bytes: Vec<u8>,
}

impl SourceFile {
    /// A file from a path and text.
    pub fn new(path: impl Into<String>, bytes: impl Into<Vec<u8>>) -> Self {
        SourceFile {
            path: path.into(),
            bytes: bytes.into(),
        }
    }
}

/// Counts of one repository's extraction.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ExtractStats {
    /// Files read.
    pub files: u64,
    /// Bytes of source read.
    pub bytes: u64,
    /// Files with at least one syntax error.
    pub files_with_syntax_errors: u64,
}

pub(crate) fn limits(cfg: &ExtractConfig) -> Limits {
    Limits {
        max_file_bytes: cfg.max_file_bytes,
        parse_budget: Duration::from_millis(cfg.parse_timeout_ms),
        max_depth: cfg.max_nesting,
    }
}

/// Extracts every `nn.Module` subclass of a repository.
///
/// Rows come sorted by (path, line, class) with ids unique among them (see [`assign_ids`]).
/// A file that cannot be read as Python (binary, not UTF-8, too large, parse timeout) or that
/// has syntax errors and no class of interest gets one row with an empty `class_name`.
/// Runs its files and classes in parallel on the current rayon pool.
pub fn extract_repo(info: &RepoInfo, files: &[SourceFile], cfg: &ExtractConfig) -> Vec<ModuleRow> {
    extract_repo_with_stats(info, files, cfg).0
}

/// [`extract_repo`], also returning counts.
pub fn extract_repo_with_stats(
    info: &RepoInfo,
    files: &[SourceFile],
    cfg: &ExtractConfig,
) -> (Vec<ModuleRow>, ExtractStats) {
    extract_repo_with_libraries(info, files, cfg, &[])
}

/// [`extract_repo_with_stats`] with installed packages whose definitions may be inlined
/// ([`Library`]): a library the repository imports (and does not ship a folder of) is resolved
/// like the repository's own files; its classes get no rows.
pub fn extract_repo_with_libraries(
    info: &RepoInfo,
    files: &[SourceFile],
    cfg: &ExtractConfig,
    libraries: &[Library],
) -> (Vec<ModuleRow>, ExtractStats) {
    let mut order: Vec<&SourceFile> = files.iter().collect();
    order.sort_by(|a, b| a.path.cmp(&b.path));
    order.dedup_by(|a, b| a.path == b.path);
    let own = order.len();
    let mut labels: Vec<Option<String>> = vec![None; own];
    for lib in libraries {
        let shipped = order.iter().take(own).any(|f| {
            f.path.starts_with(&format!("{}/", lib.package))
                || f.path == format!("{}.py", lib.package)
        });
        if shipped || !order.iter().take(own).any(|f| lib.used_by(&f.bytes)) {
            continue;
        }
        let label = lib.label();
        for f in &lib.files {
            order.push(f);
            labels.push(Some(label.clone()));
        }
    }
    let paths: Vec<&str> = order.iter().map(|f| f.path.as_str()).collect();
    let map = ModuleMap::new(&paths, &cfg.allowed_imports, &cfg.read_only_imports);
    let limits = limits(cfg);
    let indexes: Vec<FileIndex> = order
        .par_iter()
        .map(|f| FileIndex::build(&f.path, &f.bytes, &map, &limits))
        .collect();
    let stats = ExtractStats {
        files: own as u64,
        bytes: order.iter().take(own).map(|f| f.bytes.len() as u64).sum(),
        files_with_syntax_errors: indexes
            .iter()
            .take(own)
            .filter(|f| f.error_line.is_some())
            .count() as u64,
    };
    let repo = Repo::new(indexes, map, cfg.allowed_imports.clone()).with_labels(labels);
    let mut candidates: Vec<NodeId> = Vec::new();
    let mut rows: Vec<ModuleRow> = Vec::new();
    for (fi, file) in repo.files.iter().enumerate().take(own) {
        if let Some(problem) = &file.problem {
            rows.push(bare_row(
                info,
                &file.path,
                "",
                1,
                ModuleStatus::Failed,
                problem.code(),
                problem.reason(&file.path),
            ));
            continue;
        }
        let before = candidates.len();
        for (si, stmt) in file.stmts.iter().enumerate() {
            if matches!(stmt.kind, StmtKind::Class(_)) && repo.is_nn_module(fi, si) {
                candidates.push((fi, si));
            }
        }
        if candidates.len() == before
            && let Some(line) = file.error_line
        {
            rows.push(bare_row(
                info,
                &file.path,
                "",
                line,
                ModuleStatus::Failed,
                ModuleReason::SyntaxError,
                format!("syntax_error at {}:{line}", file.path),
            ));
        }
    }
    let cache = emit::PieceCache::default();
    let class_rows: Vec<ModuleRow> = candidates
        .par_iter()
        .map(|&node| {
            contained("extracting the class", || {
                class_row(&repo, info, node, cfg, &limits, &cache, Ok(()))
            })
            .unwrap_or_else(|reason| {
                let file = &repo.files[node.0];
                let stmt = &file.stmts[node.1];
                let name = stmt.class_name();
                bare_row(
                    info,
                    &file.path,
                    name,
                    stmt.line,
                    ModuleStatus::Failed,
                    ModuleReason::InternalError,
                    reason,
                )
            })
        })
        .collect();
    rows.extend(class_rows);
    rows.sort_by(|a, b| (&a.path, a.line, &a.class_name).cmp(&(&b.path, b.line, &b.class_name)));
    assign_ids(&mut rows);
    (rows, stats)
}

fn bare_row(
    info: &RepoInfo,
    path: &str,
    class_name: &str,
    line: u32,
    status: ModuleStatus,
    code: ModuleReason,
    reason: String,
) -> ModuleRow {
    info.module_row(path, class_name, line, status, Some((code, reason)))
}

/// The row of the class at `node`. `ctors`: whether constructor arguments that build a
/// repository class are taken as those calls (`Ok`), or guessed (`Err`, why not: the program
/// with those classes could not be made).
fn class_row(
    repo: &Repo,
    info: &RepoInfo,
    node: NodeId,
    cfg: &ExtractConfig,
    limits: &Limits,
    cache: &emit::PieceCache,
    ctors: Result<(), String>,
) -> ModuleRow {
    let file = &repo.files[node.0];
    let stmt = &file.stmts[node.1];
    let class_name = stmt.class_name().to_string();
    let fail = |status, code, reason: String| {
        bare_row(
            info,
            &file.path,
            &class_name,
            stmt.line,
            status,
            code,
            reason,
        )
    };
    if let Some(line) = stmt.error_line {
        return fail(
            ModuleStatus::Failed,
            ModuleReason::SyntaxError,
            format!("syntax_error at {}:{line}", file.path),
        );
    }
    if stmt.names.too_deep {
        return fail(
            ModuleStatus::Failed,
            ModuleReason::TooDeeplyNested,
            format!("too_deeply_nested at {}:{}", file.path, stmt.line),
        );
    }
    let facts = repo.class_facts(node.0, node.1);
    let has_forward = facts.forward.as_ref().is_some_and(|f| !f.is_abstract)
        || (facts.forward.is_none() && facts.torch_base.is_some());
    if !has_forward || facts.abstract_class {
        return fail(
            ModuleStatus::Rejected,
            ModuleReason::NoForward,
            "no_forward".to_string(),
        );
    }
    let sites = sites::resolved(repo, node);
    let site = sites::best(&sites);
    let mut init = guess::sited_init_args(&facts, site);
    if let Err(why) = &ctors {
        // The arguments that build classes are guessed instead, saying why.
        let built: Vec<(String, String)> = init
            .iter()
            .filter(|a| a.ctor.is_some())
            .map(|a| (a.name.clone(), a.value.clone()))
            .collect();
        let plain = site.map(|(path, s)| (path, without_ctors(s)));
        init = guess::sited_init_args(&facts, plain.as_ref().map(|(p, s)| (*p, s)));
        for arg in init.iter_mut().filter(|a| a.guessed) {
            if let Some((_, value)) = built.iter().find(|(n, _)| *n == arg.name) {
                arg.source = format!("guess ({value} not inlined: {why})");
            }
        }
    }
    let roots = ctor_classes(&init, node);
    // Without the classes the arguments build, when the program cannot have them.
    let retry = |why: String| class_row(repo, info, node, cfg, limits, cache, Err(why));
    let plan = match closure::plan(repo, node, &roots) {
        Ok(p) => p,
        Err(problem) if !roots.is_empty() => return retry(problem.reason()),
        Err(problem) => {
            let status = if problem.is_rejection() {
                ModuleStatus::Rejected
            } else {
                ModuleStatus::Failed
            };
            return fail(status, problem.code(), problem.reason());
        }
    };
    let deps: Vec<String> = plan
        .order
        .iter()
        .filter(|&&n| n != node)
        .map(|&n| closure::node_name(repo, n))
        .collect();
    let imports: Vec<String> = plan.imports.iter().cloned().collect();
    let with_lists = |mut row: ModuleRow| {
        row.deps = deps.clone();
        row.imports = imports.clone();
        row
    };
    for arg in &mut init {
        if let Some(ctor) = &arg.ctor {
            arg.value = ctor.render(&|c| program_name(repo, &plan, node, c));
        }
    }
    let (inputs, arg_sources) = match guess::input_functions(&facts, &init) {
        Ok(made) => made,
        Err(problem) => {
            return with_lists(fail(
                ModuleStatus::Rejected,
                problem.code(),
                problem.reason(),
            ));
        }
    };
    let wrapper = guess::keyword_wrapper(&facts, &class_name);
    let emitted = emit::program(repo, node, &plan, &inputs, wrapper.as_deref());
    let lines = emitted.text.lines().count() as u32;
    if lines > cfg.max_lines {
        if !roots.is_empty() {
            return retry(format!("too_large: {lines} lines > {}", cfg.max_lines));
        }
        let mut row = with_lists(fail(
            ModuleStatus::Rejected,
            ModuleReason::TooLarge,
            format!("too_large: {lines} lines > {}", cfg.max_lines),
        ));
        row.lines = lines;
        return row;
    }
    let verdict = if cfg.verify_whole_program {
        emit::validate(&emitted.text, limits)
    } else {
        emit::validate_pieces(&emitted, repo, node, cache, limits)
    };
    if let Err(invalid) = verdict {
        if !roots.is_empty() {
            return retry(invalid.text);
        }
        let mut row = with_lists(fail(ModuleStatus::Failed, invalid.code, invalid.text));
        row.lines = lines;
        return row;
    }
    ModuleRow {
        program: Some(emitted.text),
        deps,
        imports: emit::import_lines(&plan),
        lines,
        arg_sources,
        ..info.module_row(&file.path, &class_name, stmt.line, ModuleStatus::Ok, None)
    }
}

/// The repository classes the constructor arguments `init` build (nested ones included),
/// other than the entry `node` itself.
fn ctor_classes(init: &[guess::InitArg], node: NodeId) -> Vec<NodeId> {
    let mut out: Vec<NodeId> = Vec::new();
    for ctor in init.iter().filter_map(|a| a.ctor.as_ref()) {
        for class in ctor.all().into_iter().filter_map(|c| c.class) {
            if class != node && !out.contains(&class) {
                out.push(class);
            }
        }
    }
    out
}

/// `site` with its constructor-call arguments unknown.
fn without_ctors(site: &CallSite) -> CallSite {
    let mut site = site.clone();
    for arg in &mut site.args {
        arg.forget_ctor();
    }
    site
}

/// The name the class a constructor call builds has in the program of `entry`: `Model` for
/// the entry itself, else its own name or the one the plan renamed it to.
fn program_name(repo: &Repo, plan: &closure::Plan, entry: NodeId, ctor: &Ctor) -> String {
    let Some((file, stmt)) = ctor.class else {
        return ctor.callee.clone();
    };
    if (file, stmt) == entry {
        return "Model".to_string();
    }
    let name = repo.class_name_at(file, stmt).unwrap_or(&ctor.callee);
    plan.renames
        .get(&(file, name.to_string()))
        .cloned()
        .unwrap_or_else(|| name.to_string())
}

/// Gives every row an id, unique among `rows`.
///
/// An `ok` row's id is the content hash of its program, so identical programs from different
/// places share it — except that ids must be unique in the table: the first row (in the
/// given order) keeps the plain content hash and each later row with the same program gets the
/// hash of (program, repo, commit, path, class, line). Other rows get the hash of
/// (repo, commit, path, class, line).
pub fn assign_ids(rows: &mut [ModuleRow]) {
    let mut seen: HashSet<String> = HashSet::new();
    for row in rows.iter_mut() {
        let place = |h: &mut IdHasher| {
            h.part(&row.repo)
                .part(&row.commit)
                .part(&row.path)
                .part(&row.class_name)
                .part(row.line.to_le_bytes());
        };
        let mut id = match (&row.status, &row.program) {
            (ModuleStatus::Ok, Some(program)) => content_id(program),
            _ => {
                let mut h = IdHasher::new();
                h.part("module-place");
                place(&mut h);
                h.finish()
            }
        };
        if seen.contains(&id) {
            let mut h = IdHasher::new();
            h.part("module-copy")
                .part(row.program.as_deref().unwrap_or(""));
            place(&mut h);
            id = h.finish();
        }
        seen.insert(id.clone());
        row.id = id;
    }
}
