//! Workspace invariants that no single crate can check: the crate layering and module docs.

use std::path::{Path, PathBuf};

const STAGE_CRATES: &[&str] = &[
    "ksmith-discover",
    "ksmith-crawl",
    "ksmith-extract",
    "ksmith-probe",
    "ksmith-dedup",
    "ksmith-cluster",
    "ksmith-eval",
    "ksmith-evolve",
    "ksmith-select",
    "ksmith-export",
    "ksmith-review",
];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn crate_dirs() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(root().join("crates"))
        .expect("crates/ exists")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("Cargo.toml").exists())
        .collect();
    dirs.sort();
    dirs
}

fn dependency_names(manifest: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(manifest).expect("readable manifest");
    let value: toml::Table = toml::from_str(&text).expect("valid manifest");
    ["dependencies", "dev-dependencies", "build-dependencies"]
        .iter()
        .filter_map(|k| value.get(*k).and_then(|v| v.as_table()))
        .flat_map(|t| t.keys().cloned())
        .collect()
}

/// Stage crates depend on ksmith-core (and shared non-stage crates), never on each other; only
/// the CLI and these end-to-end tests wire stages together.
#[test]
fn stage_crates_do_not_depend_on_each_other() {
    let mut violations = Vec::new();
    for dir in crate_dirs() {
        let name = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if !STAGE_CRATES.contains(&name.as_str()) {
            continue;
        }
        for dep in dependency_names(&dir.join("Cargo.toml")) {
            if dep != name && STAGE_CRATES.contains(&dep.as_str()) {
                violations.push(format!("{name} depends on {dep}"));
            }
        }
    }
    assert!(violations.is_empty(), "{violations:#?}");
}

/// ksmith-core does no network, subprocess, git, tree-sitter or GPU work. (rayon is allowed: the
/// stage contract in `ksmith_core::stage` owns every stage's thread pool; it is computation only.)
#[test]
fn core_stays_free_of_heavy_dependencies() {
    let deps = dependency_names(&root().join("crates/ksmith-core/Cargo.toml"));
    for banned in [
        "git2",
        "tree-sitter",
        "tree-sitter-python",
        "ureq",
        "hdbscan",
    ] {
        assert!(
            !deps.iter().any(|d| d == banned),
            "ksmith-core must not depend on {banned}"
        );
    }
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Every Rust source file under crates/ starts with a `//!` doc saying what it is for.
#[test]
fn every_source_file_starts_with_a_module_doc() {
    let mut files = Vec::new();
    rust_files(&root().join("crates"), &mut files);
    rust_files(&root().join("tests"), &mut files);
    assert!(!files.is_empty());
    let undocumented: Vec<String> = files
        .iter()
        .filter(|f| {
            let text = std::fs::read_to_string(f).unwrap_or_default();
            !text.trim_start().starts_with("//!")
        })
        .map(|f| f.display().to_string())
        .collect();
    assert!(
        undocumented.is_empty(),
        "files without a //! doc: {undocumented:#?}"
    );
}

/// The README names exactly the two commands a newcomer needs, and CI runs the test one.
#[test]
fn readme_and_ci_agree_on_the_test_command() {
    let readme = std::fs::read_to_string(root().join("README.md")).expect("README.md");
    assert!(
        readme.contains("make dataset"),
        "README must name `make dataset`"
    );
    assert!(readme.contains("make test"), "README must name `make test`");
    let ci = std::fs::read_to_string(root().join(".ci/run")).expect(".ci/run");
    assert!(
        ci.lines().any(|l| l.trim() == "make test"),
        ".ci/run must call `make test`"
    );
}
