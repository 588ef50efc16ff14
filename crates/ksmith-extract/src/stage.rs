//! The stage entry point: `repos.parquet` in, `modules.parquet` out.

use std::collections::HashMap;
use std::path::{Component, Path, PathBuf};

use ksmith_core::config::section_hash;
use ksmith_core::context::StageContext;
use ksmith_core::ids::IdHasher;
use ksmith_core::report::StageReport;
use ksmith_core::stage::{StagePlan, StageRun};
use ksmith_core::table::{Table, read_table, write_bytes_atomically, write_table};
use ksmith_core::tables::{ModuleReason, ModuleRow, ModuleStatus, RepoRow, RepoStatus};
use rayon::prelude::*;

use crate::config::ExtractConfig;
use crate::contain::contained;
use crate::error::Error;
use crate::extract::{ExtractStats, RepoInfo, SourceFile, assign_ids, extract_repo_with_libraries};
use crate::library::{self, Library};
use crate::{CODE_VERSION, STAGE};

/// Stack size of the worker threads (deeply nested code is analysed recursively, up to
/// `max_nesting` levels).
const WORKER_STACK: usize = 16 * 1024 * 1024;

/// Runs the extract stage in `ctx.workdir`.
///
/// Reads `repos.parquet`, extracts the repositories with status `ok` from their snapshot
/// folders, writes `modules.parquet` sorted by (repo, path, line) and `reports/extract.json`.
/// Does nothing when the output already carries the fingerprint of this input and config
/// (unless `ctx.force`). Errors only for environment failures; every bad file or class is a row.
pub fn run(cfg: &ExtractConfig, ctx: &StageContext) -> Result<StageReport, Error> {
    cfg.validate()?;
    let input = RepoRow::path_in(&ctx.workdir);
    let out = ModuleRow::path_in(&ctx.workdir);
    let libraries = load_libraries(cfg, ctx);
    let keyed = Keyed {
        config: cfg,
        libraries: libraries.iter().map(Library::label).collect(),
    };
    StagePlan::new(ctx, STAGE, CODE_VERSION)
        .config(&keyed)
        .input(&input, "crawl")
        .output(&out)
        .stack_size(WORKER_STACK)
        .run(|run| {
            let repos: Vec<RepoRow> = read_table(&input)?;
            run.report.rows_read = repos.len() as u64;
            let rows = extract_all(&repos, cfg, &libraries, run)?;
            write_table(&out, &rows, run.fingerprint())?;
            write_bytes_atomically(&reuse_key_path(&ctx.workdir), reuse_key(&keyed).as_bytes())?;
            run.report.rows_written = rows.len() as u64;
            Ok(())
        })
}

/// The config with what else decides the rows: the installed packages inlined, with versions.
#[derive(serde::Serialize)]
struct Keyed<'a> {
    config: &'a ExtractConfig,
    libraries: Vec<String>,
}

/// The packages of `[extract] inline_packages` found in `site_packages` (the Python
/// environment's when empty); one that cannot be had is warned about and left out (its helpers
/// stay `import_not_allowed`).
fn load_libraries(cfg: &ExtractConfig, ctx: &StageContext) -> Vec<Library> {
    if cfg.inline_packages.is_empty() {
        return Vec::new();
    }
    let site = if cfg.site_packages.is_empty() {
        ksmith_core::python_env::resolve_python(None)
            .ok()
            .and_then(|python| library::site_packages_of(&python))
    } else {
        Some(PathBuf::from(&cfg.site_packages))
    };
    let Some(site) = site else {
        ctx.warn(
            "extract: no Python environment's site-packages found; [extract] inline_packages \
             are not inlined",
        );
        return Vec::new();
    };
    cfg.inline_packages
        .iter()
        .filter_map(|p| match library::load(&site, p, cfg.max_file_bytes) {
            Ok(lib) => Some(lib),
            Err(why) => {
                ctx.warn(format!("extract: [extract] inline_packages: {why}"));
                None
            }
        })
        .collect()
}

/// The rows of every accepted repository, sorted and with ids: reused where the repository is
/// unchanged, extracted on the stage's threads otherwise.
fn extract_all(
    repos: &[RepoRow],
    cfg: &ExtractConfig,
    libraries: &[Library],
    run: &mut StageRun<'_, Error>,
) -> Result<Vec<ModuleRow>, Error> {
    let ctx = run.ctx;
    let report = &mut run.report;
    let accepted: Vec<&RepoRow> = repos
        .iter()
        .filter(|r| r.status == RepoStatus::Ok)
        .collect();
    // A repository at the same commit, with the same license and stars, extracted with the same
    // config and code, keeps its previous rows: extraction of a repository reads only its own
    // files, and ids are re-assigned over all rows below, so the table equals a full re-run.
    let mut previous = if ctx.force {
        HashMap::new()
    } else {
        previous_rows(
            &ctx.workdir,
            &reuse_key(&Keyed {
                config: cfg,
                libraries: libraries.iter().map(Library::label).collect(),
            }),
        )
    };
    let mut rows: Vec<ModuleRow> = Vec::new();
    let mut todo: Vec<&RepoRow> = Vec::new();
    for repo in &accepted {
        let place = (repo.repo.clone(), repo.commit.clone().unwrap_or_default());
        match previous.remove(&place) {
            Some(old)
                if old
                    .iter()
                    .all(|m| m.license == repo.license && m.stars == repo.stars) =>
            {
                report.count("repos_reused", 1);
                rows.extend(old);
            }
            _ => todo.push(repo),
        }
    }
    let pool = run.pool()?;
    let tracker = ctx.tracker(STAGE, Some(todo.len() as u64));
    let results: Vec<(Vec<ModuleRow>, ExtractStats)> = pool.install(|| {
        todo.par_iter()
            .map(|repo| {
                let result = extract_one(repo, &ctx.workdir, cfg, libraries);
                tracker.inc(1);
                result
            })
            .collect()
    });
    tracker.finish();
    let report = &mut run.report;
    for (repo_rows, stats) in results {
        report.count("files", stats.files);
        report.count("source_bytes", stats.bytes);
        report.count("files_with_syntax_errors", stats.files_with_syntax_errors);
        rows.extend(repo_rows);
    }
    rows.sort_by(module_order);
    assign_ids(&mut rows);
    for row in &rows {
        match row.status {
            ModuleStatus::Ok => report.count("modules_ok", 1),
            _ => report.drop_row(&report_reason(row)),
        }
    }
    report.count("repos", accepted.len() as u64);
    Ok(rows)
}

/// Where the key of the rows in `modules.parquet` is kept.
fn reuse_key_path(workdir: &Path) -> PathBuf {
    workdir.join("modules.key")
}

/// What decides a repository's rows besides its files: the code version and the config.
fn reuse_key(keyed: &Keyed<'_>) -> String {
    IdHasher::new()
        .part(CODE_VERSION.to_le_bytes())
        .part(section_hash(keyed))
        .finish()
}

/// The previous run's rows by (repo, commit), when that run had the same key (else empty).
fn previous_rows(workdir: &Path, key: &str) -> HashMap<(String, String), Vec<ModuleRow>> {
    let stored = std::fs::read_to_string(reuse_key_path(workdir)).unwrap_or_default();
    if stored.trim() != key {
        return HashMap::new();
    }
    let rows: Vec<ModuleRow> = read_table(&ModuleRow::path_in(workdir)).unwrap_or_default();
    let mut by_repo: HashMap<(String, String), Vec<ModuleRow>> = HashMap::new();
    for row in rows {
        by_repo
            .entry((row.repo.clone(), row.commit.clone()))
            .or_default()
            .push(row);
    }
    by_repo
}

/// The order of `modules.parquet`: by repository, path, line and class. `ksmith merge` sorts the
/// union of shards with it, so [`assign_ids`] sees rows in the same order as in one run.
pub fn module_order(a: &ModuleRow, b: &ModuleRow) -> std::cmp::Ordering {
    (&a.repo, &a.path, a.line, &a.class_name).cmp(&(&b.repo, &b.path, b.line, &b.class_name))
}

/// What the report counts a row that is not ok under: its reason code, except that an
/// `import_not_allowed` row counts under its words (`import_not_allowed: scipy`), so the report
/// says which packages cost modules.
fn report_reason(row: &ModuleRow) -> String {
    match (row.reason_code, &row.reason) {
        (Some(ModuleReason::ImportNotAllowed), Some(words)) => words.clone(),
        (Some(code), _) => code.as_str().to_string(),
        (None, _) => row.status.as_str().to_string(),
    }
}

/// True for a relative path that stays inside its folder.
fn is_contained(path: &str) -> bool {
    let p = Path::new(path);
    !path.is_empty() && p.components().all(|c| matches!(c, Component::Normal(_)))
}

/// Extracts one repository from its snapshot; anything unexpected inside (a panic) becomes the
/// repository's one `failed` row, so the other repositories finish.
fn extract_one(
    repo: &RepoRow,
    workdir: &Path,
    cfg: &ExtractConfig,
    libraries: &[Library],
) -> (Vec<ModuleRow>, ExtractStats) {
    let what = format!("extracting repository {}", repo.repo);
    contained(&what, || extract_snapshot(repo, workdir, cfg, libraries)).unwrap_or_else(|reason| {
        let row = failed_row(repo, "", ModuleReason::InternalError, reason);
        (vec![row], ExtractStats::default())
    })
}

/// What extract copies from a repository's row into each of its module rows.
fn repo_info(repo: &RepoRow) -> RepoInfo {
    RepoInfo {
        repo: repo.repo.clone(),
        commit: repo.commit.clone().unwrap_or_default(),
        license: repo.license.clone(),
        stars: repo.stars,
    }
}

/// A `failed` row of `repo` for `path` (empty for the whole repository).
fn failed_row(repo: &RepoRow, path: &str, code: ModuleReason, reason: String) -> ModuleRow {
    repo_info(repo).module_row(path, "", 1, ModuleStatus::Failed, Some((code, reason)))
}

fn extract_snapshot(
    repo: &RepoRow,
    workdir: &Path,
    cfg: &ExtractConfig,
    libraries: &[Library],
) -> (Vec<ModuleRow>, ExtractStats) {
    let info = repo_info(repo);
    let failed =
        |path: &str, code: ModuleReason, reason: String| failed_row(repo, path, code, reason);
    let Some(snapshot) = repo.snapshot.as_deref().filter(|s| is_contained(s)) else {
        let reason = format!(
            "no_snapshot: repository {} has no usable snapshot folder ({:?})",
            repo.repo, repo.snapshot
        );
        return (
            vec![failed("", ModuleReason::NoSnapshot, reason)],
            ExtractStats::default(),
        );
    };
    let root = workdir.join(snapshot);
    let mut files = Vec::with_capacity(repo.files.len());
    let mut unreadable = Vec::new();
    for path in &repo.files {
        if !is_contained(path) {
            unreadable.push(failed(
                path,
                ModuleReason::UnsafePath,
                format!("unsafe_path: {path}"),
            ));
            continue;
        }
        match std::fs::read(root.join(path)) {
            Ok(bytes) => files.push(SourceFile::new(path.clone(), bytes)),
            Err(e) => unreadable.push(failed(
                path,
                ModuleReason::UnreadableFile,
                format!("unreadable_file: {path}: {e}"),
            )),
        }
    }
    let (mut rows, stats) = extract_repo_with_libraries(&info, &files, cfg, libraries);
    rows.extend(unreadable);
    (rows, stats)
}
