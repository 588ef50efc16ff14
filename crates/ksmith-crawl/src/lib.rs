//! Crawl: fetches the configured repositories, pins each to a commit, checks its license and
//! limits, and copies its accepted Python files into a snapshot. Input: the `[[source]]`
//! entries of the configuration (git URLs, local git repositories, plain folders, JSONL
//! manifests). Output: `repos.parquet` ([`RepoRow`]), one row per repository, and
//! `snapshots/<repo-key>/<commit>/` holding the accepted files.
//!
//! Invariants:
//! - No work tree is checked out and no program of a crawled repository ever runs: git
//!   objects are read from the object database (no hooks, no filter drivers, no fsmonitor);
//!   symbolic links are never followed, in git trees or in plain folders.
//! - Every repository gets a row: `ok` (its files are in the snapshot), `rejected` (license,
//!   limits, no Python; `reason_code` says which, `reason` in words, and `files` is empty) or
//!   `failed` (could not be fetched or read; `reason_code` is `failed` and `reason` holds the
//!   error). One repository failing never stops the others. The report counts the rows that
//!   are not ok by `reason_code`, and skipped files by their typed `SkipReason`.
//! - Only `.py` files that are valid UTF-8, contain no NUL byte and are at most
//!   `max_file_bytes` are accepted; every other Python file (and every link, submodule and
//!   skipped folder) is listed in `skipped` with its reason.
//! - Incremental: a repository whose pinned commit (for a folder: the hash of its accepted
//!   files) and crawl rules are unchanged since the last crawl is reused from its stamp without
//!   writing anything, and its row says `changed = false`. URLs are still fetched to learn the
//!   head; a fetch with nothing new transfers no objects.
//! - The output fingerprint hashes the stage version, the `[crawl]` table and the rows
//!   (without `fetched_at` and `changed`), so downstream stages re-run only when the crawled
//!   content changed.
//!
//! Entry point: [`run`].
#![deny(missing_docs)]

pub mod config;
pub mod error;
pub mod file_rules;
pub mod folder_source;
pub mod git_source;
pub mod license;
pub mod manifest;
pub mod repo_crawl;
pub mod snapshot;
pub mod source;

use std::collections::HashMap;
use std::time::SystemTime;

use ksmith_core::config::SourceSpec;
use ksmith_core::context::StageContext;
use ksmith_core::fingerprint::Fingerprint;
use ksmith_core::ids::IdHasher;
use ksmith_core::report::StageReport;
use ksmith_core::stage::{StagePlan, StageRun};
use ksmith_core::table::{Table, read_table, write_table};
use ksmith_core::tables::{RepoRow, RepoStatus};
use ksmith_core::timestamp;
use rayon::prelude::*;

pub use config::{CrawlConfig, LimitPolicy};
pub use error::Error;

/// The stage's name.
pub const STAGE: &str = "crawl";
/// Bumped when the output for the same input changes.
pub const CODE_VERSION: u32 = 2;

/// Crawls every source and writes `repos.parquet` in `ctx.workdir`.
///
/// Returns an error only for problems of the configuration (an invalid `[crawl]` value, a bad
/// source or manifest line, two sources with one name) or of the work directory; a repository
/// that cannot be crawled is a `failed` row.
pub fn run(
    sources: &[SourceSpec],
    cfg: &CrawlConfig,
    ctx: &StageContext,
) -> Result<StageReport, Error> {
    cfg.validate()?;
    let mut repos = source::expand(sources)?;
    check_unique_names(&repos)?;
    let total_repos = repos.len();
    if let Some(shard) = ctx.shard {
        repos.retain(|r| shard.contains(&r.name));
        ctx.info(format!(
            "crawl: shard {shard} owns {} of {total_repos} repositories",
            repos.len()
        ));
    }
    // Crawl always runs (it is incremental per repository); its fingerprint is that of the
    // rows it produced.
    StagePlan::new(ctx, STAGE, CODE_VERSION).run(|run| {
        let outcomes = crawl_all(&repos, cfg, run)?;
        run.report.rows_read = repos.len() as u64;
        for o in &outcomes {
            count_outcome(o, &mut run.report, ctx);
        }
        let rows: Vec<RepoRow> = outcomes.into_iter().map(|o| o.row).collect();
        let shard = ctx.shard.map(|s| s.to_string()).unwrap_or_default();
        let fp = Fingerprint::new(STAGE, CODE_VERSION)
            .with("config", &ksmith_core::config::section_hash(cfg))
            .with("shard", &shard)
            .with("rows", &rows_hash(&rows))
            .finish();
        write_table(&RepoRow::path_in(&ctx.workdir), &rows, &fp)?;
        run.report.rows_written = rows.len() as u64;
        run.set_fingerprint(fp);
        Ok(())
    })
}

/// Crawls every repository on the stage's threads.
fn crawl_all(
    repos: &[source::RepoSource],
    cfg: &CrawlConfig,
    run: &StageRun<'_, Error>,
) -> Result<Vec<repo_crawl::Outcome>, Error> {
    let ctx = run.ctx;
    let env = repo_crawl::CrawlEnv {
        cfg,
        workdir: &ctx.workdir,
        mirror_dir: cfg
            .mirror_dir
            .clone()
            .unwrap_or_else(|| ctx.workdir.join("mirrors")),
        previous: read_previous(&RepoRow::path_in(&ctx.workdir), ctx),
        force: ctx.force,
        now: timestamp::rfc3339_utc(SystemTime::now()),
    };
    let pool = run.pool()?;
    let tracker = ctx.tracker(STAGE, Some(repos.len() as u64));
    let outcomes = pool.install(|| {
        repos
            .par_iter()
            .map(|src| {
                tracker.set_message(src.name.clone());
                let o = repo_crawl::crawl(src, &env);
                tracker.inc(1);
                o
            })
            .collect()
    });
    tracker.finish();
    Ok(outcomes)
}

/// Counts one repository's outcome in the report and says what happened to it.
fn count_outcome(o: &repo_crawl::Outcome, report: &mut StageReport, ctx: &StageContext) {
    let row = &o.row;
    let short = row
        .commit
        .as_deref()
        .map(|c| &c[..c.len().min(12)])
        .unwrap_or("-");
    if o.reused {
        ctx.info(format!("repo {}: unchanged at {short}", row.repo));
        report.count("repos_unchanged", 1);
    } else if row.status != RepoStatus::Failed {
        ctx.info(format!(
            "repo {}: {} at {short}",
            row.repo,
            if row.changed { "new commit" } else { "re-read" }
        ));
    }
    if row.changed {
        report.count("repos_changed", 1);
    }
    match row.status {
        RepoStatus::Ok => report.count("repos_ok", 1),
        RepoStatus::Rejected | RepoStatus::Failed => {
            // Every row that is not ok has a code (set_reason); the status names the rest.
            let code = row.reason_code.map_or(row.status.as_str(), |c| c.as_str());
            report.drop_row(code);
            if row.status == RepoStatus::Failed {
                let reason = row.reason.as_deref().unwrap_or("");
                ctx.warn(format!("repo {} failed: {reason}", row.repo));
            }
        }
    }
    report.count("files_accepted", row.files.len() as u64);
    report.count("files_skipped", row.skipped.len() as u64);
    for s in &row.skipped {
        report.count(&format!("skipped_{}", s.reason), 1);
    }
    report.count("python_bytes", row.python_bytes);
}

/// Two entries with one repository name would give the table two rows with one key.
fn check_unique_names(repos: &[source::RepoSource]) -> Result<(), Error> {
    let mut seen: HashMap<&str, &str> = HashMap::new();
    for r in repos {
        if let Some(first) = seen.insert(&r.name, &r.origin) {
            return Err(Error::Config {
                message: format!(
                    "repository name `{}` is given twice ({first} and {}); set `name` to tell them apart",
                    r.name, r.origin
                ),
            });
        }
    }
    Ok(())
}

/// The previous crawl's rows by name; an unreadable table is treated as absent, with a warning.
fn read_previous(path: &std::path::Path, ctx: &StageContext) -> HashMap<String, RepoRow> {
    if !path.exists() {
        return HashMap::new();
    }
    match read_table::<RepoRow>(path) {
        Ok(rows) => rows.into_iter().map(|r| (r.repo.clone(), r)).collect(),
        Err(e) => {
            ctx.warn(format!(
                "cannot read the previous crawl ({e}); every repository counts as changed"
            ));
            HashMap::new()
        }
    }
}

/// A hash of the rows without the fields that change on every crawl.
fn rows_hash(rows: &[RepoRow]) -> String {
    let mut h = IdHasher::new();
    for row in rows {
        let stable = RepoRow {
            fetched_at: String::new(),
            changed: false,
            ..row.clone()
        };
        h.part(serde_json::to_vec(&stable).unwrap_or_default());
    }
    h.finish()
}
