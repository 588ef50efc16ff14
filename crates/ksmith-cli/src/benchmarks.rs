//! Fetching the evaluation benchmarks dedup decontaminates against, with the crawl's own git
//! machinery (a bare mirror, the pinned commit, blobs read from the object database, no work
//! tree, nothing of the repository run).
//!
//! Each benchmark URL gets a crawl work directory under the cache
//! (`<cache>/<hash of the URL>/`): its mirror, `repos.parquet` and the snapshot of the pinned
//! commit. A later run finds the snapshot there without touching the network.

use std::path::{Path, PathBuf};

use ksmith_core::config::SourceSpec;
use ksmith_core::context::StageContext;
use ksmith_core::ids::content_id;
use ksmith_core::progress::ProgressMode;
use ksmith_core::table::{Table, read_table};
use ksmith_core::tables::{RepoRow, RepoStatus};

/// A [`ksmith_dedup::Fetcher`] backed by `ksmith_crawl`.
pub struct CrawlFetcher {
    progress: ProgressMode,
}

impl CrawlFetcher {
    /// A fetcher that reports progress like the stage it serves.
    pub fn new(progress: ProgressMode) -> Self {
        CrawlFetcher { progress }
    }

    fn workdir(cache: &Path, url: &str) -> PathBuf {
        cache.join(&content_id(url)[..16])
    }

    /// The snapshot of `commit` recorded in a crawl work directory, if it is there.
    fn snapshot(workdir: &Path, commit: &str) -> Option<PathBuf> {
        let rows: Vec<RepoRow> = read_table(&RepoRow::path_in(workdir)).ok()?;
        rows.into_iter()
            .filter(|r| r.status == RepoStatus::Ok && r.commit.as_deref() == Some(commit))
            .find_map(|r| r.snapshot.map(|s| workdir.join(s)))
            .filter(|dir| dir.is_dir())
    }
}

impl ksmith_dedup::Fetcher for CrawlFetcher {
    fn cached(&self, url: &str, commit: &str, cache: &Path) -> Option<PathBuf> {
        Self::snapshot(&Self::workdir(cache, url), commit)
    }

    fn fetch(&self, url: &str, commit: &str, cache: &Path) -> Result<PathBuf, String> {
        let workdir = Self::workdir(cache, url);
        std::fs::create_dir_all(&workdir).map_err(|e| format!("{}: {e}", workdir.display()))?;
        let source = SourceSpec {
            name: Some("benchmark".to_string()),
            git: Some(url.to_string()),
            path: None,
            manifest: None,
            rev: Some(commit.to_string()),
            // A benchmark is read to compare against, never redistributed: its license does
            // not decide anything here.
            license: Some("NOASSERTION".to_string()),
            stars: None,
        };
        let cfg = ksmith_crawl::CrawlConfig {
            allowed_licenses: vec!["NOASSERTION".to_string()],
            ..Default::default()
        };
        let ctx = StageContext::new(&workdir, 1, self.progress);
        ksmith_crawl::run(&[source], &cfg, &ctx).map_err(|e| e.to_string())?;
        let rows: Vec<RepoRow> =
            read_table(&RepoRow::path_in(&workdir)).map_err(|e| e.to_string())?;
        if let Some(failed) = rows.iter().find(|r| r.status != RepoStatus::Ok) {
            return Err(failed
                .reason
                .clone()
                .unwrap_or_else(|| format!("{:?}", failed.status)));
        }
        Self::snapshot(&workdir, commit).ok_or_else(|| {
            format!(
                "the crawl of {url} recorded no snapshot of {commit} in {}",
                workdir.display()
            )
        })
    }
}
