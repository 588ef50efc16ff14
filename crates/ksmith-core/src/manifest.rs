//! The repository manifest: a JSONL file, one repository a line, that `ksmith discover` writes
//! and crawl reads (a `[[source]]` with `manifest = "..."`). People may write one by hand too.
//!
//! Crawl uses `repo`, `url`, `rev`, `license` and `stars` ([`CRAWL_KEYS`]); the other keys
//! ([`DISCOVERY_KEYS`]) describe where discover found the repository and what GitHub said about
//! it, for discover's next run and for people reading the file. Crawl accepts them and rejects
//! any other key, so a misspelt key is caught.

use serde::{Deserialize, Serialize};

/// The keys crawl acts on.
pub const CRAWL_KEYS: &[&str] = &["repo", "url", "rev", "license", "stars"];

/// The keys discover records besides [`CRAWL_KEYS`]; crawl accepts and ignores them.
pub const DISCOVERY_KEYS: &[&str] = &[
    "github_id",
    "default_branch",
    "pushed_at",
    "fork",
    "archived",
    "size_kb",
    "language",
    "topics",
];

/// True when `key` may appear in a manifest line.
pub fn is_known_key(key: &str) -> bool {
    CRAWL_KEYS.contains(&key) || DISCOVERY_KEYS.contains(&key)
}

/// One manifest line. Absent values are left out of the JSON.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ManifestLine {
    /// Unique name in the tables (`owner/name` for GitHub repositories).
    pub repo: String,
    /// Git URL (or local path) crawl fetches.
    pub url: String,
    /// The commit (or branch, tag) crawl pins; the default branch's head when absent. Discover
    /// writes the head commit of the default branch as of `pushed_at`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rev: Option<String>,
    /// SPDX license id; crawl records it instead of detecting one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub license: Option<String>,
    /// Star count.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stars: Option<i64>,
    /// GitHub's numeric repository id (stable across renames).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub github_id: Option<u64>,
    /// The default branch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_branch: Option<String>,
    /// Time of the last push (RFC 3339, UTC) as GitHub reported it; when `rev` is a pinned
    /// commit, the push time it was read at.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pushed_at: Option<String>,
    /// Whether the repository is a fork.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fork: Option<bool>,
    /// Whether the repository is archived (read-only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub archived: Option<bool>,
    /// Size of the repository in KiB, as GitHub reports it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size_kb: Option<u64>,
    /// Main language, as GitHub reports it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub language: Option<String>,
    /// Topics, as GitHub reports them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub topics: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_lists_are_the_fields() {
        let full = ManifestLine {
            repo: "o/r".into(),
            url: "https://example.com/o/r.git".into(),
            rev: Some("0".repeat(40)),
            license: Some("MIT".into()),
            stars: Some(1),
            github_id: Some(7),
            default_branch: Some("main".into()),
            pushed_at: Some("2026-01-01T00:00:00Z".into()),
            fork: Some(false),
            archived: Some(false),
            size_kb: Some(3),
            language: Some("Python".into()),
            topics: vec!["pytorch".into()],
        };
        let value = serde_json::to_value(&full).expect("serializes");
        let mut keys: Vec<&str> = value
            .as_object()
            .expect("object")
            .keys()
            .map(String::as_str)
            .collect();
        let mut known: Vec<&str> = CRAWL_KEYS.iter().chain(DISCOVERY_KEYS).copied().collect();
        keys.sort_unstable();
        known.sort_unstable();
        assert_eq!(keys, known);
        assert!(keys.iter().all(|k| is_known_key(k)));
        assert!(!is_known_key("licence"));
        let back: ManifestLine = serde_json::from_value(value).expect("reads back");
        assert_eq!(back, full);
    }

    #[test]
    fn absent_values_are_left_out() {
        let line = ManifestLine {
            repo: "o/r".into(),
            url: "u".into(),
            ..Default::default()
        };
        assert_eq!(
            serde_json::to_string(&line).expect("serializes"),
            r#"{"repo":"o/r","url":"u"}"#
        );
    }
}
