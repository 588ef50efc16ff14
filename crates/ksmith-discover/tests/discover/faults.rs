//! What GitHub does to clients: server errors, dropped connections, malformed and incomplete
//! pages, secondary and primary rate limits. Each is retried or waited out as GitHub asks; what
//! cannot be got is an error naming the search, and nothing found is lost.

use ksmith_discover::Error;
use ksmith_discover::loopback::{FakeGitHub, FakeRepo, Fault, Limits};

use crate::support::{at, clock, config, counter, dropped, ids, off, run, while_on};

fn repos(n: u64) -> Vec<FakeRepo> {
    (1..=n)
        .map(|id| {
            let mut r = FakeRepo::new(id, &format!("o/r{id}"));
            r.created_at = at("2016-01-01") + id * 86_400;
            r.stars = 10 + id;
            r
        })
        .collect()
}

fn status(status: u16, body: &str, retry_after: Option<u64>) -> Fault {
    Fault::Status {
        status,
        body: body.into(),
        retry_after,
    }
}

#[test]
fn every_kind_of_transient_failure_is_retried_as_github_asks() {
    let mut world = repos(250);
    // One search result GitHub describes badly: skipped and counted, its page kept.
    world.push({
        let mut r = FakeRepo::new(999, "evil/../x");
        r.stars = 50;
        r
    });
    let clock = clock();
    let fake = FakeGitHub::start(
        world,
        Vec::new(),
        clock.clone(),
        Limits::github(),
        |_, n| match n {
            0 => Some(status(502, "<html>Bad Gateway</html>", None)),
            1 => Some(Fault::Hangup),
            2 => Some(Fault::Malformed(
                "{\"total_count\": 5, \"items\": oops".into(),
            )),
            3 => Some(status(
                403,
                "{\"message\": \"You have exceeded a secondary rate limit\"}",
                Some(30),
            )),
            4 => Some(status(429, "{\"message\": \"slow down\"}", None)),
            5 => Some(Fault::Incomplete),
            _ => None,
        },
    )
    .expect("fake");
    let dir = tempfile::tempdir().expect("tempdir");
    let report = run(&config(fake.url()), dir.path(), Some("tok"), &clock).expect("discover");

    assert_eq!(ids(dir.path()), (1..=250).collect::<Vec<u64>>());
    assert_eq!(dropped(&report, "malformed_item"), 1);
    assert_eq!(counter(&report, "retries"), 5, "{report:?}");
    assert_eq!(counter(&report, "secondary_rate_limits"), 2);
    // 30 s as asked by retry-after, then at least a minute for the 429 without one.
    assert!(counter(&report, "rate_limit_wait_secs") >= 90);
    assert!(clock.slept().as_secs() >= 90);
    // The incomplete page was asked for again and came back complete.
    assert_eq!(counter(&report, "pages_incomplete"), 0);
    assert_eq!(fake.violations(), 0);
}

#[test]
fn a_primary_limit_announced_by_a_403_is_waited_out_until_its_reset() {
    let clock = clock();
    let fake = FakeGitHub::start(
        repos(150),
        Vec::new(),
        clock.clone(),
        Limits::none(),
        |_, n| (n == 1).then_some(Fault::Primary { reset_in: 600 }),
    )
    .expect("fake");
    let dir = tempfile::tempdir().expect("tempdir");
    let report = run(&config(fake.url()), dir.path(), None, &clock).expect("discover");
    assert_eq!(ids(dir.path()).len(), 150);
    assert_eq!(counter(&report, "retries"), 0);
    assert_eq!(counter(&report, "rate_limit_waits"), 1);
    let served = fake.served();
    assert!(
        served[2].at >= served[1].at + 600,
        "retried before the reset"
    );
}

#[test]
fn a_wait_longer_than_allowed_stops_the_run_keeping_what_was_found_and_the_rerun_resumes() {
    // 1,500 results: the first search is split, and the limit hits during the second slice.
    let clock = clock();
    let (blocked, faults) = while_on("created:2018", |_| Fault::Primary { reset_in: 7200 });
    let fake = FakeGitHub::start(
        repos(1500),
        Vec::new(),
        clock.clone(),
        Limits::none(),
        faults,
    )
    .expect("fake");
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = config(fake.url());
    let err = run(&cfg, dir.path(), None, &clock).expect_err("a 2-hour wait is refused");
    assert!(matches!(err, Error::RateLimited { .. }), "{err}");
    let msg = err.to_string();
    assert!(
        msg.contains("max_wait_secs") && msg.contains("created:2018"),
        "{msg}"
    );
    let kept = ids(dir.path());
    assert!(!kept.is_empty() && kept.len() < 1500, "{}", kept.len());
    assert!(dir.path().join("manifest.progress.json").exists());

    // The slice that was finished is the one whose second page was read.
    let finished = fake
        .served()
        .iter()
        .find(|s| s.query["page"] == "2")
        .map(|s| s.query["q"].clone())
        .expect("a finished slice");
    off(&blocked);
    let before = fake.served().len();
    let report = run(&cfg, dir.path(), None, &clock).expect("the rerun finishes");
    assert!(counter(&report, "slices_resumed") >= 1, "{report:?}");
    assert_eq!(ids(dir.path()), (1..=1500).collect::<Vec<u64>>());
    assert_eq!(report.rows_read, kept.len() as u64);
    // The slice finished before the stop was not searched again.
    let again: Vec<String> = fake.served()[before..]
        .iter()
        .map(|s| s.query["q"].clone())
        .collect();
    assert!(
        !again.contains(&finished),
        "{finished} searched again: {again:?}"
    );
    assert!(!dir.path().join("manifest.progress.json").exists());
}

#[test]
fn a_search_failing_for_good_fails_the_run_naming_it_and_the_rerun_fills_it_in() {
    let mut world = repos(40);
    for r in world.iter_mut().filter(|r| r.id > 30) {
        r.language = Some("Cuda".into());
    }
    let clock = clock();
    let (broken, faults) = while_on("language:Cuda", |_| status(500, "{}", None));
    let fake =
        FakeGitHub::start(world, Vec::new(), clock.clone(), Limits::none(), faults).expect("fake");
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cfg = config(fake.url());
    cfg.languages = vec!["Python".into(), "Cuda".into()];
    cfg.max_retries = 2;
    let err = run(&cfg, dir.path(), None, &clock).expect_err("the Cuda search fails");
    let msg = err.to_string();
    assert!(matches!(err, Error::Incomplete { .. }), "{msg}");
    assert!(
        msg.contains("language:Cuda") && msg.contains("3 attempts"),
        "{msg}"
    );
    assert!(msg.contains("manifest.jsonl"), "{msg}");
    assert_eq!(ids(dir.path()), (1..=30).collect::<Vec<u64>>());

    off(&broken);
    let report = run(&cfg, dir.path(), None, &clock).expect("the rerun finishes");
    assert_eq!(ids(dir.path()), (1..=40).collect::<Vec<u64>>());
    assert_eq!(counter(&report, "new"), 10);
}
