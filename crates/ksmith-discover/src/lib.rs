//! Discover: finds repositories worth crawling through GitHub's search API and writes them to
//! a manifest that crawl reads. Input: the `[discover]` table (search terms and filters) and a
//! token from the environment. Output: `manifest.jsonl` ([`ksmith_core::manifest::ManifestLine`]
//! per repository: name, clone URL, pinned commit, license, stars, default branch, last push,
//! fork, archived, size, language, topics), and `reports/discover.json`.
//!
//! Invariants:
//! - GitHub's limits are honoured: requests go one at a time; when `x-ratelimit-remaining`
//!   reaches 0 the next request of that resource waits for `x-ratelimit-reset`; a 403/429 with
//!   `retry-after` waits that long; other secondary limits wait a minute, doubling. Server
//!   errors, dropped connections and malformed answers are retried with backoff and jitter.
//! - The 1,000-result cap of a query is passed by slicing it by creation (or push) time, split
//!   further wherever a slice still holds more than the cap; code search is sliced by file size.
//! - Incremental: repositories are keyed by GitHub's id, so a rerun adds new ones, refreshes
//!   stars, names and pushes of known ones, and never writes one twice. A pinned commit is read
//!   again only for a repository pushed to since. Every line satisfies the current filters, and
//!   a run that listed every result removes the repositories no search returned any more.
//! - Nothing found is lost: the manifest is rewritten atomically at checkpoints and at the end
//!   (also when the run fails), and `<manifest>.progress.json` lets an interrupted run resume
//!   without repeating the slices it finished.
//! - The token is read from the environment and sent only in the `Authorization` header; it
//!   is never written to the manifest, the report, a message or a log.
//!
//! Not a fingerprinted table stage: the answer depends on GitHub at the time of the run, so it
//! runs when asked (`ksmith discover`), never as part of `ksmith run`.
//!
//! Entry point: [`run`]. The `loopback` feature adds [`loopback`], a fake GitHub API on
//! 127.0.0.1 with a virtual clock, for tests.
#![deny(missing_docs)]

pub mod clock;
pub mod config;
mod discovery;
pub mod error;
mod filter;
mod github;
#[cfg(feature = "loopback")]
pub mod loopback;
mod rate_limit;
mod resume;
mod search;
mod store;
mod wire;

use std::collections::{BTreeMap, BTreeSet};

use ksmith_core::context::StageContext;
use ksmith_core::report::StageReport;
use ksmith_core::stage::StagePlan;

pub use clock::{Clock, SystemClock};
pub use config::{DiscoverConfig, LicensePolicy, SliceBy};
pub use error::Error;
pub use github::Token;

use crate::discovery::Discovery;
use crate::filter::Filters;
use crate::github::GitHub;
use crate::resume::Progress;
use crate::store::Store;

/// The step's name (report file, progress label).
pub const STAGE: &str = "discover";

/// What a run needs from outside the configuration.
pub struct Env<'a> {
    /// The API token, when there is one.
    pub token: Option<Token>,
    /// The clock (the real one, or a test's virtual one).
    pub clock: &'a dyn Clock,
}

/// Searches GitHub as `cfg` says, keeps what passes its filters and `licenses`, and updates the
/// manifest (`cfg.manifest`, or `<workdir>/manifest.jsonl`).
///
/// Errors: a bad configuration or manifest, a rate-limit wait longer than `max_wait_secs`, the
/// disk, or searches that failed after every retry ([`Error::Incomplete`]); in the last cases
/// the manifest still holds everything found, and the next run resumes.
pub fn run(
    cfg: &DiscoverConfig,
    licenses: &LicensePolicy,
    ctx: &StageContext,
    env: Env<'_>,
) -> Result<StageReport, Error> {
    cfg.validate()?;
    if cfg.code_search && env.token.is_none() {
        return Err(Error::Config {
            message: format!(
                "[discover] code_search needs a token (GitHub's code search does not answer without one): set {}",
                cfg.token_env
            ),
        });
    }
    // Discover always runs (the answer depends on GitHub at the time of the run); the report's
    // fingerprint is the manifest's id.
    StagePlan::new(ctx, STAGE, 1).run(|run| {
        let report = discover(cfg, licenses, ctx, env)?;
        run.set_fingerprint(report.fingerprint.clone());
        run.report = report;
        Ok(())
    })
}

/// The searches, the filters and the manifest; the report's counts.
fn discover(
    cfg: &DiscoverConfig,
    licenses: &LicensePolicy,
    ctx: &StageContext,
    env: Env<'_>,
) -> Result<StageReport, Error> {
    if env.token.is_none() {
        ctx.warn(format!(
            "discover: no token in {}; GitHub allows 10 searches a minute and 60 other requests an hour without one",
            cfg.token_env
        ));
    }
    let path = cfg.manifest_path(&ctx.workdir);
    let mut store = Store::load(&path)?;
    let progress = Progress::open(&path, cfg, licenses, env.clock.now_secs(), ctx.force);
    store.add_seen(progress.seen());
    if let Some(note) = &progress.note {
        ctx.info(format!("discover: {note}"));
    }
    if progress.resumed {
        ctx.info(format!(
            "discover: resuming the interrupted run recorded in {}",
            Progress::path_for(&path).display()
        ));
    }
    let until = progress.until();
    let searches = search::searches(cfg, until);
    if searches.iter().any(|s| s.lo > s.hi) {
        return Err(Error::Config {
            message: format!(
                "[discover] since = {} is later than the run's time ({}): nothing to search",
                cfg.since,
                ksmith_core::timestamp::rfc3339_from_secs(until)
            ),
        });
    }
    let notify = |line: &str| ctx.info(line);
    let mut discovery = Discovery {
        cfg,
        ctx,
        clock: env.clock,
        client: GitHub::new(cfg, env.token, env.clock, &notify),
        store,
        progress,
        filters: Filters::new(cfg, licenses, until),
        tracker: ctx.tracker(STAGE, None),
        counts: BTreeMap::new(),
        dropped: BTreeMap::new(),
        looked_up: BTreeSet::new(),
        failed: Vec::new(),
        last_checkpoint: env.clock.now_secs(),
        manifest_id: String::new(),
    };
    let outcome = discovery.run(&searches);
    discovery.tracker.finish();
    outcome?;
    let report = discovery.report(STAGE);
    ctx.info(format!(
        "discover: {} repositories in {}",
        report.rows_written,
        path.display()
    ));
    Ok(report)
}
