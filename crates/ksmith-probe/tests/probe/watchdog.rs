//! The Rust-side watchdog, with fake workers (shell scripts) that hang, die or write garbage.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use crate::common::module;
use ksmith_core::progress::Tracker;
use ksmith_core::tables::ProbeStatus;
use ksmith_probe::{Error, ProbeConfig, probe_programs};

const HELLO: &str = r#"{"v": 1, "type": "hello", "pid": 1, "torch": "fake", "sandbox": {}}"#;

fn fake_worker(dir: &Path, body: &str) -> String {
    let path = dir.join("fake-python");
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).expect("write fake worker");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))
        .expect("chmod fake worker");
    path.display().to_string()
}

fn cfg(python: String) -> ProbeConfig {
    ProbeConfig {
        python,
        timeout_s: 0.5,
        watchdog_grace_s: 0.5,
        startup_timeout_s: 5.0,
        ..Default::default()
    }
}

fn two_modules() -> Vec<ksmith_core::tables::ModuleRow> {
    vec![module("a", "x = 1\n".into()), module("b", "x = 2\n".into())]
}

#[test]
fn a_hanging_worker_is_killed_and_replaced() {
    let _workers = crate::common::workers_shared();
    let dir = tempfile::tempdir().unwrap();
    let python = fake_worker(dir.path(), &format!("echo '{HELLO}'\nexec sleep 1000"));
    let modules = two_modules();
    let refs: Vec<_> = modules.iter().collect();
    let out = probe_programs(&refs, &cfg(python), 1, None, &Tracker::hidden()).unwrap();
    assert_eq!(out.rows.len(), 2);
    for row in &out.rows {
        assert_eq!(row.status, ProbeStatus::Timeout, "{row:?}");
        assert!(
            row.error_message
                .as_deref()
                .unwrap()
                .contains("killed and replaced")
        );
    }
    assert_eq!(out.workers_started, 2);
}

#[test]
fn a_dying_worker_gives_crashed_and_is_replaced() {
    let _workers = crate::common::workers_shared();
    let dir = tempfile::tempdir().unwrap();
    let python = fake_worker(
        dir.path(),
        &format!("echo '{HELLO}'\nread line\necho 'dying' >&2\nexit 1"),
    );
    let modules = two_modules();
    let refs: Vec<_> = modules.iter().collect();
    let out = probe_programs(&refs, &cfg(python), 1, None, &Tracker::hidden()).unwrap();
    for row in &out.rows {
        assert_eq!(row.status, ProbeStatus::Crashed, "{row:?}");
        assert_eq!(row.error_class.as_deref(), Some("WorkerDied"));
        assert!(
            row.error_message.as_deref().unwrap().contains("dying"),
            "{row:?}"
        );
    }
    assert_eq!(out.workers_started, 2);
}

#[test]
fn garbage_or_a_forged_id_on_the_protocol_is_crashed() {
    let _workers = crate::common::workers_shared();
    let dir = tempfile::tempdir().unwrap();
    let python = fake_worker(
        dir.path(),
        &format!("echo '{HELLO}'\nread line\necho 'not json'\nexec sleep 1000"),
    );
    let modules = two_modules();
    let refs: Vec<_> = modules.iter().collect();
    let out = probe_programs(&refs, &cfg(python), 1, None, &Tracker::hidden()).unwrap();
    assert_eq!(out.rows[0].status, ProbeStatus::Crashed);
    assert_eq!(out.rows[0].error_class.as_deref(), Some("Protocol"));

    let forged = r#"{"v": 1, "type": "result", "id": "someone-else", "status": "ok"}"#;
    let python = fake_worker(
        dir.path(),
        &format!("echo '{HELLO}'\nread line\necho '{forged}'\nexec sleep 1000"),
    );
    let out = probe_programs(&refs, &cfg(python), 1, None, &Tracker::hidden()).unwrap();
    assert_eq!(out.rows[0].status, ProbeStatus::Crashed);
    assert!(
        out.rows[0]
            .error_message
            .as_deref()
            .unwrap()
            .contains("someone-else")
    );
}

#[test]
fn a_worker_that_cannot_start_stops_the_run_with_its_stderr() {
    let _workers = crate::common::workers_shared();
    let dir = tempfile::tempdir().unwrap();
    let python = fake_worker(
        dir.path(),
        "echo 'ModuleNotFoundError: No module named torch' >&2\nexit 1",
    );
    let modules = two_modules();
    let refs: Vec<_> = modules.iter().collect();
    let err = probe_programs(&refs, &cfg(python), 2, None, &Tracker::hidden()).unwrap_err();
    assert!(matches!(err, Error::WorkerStart { .. }));
    let msg = err.to_string();
    assert!(
        msg.contains("No module named torch") && msg.contains("make venv"),
        "{msg}"
    );
}
