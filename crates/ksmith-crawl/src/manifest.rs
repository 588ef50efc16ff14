//! JSONL manifests: one repository a line (`repo`, `url`, `rev`, `license`, `stars`).
//!
//! `repo` and `url` are required; `url` is a git URL or the path of a local git repository
//! (relative paths are resolved against the manifest's folder). Blank lines are ignored. The
//! keys `ksmith discover` records besides ([`ksmith_core::manifest::DISCOVERY_KEYS`]) are
//! accepted and not used. Unknown keys are errors, so a misspelt `licence` is caught instead of
//! silently ignored.

use std::path::Path;

use ksmith_core::manifest::{CRAWL_KEYS, DISCOVERY_KEYS, is_known_key};
use serde_json::Value;

use crate::error::Error;
use crate::source::{RepoSource, redact_url, resolve_relative};

struct Line {
    repo: String,
    url: String,
    rev: Option<String>,
    license: Option<String>,
    stars: Option<i64>,
}

/// Parses one line, naming the offending key in errors.
fn parse_line(raw: &str) -> Result<Line, String> {
    let value: Value = serde_json::from_str(raw).map_err(|e| format!("not valid JSON: {e}"))?;
    let Value::Object(map) = value else {
        return Err("expected a JSON object".into());
    };
    if let Some(k) = map.keys().find(|k| !is_known_key(k)) {
        return Err(format!(
            "unknown key `{k}` (known keys: {}, {})",
            CRAWL_KEYS.join(", "),
            DISCOVERY_KEYS.join(", ")
        ));
    }
    let text = |key: &str, required: bool| -> Result<Option<String>, String> {
        match map.get(key) {
            None | Some(Value::Null) if required => Err(format!("`{key}` is missing")),
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(other) => Err(format!("`{key}` must be a string, found {other}")),
        }
    };
    let stars = match map.get("stars") {
        None | Some(Value::Null) => None,
        Some(v) => Some(
            v.as_i64()
                .ok_or_else(|| format!("`stars` must be an integer, found {v}"))?,
        ),
    };
    Ok(Line {
        repo: text("repo", true)?.unwrap_or_default(),
        url: text("url", true)?.unwrap_or_default(),
        rev: text("rev", false)?,
        license: text("license", false)?,
        stars,
    })
}

/// Reads a manifest into repositories, in line order.
pub fn read(path: &Path) -> Result<Vec<RepoSource>, Error> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
    parse(&text, path)
}

/// Parses manifest text; `path` names the file in errors and anchors relative URLs.
pub fn parse(text: &str, path: &Path) -> Result<Vec<RepoSource>, Error> {
    let base = path.parent().unwrap_or(Path::new("."));
    let mut out = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line_no = i + 1;
        let bad = |message: String| Error::Manifest {
            path: path.to_path_buf(),
            line: line_no,
            message,
        };
        if raw.trim().is_empty() {
            continue;
        }
        let line = parse_line(raw).map_err(bad)?;
        let repo = line.repo.trim();
        if repo.is_empty() {
            return Err(bad("`repo` is empty".into()));
        }
        if line.url.trim().is_empty() {
            return Err(bad("`url` is empty".into()));
        }
        if let Some(l) = &line.license
            && !crate::license::is_plausible_spdx_id(l)
        {
            return Err(bad(format!("license `{l}` is not an SPDX id")));
        }
        if line.stars.is_some_and(|s| s < 0) {
            return Err(bad("`stars` is negative".into()));
        }
        let location = resolve_relative(base, line.url.trim());
        out.push(RepoSource {
            name: repo.to_string(),
            location,
            url: redact_url(line.url.trim()),
            rev: line.rev.filter(|r| !r.trim().is_empty()),
            license_source: line.license.as_ref().map(|_| "manifest"),
            license: line.license,
            stars: line.stars,
            origin: format!("manifest {} line {line_no}", path.display()),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::Location;

    #[test]
    fn parses_lines_and_resolves_relative_paths() {
        let text = r#"{"repo": "a/b", "url": "https://example.com/a/b.git", "rev": "v1", "license": "MIT", "stars": 42}

{"repo": "local", "url": "repos/local.git"}
"#;
        let repos = parse(text, Path::new("/m/list.jsonl")).unwrap();
        assert_eq!(repos.len(), 2);
        assert_eq!(repos[0].name, "a/b");
        assert_eq!(repos[0].rev.as_deref(), Some("v1"));
        assert_eq!(repos[0].license.as_deref(), Some("MIT"));
        assert_eq!(repos[0].license_source, Some("manifest"));
        assert_eq!(repos[0].stars, Some(42));
        assert_eq!(
            repos[1].location,
            Location::LocalGit("/m/repos/local.git".into())
        );
        assert_eq!(repos[1].license_source, None);
    }

    #[test]
    fn discovery_keys_are_accepted_and_not_used() {
        let text = r#"{"repo": "o/r", "url": "https://github.com/o/r.git", "rev": "0123456789abcdef0123456789abcdef01234567", "license": "MIT", "stars": 7, "github_id": 99, "default_branch": "main", "pushed_at": "2026-01-02T03:04:05Z", "fork": false, "archived": false, "size_kb": 120, "language": "Python", "topics": ["pytorch"]}"#;
        let repos = parse(text, Path::new("m.jsonl")).unwrap();
        assert_eq!(repos.len(), 1);
        assert_eq!(repos[0].name, "o/r");
        assert_eq!(
            repos[0].rev.as_deref(),
            Some("0123456789abcdef0123456789abcdef01234567")
        );
        assert_eq!(repos[0].stars, Some(7));
    }

    #[test]
    fn bad_lines_name_the_line() {
        let cases = [
            (
                "{\"repo\": \"a\", \"url\": \"u\"}\nnot json\n",
                2,
                "not valid JSON",
            ),
            ("[1, 2]\n", 1, "JSON object"),
            (
                "{\"repo\": 5, \"url\": \"u\"}\n",
                1,
                "`repo` must be a string",
            ),
            ("{\"repo\": \"a\"}\n", 1, "url"),
            (
                "\n\n{\"repo\": \"a\", \"url\": \"u\", \"licence\": \"MIT\"}\n",
                3,
                "licence",
            ),
            ("{\"repo\": \" \", \"url\": \"u\"}\n", 1, "repo"),
            (
                "{\"repo\": \"a\", \"url\": \"u\", \"stars\": \"many\"}\n",
                1,
                "stars",
            ),
            (
                "{\"repo\": \"a\", \"url\": \"u\", \"stars\": -1}\n",
                1,
                "negative",
            ),
            (
                "{\"repo\": \"a\", \"url\": \"u\", \"license\": \"GPL v3\"}\n",
                1,
                "SPDX",
            ),
        ];
        for (text, line, needle) in cases {
            let err = parse(text, Path::new("m.jsonl")).unwrap_err();
            let msg = err.to_string();
            assert!(msg.contains(&format!("m.jsonl, line {line}")), "{msg}");
            assert!(msg.contains(needle), "{msg}");
        }
    }

    #[test]
    fn missing_manifest_names_the_file() {
        let err = read(Path::new("/nonexistent/manifest.jsonl")).unwrap_err();
        assert!(
            err.to_string().contains("/nonexistent/manifest.jsonl"),
            "{err}"
        );
    }
}
