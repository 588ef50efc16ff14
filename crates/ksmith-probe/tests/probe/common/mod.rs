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
