//! Paging past GitHub's 1,000-result cap by slicing the creation-date range, and the one case
//! slicing cannot help.

use ksmith_discover::loopback::{FakeRepo, Limits};

use crate::support::{at, config, counter, dropped, fake, ids, manifest, run};

fn repo(id: u64, created: u64, stars: u64) -> FakeRepo {
    let mut r = FakeRepo::new(id, &format!("owner{}/net{id}", id % 7));
    r.created_at = created;
    r.pushed_at = created;
    r.stars = stars;
    r.license = Some(
        if id.is_multiple_of(2) {
            "MIT"
        } else {
            "Apache-2.0"
        }
        .into(),
    );
    r
}

/// 2,600 repositories that pass, packed unevenly (1,500 on one day, 500 in one hour), and
/// others that fail a server-side qualifier or a client-side filter.
fn world() -> (Vec<FakeRepo>, Vec<u64>) {
    let mut repos = Vec::new();
    let mut id = 0;
    let mut next = || {
        id += 1;
        id
    };
    let decade = at("2022-01-01") - at("2012-01-01");
    for i in 0..600 {
        repos.push(repo(
            next(),
            at("2012-01-01") + i * decade / 600,
            10 + i * 37 % 5000,
        ));
    }
    for i in 0..1500 {
        repos.push(repo(next(), at("2023-03-01") + i * 57, 10 + i * 13 % 900));
    }
    for i in 0..500 {
        repos.push(repo(next(), at("2024-05-05T10:00:00Z") + i * 7, 10 + i));
    }
    let mut expected: Vec<u64> = repos.iter().map(|r| r.id).collect();
    let mut odd = |n: u64, change: &dyn Fn(&mut FakeRepo)| {
        let mut out = Vec::new();
        for i in 0..n {
            let mut r = repo(next(), at("2013-06-01") + i * 86_400 * 97, 50);
            change(&mut r);
            out.push(r);
        }
        out
    };
    let few_stars = odd(20, &|r| r.stars = 3);
    let forks = odd(15, &|r| r.fork = true);
    let archived = odd(10, &|r| r.archived = true);
    let gpl = odd(12, &|r| r.license = Some("GPL-3.0".into()));
    let unlicensed = odd(8, &|r| r.license = None);
    let unrecognized = odd(5, &|r| r.license = Some("NOASSERTION".into()));
    let private = odd(3, &|r| r.private = true);
    let cpp = odd(4, &|r| r.language = Some("C++".into()));
    let other_topic = odd(6, &|r| r.description = "jax models".into());
    expected.extend(unrecognized.iter().map(|r| r.id));
    for group in [
        few_stars,
        forks,
        archived,
        gpl,
        unlicensed,
        unrecognized,
        private,
        cpp,
        other_topic,
    ] {
        repos.extend(group);
    }
    expected.sort_unstable();
    (repos, expected)
}

#[test]
fn slices_past_the_cap_and_keeps_exactly_what_passes() {
    let (repos, expected) = world();
    let (fake, clock) = fake(repos, Limits::github());
    let dir = tempfile::tempdir().expect("tempdir");
    let report = run(&config(fake.url()), dir.path(), Some("t0ken"), &clock).expect("discover");

    assert_eq!(ids(dir.path()), expected);
    assert_eq!(report.rows_written, expected.len() as u64);
    assert_eq!(dropped(&report, "license"), 12);
    assert_eq!(dropped(&report, "unlicensed"), 8);
    assert_eq!(dropped(&report, "private"), 3);
    assert!(counter(&report, "slices_split") >= 2, "{report:?}");
    assert_eq!(counter(&report, "slices_truncated"), 0);

    let served = fake.served();
    for s in &served {
        assert_eq!(s.path, "/search/repositories");
        assert_eq!(s.query["per_page"], "100");
        let page: u64 = s.query["page"].parse().expect("page number");
        assert!((1..=10).contains(&page), "page {page}");
        let q = &s.query["q"];
        for part in [
            "pytorch",
            "language:Python",
            "stars:>=10",
            "archived:false",
            "created:",
        ] {
            assert!(q.contains(part), "{q}");
        }
    }
    // More than 30 searches: the run had to wait for the reset, and never sent one too many.
    assert!(served.len() > 30, "{}", served.len());
    assert_eq!(fake.violations(), 0);
    assert!(counter(&report, "rate_limit_waits") >= 1);
    assert!(clock.slept().as_secs() >= 1);

    // The manifest is sorted by name and carries what crawl and the next run need.
    let lines = manifest(dir.path());
    let names: Vec<String> = lines.iter().map(|l| l.repo.to_lowercase()).collect();
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(names, sorted);
    let first = &lines[0];
    assert!(first.url.starts_with("https://github.com/") && first.url.ends_with(".git"));
    assert!(first.stars.is_some() && first.pushed_at.is_some());
    assert_eq!(first.default_branch.as_deref(), Some("main"));
    assert_eq!((first.fork, first.archived), (Some(false), Some(false)));
    assert_eq!(first.rev, None, "pinning is off");
    assert!(
        !dir.path().join("manifest.progress.json").exists(),
        "a finished run leaves no progress file"
    );
}

#[test]
fn a_second_holding_more_than_the_cap_is_taken_up_to_the_cap_and_reported() {
    let dense = at("2021-07-07T07:07:07Z");
    let mut repos: Vec<FakeRepo> = (1..=1100).map(|id| repo(id, dense, 10 + id)).collect();
    repos.extend((2001..=2005).map(|id| repo(id, at("2015-01-01") + id, 20)));
    let (fake, clock) = fake(repos, Limits::none());
    let dir = tempfile::tempdir().expect("tempdir");
    let report = run(&config(fake.url()), dir.path(), None, &clock).expect("discover");
    assert_eq!(counter(&report, "slices_truncated"), 1);
    let got = ids(dir.path());
    assert_eq!(got.len(), 1005);
    // GitHub sorts by stars: the 100 least-starred of the dense second are the ones missing.
    assert!(got.contains(&1100) && got.contains(&101) && !got.contains(&100));
    assert!(got.contains(&2003));
}
