//! Loading a folder of evaluation problems (e.g. a KernelBench checkout) for decontamination.

use std::path::{Path, PathBuf};

use crate::engine::Problem;
use crate::error::DedupError;

/// Every `.py` file under `dir` (recursively, sorted by relative path), as problems.
///
/// A file that is not UTF-8 is skipped and its path returned in the second list, so the stage
/// can warn; a missing or unreadable folder is an error.
pub fn load_problems(dir: &Path) -> Result<(Vec<Problem>, Vec<PathBuf>), DedupError> {
    let meta = std::fs::metadata(dir).map_err(|e| DedupError::Benchmark {
        path: dir.to_path_buf(),
        message: e.to_string(),
    })?;
    if !meta.is_dir() {
        return Err(DedupError::Benchmark {
            path: dir.to_path_buf(),
            message: "not a directory".into(),
        });
    }
    let mut files = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let entries = std::fs::read_dir(&d).map_err(|e| DedupError::Benchmark {
            path: d.clone(),
            message: e.to_string(),
        })?;
        for entry in entries {
            let entry = entry.map_err(|e| DedupError::Benchmark {
                path: d.clone(),
                message: e.to_string(),
            })?;
            let path = entry.path();
            let name = entry.file_name();
            if name.to_string_lossy().starts_with('.') {
                continue;
            }
            let ft = entry.file_type().map_err(|e| DedupError::Benchmark {
                path: path.clone(),
                message: e.to_string(),
            })?;
            if ft.is_dir() {
                stack.push(path);
            } else if ft.is_file() && path.extension().is_some_and(|e| e == "py") {
                files.push(path);
            }
        }
    }
    files.sort();
    let mut problems = Vec::new();
    let mut skipped = Vec::new();
    for path in files {
        let bytes = std::fs::read(&path).map_err(|e| DedupError::Benchmark {
            path: path.clone(),
            message: e.to_string(),
        })?;
        match String::from_utf8(bytes) {
            Ok(source) => {
                let rel = path.strip_prefix(dir).unwrap_or(&path);
                problems.push(Problem {
                    path: rel.to_string_lossy().replace('\\', "/"),
                    source,
                });
            }
            Err(_) => skipped.push(path),
        }
    }
    Ok((problems, skipped))
}
