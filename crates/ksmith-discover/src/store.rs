//! The manifest as discover keeps it during a run: the lines of the last run, merged with what
//! the searches find, keyed by GitHub's repository id (stable across renames) or, for a line
//! without one, by its name; written back sorted by name, atomically, so a reader (or a run
//! killed mid-write) sees either the old file or the new one.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use ksmith_core::ids::content_id;
use ksmith_core::manifest::ManifestLine;
use ksmith_core::table::write_bytes_atomically;

use crate::error::Error;
use crate::filter::DropReason;

/// How a line is found again.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Key {
    /// GitHub's repository id.
    Id(u64),
    /// The name, in lower case (GitHub's names are case-insensitive).
    Name(String),
}

impl Key {
    fn of(line: &ManifestLine) -> Key {
        match line.github_id {
            Some(id) => Key::Id(id),
            None => Key::Name(line.repo.to_ascii_lowercase()),
        }
    }
}

/// What merging a search result did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Merge {
    /// A repository not in the manifest before.
    New,
    /// Known, and something about it changed (stars, push, license, name, ...).
    Updated,
    /// Known and unchanged.
    Unchanged,
}

/// The manifest in memory.
pub(crate) struct Store {
    path: PathBuf,
    lines: BTreeMap<Key, ManifestLine>,
    /// Lines a search returned in this run.
    seen: BTreeSet<Key>,
    /// Lines in the file when the run started.
    pub(crate) read: usize,
}

impl Store {
    /// Reads the manifest at `path` (none yet: an empty store). A line that cannot be read is
    /// an error naming it, and the file is left alone.
    pub(crate) fn load(path: &Path) -> Result<Store, Error> {
        let mut store = Store {
            path: path.to_path_buf(),
            lines: BTreeMap::new(),
            seen: BTreeSet::new(),
            read: 0,
        };
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(store),
            Err(e) => return Err(Error::io(path, e)),
        };
        for (i, raw) in text.lines().enumerate() {
            if raw.trim().is_empty() {
                continue;
            }
            let bad = |message: String| Error::Manifest {
                path: path.to_path_buf(),
                line: i + 1,
                message,
            };
            let line: ManifestLine = serde_json::from_str(raw).map_err(|e| bad(e.to_string()))?;
            if line.repo.trim().is_empty() || line.url.trim().is_empty() {
                return Err(bad("`repo` and `url` must not be empty".into()));
            }
            let key = Key::of(&line);
            if store.lines.insert(key, line).is_some() {
                return Err(bad(
                    "the same repository is on an earlier line too (same github_id or name)".into(),
                ));
            }
        }
        store.read = store.lines.len();
        Ok(store)
    }

    /// Number of lines.
    pub(crate) fn len(&self) -> usize {
        self.lines.len()
    }

    /// True when a repository with this GitHub id is in the manifest.
    #[cfg(test)]
    pub(crate) fn has_id(&self, id: u64) -> bool {
        self.lines.contains_key(&Key::Id(id))
    }

    /// True when a search of this run (or of the interrupted run it continues) returned the
    /// repository with this GitHub id.
    pub(crate) fn was_seen(&self, id: u64) -> bool {
        self.seen.contains(&Key::Id(id))
    }

    /// Marks repositories as returned by an earlier part of the run.
    pub(crate) fn add_seen(&mut self, ids: &[u64]) {
        self.seen.extend(ids.iter().map(|&id| Key::Id(id)));
    }

    /// GitHub ids of the repositories returned so far, ascending.
    pub(crate) fn seen_ids(&self) -> Vec<u64> {
        self.seen
            .iter()
            .filter_map(|k| match k {
                Key::Id(id) => Some(*id),
                Key::Name(_) => None,
            })
            .collect()
    }

    /// Removes every line no search of the run returned; returns how many.
    pub(crate) fn retain_seen(&mut self) -> usize {
        let before = self.lines.len();
        let seen = &self.seen;
        self.lines.retain(|key, _| seen.contains(key));
        before - self.lines.len()
    }

    /// Merges a repository a search returned. A known repository takes every value of `fresh`;
    /// its pinned commit is kept only while `pin` is on and neither its last push nor its
    /// default branch changed (otherwise it is pinned again).
    pub(crate) fn merge(&mut self, fresh: ManifestLine, pin: bool) -> Merge {
        let key = Key::of(&fresh);
        // A line written without an id (by hand) is adopted by the repository of its name.
        let old = self.lines.remove(&key).or_else(|| {
            let by_name = Key::Name(fresh.repo.to_ascii_lowercase());
            self.lines.remove(&by_name)
        });
        let mut next = fresh;
        let outcome = match &old {
            None => Merge::New,
            Some(old) => {
                if pin
                    && old.pushed_at == next.pushed_at
                    && old.default_branch == next.default_branch
                {
                    next.rev = old.rev.clone();
                }
                if *old == next {
                    Merge::Unchanged
                } else {
                    Merge::Updated
                }
            }
        };
        self.seen.insert(key.clone());
        self.lines.insert(key, next);
        outcome
    }

    /// Lines found by GitHub id with no pinned commit, in name order: key, name, default
    /// branch.
    pub(crate) fn unpinned(&self) -> Vec<(Key, String, String)> {
        let mut out: Vec<(Key, String, String)> = self
            .lines
            .iter()
            .filter(|(_, l)| l.rev.is_none() && l.github_id.is_some())
            .filter_map(|(k, l)| Some((k.clone(), l.repo.clone(), l.default_branch.clone()?)))
            .collect();
        out.sort_by(|a, b| (&a.1, &a.0).cmp(&(&b.1, &b.0)));
        out
    }

    /// Records the pinned commit of a line.
    pub(crate) fn pin(&mut self, key: &Key, sha: String) {
        if let Some(line) = self.lines.get_mut(key) {
            line.rev = Some(sha);
        }
    }

    /// Removes a line.
    pub(crate) fn remove(&mut self, key: &Key) {
        self.lines.remove(key);
    }

    /// Keeps the lines `keep` accepts and returns the reasons of the others.
    pub(crate) fn retain(
        &mut self,
        keep: impl Fn(&ManifestLine) -> Result<(), DropReason>,
    ) -> Vec<DropReason> {
        let mut dropped = Vec::new();
        self.lines.retain(|_, line| match keep(line) {
            Ok(()) => true,
            Err(reason) => {
                dropped.push(reason);
                false
            }
        });
        dropped
    }

    /// Where two lines have one name (case-insensitive), keeps one: the one a search returned
    /// in this run, or else the higher id. Returns how many were dropped.
    pub(crate) fn drop_name_clashes(&mut self) -> usize {
        let mut best: BTreeMap<String, Key> = BTreeMap::new();
        for (key, line) in &self.lines {
            let name = line.repo.to_ascii_lowercase();
            let better = match best.get(&name) {
                None => true,
                Some(other) => (self.seen.contains(key), key) > (self.seen.contains(other), other),
            };
            if better {
                best.insert(name, key.clone());
            }
        }
        let keep: BTreeSet<Key> = best.into_values().collect();
        let before = self.lines.len();
        self.lines.retain(|key, _| keep.contains(key));
        before - self.lines.len()
    }

    /// The lines in file order: by name (case-insensitive), then key.
    pub(crate) fn lines(&self) -> Vec<&ManifestLine> {
        let mut out: Vec<(String, &Key, &ManifestLine)> = self
            .lines
            .iter()
            .map(|(k, l)| (l.repo.to_ascii_lowercase(), k, l))
            .collect();
        out.sort_by(|a, b| (&a.0, a.1).cmp(&(&b.0, b.1)));
        out.into_iter().map(|(_, _, l)| l).collect()
    }

    /// Writes the manifest atomically and returns the content id of what was written.
    pub(crate) fn write(&self) -> Result<String, Error> {
        let mut text = String::new();
        for line in self.lines() {
            let json = serde_json::to_string(line).map_err(|e| Error::Config {
                message: format!("cannot write the manifest line of {}: {e}", line.repo),
            })?;
            text.push_str(&json);
            text.push('\n');
        }
        write_bytes_atomically(&self.path, text.as_bytes())?;
        Ok(content_id(text.as_bytes()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(id: u64, repo: &str, stars: i64, pushed: &str) -> ManifestLine {
        ManifestLine {
            repo: repo.into(),
            url: format!("https://github.com/{repo}.git"),
            stars: Some(stars),
            github_id: Some(id),
            default_branch: Some("main".into()),
            pushed_at: Some(pushed.into()),
            ..Default::default()
        }
    }

    const T1: &str = "2026-01-01T00:00:00Z";
    const T2: &str = "2026-02-01T00:00:00Z";

    #[test]
    fn merges_by_id_keeps_pins_until_a_push_and_never_duplicates() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.jsonl");
        let mut s = Store::load(&path).unwrap();
        assert_eq!(s.merge(line(1, "a/x", 5, T1), true), Merge::New);
        s.pin(&Key::Id(1), "1".repeat(40));
        assert_eq!(s.merge(line(1, "a/x", 5, T1), true), Merge::Unchanged);
        assert_eq!(s.merge(line(1, "a/x", 9, T1), true), Merge::Updated);
        assert_eq!(s.lines()[0].rev.as_deref(), Some("1".repeat(40).as_str()));
        // Renamed: same id, new name; still one line.
        assert_eq!(s.merge(line(1, "a/y", 9, T1), true), Merge::Updated);
        assert_eq!(s.len(), 1);
        assert!(s.unpinned().is_empty());
        // Pushed to: the pin goes, to be read again.
        s.merge(line(1, "a/y", 9, T2), true);
        assert_eq!(
            s.unpinned(),
            vec![(Key::Id(1), "a/y".to_string(), "main".to_string())]
        );
        // With pinning off, no line keeps a pin.
        s.pin(&Key::Id(1), "2".repeat(40));
        s.merge(line(1, "a/y", 9, T2), false);
        assert_eq!(s.lines()[0].rev, None);
    }

    #[test]
    fn writes_sorted_and_reads_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/m.jsonl");
        let mut s = Store::load(&path).unwrap();
        s.merge(line(2, "b/b", 1, T1), false);
        s.merge(line(1, "A/a", 1, T1), false);
        let id = s.write().unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(id, content_id(&text));
        assert!(text.find("A/a").unwrap() < text.find("b/b").unwrap());
        let back = Store::load(&path).unwrap();
        assert_eq!(back.read, 2);
        assert!(back.has_id(1) && back.has_id(2));
    }

    #[test]
    fn hand_written_lines_are_adopted_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.jsonl");
        std::fs::write(
            &path,
            "{\"repo\": \"O/R\", \"url\": \"https://github.com/O/R.git\", \"stars\": 3}\n",
        )
        .unwrap();
        let mut s = Store::load(&path).unwrap();
        assert_eq!(s.merge(line(7, "o/r", 4, T1), true), Merge::Updated);
        assert_eq!(s.len(), 1);
        assert!(s.has_id(7));
    }

    #[test]
    fn name_clashes_keep_the_repository_seen_now() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.jsonl");
        std::fs::write(
            &path,
            format!(
                "{}\n",
                serde_json::to_string(&line(9, "o/r", 1, T1)).unwrap()
            ),
        )
        .unwrap();
        let mut s = Store::load(&path).unwrap();
        s.merge(line(3, "o/R", 1, T1), false);
        assert_eq!(s.drop_name_clashes(), 1);
        assert!(s.has_id(3) && !s.has_id(9));
        assert!(s.was_seen(3) && !s.was_seen(9));
    }

    #[test]
    fn lines_no_search_returned_can_be_removed() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Store::load(&dir.path().join("m.jsonl")).unwrap();
        s.merge(line(1, "a/a", 1, T1), false);
        s.merge(line(2, "b/b", 1, T1), false);
        let mut again = Store::load(&dir.path().join("m.jsonl")).unwrap();
        again.lines = s.lines.clone();
        again.add_seen(&[2]);
        assert_eq!(again.seen_ids(), vec![2]);
        assert_eq!(again.retain_seen(), 1);
        assert!(again.has_id(2) && !again.has_id(1));
    }

    #[test]
    fn a_bad_manifest_names_the_line_and_is_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.jsonl");
        let text = "{\"repo\": \"a/b\", \"url\": \"u\"}\n\n{\"repo\": \"c/d\", \"url\": \"u\", \"licence\": \"MIT\"}\n";
        std::fs::write(&path, text).unwrap();
        let err = Store::load(&path).err().unwrap().to_string();
        assert!(
            err.contains("m.jsonl, line 3") && err.contains("licence"),
            "{err}"
        );
        let dup = "{\"repo\": \"a/b\", \"url\": \"u\"}\n{\"repo\": \"A/B\", \"url\": \"v\"}\n";
        std::fs::write(&path, dup).unwrap();
        let err = Store::load(&path).err().unwrap().to_string();
        assert!(
            err.contains("line 2") && err.contains("earlier line"),
            "{err}"
        );
        assert_eq!(std::fs::read_to_string(&path).unwrap(), dup);
    }
}
