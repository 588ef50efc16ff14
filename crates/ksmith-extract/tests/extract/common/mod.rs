//! Helpers shared by the integration tests.
#![allow(dead_code, unreachable_pub, clippy::unwrap_used)]

pub mod cpython;

use ksmith_core::tables::{ModuleRow, ModuleStatus};
use std::path::{Path, PathBuf};

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

/// The sample corpus folder (`data/corpus`).
pub fn corpus() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/corpus")
}

fn collect(root: &Path, dir: &Path, out: &mut Vec<SourceFile>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            collect(root, &path, out);
        } else if path.extension().is_some_and(|e| e == "py") {
            let rel = path
                .strip_prefix(root)
                .unwrap()
                .to_string_lossy()
                .replace('\\', "/");
            out.push(SourceFile::new(rel, std::fs::read(&path).unwrap()));
        }
    }
}

/// The Python files of one repository of the crate's test data (`tests/data/<name>`), paths
/// relative to it.
pub fn test_data_files(name: &str) -> Vec<SourceFile> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name);
    let mut files = Vec::new();
    collect(&root, &root, &mut files);
    files.sort_by(|a, b| a.path.cmp(&b.path));
    files
}

/// The Python files of one sample repository, paths relative to it.
pub fn corpus_files(repo: &str) -> Vec<SourceFile> {
    let root = corpus().join(repo);
    let mut files = Vec::new();
    collect(&root, &root, &mut files);
    files.sort_by(|a, b| a.path.cmp(&b.path));
    files
}
