//! What the tests share: a configuration for the fake, a run on a virtual clock, the manifest
//! read back.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use ksmith_core::context::StageContext;
use ksmith_core::manifest::ManifestLine;
use ksmith_core::report::StageReport;
use ksmith_core::timestamp::parse_rfc3339;
use ksmith_discover::loopback::{FakeGitHub, FakeRepo, Fault, Limits, Served, VirtualClock};
use ksmith_discover::{DiscoverConfig, Env, Error, Token};

/// 2026-06-01T00:00:00Z, the virtual time tests start at.
pub(crate) fn now() -> u64 {
    parse_rfc3339("2026-06-01").expect("date")
}

/// Epoch seconds of a date.
pub(crate) fn at(date: &str) -> u64 {
    parse_rfc3339(date).expect("date")
}

/// A virtual clock at [`now`].
pub(crate) fn clock() -> Arc<VirtualClock> {
    VirtualClock::new(now())
}

/// A fake serving `repos` (no files, no faults) with `limits`, on a fresh virtual clock.
pub(crate) fn fake(repos: Vec<FakeRepo>, limits: Limits) -> (FakeGitHub, Arc<VirtualClock>) {
    let clock = clock();
    let fake =
        FakeGitHub::start(repos, Vec::new(), clock.clone(), limits, |_, _| None).expect("fake");
    (fake, clock)
}

/// A fault function that answers `fault` to every search whose query contains `needle` while
/// the returned switch is on.
pub(crate) fn while_on(
    needle: &'static str,
    fault: impl Fn(&Served) -> Fault + Send + Sync + 'static,
) -> (
    Arc<AtomicBool>,
    impl Fn(&Served, usize) -> Option<Fault> + Send + Sync + 'static,
) {
    let on = Arc::new(AtomicBool::new(true));
    let switch = on.clone();
    let faults = move |s: &Served, _: usize| {
        let hit = s.query.get("q").is_some_and(|q| q.contains(needle));
        (switch.load(Ordering::SeqCst) && hit).then(|| fault(s))
    };
    (on, faults)
}

/// Turns a switch of [`while_on`] off.
pub(crate) fn off(switch: &AtomicBool) {
    switch.store(false, Ordering::SeqCst);
}

/// The configuration for the fake at `url`: defaults, searching from 2010, no pinning.
pub(crate) fn config(url: &str) -> DiscoverConfig {
    DiscoverConfig {
        api_url: url.to_string(),
        since: "2010-01-01".into(),
        pin_commits: false,
        ..Default::default()
    }
}

/// Runs discover into `dir` with crawl's default licenses (MIT and Apache-2.0 here).
pub(crate) fn run(
    cfg: &DiscoverConfig,
    dir: &Path,
    token: Option<&str>,
    clock: &VirtualClock,
) -> Result<StageReport, Error> {
    let ctx = StageContext::for_tests(dir);
    let licenses = cfg.license_policy(&["MIT".to_string(), "Apache-2.0".to_string()], false);
    ksmith_discover::run(
        cfg,
        &licenses,
        &ctx,
        Env {
            token: token.and_then(Token::new),
            clock,
        },
    )
}

/// The manifest of `dir`, each line parsed strictly.
pub(crate) fn manifest(dir: &Path) -> Vec<ManifestLine> {
    let text = std::fs::read_to_string(dir.join("manifest.jsonl")).expect("manifest written");
    text.lines()
        .map(|l| serde_json::from_str(l).expect("a valid manifest line"))
        .collect()
}

/// The GitHub ids of the manifest, sorted; panics on a duplicate.
pub(crate) fn ids(dir: &Path) -> Vec<u64> {
    let mut ids: Vec<u64> = manifest(dir)
        .iter()
        .map(|l| l.github_id.expect("discover records the id"))
        .collect();
    ids.sort_unstable();
    let before = ids.len();
    ids.dedup();
    assert_eq!(ids.len(), before, "a repository is listed twice");
    ids
}

/// A counter of a report (0 when absent).
pub(crate) fn counter(report: &StageReport, name: &str) -> u64 {
    report.counters.get(name).copied().unwrap_or(0)
}

/// A drop reason's count in a report (0 when absent).
pub(crate) fn dropped(report: &StageReport, reason: &str) -> u64 {
    report.dropped.get(reason).copied().unwrap_or(0)
}
