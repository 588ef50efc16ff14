//! A probe run killed with SIGKILL keeps what it finished: the next run reuses the journaled
//! rows, probes only the rest, removes the journal and the killed run's temporary folder.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::common::module;
use ksmith_core::context::StageContext;
use ksmith_core::table::{Table, read_table, write_table};
use ksmith_core::tables::{ModuleRow, ProbeRow, ProbeStatus};
use ksmith_probe::{ProbeConfig, journal, run};

const MODULES: usize = 12;
const WORKDIR_VAR: &str = "KSMITH_TEST_RESUME_WORKDIR";

fn config() -> ProbeConfig {
    let mut cfg = ProbeConfig {
        timeout_s: 20.0,
        workers: 1,
        ..Default::default()
    };
    cfg.sizing.enabled = false;
    cfg
}

/// A module whose forward takes a while, so the run can be killed in the middle.
fn slow(i: usize) -> ModuleRow {
    module(
        &format!("slow{i:02}"),
        format!(
            "import time\nimport torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n    def forward(self, x):\n        \
             time.sleep(0.2)\n        return x * {scale}\n\n\ndef get_inputs():\n    return [torch.rand(4, 4)]\n\n\n\
             def get_init_inputs():\n    return []\n",
            // Never 0 or 1: a constant output, or the input itself, is degenerate.
            scale = i + 2
        ),
    )
}

/// Not a test by itself: the stage run the killed process makes (started by the test below).
#[test]
#[ignore = "run as a child process by a_killed_run_resumes_where_it_stopped"]
fn stage_run_in_a_child_process() {
    let Some(dir) = std::env::var_os(WORKDIR_VAR) else {
        return;
    };
    let ctx = StageContext::for_tests(Path::new(&dir));
    run(&config(), &ctx).unwrap();
}

fn journaled(dir: &Path) -> usize {
    std::fs::read_to_string(journal::path(dir))
        .map(|t| t.lines().count().saturating_sub(1))
        .unwrap_or(0)
}

fn runtime_dirs_of(pid: u32) -> Vec<String> {
    let prefix = format!("ksmith-probe-{pid}-");
    std::fs::read_dir(std::env::temp_dir())
        .map(|entries| {
            entries
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with(&prefix))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn a_killed_run_resumes_where_it_stopped() {
    let _workers = crate::common::workers_shared();
    let dir = tempfile::tempdir().unwrap();
    let modules: Vec<ModuleRow> = (0..MODULES).map(slow).collect();
    write_table(&ModuleRow::path_in(dir.path()), &modules, "extract-fp").unwrap();

    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "resume::stage_run_in_a_child_process",
            "--exact",
            "--ignored",
            "--nocapture",
        ])
        .env(WORKDIR_VAR, dir.path())
        .spawn()
        .unwrap();
    let pid = child.id();
    let deadline = Instant::now() + Duration::from_secs(300);
    while journaled(dir.path()) < 4 {
        assert!(Instant::now() < deadline, "the child run journaled nothing");
        assert!(
            child.try_wait().unwrap().is_none(),
            "the child run ended early"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let done = journaled(dir.path());
    assert!((4..MODULES).contains(&done), "{done} rows journaled");
    assert!(!ProbeRow::path_in(dir.path()).exists());
    assert!(
        !runtime_dirs_of(pid).is_empty(),
        "a SIGKILL leaves the runtime folder"
    );

    let ctx = StageContext::for_tests(dir.path());
    let report = run(&config(), &ctx).unwrap();
    assert_eq!(report.counters.get("resumed"), Some(&(done as u64)));
    assert_eq!(report.rows_written, MODULES as u64);
    let rows: Vec<ProbeRow> = read_table(&ProbeRow::path_in(dir.path())).unwrap();
    let ids: Vec<&str> = rows.iter().map(|r| r.module_id.as_str()).collect();
    let want: Vec<String> = (0..MODULES).map(|i| format!("slow{i:02}")).collect();
    assert_eq!(ids, want.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(rows.iter().all(|r| r.status == ProbeStatus::Ok), "{rows:?}");
    assert!(
        !journal::path(dir.path()).exists(),
        "the journal is removed"
    );
    assert_eq!(
        runtime_dirs_of(pid),
        Vec::<String>::new(),
        "the killed run's folder is removed"
    );
}
