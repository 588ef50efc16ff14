//! The filters of `[discover]`, applied to every repository a search returns and, on every run,
//! to every line already in the manifest, so the manifest always satisfies the current
//! configuration. A value a line does not record (a hand-written line) passes.

use ksmith_core::manifest::ManifestLine;
use ksmith_core::spdx::is_allowed;
use ksmith_core::timestamp::parse_rfc3339;

use crate::config::{DiscoverConfig, LicensePolicy};

ksmith_core::vocabulary! {
    /// Why a repository is not (or no longer) in the manifest (one vocabulary: the names are
    /// those of the reports).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
    pub(crate) enum DropReason {
        /// A private repository (visible through the token).
        Private = "private",
        /// Disabled by GitHub.
        Disabled = "disabled",
        /// A fork, and `include_forks` is off.
        Fork = "fork",
        /// Archived, and `include_archived` is off.
        Archived = "archived",
        /// Fewer than `min_stars` stars.
        Stars = "stars",
        /// A license not on the list.
        License = "license",
        /// No license file, and unlicensed repositories are not kept.
        Unlicensed = "unlicensed",
        /// Not pushed to within `pushed_within_days`.
        Stale = "stale",
        /// Larger than `max_size_kb`.
        TooLarge = "too_large",
        /// Primary language not in `languages`.
        Language = "language",
        /// None of `topics`.
        Topic = "topic",
        /// Deleted, made private or blocked since it was found (404, 451).
        Gone = "gone",
        /// An empty repository (no commit to pin).
        Empty = "empty",
        /// Another repository now has its name (it was renamed or deleted and the name reused).
        NameTaken = "name_taken",
        /// No longer returned by the searches of a complete run (deleted, made private, or no
        /// longer matching a qualifier such as `min_stars`).
        NotFound = "not_found",
        /// GitHub's description of it could not be read.
        MalformedItem = "malformed_item",
    }
}

/// The filters of one run.
#[derive(Debug, Clone)]
pub(crate) struct Filters {
    min_stars: u64,
    licenses: LicensePolicy,
    pushed_after: Option<u64>,
    include_forks: bool,
    include_archived: bool,
    max_size_kb: Option<u64>,
    languages: Vec<String>,
    topics: Vec<String>,
}

impl Filters {
    /// The filters of `cfg` for a run whose reference time is `now` (epoch seconds).
    pub(crate) fn new(cfg: &DiscoverConfig, licenses: &LicensePolicy, now: u64) -> Filters {
        Filters {
            min_stars: cfg.min_stars,
            licenses: licenses.clone(),
            pushed_after: pushed_after(cfg, now),
            include_forks: cfg.include_forks,
            include_archived: cfg.include_archived,
            max_size_kb: (cfg.max_size_kb > 0).then_some(cfg.max_size_kb),
            languages: cfg.languages.clone(),
            topics: cfg.topics.clone(),
        }
    }

    /// Checks one line. `no_license_file` is true when GitHub said the repository has no
    /// license at all (as opposed to one it does not recognize, which crawl's own detection
    /// may still classify).
    pub(crate) fn check(
        &self,
        line: &ManifestLine,
        no_license_file: bool,
    ) -> Result<(), DropReason> {
        let fail = |bad: bool, reason| if bad { Err(reason) } else { Ok(()) };
        fail(
            line.fork == Some(true) && !self.include_forks,
            DropReason::Fork,
        )?;
        fail(
            line.archived == Some(true) && !self.include_archived,
            DropReason::Archived,
        )?;
        fail(
            line.stars
                .is_some_and(|s| u64::try_from(s).unwrap_or(0) < self.min_stars),
            DropReason::Stars,
        )?;
        if !self.licenses.allowed.is_empty() {
            match &line.license {
                Some(l) => fail(!is_allowed(l, &self.licenses.allowed), DropReason::License)?,
                None => fail(
                    no_license_file && !self.licenses.accept_unlicensed,
                    DropReason::Unlicensed,
                )?,
            }
        }
        if let (Some(after), Some(pushed)) = (self.pushed_after, &line.pushed_at) {
            fail(
                parse_rfc3339(pushed).is_some_and(|p| p < after),
                DropReason::Stale,
            )?;
        }
        if let (Some(max), Some(size)) = (self.max_size_kb, line.size_kb) {
            fail(size > max, DropReason::TooLarge)?;
        }
        if let Some(language) = &line.language {
            fail(
                !self.languages.is_empty()
                    && !self
                        .languages
                        .iter()
                        .any(|l| l.eq_ignore_ascii_case(language)),
                DropReason::Language,
            )?;
        }
        // A line discover wrote records the topics even when there are none.
        let topics_known = !line.topics.is_empty() || line.github_id.is_some();
        fail(
            topics_known
                && !self.topics.is_empty()
                && !self
                    .topics
                    .iter()
                    .any(|t| line.topics.iter().any(|have| have.eq_ignore_ascii_case(t))),
            DropReason::Topic,
        )?;
        Ok(())
    }
}

/// The earliest push time kept, when `pushed_within_days` is set.
pub(crate) fn pushed_after(cfg: &DiscoverConfig, now: u64) -> Option<u64> {
    (cfg.pushed_within_days > 0)
        .then(|| now.saturating_sub(cfg.pushed_within_days.saturating_mul(86_400)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line() -> ManifestLine {
        ManifestLine {
            repo: "o/r".into(),
            url: "u".into(),
            license: Some("MIT".into()),
            stars: Some(50),
            github_id: Some(1),
            pushed_at: Some("2026-01-01T00:00:00Z".into()),
            fork: Some(false),
            archived: Some(false),
            size_kb: Some(100),
            language: Some("Python".into()),
            topics: vec!["pytorch".into()],
            ..Default::default()
        }
    }

    fn filters(cfg: &DiscoverConfig) -> Filters {
        let policy = cfg.license_policy(&["MIT".to_string()], false);
        // 2026-02-01T00:00:00Z
        Filters::new(cfg, &policy, 1_769_904_000)
    }

    #[test]
    fn each_filter_drops_for_its_reason() {
        let cfg = DiscoverConfig {
            pushed_within_days: 10,
            topics: vec!["PyTorch".into()],
            max_size_kb: 1000,
            ..Default::default()
        };
        let f = filters(&cfg);
        let recent = ManifestLine {
            pushed_at: Some("2026-01-30T00:00:00Z".into()),
            ..line()
        };
        assert_eq!(f.check(&recent, false), Ok(()));
        let cases: Vec<(ManifestLine, bool, DropReason)> = vec![
            (line(), false, DropReason::Stale),
            (
                ManifestLine {
                    fork: Some(true),
                    ..recent.clone()
                },
                false,
                DropReason::Fork,
            ),
            (
                ManifestLine {
                    archived: Some(true),
                    ..recent.clone()
                },
                false,
                DropReason::Archived,
            ),
            (
                ManifestLine {
                    stars: Some(9),
                    ..recent.clone()
                },
                false,
                DropReason::Stars,
            ),
            (
                ManifestLine {
                    license: Some("GPL-3.0".into()),
                    ..recent.clone()
                },
                false,
                DropReason::License,
            ),
            (
                ManifestLine {
                    license: None,
                    ..recent.clone()
                },
                true,
                DropReason::Unlicensed,
            ),
            (
                ManifestLine {
                    size_kb: Some(1001),
                    ..recent.clone()
                },
                false,
                DropReason::TooLarge,
            ),
            (
                ManifestLine {
                    language: Some("Jupyter Notebook".into()),
                    ..recent.clone()
                },
                false,
                DropReason::Language,
            ),
            (
                ManifestLine {
                    topics: vec!["jax".into()],
                    ..recent.clone()
                },
                false,
                DropReason::Topic,
            ),
            (
                ManifestLine {
                    topics: vec![],
                    ..recent.clone()
                },
                false,
                DropReason::Topic,
            ),
        ];
        for (l, no_license, reason) in cases {
            assert_eq!(f.check(&l, no_license), Err(reason), "{l:?}");
        }
        // A license GitHub does not recognize is left to crawl's detection.
        let unrecognized = ManifestLine {
            license: None,
            ..recent
        };
        assert_eq!(f.check(&unrecognized, false), Ok(()));
    }

    #[test]
    fn unknown_values_pass_and_empty_lists_mean_any() {
        let cfg = DiscoverConfig {
            languages: vec![],
            licenses: Some(vec![]),
            ..Default::default()
        };
        let f = filters(&cfg);
        let hand_written = ManifestLine {
            repo: "o/r".into(),
            url: "u".into(),
            ..Default::default()
        };
        assert_eq!(f.check(&hand_written, false), Ok(()));
        let l = ManifestLine {
            license: Some("GPL-3.0".into()),
            language: Some("C++".into()),
            ..line()
        };
        assert_eq!(f.check(&l, false), Ok(()));
        assert_eq!(f.check(&ManifestLine { license: None, ..l }, true), Ok(()));
    }
}
