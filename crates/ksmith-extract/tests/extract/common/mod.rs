//! Helpers shared by the integration tests.
#![allow(dead_code, unreachable_pub, clippy::unwrap_used)]

pub mod cpython;

use ksmith_core::tables::{ModuleRow, ModuleStatus};
use ksmith_extract::{ExtractConfig, RepoInfo, SourceFile, extract_repo};

pub fn info() -> RepoInfo {
    RepoInfo {
        repo: "test/repo".into(),
        commit: "c0ffee".into(),
        license: Some("MIT".into()),
        stars: Some(3),
    }
}

/// Extracts a repository given as (path, text) pairs with the default config.
pub fn extract(files: &[(&str, &str)]) -> Vec<ModuleRow> {
    extract_with(files, &ExtractConfig::default())
}

pub fn extract_with(files: &[(&str, &str)], cfg: &ExtractConfig) -> Vec<ModuleRow> {
    let files: Vec<SourceFile> = files
        .iter()
        .map(|(p, t)| SourceFile::new(*p, t.as_bytes()))
        .collect();
    extract_repo(&info(), &files, cfg)
}

/// The row of class `name` (panics with all rows when absent).
pub fn row<'a>(rows: &'a [ModuleRow], name: &str) -> &'a ModuleRow {
    rows.iter()
        .find(|r| r.class_name == name)
        .unwrap_or_else(|| panic!("no row for {name}: {rows:#?}"))
}

/// The program of class `name`, which must be ok.
pub fn ok_program<'a>(rows: &'a [ModuleRow], name: &str) -> &'a str {
    let r = row(rows, name);
    assert_eq!(
        r.status,
        ModuleStatus::Ok,
        "{name}: {:?}\n{}",
        r.reason,
        r.program.as_deref().unwrap_or("")
    );
    r.program.as_deref().unwrap_or("")
}

pub fn names(rows: &[ModuleRow]) -> Vec<&str> {
    rows.iter().map(|r| r.class_name.as_str()).collect()
}
