//! The `[extract]` section of the configuration.

use serde::{Deserialize, Serialize};

use crate::error::Error;

/// Settings of the extract stage (`[extract]` in the configuration file).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ExtractConfig {
    /// Top-level packages an emitted program may import (`torch` covers `torch.nn`,
    /// `torch.nn.functional`, ...). A module that needs any other package is rejected with
    /// `import_not_allowed: <package>`. `__future__` is always allowed.
    pub allowed_imports: Vec<String>,
    /// Packages a program may import for reading only: `os` for `os.environ` reads,
    /// `os.getenv` and `os.path.*`, `sys` for `sys.version_info`, `sys.platform`,
    /// `sys.maxsize`, ... (the uses are listed in the code; `read_only_use`). Any other use
    /// (`os.makedirs`, `os.environ[...] = ...`, `sys.exit`) rejects the module with
    /// `import_not_allowed: <package>`. Only `os` and `sys` have read-only uses.
    pub read_only_imports: Vec<String>,
    /// Programs with more lines than this are rejected as `too_large`.
    pub max_lines: u32,
    /// Files larger than this many bytes are not parsed; they get a `file_too_large` row.
    pub max_file_bytes: u64,
    /// Time budget for parsing one file, in milliseconds; past it the file gets a
    /// `parse_timeout` row.
    pub parse_timeout_ms: u64,
    /// Deepest syntax-tree nesting analysed; classes nesting deeper fail as
    /// `too_deeply_nested`.
    pub max_nesting: u32,
    /// Check each program with one tree-sitter re-parse of its whole text. When false (the
    /// default) only the generated and edited stretches are re-parsed (once per distinct text
    /// in a repository) and unedited inlined statements reuse the parse of their file, which
    /// gives the same verdict about three times faster.
    pub verify_whole_program: bool,
    /// Installed packages whose definitions are inlined like the repository's own when a
    /// repository imports them (a model zoo's `DropPath`, `trunc_normal_`, `to_2tuple`): their
    /// source is read from `site_packages`, and the row's `deps` name the package and version.
    pub inline_packages: Vec<String>,
    /// Where `inline_packages` are installed; empty: the `site-packages` of the Python
    /// environment the probe uses.
    pub site_packages: String,
}

/// The packages of the probe environment (torch, triton, numpy, einops and the standard
/// library modules model code commonly uses that change nothing outside the program).
pub const DEFAULT_ALLOWED_IMPORTS: &[&str] = &[
    "torch",
    "triton",
    "numpy",
    "einops",
    "math",
    "functools",
    "itertools",
    "collections",
    "typing",
    "abc",
    "copy",
    "enum",
    "numbers",
    "operator",
    "random",
    "re",
    "string",
    "types",
    "dataclasses",
    "warnings",
    "time",
    "uuid",
    "inspect",
    "logging",
    "contextlib",
    "datetime",
    "json",
    "fnmatch",
    "weakref",
    "textwrap",
    "bisect",
    "heapq",
    "fractions",
    "decimal",
    "statistics",
    "struct",
    "base64",
    "argparse",
    "ast",
    "typing_extensions",
    "packaging",
];

/// The packages whose read-only uses extract knows (see `imports::read_only_use`).
pub const READ_ONLY_PACKAGES: &[&str] = &["os", "sys"];

impl Default for ExtractConfig {
    fn default() -> Self {
        ExtractConfig {
            allowed_imports: DEFAULT_ALLOWED_IMPORTS
                .iter()
                .map(|s| s.to_string())
                .collect(),
            read_only_imports: READ_ONLY_PACKAGES.iter().map(|s| s.to_string()).collect(),
            max_lines: 1000,
            max_file_bytes: 4 * 1024 * 1024,
            parse_timeout_ms: 10_000,
            max_nesting: 400,
            verify_whole_program: false,
            inline_packages: vec!["timm".to_string()],
            site_packages: String::new(),
        }
    }
}

impl ExtractConfig {
    /// Checks the values (no I/O).
    pub fn validate(&self) -> Result<(), Error> {
        for p in &self.allowed_imports {
            let ok = !p.is_empty()
                && !p.starts_with(|c: char| c.is_ascii_digit())
                && p.chars().all(|c| c.is_alphanumeric() || c == '_');
            if !ok {
                return Err(Error::Config(format!(
                    "[extract] allowed_imports: `{p}` is not a top-level package name (write `torch`, not `torch.nn`)"
                )));
            }
        }
        for p in &self.inline_packages {
            let ok = !p.is_empty() && p.chars().all(|c| c.is_alphanumeric() || c == '_');
            if !ok || self.allowed_imports.contains(p) {
                return Err(Error::Config(format!(
                    "[extract] inline_packages: `{p}` must be a top-level package name that is not in allowed_imports"
                )));
            }
        }
        for p in &self.read_only_imports {
            if !READ_ONLY_PACKAGES.contains(&p.as_str()) {
                return Err(Error::Config(format!(
                    "[extract] read_only_imports: `{p}` has no known read-only uses (known: {})",
                    READ_ONLY_PACKAGES.join(", ")
                )));
            }
        }
        if self.max_lines == 0 {
            return Err(Error::Config(
                "[extract] max_lines must be at least 1".into(),
            ));
        }
        if self.max_file_bytes == 0 {
            return Err(Error::Config(
                "[extract] max_file_bytes must be at least 1".into(),
            ));
        }
        if self.parse_timeout_ms == 0 {
            return Err(Error::Config(
                "[extract] parse_timeout_ms must be at least 1".into(),
            ));
        }
        if !(16..=100_000).contains(&self.max_nesting) {
            return Err(Error::Config(format!(
                "[extract] max_nesting must be between 16 and 100000 (found {})",
                self.max_nesting
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_bad_values_are_named() {
        ExtractConfig::default().validate().unwrap();
        let cfg = ExtractConfig {
            allowed_imports: vec!["torch.nn".into()],
            ..Default::default()
        };
        let err = cfg.validate().unwrap_err().to_string();
        assert!(err.contains("torch.nn"), "{err}");
        let cfg = ExtractConfig {
            max_lines: 0,
            ..Default::default()
        };
        assert!(
            cfg.validate()
                .unwrap_err()
                .to_string()
                .contains("max_lines")
        );
    }

    #[test]
    fn section_parses_from_toml() {
        let cfg = ksmith_core::config::Config::parse(
            "[extract]\nmax_lines = 50\nallowed_imports = [\"torch\"]\n",
            "test",
        )
        .unwrap();
        let section: ExtractConfig = cfg.section("extract").unwrap();
        assert_eq!(section.max_lines, 50);
        assert_eq!(section.allowed_imports, vec!["torch".to_string()]);
        assert_eq!(section.max_nesting, ExtractConfig::default().max_nesting);
        let bad = ksmith_core::config::Config::parse("[extract]\nmax_line = 5\n", "test").unwrap();
        assert!(bad.section::<ExtractConfig>("extract").is_err());
    }
}
