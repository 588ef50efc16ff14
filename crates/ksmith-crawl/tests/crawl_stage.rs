//! End-to-end tests of the crawl stage on git repositories and folders created by the tests.
// Helpers outside `#[test]` functions build fixtures; a failure there is a broken test.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};

use git2::{FileMode, ObjectType, Oid, Repository, Signature};
use ksmith_core::config::SourceSpec;
use ksmith_core::context::StageContext;
use ksmith_core::table::{Table, read_fingerprint, read_table};
use ksmith_core::tables::{RepoReason, RepoRow, RepoStatus, SourceKind};
use ksmith_crawl::{CrawlConfig, LimitPolicy, run};

const MIT: &str = "MIT License\n\nPermission is hereby granted, free of charge, to any person obtaining a copy of this software, to deal in the Software without restriction.\n\nThe above copyright notice and this permission notice shall be included in all copies or substantial portions of the Software.\n";
const GPL3: &str = "GNU GENERAL PUBLIC LICENSE\nVersion 3, 29 June 2007\n";

/// A file in a test commit: path, content, mode.
type Entry<'a> = (&'a str, &'a [u8], FileMode);

fn file<'a>(path: &'a str, content: &'a [u8]) -> Entry<'a> {
    (path, content, FileMode::Blob)
}

/// Builds the (nested) tree of `entries` and commits it on HEAD.
fn commit(repo: &Repository, entries: &[Entry<'_>], message: &str) -> Oid {
    #[derive(Default)]
    struct Dir {
        files: Vec<(String, Oid, FileMode)>,
        dirs: BTreeMap<String, Dir>,
    }
    fn write(repo: &Repository, dir: &Dir) -> Oid {
        let mut b = repo.treebuilder(None).unwrap();
        for (name, oid, mode) in &dir.files {
            b.insert(name, *oid, i32::from(*mode)).unwrap();
        }
        for (name, sub) in &dir.dirs {
            b.insert(name, write(repo, sub), i32::from(FileMode::Tree))
                .unwrap();
        }
        b.write().unwrap()
    }
    let mut root = Dir::default();
    for (path, content, mode) in entries {
        let oid = if *mode == FileMode::Commit {
            Oid::from_str(std::str::from_utf8(content).unwrap()).unwrap()
        } else {
            repo.blob(content).unwrap()
        };
        let parts: Vec<&str> = path.split('/').collect();
        let mut d = &mut root;
        for p in &parts[..parts.len() - 1] {
            d = d.dirs.entry(p.to_string()).or_default();
        }
        d.files
            .push((parts[parts.len() - 1].to_string(), oid, *mode));
    }
    let tree_id = write(repo, &root);
    commit_tree(repo, tree_id, message)
}

fn commit_tree(repo: &Repository, tree_id: Oid, message: &str) -> Oid {
    let tree = repo.find_tree(tree_id).unwrap();
    let sig = Signature::now("Test", "test@example.com").unwrap();
    let parent = repo.head().ok().and_then(|h| h.peel_to_commit().ok());
    let parents: Vec<&git2::Commit<'_>> = parent.iter().collect();
    repo.commit(Some("HEAD"), &sig, &sig, message, &tree, &parents)
        .unwrap()
}

fn git_source(value: &str) -> SourceSpec {
    SourceSpec {
        git: Some(value.to_string()),
        ..Default::default()
    }
}

fn folder_source(path: &Path) -> SourceSpec {
    SourceSpec {
        path: Some(path.to_path_buf()),
        ..Default::default()
    }
}

fn file_url(path: &Path) -> String {
    format!("file://{}", path.display())
}

struct Crawl {
    rows: Vec<RepoRow>,
    report: ksmith_core::report::StageReport,
}

impl Crawl {
    fn row(&self, name: &str) -> &RepoRow {
        self.rows
            .iter()
            .find(|r| r.repo == name)
            .unwrap_or_else(|| panic!("no row {name} in {:#?}", self.rows))
    }
}

fn crawl(work: &Path, sources: &[SourceSpec], cfg: &CrawlConfig) -> Crawl {
    let ctx = StageContext::for_tests(work);
    let report = run(sources, cfg, &ctx).unwrap();
    let rows: Vec<RepoRow> = read_table(&RepoRow::path_in(work)).unwrap();
    Crawl { rows, report }
}

fn reason_of<'a>(row: &'a RepoRow, path: &str) -> Option<&'a str> {
    row.skipped
        .iter()
        .find(|s| s.path == path)
        .map(|s| s.reason.as_str())
}

fn snapshot_file(work: &Path, row: &RepoRow, path: &str) -> Vec<u8> {
    std::fs::read(work.join(row.snapshot.as_ref().unwrap()).join(path)).unwrap()
}

/// Every file under `dir`, relative, sorted.
fn list_files(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            if e.file_type().unwrap().is_dir() {
                stack.push(e.path());
            } else {
                out.push(
                    e.path()
                        .strip_prefix(dir)
                        .unwrap()
                        .to_string_lossy()
                        .into_owned(),
                );
            }
        }
    }
    out.sort();
    out
}

const SUBMODULE_COMMIT: &[u8] = b"0123456789abcdef0123456789abcdef01234567";

fn hostile_entries(big: &[u8]) -> Vec<Entry<'_>> {
    vec![
        file("LICENSE", MIT.as_bytes()),
        file("pkg/__init__.py", b""),
        file(
            "pkg/model.py",
            b"import torch\nclass M(torch.nn.Module):\n    pass\n",
        ),
        file("README.md", b"# readme\n"),
        file("big.py", big),
        file("bin.py", b"x = 1\0\0\0"),
        file("latin.py", b"s = '\xe9t\xe9'\n"),
        file("vendor/dep.py", b"v = 1\n"),
        file("src/third_party/dep.py", b"v = 1\n"),
        file("api_pb2.py", b"g = 1\n"),
        ("link.py", b"/etc/passwd", FileMode::Link),
        ("sub", SUBMODULE_COMMIT, FileMode::Commit),
        ("run.py", b"print('hi')\n", FileMode::BlobExecutable),
    ]
}

#[test]
fn local_repository_is_read_from_objects_with_reasons_for_every_skip() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("proj");
    let repo = Repository::init(&src).unwrap();
    let big = vec![b'#'; 300];
    let head = commit(&repo, &hostile_entries(&big), "first");
    // An uncommitted edit in the work tree is not crawled: only the commit is.
    std::fs::create_dir_all(src.join("pkg")).unwrap();
    std::fs::write(src.join("pkg/model.py"), "EDITED = True\n").unwrap();

    let work = tmp.path().join("work");
    let cfg = CrawlConfig {
        max_file_bytes: 200,
        ..Default::default()
    };
    let c = crawl(&work, &[git_source(src.to_str().unwrap())], &cfg);
    let row = c.row("proj");
    assert_eq!(row.status, RepoStatus::Ok, "{row:#?}");
    assert_eq!(row.source_kind, SourceKind::LocalGit);
    assert_eq!(row.commit.as_deref(), Some(head.to_string().as_str()));
    assert_eq!(row.license.as_deref(), Some("MIT"));
    assert_eq!(row.license_source.as_deref(), Some("file:LICENSE"));
    assert_eq!(row.files, ["pkg/__init__.py", "pkg/model.py", "run.py"]);
    assert!(row.changed);
    assert!(row.fetched_at.ends_with('Z') && row.fetched_at.len() == 20);
    assert_eq!(reason_of(row, "big.py"), Some("too_large"));
    assert_eq!(reason_of(row, "bin.py"), Some("binary"));
    assert_eq!(reason_of(row, "latin.py"), Some("not_utf8"));
    assert_eq!(reason_of(row, "vendor/"), Some("vendored"));
    assert_eq!(reason_of(row, "src/third_party/"), Some("vendored"));
    assert_eq!(reason_of(row, "api_pb2.py"), Some("generated"));
    assert_eq!(reason_of(row, "link.py"), Some("symlink"));
    assert_eq!(reason_of(row, "sub"), Some("submodule"));
    assert_eq!(
        reason_of(row, "README.md"),
        None,
        "non-Python files are not listed"
    );
    assert_eq!(
        snapshot_file(&work, row, "pkg/model.py"),
        b"import torch\nclass M(torch.nn.Module):\n    pass\n"
    );
    let snap = work.join(row.snapshot.as_ref().unwrap());
    let on_disk: u64 = row
        .files
        .iter()
        .map(|f| std::fs::metadata(snap.join(f)).unwrap().len())
        .sum();
    assert_eq!(row.python_bytes, on_disk);
    assert_eq!(list_files(&snap), row.files);
    assert_eq!(
        row.snapshot.as_deref(),
        Some(
            format!(
                "snapshots/{}/{head}",
                snap.parent()
                    .unwrap()
                    .file_name()
                    .unwrap()
                    .to_string_lossy()
            )
            .as_str()
        )
    );
    assert_eq!(c.report.rows_written, 1);
    assert_eq!(c.report.counters["files_accepted"], 3);
    assert_eq!(c.report.counters["skipped_symlink"], 1);
    assert_eq!(c.report.counters["skipped_vendored"], 2);
    assert!(ksmith_core::report::StageReport::path_in(&work, "crawl").exists());
}

#[test]
fn file_url_is_mirrored_and_incremental() {
    let tmp = tempfile::tempdir().unwrap();
    let (bare_path, bare, first) = origin(tmp.path());
    let work = tmp.path().join("work");
    let sources = [git_source(&file_url(&bare_path))];
    let cfg = CrawlConfig::default();

    let c1 = crawl(&work, &sources, &cfg);
    let row = c1.row("origin");
    assert_eq!(row.status, RepoStatus::Ok, "{row:#?}");
    assert_eq!(row.source_kind, SourceKind::Git);
    assert_eq!(row.commit.as_deref(), Some(first.to_string().as_str()));
    assert!(row.changed);
    let mirrors: Vec<_> = std::fs::read_dir(work.join("mirrors")).unwrap().collect();
    assert_eq!(mirrors.len(), 1, "one bare mirror per repository");
    let mirror = Repository::open(mirrors[0].as_ref().unwrap().path()).unwrap();
    assert!(mirror.is_bare());
    let snap1 = work.join(row.snapshot.clone().unwrap());
    // A marker inside the snapshot survives a crawl that has nothing to do.
    std::fs::write(snap1.join("marker"), "untouched").unwrap();
    let fp1 = read_fingerprint(&RepoRow::path_in(&work)).unwrap();

    let c2 = crawl(&work, &sources, &cfg);
    let row2 = c2.row("origin");
    assert!(!row2.changed);
    assert_eq!(row2.commit, row.commit);
    assert_eq!(row2.files, row.files);
    assert_eq!(c2.report.counters.get("repos_unchanged"), Some(&1));
    assert!(
        snap1.join("marker").exists(),
        "unchanged repository was re-snapshotted"
    );
    assert_eq!(read_fingerprint(&RepoRow::path_in(&work)).unwrap(), fp1);

    let second = commit(
        &bare,
        &[
            file("LICENSE", MIT.as_bytes()),
            file("a.py", b"a = 2\n"),
            file("b.py", b"b = 1\n"),
        ],
        "second",
    );
    let c3 = crawl(&work, &sources, &cfg);
    let row3 = c3.row("origin");
    assert!(row3.changed);
    assert_eq!(row3.commit.as_deref(), Some(second.to_string().as_str()));
    assert_eq!(row3.files, ["a.py", "b.py"]);
    assert_eq!(snapshot_file(&work, row3, "a.py"), b"a = 2\n");
    assert!(
        !snap1.exists(),
        "the old snapshot is removed after a new one"
    );
    assert_ne!(read_fingerprint(&RepoRow::path_in(&work)).unwrap(), fp1);
    assert_eq!(c3.report.counters.get("repos_changed"), Some(&1));

    // --force re-snapshots even when nothing changed.
    let snap3 = work.join(row3.snapshot.clone().unwrap());
    std::fs::write(snap3.join("marker"), "x").unwrap();
    let mut ctx = StageContext::for_tests(&work);
    ctx.force = true;
    run(&sources, &cfg, &ctx).unwrap();
    assert!(!snap3.join("marker").exists());
    assert!(snap3.join("a.py").exists());
}

#[test]
fn damaged_mirrors_are_rebuilt() {
    let tmp = tempfile::tempdir().unwrap();
    let (bare_path, bare, _) = origin(tmp.path());
    let work = tmp.path().join("work");
    let sources = [git_source(&file_url(&bare_path))];
    let cfg = CrawlConfig::default();
    crawl(&work, &sources, &cfg);
    let mirror = std::fs::read_dir(work.join("mirrors"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    // Every ref of the mirror is garbage.
    for entry in list_files(&mirror.join("refs")) {
        std::fs::write(mirror.join("refs").join(entry), "garbage\n").unwrap();
    }
    let _ = std::fs::write(mirror.join("packed-refs"), "garbage\n");
    let second = commit(
        &bare,
        &[file("LICENSE", MIT.as_bytes()), file("a.py", b"a = 2\n")],
        "second",
    );
    let c = crawl(&work, &sources, &cfg);
    let row = c.row("origin");
    assert_eq!(row.status, RepoStatus::Ok, "{row:#?}");
    assert_eq!(row.commit.as_deref(), Some(second.to_string().as_str()));
    // A mirror folder that is not a repository at all is replaced too.
    std::fs::remove_dir_all(&mirror).unwrap();
    std::fs::create_dir_all(&mirror).unwrap();
    std::fs::write(mirror.join("junk"), "x").unwrap();
    let c = crawl(&work, &sources, &cfg);
    assert_eq!(c.row("origin").status, RepoStatus::Ok);
}

#[test]
fn oversized_fetch_is_aborted() {
    let tmp = tempfile::tempdir().unwrap();
    let bare_path = tmp.path().join("huge.git");
    let bare = Repository::init_bare(&bare_path).unwrap();
    let big: Vec<u8> = (0..200_000u32).flat_map(|i| i.to_le_bytes()).collect();
    commit(
        &bare,
        &[file("LICENSE", MIT.as_bytes()), file("blob.bin", &big)],
        "c",
    );
    let work = tmp.path().join("work");
    let cfg = CrawlConfig {
        max_fetch_bytes: 10_000,
        ..Default::default()
    };
    let c = crawl(&work, &[git_source(&file_url(&bare_path))], &cfg);
    let row = c.row("huge");
    assert_eq!(row.status, RepoStatus::Failed);
    let reason = row.reason.as_deref().unwrap();
    assert!(
        reason.contains("max_fetch_bytes = 10000 exceeded"),
        "{reason}"
    );
}

#[test]
fn revs_pin_branches_tags_and_commits() {
    let tmp = tempfile::tempdir().unwrap();
    let bare_path = tmp.path().join("revs.git");
    let bare = Repository::init_bare(&bare_path).unwrap();
    let first = commit(
        &bare,
        &[file("LICENSE", MIT.as_bytes()), file("v.py", b"V = 1\n")],
        "first",
    );
    let sig = Signature::now("T", "t@e").unwrap();
    let obj = bare.find_object(first, None).unwrap();
    bare.tag("v1", &obj, &sig, "annotated", false).unwrap();
    bare.branch("stable", &bare.find_commit(first).unwrap(), false)
        .unwrap();
    let second = commit(
        &bare,
        &[file("LICENSE", MIT.as_bytes()), file("v.py", b"V = 2\n")],
        "second",
    );
    let url = file_url(&bare_path);
    let with = |name: &str, rev: Option<&str>| rev_source(name, &url, rev);
    let sources = [
        with("head", None),
        with("tag", Some("v1")),
        with("branch", Some("stable")),
        with("sha", Some(&first.to_string())),
        with("missing", Some("no-such-branch")),
    ];
    let work = tmp.path().join("work");
    let c = crawl(&work, &sources, &CrawlConfig::default());
    let commit_of = |n: &str| c.row(n).commit.clone().unwrap();
    assert_eq!(commit_of("head"), second.to_string());
    assert_eq!(commit_of("tag"), first.to_string());
    assert_eq!(commit_of("branch"), first.to_string());
    assert_eq!(commit_of("sha"), first.to_string());
    assert_eq!(c.row("tag").rev.as_deref(), Some("v1"));
    let missing = c.row("missing");
    assert_eq!(missing.status, RepoStatus::Failed);
    let reason = missing.reason.as_deref().unwrap();
    assert!(reason.contains("no-such-branch"), "{reason}");
    assert_eq!(snapshot_file(&work, c.row("tag"), "v.py"), b"V = 1\n");
}

#[test]
fn licenses_decide_acceptance_and_overrides_win() {
    let tmp = tempfile::tempdir().unwrap();
    let make = |name: &str, license: Option<&str>| {
        let p = tmp.path().join(name);
        let repo = Repository::init_bare(&p).unwrap();
        let mut entries = vec![file("m.py", b"x = 1\n")];
        if let Some(l) = license {
            entries.push(file("COPYING", l.as_bytes()));
        }
        commit(&repo, &entries, "c");
        p.to_str().unwrap().to_string()
    };
    let gpl = make("gpl", Some(GPL3));
    let none = make("none", None);
    let odd = make("odd", Some("You may look but not touch."));
    let overridden = SourceSpec {
        name: Some("gpl-but-mit".into()),
        git: Some(gpl.clone()),
        license: Some("MIT".into()),
        ..Default::default()
    };
    let sources = [
        git_source(&gpl),
        git_source(&none),
        git_source(&odd),
        overridden,
    ];
    let work = tmp.path().join("work");
    let c = crawl(&work, &sources, &CrawlConfig::default());
    let g = c.row("gpl");
    assert_eq!(g.status, RepoStatus::Rejected);
    assert_eq!(g.reason.as_deref(), Some("license_not_allowed: GPL-3.0"));
    assert_eq!(g.license.as_deref(), Some("GPL-3.0"));
    assert_eq!(g.license_source.as_deref(), Some("file:COPYING"));
    assert!(g.files.is_empty() && g.snapshot.is_none());
    assert!(g.commit.is_some(), "a rejected repository is still pinned");
    assert_eq!(c.row("none").reason.as_deref(), Some("no_license"));
    assert_eq!(
        c.row("odd").reason.as_deref(),
        Some("unknown_license: COPYING")
    );
    // The typed code is stored next to the words, and the report counts by it.
    assert_eq!(g.reason_code, Some(RepoReason::LicenseNotAllowed));
    assert_eq!(c.row("none").reason_code, Some(RepoReason::NoLicense));
    assert_eq!(c.row("odd").reason_code, Some(RepoReason::UnknownLicense));
    for code in ["license_not_allowed", "no_license", "unknown_license"] {
        assert_eq!(
            c.report.dropped.get(code),
            Some(&1),
            "{:?}",
            c.report.dropped
        );
    }
    let o = c.row("gpl-but-mit");
    assert_eq!(o.status, RepoStatus::Ok);
    assert_eq!(o.license.as_deref(), Some("MIT"));
    assert_eq!(o.license_source.as_deref(), Some("config"));
    assert_eq!(c.report.dropped.get("license_not_allowed"), Some(&1));
    assert_eq!(c.report.dropped.get("no_license"), Some(&1));

    // The allow-list is configurable, and so is accepting unlicensed code.
    let cfg = CrawlConfig {
        allowed_licenses: vec!["GPL-3.0".into()],
        accept_unlicensed: true,
        ..Default::default()
    };
    let c = crawl(&work, &sources[..3], &cfg);
    assert_eq!(c.row("gpl").status, RepoStatus::Ok);
    assert_eq!(c.row("none").status, RepoStatus::Ok);
    assert_eq!(c.row("odd").status, RepoStatus::Ok);
}

#[test]
fn limits_reject_or_truncate() {
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join("many");
    let repo = Repository::init_bare(&p).unwrap();
    let names: Vec<String> = (0..5).map(|i| format!("m{i}.py")).collect();
    let mut entries = vec![file("LICENSE", MIT.as_bytes())];
    for n in &names {
        entries.push(file(n, b"x = 1\n"));
    }
    commit(&repo, &entries, "c");
    let work = tmp.path().join("work");
    let src = [git_source(p.to_str().unwrap())];
    let cfg = CrawlConfig {
        max_files: 3,
        ..Default::default()
    };
    let c = crawl(&work, &src, &cfg);
    let row = c.row("many");
    assert_eq!(row.status, RepoStatus::Rejected);
    assert!(row.reason.as_deref().unwrap().starts_with("too_many_files"));
    assert!(row.files.is_empty());

    let cfg = CrawlConfig {
        max_files: 3,
        on_limit: LimitPolicy::Truncate,
        ..Default::default()
    };
    let c = crawl(&work, &src, &cfg);
    let row = c.row("many");
    assert_eq!(row.status, RepoStatus::Ok);
    assert_eq!(row.files, ["m0.py", "m1.py", "m2.py"]);
    assert_eq!(reason_of(row, "m3.py"), Some("too_many_files"));
    assert_eq!(reason_of(row, "m4.py"), Some("too_many_files"));

    let cfg = CrawlConfig {
        max_tree_entries: 4,
        ..Default::default()
    };
    let c = crawl(&work, &src, &cfg);
    assert!(
        c.row("many")
            .reason
            .as_deref()
            .unwrap()
            .starts_with("tree_too_large")
    );
}

fn marker_script(marker: &Path) -> String {
    format!("#!/bin/sh\ntouch '{}'\n", marker.display())
}

#[cfg(unix)]
fn make_executable(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

#[cfg(unix)]
#[test]
fn no_hook_filter_or_fsmonitor_of_the_repository_ever_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("evil");
    let repo = Repository::init(&src).unwrap();
    let marker = tmp.path().join("MARKER");
    let raw = b"print('raw blob content')\n";
    commit(
        &repo,
        &[
            file("LICENSE", MIT.as_bytes()),
            file(".gitattributes", b"*.py filter=evil\n"),
            file("m.py", raw),
        ],
        "c",
    );
    let script = tmp.path().join("evil.sh");
    std::fs::write(&script, marker_script(&marker)).unwrap();
    make_executable(&script);
    for hook in [
        "post-checkout",
        "post-merge",
        "post-rewrite",
        "reference-transaction",
        "pre-auto-gc",
        "post-index-change",
    ] {
        let h = src.join(".git/hooks").join(hook);
        std::fs::create_dir_all(h.parent().unwrap()).unwrap();
        std::fs::write(&h, marker_script(&marker)).unwrap();
        make_executable(&h);
    }
    let mut config = repo.config().unwrap();
    let cmd = script.display().to_string();
    config.set_str("filter.evil.smudge", &cmd).unwrap();
    config.set_str("filter.evil.clean", &cmd).unwrap();
    config.set_str("filter.evil.process", &cmd).unwrap();
    config.set_bool("filter.evil.required", true).unwrap();
    config.set_str("core.fsmonitor", &cmd).unwrap();
    config
        .set_str("core.hooksPath", src.join(".git/hooks").to_str().unwrap())
        .unwrap();

    let work = tmp.path().join("work");
    let url_src = SourceSpec {
        name: Some("evil-url".into()),
        git: Some(file_url(&src)),
        ..Default::default()
    };
    let c = crawl(
        &work,
        &[git_source(src.to_str().unwrap()), url_src],
        &CrawlConfig::default(),
    );
    for name in ["evil", "evil-url"] {
        let row = c.row(name);
        assert_eq!(row.status, RepoStatus::Ok, "{row:#?}");
        assert_eq!(snapshot_file(&work, row, "m.py"), raw);
    }
    assert!(
        !marker.exists(),
        "a hook or filter of the crawled repository ran"
    );
}

#[test]
fn failures_stay_with_their_source() {
    let tmp = tempfile::tempdir().unwrap();
    // A good repository.
    let good = tmp.path().join("good");
    let repo = Repository::init_bare(&good).unwrap();
    commit(
        &repo,
        &[file("LICENSE", MIT.as_bytes()), file("ok.py", b"ok = 1\n")],
        "c",
    );
    // HEAD is garbage.
    let bad_head = tmp.path().join("badhead");
    let r = Repository::init_bare(&bad_head).unwrap();
    commit(
        &r,
        &[file("LICENSE", MIT.as_bytes()), file("x.py", b"x = 1\n")],
        "c",
    );
    std::fs::write(bad_head.join("HEAD"), b"\x00\xffgarbage\n").unwrap();
    // A blob object is garbage.
    let bad_obj = tmp.path().join("badobj");
    let r = Repository::init_bare(&bad_obj).unwrap();
    let blob = r.blob(b"y = 1\n").unwrap();
    commit(
        &r,
        &[file("LICENSE", MIT.as_bytes()), file("y.py", b"y = 1\n")],
        "c",
    );
    let hex = blob.to_string();
    let obj_path = bad_obj.join("objects").join(&hex[..2]).join(&hex[2..]);
    #[cfg(unix)]
    make_executable(&obj_path);
    std::fs::write(&obj_path, b"this is not a zlib stream").unwrap();

    let named = |name: &str, git: String| SourceSpec {
        name: Some(name.into()),
        git: Some(git),
        ..Default::default()
    };
    let sources = [
        named("good", good.to_str().unwrap().into()),
        named("https", "https://127.0.0.1:9/nothing.git".into()),
        named("nofile", "file:///nonexistent/ksmith/repo.git".into()),
        named("nopath", "/nonexistent/ksmith/repo".into()),
        named("badhead", bad_head.to_str().unwrap().into()),
        named("badobj", bad_obj.to_str().unwrap().into()),
        SourceSpec {
            name: Some("nofolder".into()),
            path: Some("/nonexistent/ksmith/folder".into()),
            ..Default::default()
        },
    ];
    let work = tmp.path().join("work");
    let mut ctx = StageContext::for_tests(&work);
    ctx.threads = 3;
    let report = run(&sources, &CrawlConfig::default(), &ctx).unwrap();
    let rows: Vec<RepoRow> = read_table(&RepoRow::path_in(&work)).unwrap();
    let c = Crawl { rows, report };
    assert_eq!(c.rows.len(), sources.len());
    assert_eq!(c.row("good").status, RepoStatus::Ok);
    assert_eq!(c.row("good").files, ["ok.py"]);
    for (name, needle) in [
        ("https", "fetch https://127.0.0.1:9/nothing.git"),
        ("nofile", "fetch file:///nonexistent"),
        ("nopath", "does not exist"),
        ("badhead", "resolve HEAD: corrupted"),
        ("badobj", "read y.py"),
        ("nofolder", "/nonexistent/ksmith/folder"),
    ] {
        let row = c.row(name);
        assert_eq!(row.status, RepoStatus::Failed, "{row:#?}");
        let reason = row.reason.as_deref().unwrap();
        assert!(reason.contains(needle), "{name}: {reason}");
        assert!(row.files.is_empty());
        assert!(!row.changed);
    }
    assert_eq!(c.report.dropped.get("failed"), Some(&6));
}

#[cfg(unix)]
#[test]
fn folders_never_follow_symlinks_and_hash_their_content() {
    let tmp = tempfile::tempdir().unwrap();
    let outside = tmp.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("secret.py"), "SECRET = 'do not read'\n").unwrap();
    let root = tmp.path().join("folder");
    std::fs::create_dir_all(root.join("pkg")).unwrap();
    std::fs::write(root.join("LICENSE"), MIT).unwrap();
    std::fs::write(root.join("pkg/a.py"), "a = 1\n").unwrap();
    std::fs::write(root.join("pkg/bin.py"), b"\0\x01").unwrap();
    std::fs::write(root.join("pkg/latin.py"), b"\xff\xfe").unwrap();
    std::fs::write(root.join("big.py"), vec![b'#'; 100]).unwrap();
    std::fs::create_dir_all(root.join(".venv/lib")).unwrap();
    std::fs::write(root.join(".venv/lib/site.py"), "v = 1\n").unwrap();
    std::os::unix::fs::symlink(outside.join("secret.py"), root.join("leak.py")).unwrap();
    std::os::unix::fs::symlink(&outside, root.join("linked")).unwrap();
    std::os::unix::fs::symlink("pkg/a.py", root.join("inside.py")).unwrap();
    // A symlinked LICENSE is not read either.
    std::os::unix::fs::symlink(outside.join("secret.py"), root.join("LICENSE-EXTRA")).unwrap();
    let fifo_made = std::process::Command::new("mkfifo")
        .arg(root.join("pipe.py"))
        .status()
        .is_ok_and(|s| s.success());

    let work = tmp.path().join("work");
    let cfg = CrawlConfig {
        max_file_bytes: 50,
        ..Default::default()
    };
    let sources = [folder_source(&root)];
    let c = crawl(&work, &sources, &cfg);
    let row = c.row("folder");
    assert_eq!(row.status, RepoStatus::Ok, "{row:#?}");
    assert_eq!(row.source_kind, SourceKind::Folder);
    assert_eq!(row.files, ["pkg/a.py"]);
    assert_eq!(row.license.as_deref(), Some("MIT"));
    for (path, why) in [
        ("leak.py", "symlink"),
        ("linked", "symlink"),
        ("inside.py", "symlink"),
        ("pkg/bin.py", "binary"),
        ("pkg/latin.py", "not_utf8"),
        ("big.py", "too_large"),
        (".venv/", "vendored"),
    ] {
        assert_eq!(
            reason_of(row, path),
            Some(why),
            "{path}: {:#?}",
            row.skipped
        );
    }
    if fifo_made {
        assert_eq!(reason_of(row, "pipe.py"), Some("not_regular_file"));
    }
    let snap = work.join(row.snapshot.as_ref().unwrap());
    assert_eq!(list_files(&snap), ["pkg/a.py"]);
    let everything: Vec<u8> = list_files(&work)
        .iter()
        .filter(|p| !p.ends_with(".parquet"))
        .flat_map(|p| std::fs::read(work.join(p)).unwrap_or_default())
        .collect();
    assert!(
        !String::from_utf8_lossy(&everything).contains("do not read"),
        "content behind a symlink was copied"
    );
    let commit1 = row.commit.clone().unwrap();
    assert_eq!(commit1.len(), 32);

    let again = crawl(&work, &sources, &cfg);
    assert!(!again.row("folder").changed);
    assert_eq!(
        again.row("folder").commit.as_deref(),
        Some(commit1.as_str())
    );
    assert_eq!(again.report.counters.get("repos_unchanged"), Some(&1));

    std::fs::write(root.join("pkg/a.py"), "a = 2\n").unwrap();
    let changed = crawl(&work, &sources, &cfg);
    let row = changed.row("folder");
    assert!(row.changed);
    assert_ne!(row.commit.as_deref(), Some(commit1.as_str()));
    assert_eq!(snapshot_file(&work, row, "pkg/a.py"), b"a = 2\n");
}

#[test]
fn hostile_tree_entries_cannot_escape_the_snapshot() {
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join("hostile");
    let repo = Repository::init_bare(&p).unwrap();
    let lic = repo.blob(MIT.as_bytes()).unwrap();
    let evil = repo.blob(b"ESCAPED = 1\n").unwrap();
    let ok = repo.blob(b"ok = 1\n").unwrap();
    // git itself refuses these names, so the tree is written byte by byte.
    let mut entries: Vec<(&[u8], Oid)> = vec![
        (b"..", evil),
        (b".git", evil),
        (b"LICENSE", lic),
        (b"a\\b.py", evil),
        (b"ok.py", ok),
    ];
    entries.sort();
    let mut raw = Vec::new();
    for (name, oid) in &entries {
        raw.extend_from_slice(b"100644 ");
        raw.extend_from_slice(name);
        raw.push(0);
        raw.extend_from_slice(oid.as_bytes());
    }
    let tree = repo.odb().unwrap().write(ObjectType::Tree, &raw).unwrap();
    commit_tree(&repo, tree, "hostile");

    let work = tmp.path().join("work");
    let c = crawl(
        &work,
        &[git_source(p.to_str().unwrap())],
        &CrawlConfig::default(),
    );
    let row = c.row("hostile");
    assert_eq!(row.status, RepoStatus::Ok, "{row:#?}");
    assert_eq!(row.files, ["ok.py"]);
    for name in ["..", ".git", "a\\b.py"] {
        assert_eq!(
            reason_of(row, name),
            Some("unsafe_path"),
            "{:#?}",
            row.skipped
        );
    }
    let all: Vec<String> = list_files(tmp.path());
    assert!(
        all.iter()
            .all(|f| !f.ends_with("..") && !f.contains("a\\b")),
        "{all:#?}"
    );
    assert!(!work.join("snapshots/ESCAPED").exists());
}

#[test]
fn manifest_sources_and_bad_lines() {
    let tmp = tempfile::tempdir().unwrap();
    let repos = tmp.path().join("repos");
    let a = repos.join("a.git");
    let r = Repository::init_bare(&a).unwrap();
    commit(&r, &[file("m.py", b"x = 1\n")], "c");
    let b = repos.join("b.git");
    let r = Repository::init_bare(&b).unwrap();
    commit(
        &r,
        &[file("LICENSE", GPL3.as_bytes()), file("n.py", b"y = 1\n")],
        "c",
    );
    let manifest = tmp.path().join("list.jsonl");
    std::fs::write(
        &manifest,
        format!(
            "{{\"repo\": \"org/a\", \"url\": \"repos/a.git\", \"license\": \"Apache-2.0\", \"stars\": 7}}\n\n{{\"repo\": \"org/b\", \"url\": \"{}\", \"rev\": \"HEAD\"}}\n",
            file_url(&b)
        ),
    )
    .unwrap();
    let work = tmp.path().join("work");
    let spec = SourceSpec {
        manifest: Some(manifest.clone()),
        ..Default::default()
    };
    let c = crawl(&work, std::slice::from_ref(&spec), &CrawlConfig::default());
    let ra = c.row("org/a");
    assert_eq!(ra.status, RepoStatus::Ok, "{ra:#?}");
    assert_eq!(ra.stars, Some(7));
    assert_eq!(ra.license.as_deref(), Some("Apache-2.0"));
    assert_eq!(ra.license_source.as_deref(), Some("manifest"));
    assert_eq!(ra.source_kind, SourceKind::LocalGit);
    let rb = c.row("org/b");
    assert_eq!(rb.source_kind, SourceKind::Git);
    assert_eq!(rb.rev.as_deref(), Some("HEAD"));
    assert_eq!(rb.reason.as_deref(), Some("license_not_allowed: GPL-3.0"));

    std::fs::write(
        &manifest,
        "{\"repo\": \"org/a\", \"url\": \"repos/a.git\"}\n{\"repo\": \"x\"\n",
    )
    .unwrap();
    let err = run(
        &[spec],
        &CrawlConfig::default(),
        &StageContext::for_tests(&work),
    )
    .unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("list.jsonl, line 2"), "{msg}");
}

#[test]
fn duplicate_names_and_bad_config_stop_before_any_work() {
    let tmp = tempfile::tempdir().unwrap();
    let work = tmp.path().join("work");
    let ctx = StageContext::for_tests(&work);
    // Two sources at different places get different names (`x/proj`, `y/proj`); the same
    // place twice has no name to tell them apart.
    let err = run(
        &[git_source("/x/proj"), git_source("/x/proj")],
        &CrawlConfig::default(),
        &ctx,
    )
    .unwrap_err();
    assert!(err.to_string().contains("`proj` is given twice"), "{err}");
    let cfg = CrawlConfig {
        max_file_bytes: 0,
        ..Default::default()
    };
    assert!(
        run(&[], &cfg, &ctx)
            .unwrap_err()
            .to_string()
            .contains("max_file_bytes")
    );
    assert!(
        !work.exists(),
        "nothing is written before the configuration is checked"
    );
}

#[test]
fn sample_corpus_crawls_when_present() {
    let corpus = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../data/corpus");
    let Ok(entries) = std::fs::read_dir(&corpus) else {
        eprintln!("data/corpus is not there yet; skipping");
        return;
    };
    let sources: Vec<SourceSpec> = entries
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| folder_source(&e.path()))
        .collect();
    let tmp = tempfile::tempdir().unwrap();
    let c = crawl(tmp.path(), &sources, &CrawlConfig::default());
    assert_eq!(c.rows.len(), sources.len());
    for row in &c.rows {
        assert_ne!(row.status, RepoStatus::Failed, "{row:#?}");
        // Every sample repository carries a license the classifier knows.
        assert!(row.license.is_some(), "{row:#?}");
        if row.status == RepoStatus::Ok {
            assert!(!row.files.is_empty());
            for f in &row.files {
                assert!(
                    tmp.path()
                        .join(row.snapshot.as_ref().unwrap())
                        .join(f)
                        .is_file()
                );
            }
        }
    }
}

/// A bare repository `origin.git` in `dir` with one commit (a license and `a.py`).
fn origin(dir: &Path) -> (PathBuf, Repository, Oid) {
    let path = dir.join("origin.git");
    let bare = Repository::init_bare(&path).unwrap();
    let first = commit(
        &bare,
        &[file("LICENSE", MIT.as_bytes()), file("a.py", b"a = 1\n")],
        "first",
    );
    (path, bare, first)
}

/// A source `name` for `url` at `rev`.
fn rev_source(name: &str, url: &str, rev: Option<&str>) -> SourceSpec {
    SourceSpec {
        name: Some(name.to_string()),
        git: Some(url.to_string()),
        rev: rev.map(str::to_string),
        ..Default::default()
    }
}

/// The bare mirror of the repository named `name` (its folder starts with the name).
fn mirror_named(work: &Path, name: &str) -> Repository {
    let dir = std::fs::read_dir(work.join("mirrors"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            p.file_name()
                .is_some_and(|f| f.to_string_lossy().starts_with(&format!("{name}-")))
        })
        .unwrap_or_else(|| panic!("no mirror of {name}"));
    Repository::open_bare(dir).unwrap()
}

/// On branch `branch` of `bare`, a child of `parent` whose tree adds a blob that is then
/// deleted from the object database: the remote has an unreachable object there.
fn broken_branch(bare: &Repository, bare_path: &Path, parent: Oid, branch: &str) -> Oid {
    let lost = bare.blob(b"lost = True\n").unwrap();
    let parent = bare.find_commit(parent).unwrap();
    let mut tb = bare.treebuilder(Some(&parent.tree().unwrap())).unwrap();
    tb.insert("lost.py", lost, i32::from(FileMode::Blob))
        .unwrap();
    let tree = tb.write().unwrap();
    let broken = commit_on(bare, branch, tree, parent.id());
    std::fs::remove_file(loose_object(bare_path, lost)).unwrap();
    broken
}

/// A commit of `tree` with parent `parent` on branch `branch` (HEAD stays where it is).
fn commit_on(bare: &Repository, branch: &str, tree: Oid, parent: Oid) -> Oid {
    let sig = Signature::now("T", "t@e").unwrap();
    let tree = bare.find_tree(tree).unwrap();
    let parent = bare.find_commit(parent).unwrap();
    let refname = format!("refs/heads/{branch}");
    bare.commit(Some(&refname), &sig, &sig, branch, &tree, &[&parent])
        .unwrap()
}

/// The loose object file of `oid` in the bare repository at `path`.
fn loose_object(path: &Path, oid: Oid) -> PathBuf {
    let hex = oid.to_string();
    path.join("objects").join(&hex[..2]).join(&hex[2..])
}

#[test]
fn only_the_configured_rev_is_fetched_so_a_broken_branch_does_not_matter() {
    let tmp = tempfile::tempdir().unwrap();
    let (bare_path, bare, main) = origin(tmp.path());
    let broken = broken_branch(&bare, &bare_path, main, "broken");
    // Branch `side`: a good commit that the default branch does not contain.
    let main_tree = bare.find_commit(main).unwrap().tree_id();
    let side = commit_on(&bare, "side", main_tree, main);
    bare.tag_lightweight("v1", &bare.find_object(side, None).unwrap(), false)
        .unwrap();

    let url = file_url(&bare_path);
    let with = |name: &str, rev: Option<&str>| rev_source(name, &url, rev);
    let work = tmp.path().join("work");
    let c = crawl(
        &work,
        &[
            with("head", None),
            with("side", Some(&side.to_string())),
            with("broken", Some("broken")),
        ],
        &CrawlConfig::default(),
    );
    let head = c.row("head");
    assert_eq!(head.status, RepoStatus::Ok, "{head:#?}");
    assert_eq!(head.commit.as_deref(), Some(main.to_string().as_str()));
    // A commit off the default branch is fetched by its id.
    assert_eq!(
        c.row("side").commit.as_deref(),
        Some(side.to_string().as_str())
    );
    // The broken branch itself does fail: the object really is missing.
    let failed = c.row("broken");
    assert_eq!(failed.status, RepoStatus::Failed, "{failed:#?}");
    // The default branch's mirror holds only the pinned ref and no object of other branches.
    let mirror = mirror_named(&work, "head");
    let refs: Vec<String> = mirror
        .references()
        .unwrap()
        .names()
        .map(|n| n.unwrap().to_string())
        .collect();
    assert_eq!(refs, ["refs/ksmith/remote-head"]);
    assert!(mirror.find_commit(broken).is_err());
    assert!(mirror.find_commit(side).is_err());
    assert!(mirror.find_reference("refs/tags/v1").is_err());
}

/// `git daemon` serving `base` on a free loopback port (the smart git protocol, as a real
/// server speaks it: wants, shallow depth), stopped on drop. It allows fetching any reachable
/// commit by id, as GitHub does.
///
/// The `git-daemon` program is started itself, in a process group of its own: through the `git`
/// front end, killing the front end would leave the daemon listening after the tests; on drop
/// the whole group goes (the daemon and the processes serving its connections).
struct Daemon {
    child: std::process::Child,
    port: u16,
}

impl Daemon {
    fn start(base: &Path) -> Daemon {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let exec_path = std::process::Command::new("git")
            .arg("--exec-path")
            .output()
            .expect("the git command-line tool is needed for this test");
        let exec_path = String::from_utf8(exec_path.stdout).unwrap();
        let child = std::process::Command::new(Path::new(exec_path.trim()).join("git-daemon"))
            .env("GIT_CONFIG_COUNT", "1")
            .env("GIT_CONFIG_KEY_0", "uploadpack.allowReachableSHA1InWant")
            .env("GIT_CONFIG_VALUE_0", "true")
            .arg("--reuseaddr")
            .arg("--export-all")
            .arg("--listen=127.0.0.1")
            .arg(format!("--port={port}"))
            .arg(format!("--base-path={}", base.display()))
            .arg(base)
            .process_group(0)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("git-daemon (of the git command-line tool) is needed for this test");
        let daemon = Daemon { child, port };
        for _ in 0..100 {
            if daemon.listening() {
                return daemon;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        drop(daemon);
        panic!("git daemon did not start on port {port}");
    }

    fn url(&self, repo: &str) -> String {
        format!("git://127.0.0.1:{}/{repo}", self.port)
    }

    fn listening(&self) -> bool {
        std::net::TcpStream::connect(("127.0.0.1", self.port)).is_ok()
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        // The group's id is the daemon's pid.
        let _ = std::process::Command::new("kill")
            .args(["-KILL", "--", &format!("-{}", self.child.id())])
            .status();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn over_the_git_protocol_only_the_rev_is_fetched_shallow() {
    let tmp = tempfile::tempdir().unwrap();
    let served = tmp.path().join("served");
    let (bare_path, bare, first) = origin(&served);
    let second = commit(
        &bare,
        &[file("LICENSE", MIT.as_bytes()), file("a.py", b"a = 2\n")],
        "second",
    );
    let head_tree = bare.find_commit(second).unwrap().tree_id();
    let side = commit_on(&bare, "side", head_tree, first);
    bare.tag_lightweight("v1", &bare.find_object(first, None).unwrap(), false)
        .unwrap();
    broken_branch(&bare, &bare_path, second, "broken");

    let daemon = Daemon::start(&served);
    let url = daemon.url("origin.git");
    let with = |name: &str, rev: Option<&str>| rev_source(name, &url, rev);
    let work = tmp.path().join("work");
    let c = crawl(
        &work,
        &[
            with("head", None),
            with("tag", Some("v1")),
            with("branch", Some("side")),
            with("sha", Some(&side.to_string())),
            with("missing", Some("no-such-branch")),
        ],
        &CrawlConfig::default(),
    );
    let commit_of = |n: &str| c.row(n).commit.clone().unwrap_or_default();
    assert_eq!(c.row("head").status, RepoStatus::Ok, "{:#?}", c.row("head"));
    assert_eq!(commit_of("head"), second.to_string());
    assert_eq!(commit_of("tag"), first.to_string());
    assert_eq!(commit_of("branch"), side.to_string());
    assert_eq!(commit_of("sha"), side.to_string());
    let reason = c.row("missing").reason.clone().unwrap_or_default();
    assert!(reason.contains("no-such-branch"), "{reason}");
    // Shallow: the mirror of the default branch has its commit but not the parent.
    let mirror = mirror_named(&work, "head");
    assert!(mirror.find_commit(second).is_ok());
    assert!(mirror.find_commit(first).is_err(), "not shallow");
    assert!(mirror.find_reference("refs/heads/side").is_err());
    // Incremental: a second crawl fetches nothing new and reuses the snapshot.
    let again = crawl(&work, &[with("head", None)], &CrawlConfig::default());
    assert!(!again.row("head").changed);
    // Nothing of the server outlives the test.
    let port = daemon.port;
    drop(daemon);
    assert!(
        std::net::TcpStream::connect(("127.0.0.1", port)).is_err(),
        "a git daemon still listens on port {port}"
    );
}

#[test]
fn a_file_url_copy_resumes_after_an_interruption_and_skips_blobs_the_source_lacks() {
    let tmp = tempfile::tempdir().unwrap();
    let bare_path = tmp.path().join("origin.git");
    let bare = Repository::init_bare(&bare_path).unwrap();
    let big: Vec<u8> = (0..50_000u32).flat_map(|i| i.to_le_bytes()).collect();
    let head = commit(
        &bare,
        &[
            file("LICENSE", MIT.as_bytes()),
            file("pkg/a.py", b"a = 1\n"),
            file("pkg/b.py", b"b = 2\n"),
            file("weights.bin", &big),
            file("image.png", b"not really a png"),
        ],
        "c",
    );
    // The source itself lacks a large non-Python file, as a partial clone does.
    let tree = bare.find_commit(head).unwrap().tree().unwrap();
    let image = tree.get_name("image.png").unwrap().id();
    std::fs::remove_file(loose_object(&bare_path, image)).unwrap();
    let work = tmp.path().join("work");
    let sources = [rev_source("origin", &file_url(&bare_path), None)];
    // Interrupted: the copy stops part way (the big blob is over the limit).
    let small = CrawlConfig {
        max_fetch_bytes: 10_000,
        ..Default::default()
    };
    assert_eq!(
        crawl(&work, &sources, &small).row("origin").status,
        RepoStatus::Failed
    );
    // The next crawl completes the copy instead of trusting what the first one left.
    let c = crawl(&work, &sources, &CrawlConfig::default());
    let row = c.row("origin");
    assert_eq!(row.status, RepoStatus::Ok, "{row:#?}");
    assert_eq!(row.files, ["pkg/a.py", "pkg/b.py"]);
    assert_eq!(snapshot_file(&work, row, "pkg/b.py"), b"b = 2\n");
    assert!(mirror_named(&work, "origin").find_blob(image).is_err());
}
