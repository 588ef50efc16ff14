//! Installed packages whose helpers are inlined like the repository's own code
//! (`[extract] inline_packages`): a model zoo's `DropPath`, `trunc_normal_` or `to_2tuple` is a
//! few lines of plain torch, and a class that uses one should not be rejected for it.
//!
//! A package's source is read from the Python environment's `site-packages` (extract never runs
//! Python: the files are read as text), its version from its `.dist-info` folder. A repository
//! that imports the package gets its files beside its own (a repository shipping a folder of
//! that name keeps its own); only the definitions a class reaches are inlined, and the row's
//! `deps` name them with the package and version (`timm==1.0.31:timm/layers/drop.py::DropPath`).

use std::path::{Path, PathBuf};

use crate::extract::SourceFile;

/// One installed package's Python source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Library {
    /// The top-level package (`timm`).
    pub package: String,
    /// Its installed version (from `<package>-<version>.dist-info`), `unknown` when absent.
    pub version: String,
    /// Its `.py` files, with paths from `site-packages` (`timm/layers/drop.py`).
    pub files: Vec<SourceFile>,
}

impl Library {
    /// The label recorded with its definitions: `package==version`.
    pub fn label(&self) -> String {
        format!("{}=={}", self.package, self.version)
    }

    /// True when a repository file imports the package (`import timm`, `from timm...`).
    pub(crate) fn used_by(&self, source: &[u8]) -> bool {
        let Ok(text) = std::str::from_utf8(source) else {
            return false;
        };
        let p = &self.package;
        text.lines().any(|l| {
            let l = l.trim_start();
            let rest = l
                .strip_prefix("from ")
                .or_else(|| l.strip_prefix("import "))
                .map(str::trim_start);
            rest.is_some_and(|r| {
                r.strip_prefix(p.as_str())
                    .is_some_and(|after| after.is_empty() || after.starts_with(['.', ' ', ',']))
            })
        })
    }
}

/// The `site-packages` folder of the Python environment whose interpreter is `python`
/// (`<prefix>/bin/python` -> `<prefix>/lib/python3.X/site-packages`), if there is one.
pub fn site_packages_of(python: &Path) -> Option<PathBuf> {
    let prefix = python.parent()?.parent()?;
    let lib = prefix.join("lib");
    let mut found: Vec<PathBuf> = std::fs::read_dir(&lib)
        .ok()?
        .filter_map(|e| e.ok())
        .map(|e| e.path().join("site-packages"))
        .filter(|p| p.is_dir())
        .collect();
    found.sort();
    found.pop()
}

/// Loads `package` from `site_packages`: every `.py` file under its folder (at most
/// `max_file_bytes` each) and its version. `Err` says why it cannot be had.
pub fn load(site_packages: &Path, package: &str, max_file_bytes: u64) -> Result<Library, String> {
    let root = site_packages.join(package);
    if !root.is_dir() {
        return Err(format!(
            "{package} is not installed in {}",
            site_packages.display()
        ));
    }
    let mut files = Vec::new();
    collect(site_packages, &root, max_file_bytes, &mut files)
        .map_err(|e| format!("cannot read {}: {e}", root.display()))?;
    files.sort_by(|a, b| a.path.cmp(&b.path));
    let version = version_of(site_packages, package).unwrap_or_else(|| "unknown".to_string());
    Ok(Library {
        package: package.to_string(),
        version,
        files,
    })
}

fn collect(
    base: &Path,
    dir: &Path,
    max_file_bytes: u64,
    out: &mut Vec<SourceFile>,
) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let path = entry.path();
        let kind = entry.file_type()?;
        if kind.is_dir() {
            if path.file_name().is_some_and(|n| n == "__pycache__") {
                continue;
            }
            collect(base, &path, max_file_bytes, out)?;
        } else if kind.is_file()
            && path.extension().is_some_and(|e| e == "py")
            && entry.metadata()?.len() <= max_file_bytes
        {
            let rel = path
                .strip_prefix(base)
                .unwrap_or(&path)
                .to_string_lossy()
                .replace('\\', "/");
            out.push(SourceFile::new(rel, std::fs::read(&path)?));
        }
    }
    Ok(())
}

/// The version in `<package>-<version>.dist-info` (names compared case-insensitively, `-` and
/// `_` alike).
fn version_of(site_packages: &Path, package: &str) -> Option<String> {
    let want = package.to_ascii_lowercase().replace('-', "_");
    std::fs::read_dir(site_packages)
        .ok()?
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().into_string().ok())
        .filter_map(|n| n.strip_suffix(".dist-info").map(str::to_string))
        .find_map(|n| {
            let (name, version) = n.rsplit_once('-')?;
            (name.to_ascii_lowercase().replace('-', "_") == want).then(|| version.to_string())
        })
}
