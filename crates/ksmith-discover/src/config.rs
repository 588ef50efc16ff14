//! The `[discover]` table of the configuration, and the license policy it resolves to.

use std::path::{Path, PathBuf};

use ksmith_core::spdx::is_plausible_spdx_id;
use ksmith_core::timestamp::parse_rfc3339;
use serde::{Deserialize, Serialize};

use crate::error::Error;

/// Which date the repository search is sliced by to get past GitHub's 1,000-result cap.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SliceBy {
    /// Creation date: it never changes, so every repository falls in exactly one slice and an
    /// interrupted run resumes where it stopped.
    Created,
    /// Date of the last push.
    Pushed,
}

/// Settings of `ksmith discover`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DiscoverConfig {
    /// The manifest written (and updated on the next run); `<workdir>/manifest.jsonl` when
    /// absent.
    pub manifest: Option<PathBuf>,
    /// Base URL of the GitHub REST API.
    pub api_url: String,
    /// Name of the environment variable holding the API token (the token itself is never part
    /// of the configuration, the manifest, a report or a message).
    pub token_env: String,
    /// Repository search terms (GitHub search syntax, without the qualifiers the keys below
    /// set); one search per query, language and topic.
    pub queries: Vec<String>,
    /// Primary languages kept (one search each; empty: any language).
    pub languages: Vec<String>,
    /// Topics, any of which a repository must carry (one search each; empty: no topic needed).
    pub topics: Vec<String>,
    /// Fewest stars a repository must have.
    pub min_stars: u64,
    /// SPDX ids of the licenses kept (as GitHub reports them); `[crawl] allowed_licenses` when
    /// absent, so discover keeps exactly what crawl would accept.
    pub licenses: Option<Vec<String>>,
    /// Keep repositories without a license GitHub recognizes; `[crawl] accept_unlicensed` when
    /// absent.
    pub accept_unlicensed: Option<bool>,
    /// Keep only repositories pushed to within this many days (0: no limit).
    pub pushed_within_days: u64,
    /// Keep forks.
    pub include_forks: bool,
    /// Keep archived (read-only) repositories.
    pub include_archived: bool,
    /// Largest repository kept, in KiB as GitHub reports it (0: no limit).
    pub max_size_kb: u64,
    /// The date the searches are sliced by.
    pub slice_by: SliceBy,
    /// Earliest date searched (`YYYY-MM-DD`).
    pub since: String,
    /// Also search code for `code_queries` and read the metadata of the repositories found
    /// only that way (one request each; GitHub's code search needs a token).
    pub code_search: bool,
    /// Code search terms, one search per query and language.
    pub code_queries: Vec<String>,
    /// Pin each repository to the head commit of its default branch (one request per new or
    /// pushed-to repository), so every crawl of the manifest reads the same commits.
    pub pin_commits: bool,
    /// Retries of a request after a server error, a dropped connection, a malformed answer or
    /// a secondary rate limit.
    pub max_retries: u32,
    /// First delay before retrying a server error, in milliseconds; doubles on each retry,
    /// with jitter.
    pub backoff_initial_ms: u64,
    /// Longest delay between retries of a server error, in milliseconds.
    pub backoff_max_ms: u64,
    /// Longest rate-limit wait accepted, in seconds; a longer one stops the run (everything
    /// found so far is in the manifest, and the next run resumes).
    pub max_wait_secs: u64,
    /// Time limit of one request, in seconds.
    pub timeout_secs: u64,
    /// The manifest is rewritten (atomically) at least this often during a run, in seconds.
    pub checkpoint_secs: u64,
}

/// Qualifiers that the configuration keys set; a query must not set them itself.
const MANAGED_QUALIFIERS: &[(&str, &str)] = &[
    ("created:", "slice_by"),
    ("pushed:", "slice_by / pushed_within_days"),
    ("stars:", "min_stars"),
    ("fork:", "include_forks"),
    ("archived:", "include_archived"),
    ("size:", "max_size_kb"),
    ("language:", "languages"),
    ("topic:", "topics"),
    ("sort:", "(results are sorted by stars)"),
];

impl Default for DiscoverConfig {
    fn default() -> Self {
        DiscoverConfig {
            manifest: None,
            api_url: "https://api.github.com".into(),
            token_env: "GITHUB_TOKEN".into(),
            queries: vec!["pytorch".into()],
            languages: vec!["Python".into()],
            topics: Vec::new(),
            min_stars: 10,
            licenses: None,
            accept_unlicensed: None,
            pushed_within_days: 0,
            include_forks: false,
            include_archived: false,
            max_size_kb: 1 << 20,
            slice_by: SliceBy::Created,
            since: "2008-01-01".into(),
            code_search: false,
            code_queries: vec!["nn.Module".into()],
            pin_commits: true,
            max_retries: 6,
            backoff_initial_ms: 1000,
            backoff_max_ms: 60_000,
            max_wait_secs: 3900,
            timeout_secs: 60,
            checkpoint_secs: 30,
        }
    }
}

impl DiscoverConfig {
    /// Checks the values without touching the file system or the network.
    pub fn validate(&self) -> Result<(), Error> {
        let bad = |message: String| {
            Err(Error::Config {
                message: format!("[discover] {message}"),
            })
        };
        let api = self.api_url.trim();
        if !(api.starts_with("https://") || api.starts_with("http://")) {
            return bad(format!(
                "api_url `{api}` must start with https:// or http://"
            ));
        }
        if self.token_env.trim().is_empty() {
            return bad("token_env must name an environment variable".into());
        }
        if self.queries.is_empty() && !self.code_search {
            return bad("queries is empty and code_search is off: nothing to search".into());
        }
        if self.code_search && self.code_queries.is_empty() {
            return bad("code_search is on but code_queries is empty".into());
        }
        for (key, list) in [
            ("queries", &self.queries),
            ("code_queries", &self.code_queries),
            ("languages", &self.languages),
            ("topics", &self.topics),
        ] {
            for item in list {
                if item.trim().is_empty() {
                    return bad(format!("{key} has an empty entry"));
                }
            }
        }
        for query in self.queries.iter().chain(&self.code_queries) {
            for word in query.split_whitespace() {
                let lower = word.to_ascii_lowercase();
                if let Some((q, key)) = MANAGED_QUALIFIERS
                    .iter()
                    .find(|(q, _)| lower.starts_with(q))
                {
                    return bad(format!(
                        "query `{query}` sets `{q}` itself; that qualifier comes from {key}"
                    ));
                }
            }
        }
        for (key, list) in [("languages", &self.languages), ("topics", &self.topics)] {
            if let Some(v) = list.iter().find(|v| v.chars().any(char::is_whitespace)) {
                return bad(format!("{key}: `{v}` must be one word (GitHub's spelling)"));
            }
        }
        if let Some(licenses) = &self.licenses
            && let Some(id) = licenses.iter().find(|id| !is_plausible_spdx_id(id))
        {
            return bad(format!(
                "licenses: `{id}` is not an SPDX license id (letters, digits, `.`, `-`, `+`)"
            ));
        }
        if parse_rfc3339(&self.since).is_none() {
            return bad(format!("since `{}` is not a date (YYYY-MM-DD)", self.since));
        }
        if self.timeout_secs == 0 {
            return bad("timeout_secs must be at least 1".into());
        }
        if self.checkpoint_secs == 0 {
            return bad("checkpoint_secs must be at least 1".into());
        }
        if self.backoff_initial_ms == 0 || self.backoff_max_ms < self.backoff_initial_ms {
            return bad("backoff_initial_ms must be at least 1 and at most backoff_max_ms".into());
        }
        if self.max_retries > 30 {
            return bad("max_retries must be at most 30".into());
        }
        Ok(())
    }

    /// Where the manifest goes: `manifest`, or `<workdir>/manifest.jsonl`.
    pub fn manifest_path(&self, workdir: &Path) -> PathBuf {
        self.manifest
            .clone()
            .unwrap_or_else(|| workdir.join("manifest.jsonl"))
    }

    /// The license policy: this table's `licenses` and `accept_unlicensed` where set, crawl's
    /// `allowed_licenses` and `accept_unlicensed` otherwise.
    pub fn license_policy(
        &self,
        crawl_allowed: &[String],
        crawl_accept_unlicensed: bool,
    ) -> LicensePolicy {
        LicensePolicy {
            allowed: self
                .licenses
                .clone()
                .unwrap_or_else(|| crawl_allowed.to_vec()),
            accept_unlicensed: self.accept_unlicensed.unwrap_or(crawl_accept_unlicensed),
        }
    }
}

/// Which licenses discover keeps.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LicensePolicy {
    /// SPDX ids kept (empty: any license, and repositories without one).
    pub allowed: Vec<String>,
    /// Keep repositories without a license GitHub recognizes.
    pub accept_unlicensed: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid() {
        DiscoverConfig::default().validate().unwrap();
    }

    #[test]
    fn bad_values_name_the_key() {
        let cases: Vec<(DiscoverConfig, &str)> = vec![
            (
                DiscoverConfig {
                    api_url: "api.github.com".into(),
                    ..Default::default()
                },
                "api_url",
            ),
            (
                DiscoverConfig {
                    queries: vec!["pytorch stars:>5".into()],
                    ..Default::default()
                },
                "min_stars",
            ),
            (
                DiscoverConfig {
                    queries: vec!["pytorch created:2020-01-01..2021-01-01".into()],
                    ..Default::default()
                },
                "slice_by",
            ),
            (
                DiscoverConfig {
                    licenses: Some(vec!["MIT License".into()]),
                    ..Default::default()
                },
                "licenses",
            ),
            (
                DiscoverConfig {
                    since: "last year".into(),
                    ..Default::default()
                },
                "since",
            ),
            (
                DiscoverConfig {
                    queries: vec![],
                    ..Default::default()
                },
                "nothing to search",
            ),
            (
                DiscoverConfig {
                    languages: vec!["Jupyter Notebook".into()],
                    ..Default::default()
                },
                "languages",
            ),
            (
                DiscoverConfig {
                    backoff_initial_ms: 0,
                    ..Default::default()
                },
                "backoff_initial_ms",
            ),
        ];
        for (cfg, needle) in cases {
            let msg = cfg.validate().unwrap_err().to_string();
            assert!(msg.contains("[discover]") && msg.contains(needle), "{msg}");
        }
    }

    #[test]
    fn licenses_fall_back_to_crawl() {
        let crawl = vec!["MIT".to_string()];
        let cfg = DiscoverConfig::default();
        let p = cfg.license_policy(&crawl, true);
        assert_eq!(p.allowed, crawl);
        assert!(p.accept_unlicensed);
        let cfg = DiscoverConfig {
            licenses: Some(vec!["Apache-2.0".into()]),
            accept_unlicensed: Some(false),
            ..Default::default()
        };
        let p = cfg.license_policy(&crawl, true);
        assert_eq!(p.allowed, vec!["Apache-2.0".to_string()]);
        assert!(!p.accept_unlicensed);
    }

    #[test]
    fn parses_from_toml_and_rejects_typos() {
        let c = ksmith_core::config::Config::parse(
            "[discover]\nmin_stars = 3\nslice_by = \"pushed\"\n",
            "t",
        )
        .unwrap();
        let cfg: DiscoverConfig = c.section("discover").unwrap();
        assert_eq!(cfg.min_stars, 3);
        assert_eq!(cfg.slice_by, SliceBy::Pushed);
        let c = ksmith_core::config::Config::parse("[discover]\nmin_star = 3\n", "t").unwrap();
        assert!(c.section::<DiscoverConfig>("discover").is_err());
    }
}
