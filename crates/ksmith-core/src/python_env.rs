//! Where the Python interpreter with torch and triton lives.
//!
//! The probe and eval stages run Python. The interpreter is, in order: the path given in the
//! stage's config, the `KSMITH_PYTHON` environment variable, or `bin/python` of the virtual
//! environment that `make venv` builds at `KSMITH_VENV` (default `~/.cache/ksmith/venv`).

use std::path::PathBuf;

/// The default virtual environment folder.
pub fn default_venv() -> PathBuf {
    if let Some(v) = std::env::var_os("KSMITH_VENV") {
        return PathBuf::from(v);
    }
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("."));
    home.join(".cache").join("ksmith").join("venv")
}

/// Resolves the interpreter: `configured` if non-empty, else `KSMITH_PYTHON`, else the default
/// venv's `bin/python`. Returns an error message that says how to fix a missing interpreter.
pub fn resolve_python(configured: Option<&std::path::Path>) -> Result<PathBuf, String> {
    let candidate = match configured {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => match std::env::var_os("KSMITH_PYTHON") {
            Some(p) => PathBuf::from(p),
            None => default_venv().join("bin").join("python"),
        },
    };
    if candidate.exists() {
        Ok(candidate)
    } else {
        Err(format!(
            "Python environment not found: {} does not exist. Run `make venv` to build it \
             (torch and triton, about 3 GB, cached in {}), or set KSMITH_PYTHON to an \
             interpreter that has torch and triton.",
            candidate.display(),
            default_venv().display()
        ))
    }
}
