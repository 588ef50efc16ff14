//! `ksmith discover` as a user runs it, against the loopback fake of GitHub's API: the manifest
//! and report it writes, the token it never writes, and a run killed with SIGKILL that loses
//! nothing and is resumed.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use ksmith_core::manifest::ManifestLine;
use ksmith_core::report::StageReport;
use ksmith_discover::SystemClock;
use ksmith_discover::loopback::{FakeGitHub, FakeRepo, Fault, Limits};

const TOKEN_ENV: &str = "KSMITH_TEST_DISCOVER_TOKEN";
const SECRET: &str = "ghp_CLISECRET42";

fn world(n: u64) -> Vec<FakeRepo> {
    (1..=n)
        .map(|id| {
            let mut r = FakeRepo::new(id, &format!("o/r{id}"));
            r.created_at += id * 3600;
            r.stars = 10 + id % 50;
            r
        })
        .collect()
}

fn config(dir: &Path, url: &str, extra: &str) -> PathBuf {
    let path = dir.join("discover.toml");
    std::fs::write(
        &path,
        format!(
            "[discover]\napi_url = \"{url}\"\ntoken_env = \"{TOKEN_ENV}\"\nsince = \"2015-01-01\"\n{extra}"
        ),
    )
    .expect("write config");
    path
}

fn discover(config: &Path, workdir: &Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ksmith"));
    cmd.arg("discover")
        .arg("--config")
        .arg(config)
        .arg("--workdir")
        .arg(workdir)
        .env(TOKEN_ENV, SECRET);
    cmd
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn manifest(workdir: &Path) -> Vec<ManifestLine> {
    std::fs::read_to_string(workdir.join("manifest.jsonl"))
        .expect("manifest")
        .lines()
        .map(|l| serde_json::from_str(l).expect("every line is complete and valid"))
        .collect()
}

fn every_file(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read dir").flatten() {
        let path = entry.path();
        if path.is_dir() {
            every_file(&path, out);
        } else {
            out.push(path);
        }
    }
}

#[test]
fn discover_writes_the_manifest_and_report_and_never_the_token() {
    let fake = FakeGitHub::start(
        world(30),
        Vec::new(),
        Arc::new(SystemClock),
        Limits::github(),
        |_, _| None,
    )
    .expect("fake");
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = config(dir.path(), fake.url(), "");
    let workdir = dir.path().join("work");
    let out = discover(&cfg, &workdir).output().expect("runs");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(!text(&out).contains(SECRET));

    let lines = manifest(&workdir);
    assert_eq!(lines.len(), 30);
    // Pinned by default, to the head the fake reports.
    assert!(
        lines
            .iter()
            .all(|l| l.rev == Some(format!("{:040x}", l.github_id.unwrap_or(0))))
    );
    let report: StageReport = serde_json::from_str(
        &std::fs::read_to_string(StageReport::path_in(&workdir, "discover")).expect("report"),
    )
    .expect("report is JSON");
    assert_eq!(report.rows_written, 30);
    assert_eq!(report.counters.get("pinned"), Some(&30));

    assert!(
        fake.served()
            .iter()
            .all(|s| s.authorization.as_deref() == Some(&format!("Bearer {SECRET}")))
    );
    let mut files = Vec::new();
    every_file(&workdir, &mut files);
    for f in files {
        let bytes = std::fs::read(&f).expect("read");
        assert!(
            !String::from_utf8_lossy(&bytes).contains(SECRET),
            "{} holds the token",
            f.display()
        );
    }
}

#[test]
fn a_bad_discover_table_or_a_shard_exits_2_saying_why() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = config(
        dir.path(),
        "http://127.0.0.1:9",
        "queries = [\"pytorch stars:>1\"]\n",
    );
    let out = discover(&cfg, &dir.path().join("work"))
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("min_stars"), "{}", text(&out));

    let cfg = config(dir.path(), "http://127.0.0.1:9", "");
    let out = discover(&cfg, &dir.path().join("work"))
        .args(["--shard", "0/2"])
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("--shard"), "{}", text(&out));
}

#[test]
fn a_killed_run_loses_nothing_and_the_rerun_resumes() {
    let slow = Arc::new(AtomicBool::new(true));
    let switch = slow.clone();
    let fake = FakeGitHub::start(
        world(5000),
        Vec::new(),
        Arc::new(SystemClock),
        Limits::none(),
        move |_, _| {
            switch
                .load(Ordering::SeqCst)
                .then_some(Fault::Slow(Duration::from_millis(50)))
        },
    )
    .expect("fake");
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = config(
        dir.path(),
        fake.url(),
        "pin_commits = false\ncheckpoint_secs = 1\n",
    );
    let workdir = dir.path().join("work");
    let mut child = discover(&cfg, &workdir).spawn().expect("starts");
    let deadline = Instant::now() + Duration::from_secs(60);
    // Empty slices (years before the first repository) are checkpointed too: wait for a
    // checkpoint that holds repositories (the progress file follows each manifest write).
    let has_lines = || {
        std::fs::read_to_string(workdir.join("manifest.jsonl")).is_ok_and(|t| !t.is_empty())
            && workdir.join("manifest.progress.json").exists()
    };
    while !has_lines() {
        assert!(Instant::now() < deadline, "no checkpoint within a minute");
        assert!(
            child.try_wait().expect("wait").is_none(),
            "finished before a checkpoint"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    child.kill().expect("SIGKILL");
    let status = child.wait().expect("reaped");
    assert!(!status.success());
    let kept = manifest(&workdir);
    assert!(!kept.is_empty() && kept.len() < 5000, "{}", kept.len());
    assert!(workdir.join("manifest.progress.json").exists());

    slow.store(false, Ordering::SeqCst);
    let out = discover(&cfg, &workdir).output().expect("runs");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let mut ids: Vec<u64> = manifest(&workdir)
        .iter()
        .map(|l| l.github_id.expect("id"))
        .collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids, (1..=5000).collect::<Vec<u64>>());
    let report: StageReport = serde_json::from_str(
        &std::fs::read_to_string(StageReport::path_in(&workdir, "discover")).expect("report"),
    )
    .expect("report is JSON");
    assert!(
        report
            .counters
            .get("slices_resumed")
            .is_some_and(|n| *n >= 1),
        "{report:?}"
    );
    assert_eq!(report.rows_read, kept.len() as u64);
}
