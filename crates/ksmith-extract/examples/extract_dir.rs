//! Extracts one folder as a repository and writes each `ok` program to an output folder
//! (`<n>_<class>.py`), printing one line per row. For looking at what extract makes of a
//! code base without running the pipeline:
//!
//! `cargo run --release -p ksmith-extract --example extract_dir -- SRC_DIR OUT_DIR`
use std::path::{Path, PathBuf};

use ksmith_core::tables::ModuleStatus;
use ksmith_extract::{ExtractConfig, RepoInfo, SourceFile, extract_repo};

fn collect(root: &Path, dir: &Path, out: &mut Vec<SourceFile>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            collect(root, &path, out)?;
        } else if path.extension().is_some_and(|e| e == "py") {
            let rel = path
                .strip_prefix(root)
                .map(|p| p.to_string_lossy().replace('\\', "/"))
                .unwrap_or_default();
            out.push(SourceFile::new(rel, std::fs::read(&path)?));
        }
    }
    Ok(())
}

fn main() -> std::io::Result<()> {
    let mut args = std::env::args().skip(1);
    let (Some(src), Some(dst)) = (args.next(), args.next()) else {
        eprintln!("usage: extract_dir SRC_DIR OUT_DIR");
        std::process::exit(2);
    };
    let (src, dst) = (PathBuf::from(src), PathBuf::from(dst));
    let mut files = Vec::new();
    collect(&src, &src, &mut files)?;
    let info = RepoInfo {
        repo: src.display().to_string(),
        ..Default::default()
    };
    let rows = extract_repo(&info, &files, &ExtractConfig::default());
    std::fs::create_dir_all(&dst)?;
    for (i, row) in rows.iter().enumerate() {
        println!(
            "{:?}\t{}:{}\t{}\t{}",
            row.status,
            row.path,
            row.line,
            row.class_name,
            row.reason.as_deref().unwrap_or("")
        );
        if let (ModuleStatus::Ok, Some(program)) = (row.status, &row.program) {
            std::fs::write(dst.join(format!("{i:03}_{}.py", row.class_name)), program)?;
        }
    }
    Ok(())
}
