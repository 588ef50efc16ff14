//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

use ksmith_core::tables::{ModuleRow, ModuleStatus};

/// Probe runs of this test binary. Every run's temporary folder is named after the test
/// process, so the leftover-process check ([`leftover_processes`]) runs alone
/// ([`workers_alone`]) while every other test that starts workers shares the lock
/// ([`workers_shared`]).
static WORKERS: RwLock<()> = RwLock::new(());

/// Held by a test that starts probe workers.
pub(crate) fn workers_shared() -> RwLockReadGuard<'static, ()> {
    WORKERS.read().unwrap_or_else(|e| e.into_inner())
}

/// Held by a test that checks for leftover processes: no other probe run is under way.
pub(crate) fn workers_alone() -> RwLockWriteGuard<'static, ()> {
    WORKERS.write().unwrap_or_else(|e| e.into_inner())
}

/// A test program from `tests/programs/`.
pub(crate) fn program(name: &str) -> String {
    let path = format!("{}/tests/programs/{name}.py", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// A module row holding `program`.
pub(crate) fn module(id: &str, program: String) -> ModuleRow {
    ModuleRow {
        id: id.to_string(),
        repo: "tests/repo".to_string(),
        commit: "0".repeat(40),
        path: format!("{id}.py"),
        class_name: "Model".to_string(),
        line: 1,
        status: ModuleStatus::Ok,
        reason: None,
        reason_code: None,
        lines: program.lines().count() as u32,
        program: Some(program),
        deps: vec![],
        imports: vec![],
        license: Some("MIT".to_string()),
        stars: Some(1),
    }
}

/// Processes (other than zombies) whose working directory is in a runtime dir of this test
/// process: what a probe run left behind.
pub(crate) fn leftover_processes() -> Vec<String> {
    let marker = format!("ksmith-probe-{}-", std::process::id());
    let mut out = Vec::new();
    if let Ok(entries) = std::fs::read_dir("/proc") {
        for e in entries.flatten() {
            let cwd = e.path().join("cwd");
            if let Ok(target) = std::fs::read_link(&cwd)
                && target.to_string_lossy().contains(&marker)
            {
                out.push(format!(
                    "{} {}",
                    e.file_name().to_string_lossy(),
                    target.display()
                ));
            }
        }
    }
    out
}

/// Whether this process runs as root (effective uid 0).
pub(crate) fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(2).map(|u| u == "0"))
        })
        .unwrap_or(false)
}

/// Runs the test `name` of this binary again as an ordinary user (`tests/as_ordinary_user.sh`
/// creates the account and opens the way to what that run reads: the Python environment, this
/// test binary and the test programs, even in a checkout under a folder closed to other users)
/// and panics with its output when it fails. Where this process is not root it already is an
/// ordinary user, and the test ran as one: nothing to do.
pub(crate) fn rerun_as_ordinary_user(name: &str) {
    if !is_root() {
        eprintln!("note: not root; {name} ran as this (ordinary) user already");
        return;
    }
    let python = ksmith_core::python_env::resolve_python(None).expect("the Python environment");
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/as_ordinary_user.sh"
    );
    let exe = std::env::current_exe().expect("this test binary");
    let programs = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/programs");
    let out = std::process::Command::new("sh")
        .arg(script)
        .arg(&python)
        .arg(&exe)
        .arg(programs)
        .arg("--")
        .arg(&exe)
        .args([
            name,
            "--exact",
            "--include-ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .output()
        .expect("run tests/as_ordinary_user.sh");
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    let stdout = text(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("1 passed"),
        "{name} as an ordinary user: {}\nstdout:\n{stdout}\nstderr:\n{}",
        out.status,
        text(&out.stderr)
    );
    eprintln!("{name} passed as an ordinary user");
}
