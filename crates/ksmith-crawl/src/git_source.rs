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

use crate::config::CrawlConfig;
use crate::error::Error;
use crate::file_rules::{FileRules, is_safe_component, reason};
use crate::license::{MAX_LICENSE_BYTES, license_file_rank};
use crate::snapshot::{Candidate, Handle, LoadError, Walk};

/// The ref in a mirror that records the remote's HEAD at the last fetch.
pub const REMOTE_HEAD_REF: &str = "refs/ksmith/remote-head";

const MODE_TREE: i32 = 0o040000;
const MODE_BLOB: i32 = 0o100644;
const MODE_BLOB_GROUP_WRITABLE: i32 = 0o100664;
const MODE_BLOB_EXECUTABLE: i32 = 0o100755;
const MODE_LINK: i32 = 0o120000;
const MODE_COMMIT: i32 = 0o160000;

/// Fetches `url` into the bare mirror at `dir` (created on first use) and opens it.
///
/// Branches, tags and the remote HEAD (as [`REMOTE_HEAD_REF`]) are fetched. A mirror that no
/// longer opens, or whose fetch fails with a local object, ref or repository error, is removed
/// and fetched again from scratch, once. The fetch is aborted when it takes longer than
/// `fetch_timeout_secs` or receives more than `max_fetch_bytes`.
pub fn update_mirror(
    repo: &str,
    url: &str,
    dir: &Path,
    cfg: &CrawlConfig,
) -> Result<Repository, Error> {
    let existed = dir.exists();
    let mirror = open_or_create_mirror(repo, dir)?;
    match fetch(&mirror, url, cfg) {
        Ok(()) => Ok(mirror),
        // A mirror damaged on disk (a broken object, pack or ref) is rebuilt once from
        // scratch; network and timeout failures are not, since a fresh clone would fail too.
        Err(e) if existed && is_local_damage(&e) => {
            drop(mirror);
            std::fs::remove_dir_all(dir).map_err(|io| Error::io(dir, io))?;
            let mirror = open_or_create_mirror(repo, dir)?;
            fetch(&mirror, url, cfg).map_err(|e| e.into_error(repo, url, cfg))?;
            Ok(mirror)
        }
        Err(e) => Err(e.into_error(repo, url, cfg)),
    }
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

fn fetch(mirror: &Repository, url: &str, cfg: &CrawlConfig) -> Result<(), FetchError> {
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
    let head_spec = format!("+HEAD:{REMOTE_HEAD_REF}");
    let refspecs = [
        "+refs/heads/*:refs/heads/*",
        "+refs/tags/*:refs/tags/*",
        head_spec.as_str(),
    ];
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

/// The commit `rev` names (a branch, tag, commit id or any rev expression), or the commit of
/// `head` when no rev is given.
pub fn resolve(git: &Repository, repo: &str, rev: Option<&str>, head: &str) -> Result<Oid, Error> {
    let spec = rev.unwrap_or(head);
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
) -> Result<Result<Walk, String>, Error> {
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
                return Ok(Err(format!(
                    "tree_too_large: more than max_tree_entries = {} entries",
                    cfg.max_tree_entries
                )));
            }
            let raw = entry.name_bytes();
            if !is_safe_component(raw) {
                walk.skip(
                    format!("{prefix}{}", String::from_utf8_lossy(raw)),
                    reason::UNSAFE_PATH,
                );
                continue;
            }
            let Ok(name) = std::str::from_utf8(raw) else {
                walk.skip(
                    format!("{prefix}{}", String::from_utf8_lossy(raw)),
                    reason::NOT_UTF8_PATH,
                );
                continue;
            };
            let path = format!("{prefix}{name}");
            match entry.filemode() {
                MODE_TREE => {
                    if rules.skips_dir(name) {
                        walk.skip(format!("{path}/"), reason::VENDORED);
                    } else {
                        stack.push((entry.id(), format!("{path}/")));
                    }
                }
                MODE_LINK => walk.skip(path, reason::SYMLINK),
                MODE_COMMIT => walk.skip(path, reason::SUBMODULE),
                MODE_BLOB | MODE_BLOB_EXECUTABLE | MODE_BLOB_GROUP_WRITABLE => {
                    if !rules.is_python(name) {
                        continue;
                    }
                    if rules.is_generated(name) {
                        walk.skip(path, reason::GENERATED);
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
                        walk.skip(path, reason::TOO_LARGE);
                        continue;
                    }
                    walk.candidates.push(Candidate {
                        path,
                        size: size as u64,
                        handle: Handle::Blob(entry.id()),
                    });
                }
                _ => walk.skip(path, reason::UNKNOWN_MODE),
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
        Handle::File { .. } => Err(LoadError::Skip(reason::UNREADABLE)),
    }
}
