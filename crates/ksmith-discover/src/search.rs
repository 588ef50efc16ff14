//! The searches a configuration asks for, and how one is sliced to get past GitHub's cap of
//! 1,000 results a query.
//!
//! Every search covers a range of one dimension: creation or push time for repositories (in
//! seconds, so a slice can be as narrow as GitHub's timestamps), file size for code. A slice
//! whose first page reports more than [`RESULT_CAP`] results is split into equal parts (more
//! parts the further over the cap it is) and each part is searched the same way, until every
//! slice fits. A one-second (or one-byte) slice that still holds more than the cap cannot be
//! split: its first 1,000 results are taken and the slice is counted as truncated.

use ksmith_core::timestamp::{parse_rfc3339, rfc3339_from_secs};

use crate::config::{DiscoverConfig, SliceBy};
use crate::filter::pushed_after;

/// GitHub returns at most this many results for one query.
pub(crate) const RESULT_CAP: u64 = 1000;
/// Results a page (GitHub's largest page).
pub(crate) const PER_PAGE: u64 = 100;
/// GitHub's code search covers files up to 384 KiB.
pub(crate) const MAX_CODE_FILE_BYTES: u64 = 384 * 1024;

/// What is searched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// `/search/repositories`.
    Repositories,
    /// `/search/code`.
    Code,
}

/// The dimension a search is sliced along.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dimension {
    /// `created:` (epoch seconds).
    Created,
    /// `pushed:` (epoch seconds).
    Pushed,
    /// `size:` of a file (bytes).
    FileSize,
}

/// One search: terms and qualifiers, and the range to cover.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Search {
    /// Repositories or code.
    pub(crate) kind: Kind,
    /// Search terms with the configured qualifiers, without the slice's.
    pub(crate) terms: String,
    /// The slicing dimension.
    pub(crate) dimension: Dimension,
    /// First value of the range (inclusive).
    pub(crate) lo: u64,
    /// Last value of the range (inclusive).
    pub(crate) hi: u64,
}

impl Search {
    /// The qualifier that restricts the search to `lo..=hi`.
    pub(crate) fn qualifier(&self, lo: u64, hi: u64) -> String {
        match self.dimension {
            Dimension::Created => {
                format!(
                    "created:{}..{}",
                    rfc3339_from_secs(lo),
                    rfc3339_from_secs(hi)
                )
            }
            Dimension::Pushed => {
                format!(
                    "pushed:{}..{}",
                    rfc3339_from_secs(lo),
                    rfc3339_from_secs(hi)
                )
            }
            Dimension::FileSize => format!("size:{lo}..{hi}"),
        }
    }

    /// The full query of one slice.
    pub(crate) fn query(&self, lo: u64, hi: u64) -> String {
        format!("{} {}", self.terms, self.qualifier(lo, hi))
    }

    /// The API path.
    pub(crate) fn path(&self) -> &'static str {
        match self.kind {
            Kind::Repositories => "/search/repositories",
            Kind::Code => "/search/code",
        }
    }
}

/// The searches of `cfg` for a run whose reference time is `until` (epoch seconds): one per
/// query, language and topic for repositories, one per code query and language for code.
pub(crate) fn searches(cfg: &DiscoverConfig, until: u64) -> Vec<Search> {
    let since = parse_rfc3339(&cfg.since).unwrap_or(0);
    let pushed_after = pushed_after(cfg, until);
    let (dimension, lo) = match cfg.slice_by {
        SliceBy::Created => (Dimension::Created, since),
        SliceBy::Pushed => (Dimension::Pushed, since.max(pushed_after.unwrap_or(0))),
    };
    let languages = optional(&cfg.languages);
    let topics = optional(&cfg.topics);
    let mut out = Vec::new();
    for query in &cfg.queries {
        for language in &languages {
            for topic in &topics {
                let mut terms = vec![query.trim().to_string()];
                if let Some(l) = language {
                    terms.push(format!("language:{l}"));
                }
                if let Some(t) = topic {
                    terms.push(format!("topic:{t}"));
                }
                terms.push(format!("stars:>={}", cfg.min_stars));
                if cfg.include_forks {
                    terms.push("fork:true".into());
                }
                if !cfg.include_archived {
                    terms.push("archived:false".into());
                }
                if cfg.max_size_kb > 0 {
                    terms.push(format!("size:<={}", cfg.max_size_kb));
                }
                if let (Some(after), SliceBy::Created) = (pushed_after, cfg.slice_by) {
                    terms.push(format!("pushed:>={}", rfc3339_from_secs(after)));
                }
                out.push(Search {
                    kind: Kind::Repositories,
                    terms: terms.join(" "),
                    dimension,
                    lo,
                    hi: until,
                });
            }
        }
    }
    if cfg.code_search {
        for query in &cfg.code_queries {
            for language in &languages {
                let mut terms = query.trim().to_string();
                if let Some(l) = language {
                    terms.push_str(&format!(" language:{l}"));
                }
                out.push(Search {
                    kind: Kind::Code,
                    terms,
                    dimension: Dimension::FileSize,
                    lo: 0,
                    hi: MAX_CODE_FILE_BYTES,
                });
            }
        }
    }
    out
}

fn optional(items: &[String]) -> Vec<Option<&str>> {
    if items.is_empty() {
        vec![None]
    } else {
        items.iter().map(|s| Some(s.trim())).collect()
    }
}

/// Splits `lo..=hi`, which holds `total` results, into equal consecutive parts: enough that
/// each would hold about three quarters of the cap if results were spread evenly (at least 2,
/// at most 16, never more than the values in the range).
pub(crate) fn split(lo: u64, hi: u64, total: u64) -> Vec<(u64, u64)> {
    let width = hi - lo + 1;
    let parts = total.div_ceil(RESULT_CAP * 3 / 4).clamp(2, 16).min(width);
    (0..parts)
        .map(|i| {
            (
                lo + (width as u128 * i as u128 / parts as u128) as u64,
                lo + (width as u128 * (i + 1) as u128 / parts as u128) as u64 - 1,
            )
        })
        .collect()
}

/// Pages to read for a slice holding `total` results.
pub(crate) fn pages(total: u64) -> u64 {
    total.min(RESULT_CAP).div_ceil(PER_PAGE)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_cover_the_range_exactly() {
        for (lo, hi, total) in [
            (0, 99, 5000),
            (10, 11, 1_000_000),
            (1_199_145_600, 1_800_000_000, 3_000_000),
            (0, MAX_CODE_FILE_BYTES, 1500),
        ] {
            let parts = split(lo, hi, total);
            assert!(parts.len() >= 2 && parts.len() <= 16, "{parts:?}");
            assert_eq!(parts[0].0, lo);
            assert_eq!(parts[parts.len() - 1].1, hi);
            for w in parts.windows(2) {
                assert_eq!(w[0].1 + 1, w[1].0);
                assert!(w[0].0 <= w[0].1);
            }
        }
        assert_eq!(split(0, 99, 1001).len(), 2);
        assert_eq!(split(0, 99, 12_000).len(), 16);
        assert_eq!(pages(0), 0);
        assert_eq!(pages(101), 2);
        assert_eq!(pages(50_000), 10);
    }

    #[test]
    fn one_search_per_query_language_and_topic() {
        let cfg = DiscoverConfig {
            queries: vec!["pytorch".into(), "transformer".into()],
            languages: vec!["Python".into()],
            topics: vec!["deep-learning".into(), "vision".into()],
            pushed_within_days: 365,
            code_search: true,
            ..Default::default()
        };
        let until = parse_rfc3339("2026-06-01").unwrap();
        let s = searches(&cfg, until);
        assert_eq!(s.len(), 5);
        assert_eq!(
            s[0].terms,
            "pytorch language:Python topic:deep-learning stars:>=10 archived:false \
             size:<=1048576 pushed:>=2025-06-01T00:00:00Z"
        );
        assert_eq!(
            s[0].query(0, 59),
            format!(
                "{} created:1970-01-01T00:00:00Z..1970-01-01T00:00:59Z",
                s[0].terms
            )
        );
        assert_eq!(s[0].lo, parse_rfc3339("2008-01-01").unwrap());
        assert_eq!(s[0].hi, until);
        assert_eq!(s[4].kind, Kind::Code);
        assert_eq!(s[4].query(0, 10), "nn.Module language:Python size:0..10");
        let pushed = DiscoverConfig {
            slice_by: SliceBy::Pushed,
            ..cfg
        };
        let s = searches(&pushed, until);
        assert!(!s[0].terms.contains("pushed:"));
        assert_eq!(s[0].lo, parse_rfc3339("2025-06-01").unwrap());
        assert!(
            s[0].query(s[0].lo, s[0].hi)
                .contains("pushed:2025-06-01T00:00:00Z..")
        );
    }
}
