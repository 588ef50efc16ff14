//! The stage end to end: a `repos.parquet` pointing at snapshot folders in a temporary work
//! directory, `run`, then `modules.parquet` and the report.
#![allow(clippy::unwrap_used)] // Tests may unwrap.

use std::path::Path;

use ksmith_core::context::StageContext;
use ksmith_core::report::StageReport;
use ksmith_core::table::{Table, read_table, write_table};
use ksmith_core::tables::{ModuleReason, ModuleRow, ModuleStatus, RepoRow, RepoStatus, SourceKind};
use ksmith_extract::{ExtractConfig, run};

fn write(dir: &Path, rel: &str, text: &str) {
    let path = dir.join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

fn repo_row(name: &str, snapshot: &str, files: &[&str], status: RepoStatus) -> RepoRow {
    RepoRow {
        repo: name.into(),
        url: format!("file:///{name}"),
        source_kind: SourceKind::Folder,
        rev: None,
        commit: Some(format!("commit-of-{name}")),
        license: Some("MIT".into()),
        license_source: Some("file:LICENSE".into()),
        stars: Some(7),
        fetched_at: "2026-11-21T00:00:00Z".into(),
        status,
        reason: None,
        reason_code: None,
        changed: true,
        snapshot: Some(snapshot.into()),
        files: files.iter().map(|s| s.to_string()).collect(),
        skipped: Vec::new(),
        python_bytes: 0,
    }
}

fn setup(work: &Path) {
    write(work, "snapshots/alpha/pkg/__init__.py", "");
    write(
        work,
        "snapshots/alpha/pkg/ops.py",
        "import torch\n\nGAIN = 2.0\n\n\ndef act(x):\n    return torch.relu(x) * GAIN\n",
    );
    write(
        work,
        "snapshots/alpha/pkg/net.py",
        "import torch.nn as nn\nfrom .ops import act\nimport scipy\n\n\nclass Net(nn.Module):\n    def __init__(self, dim):\n        super().__init__()\n        self.fc = nn.Linear(dim, dim)\n\n    def forward(self, x):\n        return act(self.fc(x))\n\n\nclass UsesScipy(nn.Module):\n    def forward(self, x):\n        return scipy.special.erf(x)\n",
    );
    write(
        work,
        "snapshots/beta/model.py",
        "import torch\nfrom torch import nn\n\n\nclass Double(nn.Module):\n    def forward(self, x):\n        return x * 2\n\n\nclass Broken(nn.Module):\n    def forward(self, x):\n        return (x\n",
    );
    let rows = vec![
        repo_row(
            "beta",
            "snapshots/beta",
            &["model.py", "missing.py"],
            RepoStatus::Ok,
        ),
        repo_row(
            "alpha",
            "snapshots/alpha",
            &["pkg/__init__.py", "pkg/net.py", "pkg/ops.py"],
            RepoStatus::Ok,
        ),
        repo_row("gamma", "snapshots/gamma", &["x.py"], RepoStatus::Rejected),
    ];
    write_table(&RepoRow::path_in(work), &rows, "crawl-fp-1").unwrap();
}

#[test]
fn run_writes_sorted_modules_and_a_report_and_skips_when_up_to_date() {
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path();
    setup(work);
    let ctx = StageContext::for_tests(work);
    let cfg = ExtractConfig::default();
    let report = run(&cfg, &ctx).unwrap();
    assert!(!report.skipped);
    assert_eq!(report.rows_read, 3);

    let rows: Vec<ModuleRow> = read_table(&ModuleRow::path_in(work)).unwrap();
    assert_eq!(report.rows_written, rows.len() as u64);
    let keys: Vec<(&str, &str, &str)> = rows
        .iter()
        .map(|r| (r.repo.as_str(), r.path.as_str(), r.class_name.as_str()))
        .collect();
    assert_eq!(
        keys,
        vec![
            ("alpha", "pkg/net.py", "Net"),
            ("alpha", "pkg/net.py", "UsesScipy"),
            ("beta", "missing.py", ""),
            ("beta", "model.py", "Double"),
            ("beta", "model.py", "Broken"),
        ]
    );
    let net = &rows[0];
    assert_eq!(net.status, ModuleStatus::Ok);
    assert_eq!(net.commit, "commit-of-alpha");
    assert_eq!(net.license.as_deref(), Some("MIT"));
    assert_eq!(net.stars, Some(7));
    assert_eq!(net.deps, vec!["pkg/ops.py::GAIN", "pkg/ops.py::act"]);
    let program = net.program.as_deref().unwrap();
    assert!(program.contains("class Model(nn.Module):"), "{program}");
    assert!(!program.contains("scipy"), "{program}");
    assert_eq!(rows[1].reason.as_deref(), Some("import_not_allowed: scipy"));
    assert!(
        rows[2]
            .reason
            .as_deref()
            .unwrap()
            .starts_with("unreadable_file: missing.py")
    );
    assert_eq!(rows[3].status, ModuleStatus::Ok);
    assert!(
        rows[4]
            .reason
            .as_deref()
            .unwrap()
            .starts_with("syntax_error at model.py:")
    );
    let codes: Vec<Option<ModuleReason>> = rows.iter().map(|r| r.reason_code).collect();
    assert_eq!(
        codes,
        [
            None,
            Some(ModuleReason::ImportNotAllowed),
            Some(ModuleReason::UnreadableFile),
            None,
            Some(ModuleReason::SyntaxError),
        ]
    );
    let mut ids: Vec<&str> = rows.iter().map(|r| r.id.as_str()).collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), rows.len());

    assert_eq!(report.counters.get("modules_ok"), Some(&2));
    assert_eq!(
        report.dropped.get("import_not_allowed: scipy"),
        Some(&1),
        "{:?}",
        report.dropped
    );
    assert_eq!(report.dropped.get("syntax_error"), Some(&1));
    assert_eq!(report.dropped.get("unreadable_file"), Some(&1));
    let saved: StageReport = serde_json::from_str(
        &std::fs::read_to_string(StageReport::path_in(work, "extract")).unwrap(),
    )
    .unwrap();
    assert_eq!(saved, report);

    // Nothing changed: nothing to do.
    let again = run(&cfg, &ctx).unwrap();
    assert!(again.skipped);
    // A config change re-runs.
    let cfg2 = ExtractConfig {
        max_lines: 500,
        ..Default::default()
    };
    assert!(!run(&cfg2, &ctx).unwrap().skipped);
    // So does --force, with the same output.
    let mut forced = ctx.clone();
    forced.force = true;
    assert!(!run(&cfg2, &forced).unwrap().skipped);
    let rows_again: Vec<ModuleRow> = read_table(&ModuleRow::path_in(work)).unwrap();
    assert_eq!(rows_again, rows);
}

#[test]
fn threads_do_not_change_the_output() {
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path();
    setup(work);
    let one = StageContext::for_tests(work);
    run(&ExtractConfig::default(), &one).unwrap();
    let serial: Vec<ModuleRow> = read_table(&ModuleRow::path_in(work)).unwrap();
    let mut four = StageContext::new(work, 4, ksmith_core::progress::ProgressMode::Silent);
    four.force = true;
    run(&ExtractConfig::default(), &four).unwrap();
    let parallel: Vec<ModuleRow> = read_table(&ModuleRow::path_in(work)).unwrap();
    assert_eq!(serial, parallel);
}

#[test]
fn missing_input_and_bad_config_are_errors_naming_what_is_wrong() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = StageContext::for_tests(dir.path());
    let err = run(&ExtractConfig::default(), &ctx)
        .unwrap_err()
        .to_string();
    assert!(err.contains("repos.parquet"), "{err}");
    let bad = ExtractConfig {
        max_nesting: 1,
        ..Default::default()
    };
    let err = run(&bad, &ctx).unwrap_err().to_string();
    assert!(err.contains("max_nesting"), "{err}");
}

#[test]
fn snapshot_paths_that_escape_the_workdir_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path();
    let mut row = repo_row("evil", "../outside", &["x.py"], RepoStatus::Ok);
    let mut row2 = repo_row(
        "evil2",
        "snapshots/evil2",
        &["../../etc/passwd"],
        RepoStatus::Ok,
    );
    row.stars = None;
    row2.stars = None;
    write_table(&RepoRow::path_in(work), &[row, row2], "fp").unwrap();
    run(&ExtractConfig::default(), &StageContext::for_tests(work)).unwrap();
    let rows: Vec<ModuleRow> = read_table(&ModuleRow::path_in(work)).unwrap();
    assert_eq!(rows.len(), 2);
    assert!(
        rows[0]
            .reason
            .as_deref()
            .unwrap()
            .starts_with("no_snapshot"),
        "{rows:?}"
    );
    assert!(
        rows[1]
            .reason
            .as_deref()
            .unwrap()
            .starts_with("unsafe_path"),
        "{rows:?}"
    );
}
