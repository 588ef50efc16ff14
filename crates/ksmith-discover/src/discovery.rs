//! One discover run: the searches slice by slice, the metadata of repositories found by code
//! search, the filters, the commit pins, checkpoints of the manifest, and the counters.

use std::collections::{BTreeMap, BTreeSet};

use ksmith_core::context::StageContext;
use ksmith_core::progress::Tracker;
use ksmith_core::report::StageReport;

use crate::clock::Clock;
use crate::config::DiscoverConfig;
use crate::error::Error;
use crate::filter::{DropReason, Filters};
use crate::github::{ACCEPT_JSON, ACCEPT_SHA, GitHub, Refusal, Request, Resource, encode_ref};
use crate::resume::Progress;
use crate::search::{Kind, RESULT_CAP, Search, pages, split};
use crate::store::{Key, Merge, Store};
use crate::wire::{Page, Repo, parse_code_item, parse_page, parse_repo, parse_sha};

/// Times an incomplete page (GitHub stopped the query early) is asked for again.
const INCOMPLETE_RETRIES: u32 = 2;

/// What a slice turned out to be.
enum Slice {
    /// Over the cap: search these parts instead.
    Split(Vec<(u64, u64)>),
    /// Read completely (or up to the cap, when it cannot be split).
    Done,
}

/// The state of a run.
pub(crate) struct Discovery<'a> {
    pub(crate) cfg: &'a DiscoverConfig,
    pub(crate) ctx: &'a StageContext,
    pub(crate) clock: &'a dyn Clock,
    pub(crate) client: GitHub<'a>,
    pub(crate) store: Store,
    pub(crate) progress: Progress,
    pub(crate) filters: Filters,
    pub(crate) tracker: Tracker,
    pub(crate) counts: BTreeMap<&'static str, u64>,
    pub(crate) dropped: BTreeMap<&'static str, u64>,
    /// Repositories of code search results looked up in this run (by GitHub id).
    pub(crate) looked_up: BTreeSet<u64>,
    /// One message per slice that failed.
    pub(crate) failed: Vec<String>,
    pub(crate) last_checkpoint: u64,
    pub(crate) manifest_id: String,
}

impl Discovery<'_> {
    fn count(&mut self, name: &'static str, n: u64) {
        *self.counts.entry(name).or_default() += n;
    }

    fn drop_repo(&mut self, reason: DropReason) {
        *self.dropped.entry(reason.as_str()).or_default() += 1;
    }

    /// Runs every search, then filters, pins and writes the manifest. The manifest is written
    /// whatever happens, so what was found is never lost.
    pub(crate) fn run(&mut self, searches: &[Search]) -> Result<(), Error> {
        if let Err(e) = self.search_all(searches) {
            // Keep what was found; the progress file lets the next run resume.
            self.checkpoint()?;
            return Err(e);
        }
        self.finish()
    }

    fn search_all(&mut self, searches: &[Search]) -> Result<(), Error> {
        for (index, search) in searches.iter().enumerate() {
            let mut stack = vec![(search.lo, search.hi)];
            while let Some((lo, hi)) = stack.pop() {
                if self.progress.covered(index, lo, hi) {
                    self.count("slices_resumed", 1);
                    continue;
                }
                match self.slice(search, lo, hi) {
                    Ok(Slice::Split(parts)) => {
                        self.count("slices_split", 1);
                        stack.extend(parts.into_iter().rev());
                    }
                    Ok(Slice::Done) => {
                        self.count("slices", 1);
                        self.progress.mark(index, lo, hi);
                        self.maybe_checkpoint()?;
                    }
                    Err(e) if e.is_per_search() => {
                        self.ctx.warn(format!("discover: {e}"));
                        self.failed.push(e.to_string());
                    }
                    Err(e) => return Err(e),
                }
            }
        }
        Ok(())
    }

    fn finish(&mut self) -> Result<(), Error> {
        // Only a run that listed every result may conclude that a repository is gone.
        let complete = self.failed.is_empty()
            && !self.counts.contains_key("slices_truncated")
            && !self.counts.contains_key("pages_incomplete");
        if complete {
            for _ in 0..self.store.retain_seen() {
                self.drop_repo(DropReason::NotFound);
            }
        }
        let filters = self.filters.clone();
        for reason in self.store.retain(|line| filters.check(line, false)) {
            self.drop_repo(reason);
        }
        for _ in 0..self.store.drop_name_clashes() {
            self.drop_repo(DropReason::NameTaken);
        }
        let pinned = if self.cfg.pin_commits {
            self.pin_all()
        } else {
            Ok(())
        };
        self.checkpoint()?;
        pinned?;
        if self.failed.is_empty() {
            self.progress.finish()?;
            Ok(())
        } else {
            Err(Error::Incomplete {
                failed: self.failed.clone(),
                manifest: self.cfg.manifest_path(&self.ctx.workdir),
            })
        }
    }

    /// Reads one slice: its first page decides whether it must be split.
    fn slice(&mut self, search: &Search, lo: u64, hi: u64) -> Result<Slice, Error> {
        let first = self.page(search, lo, hi, 1, None)?;
        if first.total_count > RESULT_CAP {
            if hi > lo {
                return Ok(Slice::Split(split(lo, hi, first.total_count)));
            }
            self.count("slices_truncated", 1);
            self.ctx.warn(format!(
                "discover: `{}` has {} results and cannot be split further; GitHub lists only the first {RESULT_CAP}",
                search.query(lo, hi),
                first.total_count
            ));
        }
        let total_pages = pages(first.total_count);
        self.take(search, first.items)?;
        for number in 2..=total_pages {
            let page = self.page(search, lo, hi, number, Some(total_pages))?;
            if page.items.is_empty() {
                break;
            }
            self.take(search, page.items)?;
        }
        Ok(Slice::Done)
    }

    /// One page of a slice; an incomplete page is asked for again a few times.
    fn page(
        &mut self,
        search: &Search,
        lo: u64,
        hi: u64,
        number: u64,
        of: Option<u64>,
    ) -> Result<Page, Error> {
        let query = search.query(lo, hi);
        let (resource, kind) = match search.kind {
            Kind::Repositories => (Resource::Search, "repositories"),
            Kind::Code => (Resource::CodeSearch, "code"),
        };
        let mut params = vec![
            ("q", query.clone()),
            ("per_page", crate::search::PER_PAGE.to_string()),
            ("page", number.to_string()),
        ];
        if search.kind == Kind::Repositories {
            params.push(("sort", "stars".into()));
            params.push(("order", "desc".into()));
        }
        let req = Request {
            resource,
            path: search.path().to_string(),
            query: params,
            accept: ACCEPT_JSON,
            what: format!("search {kind} `{query}` page {number}"),
        };
        let mut tries = 0;
        loop {
            let page = self
                .client
                .get(&req, parse_page)?
                .map_err(|r: Refusal| r.into_error(&req.what))?;
            self.count("pages", 1);
            self.tracker.inc(1);
            self.tracker.set_message(format!(
                "{} page {number}/{}: {} repositories",
                search.qualifier(lo, hi),
                of.unwrap_or_else(|| pages(page.total_count)),
                self.store.len()
            ));
            if !page.incomplete || tries == INCOMPLETE_RETRIES {
                if page.incomplete {
                    self.count("pages_incomplete", 1);
                }
                return Ok(page);
            }
            tries += 1;
        }
    }

    /// Takes a page's items into the manifest.
    fn take(&mut self, search: &Search, items: Vec<serde_json::Value>) -> Result<(), Error> {
        for item in items {
            match search.kind {
                Kind::Repositories => match parse_repo(&item) {
                    Ok(repo) => self.consider(repo),
                    Err(message) => self.malformed(&message),
                },
                Kind::Code => match parse_code_item(&item) {
                    Ok((id, name)) => self.look_up(id, &name)?,
                    Err(message) => self.malformed(&message),
                },
            }
        }
        Ok(())
    }

    fn malformed(&mut self, message: &str) {
        self.drop_repo(DropReason::MalformedItem);
        self.ctx
            .warn(format!("discover: skipped a search result: {message}"));
    }

    /// Reads the metadata of a repository found by code search, unless a search of this run
    /// returned it already.
    fn look_up(&mut self, id: u64, name: &str) -> Result<(), Error> {
        if self.store.was_seen(id) || !self.looked_up.insert(id) {
            return Ok(());
        }
        let req = Request {
            resource: Resource::Core,
            path: format!("/repos/{name}"),
            query: Vec::new(),
            accept: ACCEPT_JSON,
            what: format!("repository {name}"),
        };
        self.count("repositories_looked_up", 1);
        let answer = self.client.get(&req, |body| {
            let value: serde_json::Value =
                serde_json::from_str(body).map_err(|e| format!("repository: {e}"))?;
            parse_repo(&value)
        });
        match answer? {
            Ok(repo) => self.consider(repo),
            Err(refusal) if matches!(refusal.status, 404 | 451) => self.drop_repo(DropReason::Gone),
            // A refusal concerns this repository only (access blocked, ...): skip it.
            Err(refusal) => {
                self.count("lookups_refused", 1);
                self.ctx.warn(format!(
                    "discover: {}: HTTP {}: {}; skipped",
                    req.what, refusal.status, refusal.message
                ));
            }
        }
        Ok(())
    }

    /// Filters one repository and merges it into the manifest; a known repository that now
    /// fails a filter leaves it.
    fn consider(&mut self, repo: Repo) {
        let verdict = if repo.private {
            Err(DropReason::Private)
        } else if repo.disabled {
            Err(DropReason::Disabled)
        } else {
            self.filters.check(&repo.line, repo.no_license)
        };
        match verdict {
            Err(reason) => {
                if let Some(id) = repo.line.github_id {
                    self.store.remove(&Key::Id(id));
                }
                self.drop_repo(reason);
            }
            Ok(()) => match self.store.merge(repo.line, self.cfg.pin_commits) {
                Merge::New => self.count("new", 1),
                Merge::Updated => self.count("updated", 1),
                Merge::Unchanged => self.count("unchanged", 1),
            },
        }
    }

    /// Pins every line without a commit to its default branch's head.
    fn pin_all(&mut self) -> Result<(), Error> {
        let todo = self.store.unpinned();
        if todo.is_empty() {
            return Ok(());
        }
        let tracker = self.ctx.tracker("pin", Some(todo.len() as u64));
        for (key, repo, branch) in todo {
            tracker.set_message(repo.clone());
            let req = Request {
                resource: Resource::Core,
                path: format!("/repos/{repo}/commits/{}", encode_ref(&branch)),
                query: Vec::new(),
                accept: ACCEPT_SHA,
                what: format!("head commit of {repo} ({branch})"),
            };
            match self.client.get(&req, parse_sha) {
                Ok(Ok(sha)) => {
                    self.store.pin(&key, sha);
                    self.count("pinned", 1);
                }
                Ok(Err(refusal)) => self.unpinnable(&key, &req.what, refusal),
                Err(e) if e.is_per_search() => {
                    self.count("pin_failed", 1);
                    self.ctx.warn(format!("discover: {e}"));
                }
                Err(e) => {
                    tracker.finish();
                    return Err(e);
                }
            }
            tracker.inc(1);
            self.maybe_checkpoint()?;
        }
        tracker.finish();
        Ok(())
    }

    fn unpinnable(&mut self, key: &Key, what: &str, refusal: Refusal) {
        let reason = match refusal.status {
            404 | 451 => Some(DropReason::Gone),
            409 => Some(DropReason::Empty),
            _ => None,
        };
        match reason {
            Some(reason) => {
                self.store.remove(key);
                self.drop_repo(reason);
            }
            None => {
                self.count("pin_failed", 1);
                self.ctx.warn(format!(
                    "discover: {what}: HTTP {}: {}; left unpinned",
                    refusal.status, refusal.message
                ));
            }
        }
    }

    fn maybe_checkpoint(&mut self) -> Result<(), Error> {
        if self.clock.now_secs() >= self.last_checkpoint + self.cfg.checkpoint_secs {
            self.checkpoint()?;
        }
        Ok(())
    }

    /// Writes the manifest, then the progress that it reflects.
    fn checkpoint(&mut self) -> Result<(), Error> {
        self.manifest_id = self.store.write()?;
        self.progress.set_seen(self.store.seen_ids());
        self.progress.save()?;
        self.last_checkpoint = self.clock.now_secs();
        self.count("checkpoints", 1);
        Ok(())
    }

    /// The report of the run.
    pub(crate) fn report(&self, stage: &str) -> StageReport {
        let mut report = StageReport::new(stage);
        report.rows_read = self.store.read as u64;
        report.rows_written = self.store.len() as u64;
        for (reason, n) in &self.dropped {
            report.dropped.insert((*reason).to_string(), *n);
        }
        for (name, n) in &self.counts {
            report.count(name, *n);
        }
        let stats = self.client.stats();
        for (resource, n) in &stats.requests {
            report.count(&format!("requests_{resource}"), *n);
        }
        report.count("retries", stats.retries);
        report.count(
            "rate_limit_waits",
            stats.primary_waits + stats.secondary_waits,
        );
        report.count("secondary_rate_limits", stats.secondary_waits);
        report.count("rate_limit_wait_secs", stats.waited_secs);
        report.fingerprint = self.manifest_id.clone();
        report
    }
}
