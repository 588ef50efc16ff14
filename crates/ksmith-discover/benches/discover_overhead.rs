//! Discover's own cost, against the loopback fake of GitHub's API with no rate limits: a first
//! run over a generated world (slicing, pages, merge, checkpoints, the manifest written), a rerun
//! where nothing changed, and commit pinning. The fake's own work (filtering the world for each
//! query) is included, so the figures are a lower bound on what the client can do; GitHub
//! allows 30 searches a minute (0.5 pages/s) and 5,000 other requests an hour (1.4/s).
//! Prints a table of medians.
//!
//! Run with `cargo bench -p ksmith-discover`. `KSMITH_BENCH_REPOS` sets the world size
//! (default 20000).
#![allow(clippy::unwrap_used)]

use std::time::Instant;

use ksmith_core::context::StageContext;
use ksmith_core::report::StageReport;
use ksmith_core::timestamp::parse_rfc3339;
use ksmith_discover::loopback::{FakeGitHub, FakeRepo, Limits, VirtualClock};
use ksmith_discover::{DiscoverConfig, Env, Token};

const REPS: usize = 3;

/// `n` repositories created over ten years, half of them in the last three (as on GitHub).
fn world(n: u64) -> Vec<FakeRepo> {
    let start = parse_rfc3339("2015-01-01").unwrap();
    let recent = parse_rfc3339("2023-01-01").unwrap();
    (1..=n)
        .map(|id| {
            let mut r = FakeRepo::new(id, &format!("owner{}/repo{id}", id % 997));
            r.created_at = if id % 2 == 0 {
                start + (id * 7919) % (recent - start)
            } else {
                recent + (id * 104_729) % (3 * 365 * 86_400)
            };
            r.pushed_at = r.created_at;
            r.stars = 10 + (id * 31) % 5000;
            r
        })
        .collect()
}

fn run_once(
    url: &str,
    dir: &std::path::Path,
    pin: bool,
    clock: &VirtualClock,
) -> (f64, StageReport) {
    let cfg = DiscoverConfig {
        api_url: url.to_string(),
        since: "2014-01-01".into(),
        pin_commits: pin,
        ..Default::default()
    };
    let ctx = StageContext::for_tests(dir);
    let licenses = cfg.license_policy(&["MIT".to_string()], false);
    let t = Instant::now();
    let report = ksmith_discover::run(
        &cfg,
        &licenses,
        &ctx,
        Env {
            token: Token::new("bench"),
            clock,
        },
    )
    .unwrap();
    (t.elapsed().as_secs_f64(), report)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn requests(r: &StageReport) -> u64 {
    r.counters
        .iter()
        .filter(|(k, _)| k.starts_with("requests_"))
        .map(|(_, v)| v)
        .sum()
}

fn print(case: &str, times: Vec<f64>, r: &StageReport) {
    let wall = median(times);
    let pages = r.counters.get("pages").copied().unwrap_or(0);
    println!(
        "| {case} | {} | {} | {pages} | {wall:.2} | {:.0} | {:.0} |",
        r.rows_written,
        requests(r),
        requests(r) as f64 / wall,
        r.rows_written as f64 / wall
    );
}

fn main() {
    let n: u64 = std::env::var("KSMITH_BENCH_REPOS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000);
    let clock = VirtualClock::new(parse_rfc3339("2026-06-01").unwrap());
    let fake = FakeGitHub::start(
        world(n),
        Vec::new(),
        clock.clone(),
        Limits::none(),
        |_, _| None,
    )
    .unwrap();
    println!("discover against the loopback fake, {n} repositories, median of {REPS}");
    println!("| case | repositories | requests | pages | wall s | requests/s | repositories/s |");
    println!("| --- | --- | --- | --- | --- | --- | --- |");

    let (mut first, mut again, mut pinned) = (Vec::new(), Vec::new(), Vec::new());
    let mut last = Vec::new();
    for _ in 0..REPS {
        let dir = tempfile::tempdir().unwrap();
        let (t, a) = run_once(fake.url(), dir.path(), false, &clock);
        first.push(t);
        let (t, b) = run_once(fake.url(), dir.path(), false, &clock);
        again.push(t);
        let dir = tempfile::tempdir().unwrap();
        let (t, c) = run_once(fake.url(), dir.path(), true, &clock);
        pinned.push(t);
        last = vec![a, b, c];
    }
    print("first run, no pins", first, &last[0]);
    print("rerun, nothing changed", again, &last[1]);
    print("first run with pins", pinned, &last[2]);
}
