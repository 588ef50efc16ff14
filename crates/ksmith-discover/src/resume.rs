//! Where an interrupted run stopped: the reference time of the run and the slices of each
//! search already read, in `<manifest>.progress.json` next to the manifest. A run with the same
//! search settings picks it up and skips those slices (their repositories are already in the
//! manifest); a run that finishes every search removes it, so the next one starts afresh.
//!
//! The file is only a shortcut: if it is missing, unreadable or from other settings, the run
//! starts over and loses nothing but time.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use ksmith_core::config::section_hash;
use ksmith_core::table::write_bytes_atomically;
use serde::{Deserialize, Serialize};

use crate::config::{DiscoverConfig, LicensePolicy};
use crate::error::Error;

const VERSION: u32 = 1;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct ProgressFile {
    version: u32,
    searches: String,
    until: u64,
    done: BTreeMap<usize, Vec<(u64, u64)>>,
    /// GitHub ids of the repositories the searches returned so far.
    #[serde(default)]
    seen: Vec<u64>,
}

/// The progress of a run.
#[derive(Debug)]
pub(crate) struct Progress {
    path: PathBuf,
    file: ProgressFile,
    /// Why an existing progress file was not used, when there was one.
    pub(crate) note: Option<String>,
    /// True when the run continues an interrupted one.
    pub(crate) resumed: bool,
}

/// The hash of the settings that decide what the searches return and what is kept of it.
fn searches_hash(cfg: &DiscoverConfig, licenses: &LicensePolicy) -> String {
    section_hash(&(
        licenses,
        &cfg.api_url,
        &cfg.queries,
        &cfg.languages,
        &cfg.topics,
        cfg.min_stars,
        cfg.pushed_within_days,
        cfg.include_forks,
        cfg.include_archived,
        cfg.max_size_kb,
        cfg.slice_by,
        &cfg.since,
        cfg.code_search,
        &cfg.code_queries,
    ))
}

impl Progress {
    /// The progress file of the manifest at `manifest`.
    pub(crate) fn path_for(manifest: &Path) -> PathBuf {
        manifest.with_extension("progress.json")
    }

    /// Continues the interrupted run recorded next to `manifest` when it had the same search
    /// settings (and `fresh` is false); otherwise starts a run whose reference time is `now`.
    pub(crate) fn open(
        manifest: &Path,
        cfg: &DiscoverConfig,
        licenses: &LicensePolicy,
        now: u64,
        fresh: bool,
    ) -> Progress {
        let path = Progress::path_for(manifest);
        let searches = searches_hash(cfg, licenses);
        let start = |note: Option<String>| Progress {
            path: path.clone(),
            file: ProgressFile {
                version: VERSION,
                searches: searches.clone(),
                until: now,
                done: BTreeMap::new(),
                seen: Vec::new(),
            },
            note,
            resumed: false,
        };
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(_) => return start(None),
        };
        if fresh {
            return start(Some(format!("{}: not resumed (--force)", path.display())));
        }
        match serde_json::from_str::<ProgressFile>(&text) {
            Ok(file) if file.version == VERSION && file.searches == searches => Progress {
                path,
                file,
                note: None,
                resumed: true,
            },
            Ok(_) => start(Some(format!(
                "{}: from other search settings, starting over",
                path.display()
            ))),
            Err(e) => start(Some(format!(
                "{}: unreadable ({e}), starting over",
                path.display()
            ))),
        }
    }

    /// The reference time of the run (epoch seconds): the end of the searched date ranges.
    pub(crate) fn until(&self) -> u64 {
        self.file.until
    }

    /// True when `lo..=hi` of search `search` was read completely.
    pub(crate) fn covered(&self, search: usize, lo: u64, hi: u64) -> bool {
        self.file
            .done
            .get(&search)
            .is_some_and(|done| done.iter().any(|&(a, b)| a <= lo && hi <= b))
    }

    /// Records `lo..=hi` of search `search` as read, merging it with adjacent slices.
    pub(crate) fn mark(&mut self, search: usize, lo: u64, hi: u64) {
        let done = self.file.done.entry(search).or_default();
        done.push((lo, hi));
        done.sort_unstable();
        let mut merged: Vec<(u64, u64)> = Vec::with_capacity(done.len());
        for &(a, b) in done.iter() {
            match merged.last_mut() {
                Some(last) if a <= last.1.saturating_add(1) => last.1 = last.1.max(b),
                _ => merged.push((a, b)),
            }
        }
        *done = merged;
    }

    /// GitHub ids of the repositories the searches of the interrupted run returned.
    pub(crate) fn seen(&self) -> &[u64] {
        &self.file.seen
    }

    /// Records the ids the searches returned so far (written by the next [`Progress::save`]).
    pub(crate) fn set_seen(&mut self, ids: Vec<u64>) {
        self.file.seen = ids;
    }

    /// Writes the progress file (atomically).
    pub(crate) fn save(&self) -> Result<(), Error> {
        let json = serde_json::to_vec(&self.file).map_err(|e| Error::Config {
            message: format!("cannot write {}: {e}", self.path.display()),
        })?;
        write_bytes_atomically(&self.path, &json)?;
        Ok(())
    }

    /// Removes the progress file: every search finished.
    pub(crate) fn finish(&self) -> Result<(), Error> {
        match std::fs::remove_file(&self.path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(Error::io(&self.path, e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resumes_only_the_same_settings() {
        let dir = tempfile::tempdir().unwrap();
        let manifest = dir.path().join("manifest.jsonl");
        let cfg = DiscoverConfig::default();
        let mit = cfg.license_policy(&["MIT".to_string()], false);
        let mut p = Progress::open(&manifest, &cfg, &mit, 1000, false);
        assert!(!p.resumed && p.note.is_none());
        p.mark(0, 10, 19);
        p.mark(0, 20, 29);
        p.mark(1, 5, 5);
        p.set_seen(vec![3, 8]);
        p.save().unwrap();
        assert_eq!(
            Progress::path_for(&manifest),
            dir.path().join("manifest.progress.json")
        );

        let p = Progress::open(&manifest, &cfg, &mit, 2000, false);
        assert!(p.resumed);
        assert_eq!(p.until(), 1000);
        assert_eq!(p.seen(), [3, 8]);
        assert!(p.covered(0, 12, 27));
        assert!(p.covered(1, 5, 5));
        assert!(!p.covered(0, 25, 30));
        assert!(!p.covered(2, 5, 5));

        let other = DiscoverConfig {
            min_stars: 99,
            ..Default::default()
        };
        let p = Progress::open(&manifest, &other, &mit, 3000, false);
        assert!(!p.resumed && p.note.as_deref().is_some_and(|n| n.contains("other")));
        assert_eq!(p.until(), 3000);
        let apache = cfg.license_policy(&["Apache-2.0".to_string()], false);
        assert!(!Progress::open(&manifest, &cfg, &apache, 3000, false).resumed);
        let p = Progress::open(&manifest, &cfg, &mit, 3000, true);
        assert!(!p.resumed);

        std::fs::write(Progress::path_for(&manifest), "{garbage").unwrap();
        let p = Progress::open(&manifest, &cfg, &mit, 3000, false);
        assert!(p.note.as_deref().is_some_and(|n| n.contains("unreadable")));
        p.finish().unwrap();
        assert!(!Progress::path_for(&manifest).exists());
        p.finish().unwrap();
    }
}
