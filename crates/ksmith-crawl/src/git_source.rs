//! Git sources: the bare mirror cache for URLs, local repositories opened in place, resolving
//! the rev to a commit, and walking the commit's tree.
//!
//! No work tree is ever checked out: files are read as blobs from the object database, so no
//! hook, filter driver (`.gitattributes`), `core.fsmonitor` command or other configured program
//! of the repository can run, and symbolic links are never followed (they are recorded as
//! skipped). libgit2 itself runs no hooks.

use std::path::Path;
use std::time::{Duration, Instant};

use git2::{
    AutotagOption, FetchOptions, ObjectType, Oid, ProxyOptions, RemoteCallbacks, Repository,
    RepositoryOpenFlags,
};

use ksmith_core::tables::SkipReason;

use crate::config::CrawlConfig;
use crate::error::Error;
use crate::file_rules::{FileRules, is_safe_component};
use crate::license::{MAX_LICENSE_BYTES, license_file_rank};
use crate::snapshot::{Candidate, Handle, LoadError, Rejection, Walk};

/// The ref in a mirror that records the remote's HEAD at the last fetch.
pub const REMOTE_HEAD_REF: &str = "refs/ksmith/remote-head";

const MODE_TREE: i32 = 0o040000;
const MODE_BLOB: i32 = 0o100644;
const MODE_BLOB_GROUP_WRITABLE: i32 = 0o100664;
const MODE_BLOB_EXECUTABLE: i32 = 0o100755;
const MODE_LINK: i32 = 0o120000;
const MODE_COMMIT: i32 = 0o160000;

/// The ref of a mirror that holds the configured rev after a fetch (a branch, tag, full ref or
/// commit of the remote).
pub const REV_REF: &str = "refs/ksmith/rev";

/// What a fetch asks the remote for.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Want {
    /// The remote's HEAD (its default branch), into [`REMOTE_HEAD_REF`].
    Head,
    /// A full ref name (`refs/heads/dev`, `refs/pull/1/head`).
    Ref(String),
    /// A commit id (40 hex digits).
    Commit(Oid),
    /// A short name: a tag or a branch of that name (a tag wins, as in git).
    Name(String),
}

impl Want {
    fn of(rev: Option<&str>) -> Want {
        match rev {
            None | Some("HEAD") => Want::Head,
            Some(r) if r.starts_with("refs/") => Want::Ref(r.to_string()),
            Some(r) => match Oid::from_str(r) {
                Ok(oid) if r.len() == 40 => Want::Commit(oid),
                _ => Want::Name(r.to_string()),
            },
        }
    }

    /// (remote ref or commit id, local ref) pairs, tried in order.
    fn refspecs(&self) -> Vec<(String, String)> {
        match self {
            Want::Head => vec![("HEAD".into(), REMOTE_HEAD_REF.into())],
            Want::Ref(r) => vec![(r.clone(), REV_REF.into())],
            Want::Commit(oid) => vec![(oid.to_string(), REV_REF.into())],
            Want::Name(n) => vec![
                (format!("refs/tags/{n}"), format!("{REV_REF}-tag")),
                (format!("refs/heads/{n}"), format!("{REV_REF}-branch")),
            ],
        }
    }
}

/// Fetches the configured rev of `url` (the remote's HEAD when `rev` is `None`) into the bare
/// mirror at `dir` (created on first use), opens it and returns it with the ref or rev
/// expression that names the fetched commit in it.
///
/// Only that rev is fetched, never every branch and tag, so a broken object elsewhere in the
/// remote cannot fail the crawl, and over http(s), ssh and git the fetch is shallow (depth 1):
/// only the pinned commit's objects travel. (libgit2's transport for `file://` and local
/// paths fetches the history too.) A `rev` is a tag or branch name, a full ref, a commit id, or
/// else an expression resolved against the default branch's full history (`v1~2`, a short
/// commit id). A mirror that no longer opens, or whose fetch fails with a local object, ref or
/// repository error, is removed and fetched again from scratch, once. The fetch is aborted
/// when it takes longer than `fetch_timeout_secs` or receives more than `max_fetch_bytes`.
pub fn update_mirror(
    repo: &str,
    url: &str,
    rev: Option<&str>,
    dir: &Path,
    cfg: &CrawlConfig,
) -> Result<(Repository, String), Error> {
    let existed = dir.exists();
    let mirror = open_or_create_mirror(repo, dir)?;
    match fetch_rev(&mirror, url, rev, cfg) {
        Ok(Some(spec)) => Ok((mirror, spec)),
        Ok(None) => Err(rev_not_found(repo, rev)),
        // A mirror damaged on disk (a broken object, pack or ref) is rebuilt once from
        // scratch; network and timeout failures are not, since a fresh clone would fail too.
        Err(e) if existed && is_local_damage(&e) => {
            drop(mirror);
            std::fs::remove_dir_all(dir).map_err(|io| Error::io(dir, io))?;
            let mirror = open_or_create_mirror(repo, dir)?;
            match fetch_rev(&mirror, url, rev, cfg).map_err(|e| e.into_error(repo, url, cfg))? {
                Some(spec) => Ok((mirror, spec)),
                None => Err(rev_not_found(repo, rev)),
            }
        }
        Err(e) => Err(e.into_error(repo, url, cfg)),
    }
}

fn rev_not_found(repo: &str, rev: Option<&str>) -> Error {
    Error::Git {
        repo: repo.to_string(),
        action: format!("fetch rev `{}`", rev.unwrap_or("HEAD")),
        message: "the remote has no such branch, tag, ref or commit".to_string(),
    }
}

/// Fetches what `rev` names; returns the ref (or rev expression) naming it in the mirror, or
/// `None` when the remote has nothing of that name.
fn fetch_rev(
    mirror: &Repository,
    url: &str,
    rev: Option<&str>,
    cfg: &CrawlConfig,
) -> Result<Option<String>, FetchError> {
    let local_error = |err| FetchError {
        err,
        timed_out: false,
        too_big: false,
    };
    // Refs of an earlier fetch would answer for a rev the remote no longer has.
    for name in mirror
        .references_glob("refs/ksmith/*")
        .map_err(local_error)?
        .names()
        .filter_map(Result::ok)
        .map(str::to_string)
        .collect::<Vec<_>>()
    {
        mirror
            .find_reference(&name)
            .and_then(|mut r| r.delete())
            .map_err(local_error)?;
    }
    if let Some(path) = url.strip_prefix("file://") {
        return copy_local(mirror, Path::new(path), rev, cfg);
    }
    let want = Want::of(rev);
    let shallow = supports_shallow(url);
    let found = |m: &Repository, specs: &[(String, String)]| {
        specs
            .iter()
            .map(|(_, local)| local)
            .find(|local| m.find_reference(local).is_ok())
            .cloned()
    };
    let specs = want.refspecs();
    match (&want, fetch(mirror, url, &specs, shallow, cfg)) {
        (_, Err(e)) if e.timed_out || e.too_big => Err(e),
        (Want::Commit(_), Err(_)) | (Want::Name(_) | Want::Ref(_), Ok(()))
            if found(mirror, &specs).is_none() =>
        {
            // Not a name the remote has, or a commit it will not send by id: the rev may
            // still be in the default branch's history (a short commit id, `v1~2`).
            let head = Want::Head.refspecs();
            fetch(mirror, url, &head, false, cfg)?;
            // The mirror's own HEAD is unborn: `HEAD~2` means the remote's.
            let rev = rev.unwrap_or("HEAD");
            let spec = match rev.strip_prefix("HEAD") {
                Some(rest) => format!("{REMOTE_HEAD_REF}{rest}"),
                None => rev.to_string(),
            };
            Ok(mirror.revparse_single(&spec).is_ok().then_some(spec))
        }
        (_, Err(e)) => Err(e),
        (_, Ok(())) => Ok(found(mirror, &specs)),
    }
}

/// The `file://` transport, done here: libgit2's own packs the objects of every ref of the
/// source (and refuses depth), so one broken branch would fail the fetch. The rev is resolved
/// in the source repository (opened in place, read only), and only the pinned commit with its
/// trees and blobs is copied into the mirror, which records it as a shallow boundary: a
/// depth-1 fetch. Bytes copied count against `max_fetch_bytes`, time against
/// `fetch_timeout_secs`.
fn copy_local(
    mirror: &Repository,
    source: &Path,
    rev: Option<&str>,
    cfg: &CrawlConfig,
) -> Result<Option<String>, FetchError> {
    let deadline = Instant::now() + Duration::from_secs(cfg.fetch_timeout_secs);
    let fail = |err, timed_out, too_big| FetchError {
        err,
        timed_out,
        too_big,
    };
    let local = |err| fail(err, false, false);
    let src = Repository::open_ext(
        source,
        RepositoryOpenFlags::NO_SEARCH,
        std::iter::empty::<&str>(),
    )
    .map_err(local)?;
    let spec = rev.unwrap_or("HEAD");
    let commit = match src.revparse_single(spec) {
        Ok(object) => object.peel_to_commit().map_err(local)?.id(),
        Err(e) if e.code() == git2::ErrorCode::NotFound => return Ok(None),
        Err(e) => return Err(local(e)),
    };
    let (from, to) = (src.odb().map_err(local)?, mirror.odb().map_err(local)?);
    let mut copied: u64 = 0;
    // Children are written before the tree or commit naming them, so an object present in the
    // mirror has all its content there (an interrupted copy resumes instead of stopping at a
    // commit it already has). (oid, its children are already written)
    let mut stack = vec![(commit, false)];
    while let Some((oid, children_done)) = stack.pop() {
        if to.exists(oid) {
            continue;
        }
        if !children_done {
            stack.push((oid, true));
            if from.read_header(oid).map_err(local)?.1 == ObjectType::Tree {
                let tree = src.find_tree(oid).map_err(local)?;
                // Submodule entries name commits of other repositories: not copied. Blobs
                // have no children: they go in as done.
                for e in tree.iter().filter(|e| e.filemode() != MODE_COMMIT) {
                    stack.push((e.id(), e.kind() == Some(ObjectType::Blob)));
                }
            } else if oid == commit {
                stack.push((src.find_commit(oid).map_err(local)?.tree_id(), false));
            }
            continue;
        }
        let object = match from.read(oid) {
            Ok(o) => o,
            // A blob the source itself lacks (a partial clone's large files): the mirror lacks
            // it too, and reading it later fails with the same error as reading the source.
            Err(e) if e.code() == git2::ErrorCode::NotFound && oid != commit => continue,
            Err(e) => return Err(local(e)),
        };
        copied += object.len() as u64;
        if copied > cfg.max_fetch_bytes || Instant::now() >= deadline {
            let err = git2::Error::from_str("transfer aborted");
            return Err(fail(
                err,
                Instant::now() >= deadline,
                copied > cfg.max_fetch_bytes,
            ));
        }
        to.write(object.kind(), object.data()).map_err(local)?;
    }
    let shallow = mirror.path().join("shallow");
    let known = std::fs::read_to_string(&shallow).unwrap_or_default();
    if !known.lines().any(|l| l == commit.to_string()) {
        let text = format!("{known}{commit}\n");
        std::fs::write(&shallow, text).map_err(|e| {
            local(git2::Error::from_str(&format!(
                "write {}: {e}",
                shallow.display()
            )))
        })?;
    }
    let reference = match rev {
        None | Some("HEAD") => REMOTE_HEAD_REF,
        Some(_) => REV_REF,
    };
    mirror
        .reference(reference, commit, true, "ksmith: pinned")
        .map_err(local)?;
    Ok(Some(reference.to_string()))
}

/// True when libgit2 can fetch `url` shallow: network transports, not its local one.
fn supports_shallow(url: &str) -> bool {
    let lower = url.to_ascii_lowercase();
    ["http://", "https://", "ssh://", "git://"]
        .iter()
        .any(|s| lower.starts_with(s))
        || (!lower.contains("://") && crate::source::is_url(url))
}

fn open_or_create_mirror(repo: &str, dir: &Path) -> Result<Repository, Error> {
    if let Ok(m) = Repository::open_bare(dir) {
        return Ok(m);
    }
    if dir.exists() {
        std::fs::remove_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    }
    std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    Repository::init_bare(dir).map_err(|e| Error::git(repo, "create mirror", e))
}

/// A failed fetch and whether its deadline had passed.
struct FetchError {
    err: git2::Error,
    timed_out: bool,
    too_big: bool,
}

impl FetchError {
    fn into_error(self, repo: &str, url: &str, cfg: &CrawlConfig) -> Error {
        let mut err = Error::git(
            repo,
            format!("fetch {}", crate::source::redact_url(url)),
            self.err,
        );
        if let Error::Git { message, .. } = &mut err {
            if self.timed_out {
                message.push_str(&format!(
                    " (fetch_timeout_secs = {} exceeded)",
                    cfg.fetch_timeout_secs
                ));
            }
            if self.too_big {
                message.push_str(&format!(
                    " (max_fetch_bytes = {} exceeded)",
                    cfg.max_fetch_bytes
                ));
            }
        }
        err
    }
}

fn is_local_damage(e: &FetchError) -> bool {
    use git2::ErrorClass;
    !e.timed_out
        && !e.too_big
        && matches!(
            e.err.class(),
            ErrorClass::Odb
                | ErrorClass::Object
                | ErrorClass::Zlib
                | ErrorClass::Reference
                | ErrorClass::Repository
                | ErrorClass::Index
                | ErrorClass::Indexer
        )
}

/// One fetch of `specs` ((remote, local) ref pairs) from `url`, depth 1 when `shallow`.
fn fetch(
    mirror: &Repository,
    url: &str,
    specs: &[(String, String)],
    shallow: bool,
    cfg: &CrawlConfig,
) -> Result<(), FetchError> {
    let mut remote = mirror.remote_anonymous(url).map_err(|err| FetchError {
        err,
        timed_out: false,
        too_big: false,
    })?;
    let deadline = Instant::now() + Duration::from_secs(cfg.fetch_timeout_secs);
    let max_bytes = cfg.max_fetch_bytes;
    let too_big = std::cell::Cell::new(false);
    let mut callbacks = RemoteCallbacks::new();
    callbacks.transfer_progress(|p| {
        if p.received_bytes() as u64 > max_bytes {
            too_big.set(true);
        }
        Instant::now() < deadline && !too_big.get()
    });
    callbacks.sideband_progress(move |_| Instant::now() < deadline);
    let mut proxy = ProxyOptions::new();
    proxy.auto();
    let mut opts = FetchOptions::new();
    opts.remote_callbacks(callbacks)
        .proxy_options(proxy)
        .download_tags(AutotagOption::None)
        .update_fetchhead(false);
    if shallow {
        opts.depth(1);
    }
    let refspecs: Vec<String> = specs
        .iter()
        .map(|(remote, local)| format!("+{remote}:{local}"))
        .collect();
    remote
        .fetch(&refspecs, Some(&mut opts), None)
        .map_err(|err| FetchError {
            err,
            timed_out: Instant::now() >= deadline,
            too_big: too_big.get(),
        })
}

/// Opens a local git repository in place, bare or not, without searching parent folders.
pub fn open_local(repo: &str, path: &Path) -> Result<Repository, Error> {
    if !path.exists() {
        return Err(Error::Git {
            repo: repo.to_string(),
            action: "open".into(),
            message: format!("{} does not exist", path.display()),
        });
    }
    Repository::open_ext(
        path,
        RepositoryOpenFlags::NO_SEARCH,
        std::iter::empty::<&str>(),
    )
    .map_err(|e| Error::git(repo, format!("open {}", path.display()), e))
}

/// The commit `spec` names (a ref, commit id or any rev expression); `rev` is the configured
/// rev it stands for, for messages.
pub fn resolve(git: &Repository, repo: &str, spec: &str, rev: Option<&str>) -> Result<Oid, Error> {
    let action = match rev {
        Some(r) => format!("resolve rev `{r}`"),
        None => "resolve HEAD".to_string(),
    };
    let object = git
        .revparse_single(spec)
        .map_err(|e| Error::git(repo, action.clone(), e))?;
    let commit = object
        .peel_to_commit()
        .map_err(|e| Error::git(repo, action, e))?;
    Ok(commit.id())
}

/// The root tree of `commit`.
fn root_tree<'r>(git: &'r Repository, repo: &str, commit: Oid) -> Result<git2::Tree<'r>, Error> {
    git.find_commit(commit)
        .and_then(|c| c.tree())
        .map_err(|e| Error::git(repo, format!("read tree of {commit}"), e))
}

/// The license files at the root of `commit` (regular files only, at most
/// [`MAX_LICENSE_BYTES`] each), as (name, text).
pub fn license_files(
    git: &Repository,
    repo: &str,
    commit: Oid,
) -> Result<Vec<(String, String)>, Error> {
    let tree = root_tree(git, repo, commit)?;
    let odb = git
        .odb()
        .map_err(|e| Error::git(repo, "open object database", e))?;
    let mut out = Vec::new();
    for entry in tree.iter() {
        let Ok(name) = std::str::from_utf8(entry.name_bytes()) else {
            continue;
        };
        let mode = entry.filemode();
        if license_file_rank(name).is_none()
            || !matches!(
                mode,
                MODE_BLOB | MODE_BLOB_EXECUTABLE | MODE_BLOB_GROUP_WRITABLE
            )
        {
            continue;
        }
        let (size, kind) = odb
            .read_header(entry.id())
            .map_err(|e| Error::git(repo, format!("read {name}"), e))?;
        if kind != ObjectType::Blob || size as u64 > MAX_LICENSE_BYTES {
            continue;
        }
        let blob = git
            .find_blob(entry.id())
            .map_err(|e| Error::git(repo, format!("read {name}"), e))?;
        out.push((
            name.to_string(),
            String::from_utf8_lossy(blob.content()).into_owned(),
        ));
    }
    Ok(out)
}

/// Walks the tree of `commit`: Python candidates and skipped entries.
///
/// Returns `Ok(Err(reason))` when the tree has more than `max_tree_entries` entries.
pub fn walk(
    git: &Repository,
    repo: &str,
    commit: Oid,
    cfg: &CrawlConfig,
) -> Result<Result<Walk, Rejection>, Error> {
    let rules = FileRules::new(cfg);
    let odb = git
        .odb()
        .map_err(|e| Error::git(repo, "open object database", e))?;
    let mut walk = Walk::default();
    let mut entries: u64 = 0;
    let mut stack = vec![(root_tree(git, repo, commit)?.id(), String::new())];
    while let Some((tree_id, prefix)) = stack.pop() {
        let tree = git
            .find_tree(tree_id)
            .map_err(|e| Error::git(repo, format!("read tree {prefix}"), e))?;
        for entry in tree.iter() {
            entries += 1;
            if entries > cfg.max_tree_entries {
                return Ok(Err(Rejection::tree_too_large(cfg.max_tree_entries)));
            }
            let raw = entry.name_bytes();
            if !is_safe_component(raw) {
                walk.skip(
                    format!("{prefix}{}", String::from_utf8_lossy(raw)),
                    SkipReason::UnsafePath,
                );
                continue;
            }
            let Ok(name) = std::str::from_utf8(raw) else {
                walk.skip(
                    format!("{prefix}{}", String::from_utf8_lossy(raw)),
                    SkipReason::NotUtf8Path,
                );
                continue;
            };
            let path = format!("{prefix}{name}");
            match entry.filemode() {
                MODE_TREE => {
                    if rules.skips_dir(name) {
                        walk.skip(format!("{path}/"), SkipReason::Vendored);
                    } else {
                        stack.push((entry.id(), format!("{path}/")));
                    }
                }
                MODE_LINK => walk.skip(path, SkipReason::Symlink),
                MODE_COMMIT => walk.skip(path, SkipReason::Submodule),
                MODE_BLOB | MODE_BLOB_EXECUTABLE | MODE_BLOB_GROUP_WRITABLE => {
                    if !rules.is_python(name) {
                        continue;
                    }
                    if rules.is_generated(name) {
                        walk.skip(path, SkipReason::Generated);
                        continue;
                    }
                    let (size, kind) = odb
                        .read_header(entry.id())
                        .map_err(|e| Error::git(repo, format!("read {path}"), e))?;
                    if kind != ObjectType::Blob {
                        return Err(Error::Git {
                            repo: repo.to_string(),
                            action: format!("read {path}"),
                            message: format!("object {} is a {kind}, not a blob", entry.id()),
                        });
                    }
                    if rules.too_large(size as u64) {
                        walk.skip(path, SkipReason::TooLarge);
                        continue;
                    }
                    walk.candidates.push(Candidate {
                        path,
                        size: size as u64,
                        handle: Handle::Blob(entry.id()),
                    });
                }
                _ => walk.skip(path, SkipReason::UnknownMode),
            }
        }
    }
    Ok(Ok(walk))
}

/// Reads a candidate blob.
pub fn load(git: &Repository, repo: &str, c: &Candidate) -> Result<Vec<u8>, LoadError> {
    match &c.handle {
        Handle::Blob(oid) => git
            .find_blob(*oid)
            .map(|b| b.content().to_vec())
            .map_err(|e| LoadError::Fatal(Error::git(repo, format!("read {}", c.path), e))),
        Handle::File { .. } => Err(LoadError::Skip(SkipReason::Unreadable)),
    }
}
