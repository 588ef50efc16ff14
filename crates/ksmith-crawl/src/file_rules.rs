//! Which paths and file contents are accepted: path safety, skipped folders, Python files,
//! generated files, binary and non-UTF-8 content.

use ksmith_core::tables::SkipReason;

use crate::config::CrawlConfig;

/// True when one path component is safe to create inside a snapshot folder.
pub fn is_safe_component(name: &[u8]) -> bool {
    !name.is_empty()
        && name != b"."
        && name != b".."
        && !name.eq_ignore_ascii_case(b".git")
        && !name.iter().any(|&b| b == b'/' || b == b'\\' || b == 0)
}

/// The path and content rules of one crawl.
pub struct FileRules<'a> {
    cfg: &'a CrawlConfig,
}

impl<'a> FileRules<'a> {
    /// Rules from the configuration.
    pub fn new(cfg: &'a CrawlConfig) -> Self {
        FileRules { cfg }
    }

    /// True when a folder of this name is skipped.
    pub fn skips_dir(&self, name: &str) -> bool {
        self.cfg.skip_dirs.iter().any(|d| d == name)
    }

    /// True for Python source files (`.py`).
    pub fn is_python(&self, name: &str) -> bool {
        name.ends_with(".py") && name.len() > 3
    }

    /// True when a Python file is generated code that is skipped.
    pub fn is_generated(&self, name: &str) -> bool {
        self.cfg
            .skip_file_suffixes
            .iter()
            .any(|s| name.ends_with(s.as_str()))
    }

    /// True when a file of `size` bytes is too large to read.
    pub fn too_large(&self, size: u64) -> bool {
        size > self.cfg.max_file_bytes
    }

    /// Checks file content; the skip reason when it is not accepted.
    pub fn check_content(&self, bytes: &[u8]) -> Result<(), SkipReason> {
        if self.too_large(bytes.len() as u64) {
            return Err(SkipReason::TooLarge);
        }
        if bytes.contains(&0) {
            return Err(SkipReason::Binary);
        }
        if std::str::from_utf8(bytes).is_err() {
            return Err(SkipReason::NotUtf8);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unsafe_components() {
        for bad in [
            &b""[..],
            b".",
            b"..",
            b".git",
            b".GIT",
            b"a/b",
            b"a\\b",
            b"a\0b",
        ] {
            assert!(!is_safe_component(bad), "{bad:?}");
        }
        for good in [&b"a.py"[..], b"..a", b".gitignore", b"pkg"] {
            assert!(is_safe_component(good), "{good:?}");
        }
    }

    #[test]
    fn names_and_contents() {
        let cfg = CrawlConfig {
            max_file_bytes: 10,
            ..Default::default()
        };
        let r = FileRules::new(&cfg);
        assert!(r.is_python("m.py"));
        assert!(!r.is_python(".py"));
        assert!(!r.is_python("m.pyc"));
        assert!(!r.is_python("m.PY"));
        assert!(r.is_generated("api_pb2.py"));
        assert!(r.skips_dir("third_party"));
        assert!(!r.skips_dir("Third_Party"));
        assert_eq!(r.check_content(b"x = 1\n"), Ok(()));
        assert_eq!(r.check_content(b"x\0"), Err(SkipReason::Binary));
        assert_eq!(r.check_content(b"x = '\xe9'"), Err(SkipReason::NotUtf8));
        assert_eq!(r.check_content(b"01234567890"), Err(SkipReason::TooLarge));
    }
}
