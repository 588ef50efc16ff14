//! Crawling one repository: open or fetch it, pin the commit, decide its license, select its
//! files, write its snapshot, and build its row.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use ksmith_core::ids::IdHasher;
use ksmith_core::tables::{RepoReason, RepoRow, RepoStatus};

use crate::config::CrawlConfig;
use crate::error::Error;
use crate::folder_source;
use crate::git_source;
use crate::license::{self, Detected};
use crate::snapshot::{self, Rejection, Selection, Walk};
use crate::source::{Location, RepoSource};

/// What every repository of one crawl shares.
pub struct CrawlEnv<'a> {
    /// The `[crawl]` table.
    pub cfg: &'a CrawlConfig,
    /// The work directory.
    pub workdir: &'a Path,
    /// Where bare mirrors of URLs live.
    pub mirror_dir: PathBuf,
    /// Rows of the previous crawl, by repository name.
    pub previous: HashMap<String, RepoRow>,
    /// Re-snapshot even when a stamp says nothing changed.
    pub force: bool,
    /// The time written to `fetched_at`.
    pub now: String,
}

/// One crawled repository.
pub struct Outcome {
    /// Its row.
    pub row: RepoRow,
    /// True when an earlier snapshot was reused without any work.
    pub reused: bool,
}

/// Crawls one repository; a failure becomes a `failed` row, never an error.
pub fn crawl(src: &RepoSource, env: &CrawlEnv<'_>) -> Outcome {
    let mut outcome = match crawl_inner(src, env) {
        Ok(o) => o,
        Err(e) => {
            let mut row = base_row(src, RepoStatus::Failed);
            row.set_reason(RepoReason::Failed, Some(&failure_reason(&e)));
            Outcome { row, reused: false }
        }
    };
    let row = &mut outcome.row;
    row.fetched_at = env.now.clone();
    row.changed = row.status != RepoStatus::Failed
        && env
            .previous
            .get(&src.name)
            .is_none_or(|p| p.commit != row.commit);
    outcome
}

/// The `reason` of a failed row: the error without the repository name the row already has.
fn failure_reason(e: &Error) -> String {
    match e {
        Error::Git {
            action, message, ..
        } => format!("{action}: {message}"),
        other => other.to_string(),
    }
}

/// The row fields that come from the source itself.
fn base_row(src: &RepoSource, status: RepoStatus) -> RepoRow {
    RepoRow {
        repo: src.name.clone(),
        url: src.url.clone(),
        source_kind: src.location.kind(),
        rev: src.rev.clone(),
        commit: None,
        license: src.license.clone(),
        license_source: src.license_source.map(str::to_string),
        stars: src.stars,
        fetched_at: String::new(),
        status,
        reason: None,
        reason_code: None,
        changed: false,
        snapshot: None,
        files: Vec::new(),
        skipped: Vec::new(),
        python_bytes: 0,
    }
}

/// The hash of everything that decides this repository's row besides its commit.
fn rules_for(src: &RepoSource, env: &CrawlEnv<'_>) -> String {
    let mut h = IdHasher::new();
    h.part(crate::CODE_VERSION.to_le_bytes())
        .part(env.cfg.rules_hash())
        .part(&src.name)
        .part(&src.url)
        .part(format!("{:?}", src.location.kind()))
        .part(src.rev.as_deref().unwrap_or(""))
        .part(src.license.as_deref().unwrap_or(""))
        .part(src.license_source.unwrap_or(""))
        .part(src.stars.map(|s| s.to_string()).unwrap_or_default());
    h.finish()
}

/// The license decision: (license, license_source, rejection).
fn decide_license(
    src: &RepoSource,
    files: &[(String, String)],
    cfg: &CrawlConfig,
) -> (Option<String>, Option<String>, Option<Rejection>) {
    let (id, from) = match (&src.license, src.license_source) {
        (Some(l), Some(s)) => (Some(l.clone()), Some(s.to_string())),
        _ => match license::detect(files) {
            Detected::Known { id, file } => (Some(id), Some(format!("file:{file}"))),
            Detected::Unknown { file } => {
                let why = (!cfg.accept_unlicensed)
                    .then(|| Rejection::new(RepoReason::UnknownLicense, Some(file.clone())));
                return (None, Some(format!("file:{file}")), why);
            }
            Detected::Missing => {
                let why =
                    (!cfg.accept_unlicensed).then(|| Rejection::new(RepoReason::NoLicense, None));
                return (None, None, why);
            }
        },
    };
    let reject = id
        .as_deref()
        .filter(|l| !license::is_allowed(l, &cfg.allowed_licenses))
        .map(|l| Rejection::new(RepoReason::LicenseNotAllowed, Some(l.to_string())));
    (id, from, reject)
}

fn crawl_inner(src: &RepoSource, env: &CrawlEnv<'_>) -> Result<Outcome, Error> {
    match &src.location {
        Location::Url(url) => {
            let dir = env.mirror_dir.join(format!("{}.git", src.key()));
            let rev = src.rev.as_deref();
            let (git, spec) = git_source::update_mirror(&src.name, url, rev, &dir, env.cfg)?;
            let oid = git_source::resolve(&git, &src.name, &spec, rev)?;
            crawl_git(src, env, &git, oid)
        }
        Location::LocalGit(path) => {
            let git = git_source::open_local(&src.name, path)?;
            let rev = src.rev.as_deref();
            let oid = git_source::resolve(&git, &src.name, rev.unwrap_or("HEAD"), rev)?;
            crawl_git(src, env, &git, oid)
        }
        Location::Folder(path) => crawl_folder(src, env, path),
    }
}

fn crawl_git(
    src: &RepoSource,
    env: &CrawlEnv<'_>,
    git: &git2::Repository,
    oid: git2::Oid,
) -> Result<Outcome, Error> {
    let commit = oid.to_string();
    let key = src.key();
    let rules = rules_for(src, env);
    if !env.force
        && let Some(row) = snapshot::reusable(env.workdir, &key, &commit, &rules)
    {
        return Ok(Outcome { row, reused: true });
    }
    let mut row = base_row(src, RepoStatus::Ok);
    row.commit = Some(commit.clone());
    let files = git_source::license_files(git, &src.name, oid)?;
    let (id, from, reject) = decide_license(src, &files, env.cfg);
    row.license = id;
    row.license_source = from;
    if let Some(why) = reject {
        return finish_rejected(env, &key, &commit, &rules, row, why);
    }
    let walk = match git_source::walk(git, &src.name, oid, env.cfg)? {
        Ok(w) => w,
        Err(why) => return finish_rejected(env, &key, &commit, &rules, row, why),
    };
    let sel = snapshot::select(walk, env.cfg, |c| git_source::load(git, &src.name, c))?;
    finish_selected(env, &key, &commit, &rules, row, sel)
}

fn crawl_folder(src: &RepoSource, env: &CrawlEnv<'_>, root: &Path) -> Result<Outcome, Error> {
    folder_source::check_root(&src.name, root)?;
    let key = src.key();
    let rules = rules_for(src, env);
    let mut row = base_row(src, RepoStatus::Ok);
    let files = folder_source::license_files(root)?;
    let (id, from, reject) = decide_license(src, &files, env.cfg);
    row.license = id;
    row.license_source = from;
    if let Some(why) = reject {
        reject_row(&mut row, why);
        return Ok(Outcome { row, reused: false });
    }
    let walk: Walk = match folder_source::walk(root, env.cfg)? {
        Ok(w) => w,
        Err(why) => {
            reject_row(&mut row, why);
            return Ok(Outcome { row, reused: false });
        }
    };
    let max = env.cfg.max_file_bytes;
    let sel = snapshot::select(walk, env.cfg, |c| folder_source::read_checked(c, max))?;
    // A folder's commit is the hash of what it contributes, known only after reading it.
    let commit = snapshot::content_commit(&sel.accepted);
    if sel.rejected.is_none()
        && !env.force
        && let Some(row) = snapshot::reusable(env.workdir, &key, &commit, &rules)
    {
        return Ok(Outcome { row, reused: true });
    }
    row.commit = Some(commit.clone());
    finish_selected(env, &key, &commit, &rules, row, sel)
}

/// Marks `row` rejected for `why`.
fn reject_row(row: &mut RepoRow, why: Rejection) {
    row.status = RepoStatus::Rejected;
    row.set_reason(why.code, why.detail.as_deref());
}

fn finish_rejected(
    env: &CrawlEnv<'_>,
    key: &str,
    commit: &str,
    rules: &str,
    mut row: RepoRow,
    why: Rejection,
) -> Result<Outcome, Error> {
    reject_row(&mut row, why);
    snapshot::write_stamp(env.workdir, key, commit, rules, &row)?;
    snapshot::remove_others(env.workdir, key, commit)?;
    Ok(Outcome { row, reused: false })
}

fn finish_selected(
    env: &CrawlEnv<'_>,
    key: &str,
    commit: &str,
    rules: &str,
    mut row: RepoRow,
    sel: Selection,
) -> Result<Outcome, Error> {
    row.skipped = sel.skipped;
    if let Some(why) = sel.rejected {
        return finish_rejected(env, key, commit, rules, row, why);
    }
    if sel.accepted.is_empty() {
        let why = Rejection::new(RepoReason::NoPythonFiles, None);
        return finish_rejected(env, key, commit, rules, row, why);
    }
    snapshot::write(env.workdir, key, commit, &sel.accepted)?;
    row.snapshot = Some(snapshot::relative_dir(key, commit));
    row.python_bytes = sel.python_bytes;
    row.files = sel.accepted.into_iter().map(|(p, _)| p).collect();
    snapshot::write_stamp(env.workdir, key, commit, rules, &row)?;
    snapshot::remove_others(env.workdir, key, commit)?;
    Ok(Outcome { row, reused: false })
}
