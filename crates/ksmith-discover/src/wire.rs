//! GitHub's JSON, read into what discover keeps: search pages, repositories (as search items
//! and as `GET /repos/{owner}/{repo}` answers, which share one shape) and code search items.
//!
//! A page whose envelope is wrong is malformed (the client retries it); one item that is wrong
//! is skipped and counted, the rest of its page is kept.

use ksmith_core::manifest::ManifestLine;
use ksmith_core::spdx::is_plausible_spdx_id;
use ksmith_core::timestamp::{parse_rfc3339, rfc3339_from_secs};
use serde::Deserialize;

/// One page of search results.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Page {
    /// Results of the whole query (not just this page).
    pub(crate) total_count: u64,
    /// GitHub stopped the query early; results may be missing.
    pub(crate) incomplete: bool,
    /// The page's items, each still to be read.
    pub(crate) items: Vec<serde_json::Value>,
}

#[derive(Deserialize)]
struct PageJson {
    total_count: u64,
    #[serde(default)]
    incomplete_results: bool,
    items: Vec<serde_json::Value>,
}

/// Reads a search page's envelope.
pub(crate) fn parse_page(body: &str) -> Result<Page, String> {
    let page: PageJson = serde_json::from_str(body).map_err(|e| format!("search page: {e}"))?;
    Ok(Page {
        total_count: page.total_count,
        incomplete: page.incomplete_results,
        items: page.items,
    })
}

/// A repository as GitHub describes it, reduced to what discover keeps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Repo {
    /// The manifest line it becomes (without a pinned commit).
    pub(crate) line: ManifestLine,
    /// Private repositories (visible through the token) are never listed.
    pub(crate) private: bool,
    /// Disabled repositories cannot be fetched.
    pub(crate) disabled: bool,
    /// GitHub found no license file at all (as opposed to one it does not recognize).
    pub(crate) no_license: bool,
}

#[derive(Deserialize)]
struct RepoJson {
    id: u64,
    full_name: String,
    clone_url: String,
    default_branch: Option<String>,
    stargazers_count: u64,
    pushed_at: Option<String>,
    #[serde(default)]
    fork: bool,
    #[serde(default)]
    archived: bool,
    #[serde(default)]
    disabled: bool,
    #[serde(default)]
    private: bool,
    #[serde(default)]
    size: u64,
    language: Option<String>,
    license: Option<LicenseJson>,
    #[serde(default)]
    topics: Vec<String>,
}

#[derive(Deserialize)]
struct LicenseJson {
    spdx_id: Option<String>,
}

/// True for `owner/name` with GitHub's characters (letters, digits, `-`, `_`, `.`), so a name
/// can go into a URL path and a folder name as it is.
pub(crate) fn is_repo_name(name: &str) -> bool {
    let ok = |part: &str| {
        !part.is_empty()
            && part != "."
            && part != ".."
            && part
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
    };
    matches!(name.split_once('/'), Some((owner, repo)) if ok(owner) && ok(repo))
}

/// Reads one repository (a search item or a `GET /repos` answer).
pub(crate) fn parse_repo(value: &serde_json::Value) -> Result<Repo, String> {
    let r = RepoJson::deserialize(value).map_err(|e| format!("repository: {e}"))?;
    if !is_repo_name(&r.full_name) {
        return Err(format!(
            "repository name `{}` is not owner/name",
            r.full_name
        ));
    }
    if r.clone_url.trim().is_empty() {
        return Err(format!("{}: empty clone_url", r.full_name));
    }
    let pushed_at = match &r.pushed_at {
        None => None,
        Some(t) => Some(rfc3339_from_secs(parse_rfc3339(t).ok_or_else(|| {
            format!("{}: pushed_at `{t}` is not a timestamp", r.full_name)
        })?)),
    };
    let no_license = r.license.is_none();
    // GitHub says NOASSERTION (or "other") for a license file it does not recognize.
    let license = r
        .license
        .and_then(|l| l.spdx_id)
        .filter(|id| id != "NOASSERTION" && is_plausible_spdx_id(id));
    Ok(Repo {
        line: ManifestLine {
            repo: r.full_name,
            url: r.clone_url,
            rev: None,
            license,
            stars: Some(i64::try_from(r.stargazers_count).unwrap_or(i64::MAX)),
            github_id: Some(r.id),
            default_branch: r.default_branch.filter(|b| !b.trim().is_empty()),
            pushed_at,
            fork: Some(r.fork),
            archived: Some(r.archived),
            size_kb: Some(r.size),
            language: r.language,
            topics: r.topics,
        },
        private: r.private,
        disabled: r.disabled,
        no_license,
    })
}

/// The repository a code search item belongs to: its id and `owner/name`.
pub(crate) fn parse_code_item(value: &serde_json::Value) -> Result<(u64, String), String> {
    let repo = &value["repository"];
    let id = repo["id"]
        .as_u64()
        .ok_or("code item: repository.id is missing")?;
    let name = repo["full_name"]
        .as_str()
        .ok_or("code item: repository.full_name is missing")?;
    if !is_repo_name(name) {
        return Err(format!(
            "code item: repository name `{name}` is not owner/name"
        ));
    }
    Ok((id, name.to_string()))
}

/// Reads the bare SHA the commit endpoint answers with (`application/vnd.github.sha`).
pub(crate) fn parse_sha(body: &str) -> Result<String, String> {
    let sha = body.trim();
    if sha.len() == 40 && sha.bytes().all(|b| b.is_ascii_hexdigit()) {
        Ok(sha.to_ascii_lowercase())
    } else {
        Err(format!(
            "expected a 40-digit commit id, got `{}`",
            sha.chars().take(60).collect::<String>()
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn item() -> serde_json::Value {
        json!({
            "id": 42, "full_name": "octo/net", "clone_url": "https://github.com/octo/net.git",
            "default_branch": "main", "stargazers_count": 120,
            "pushed_at": "2026-03-01T10:00:00Z", "created_at": "2020-01-01T00:00:00Z",
            "fork": false, "archived": false, "size": 2048, "language": "Python",
            "license": {"key": "mit", "spdx_id": "MIT", "name": "MIT License"},
            "topics": ["pytorch", "vision"], "owner": {"login": "octo"}, "score": 1.0
        })
    }

    #[test]
    fn reads_a_search_item() {
        let r = parse_repo(&item()).unwrap();
        assert_eq!(r.line.repo, "octo/net");
        assert_eq!(r.line.license.as_deref(), Some("MIT"));
        assert_eq!(r.line.stars, Some(120));
        assert_eq!(r.line.github_id, Some(42));
        assert_eq!(r.line.pushed_at.as_deref(), Some("2026-03-01T10:00:00Z"));
        assert_eq!(r.line.topics, vec!["pytorch", "vision"]);
        assert!(!r.private && !r.disabled && !r.no_license);
    }

    #[test]
    fn unknown_licenses_are_none() {
        for (license, none_at_all) in [
            (json!({"key": "other", "spdx_id": "NOASSERTION"}), false),
            (json!(null), true),
            (json!({"key": "x", "spdx_id": "Not An Id"}), false),
        ] {
            let mut v = item();
            v["license"] = license;
            let r = parse_repo(&v).unwrap();
            assert_eq!(r.line.license, None);
            assert_eq!(r.no_license, none_at_all);
        }
    }

    #[test]
    fn bad_items_say_why() {
        let mut v = item();
        v["full_name"] = json!("../etc");
        assert!(parse_repo(&v).unwrap_err().contains("owner/name"));
        let mut v = item();
        v["stargazers_count"] = json!("many");
        assert!(parse_repo(&v).is_err());
        let mut v = item();
        v["pushed_at"] = json!("yesterday");
        assert!(parse_repo(&v).unwrap_err().contains("pushed_at"));
        assert!(parse_page(r#"{"items": []}"#).is_err());
        assert!(parse_page("<html>").is_err());
        assert_eq!(
            parse_page(r#"{"total_count": 3, "items": [1]}"#)
                .unwrap()
                .total_count,
            3
        );
    }

    #[test]
    fn names_code_items_and_shas() {
        let v = json!({"name": "m.py", "repository": {"id": 5, "full_name": "a/b"}});
        assert_eq!(parse_code_item(&v).unwrap(), (5, "a/b".to_string()));
        assert!(parse_code_item(&json!({"repository": {"id": 5}})).is_err());
        assert!(is_repo_name("a-b/c.d_e"));
        assert!(!is_repo_name("a/b/c"));
        assert!(!is_repo_name("a/.."));
        let sha = "0123456789ABCDEF0123456789abcdef01234567";
        assert_eq!(parse_sha(&format!("{sha}\n")).unwrap(), sha.to_lowercase());
        assert!(parse_sha("{\"sha\": 1}").is_err());
    }
}
