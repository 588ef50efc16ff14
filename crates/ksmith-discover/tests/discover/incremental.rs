//! Reruns on a world that changed: new repositories are added, known ones refreshed (stars,
//! renames), pushed-to ones pinned again, and ones that vanished or stopped passing removed;
//! nothing is listed twice and nothing unchanged costs a commit request.

use std::collections::BTreeMap;
use std::time::Duration;

use ksmith_discover::loopback::{FakeRepo, Limits, Served};

use crate::support::{config, counter, dropped, fake, ids, manifest, run};

fn head(id: u64) -> String {
    format!("{id:040x}")
}

/// The ids whose head commit a run asked for.
fn commit_requests(served: &[Served]) -> Vec<u64> {
    let mut ids: Vec<u64> = served
        .iter()
        .filter(|s| s.path.contains("/commits/"))
        .map(|s| {
            assert!(
                s.accept
                    .as_deref()
                    .is_some_and(|a| a.contains("vnd.github.sha")),
                "{s:?}"
            );
            let name = s.path.split('/').nth(3).unwrap_or("");
            name.trim_start_matches('r').parse().unwrap_or(0)
        })
        .collect();
    ids.sort_unstable();
    ids
}

fn revs(dir: &std::path::Path) -> BTreeMap<u64, Option<String>> {
    manifest(dir)
        .into_iter()
        .map(|l| (l.github_id.unwrap_or(0), l.rev))
        .collect()
}

#[test]
fn a_rerun_adds_refreshes_repins_and_removes_and_never_duplicates() {
    let world: Vec<FakeRepo> = (1..=9)
        .map(|id| {
            let mut r = FakeRepo::new(id, &format!("o/r{id}"));
            r.created_at += id * 86_400;
            if id == 9 {
                r.head = None; // an empty repository
            }
            r
        })
        .collect();
    let (fake, clock) = fake(world, Limits::github());
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cfg = config(fake.url());
    cfg.pin_commits = true;

    let first = run(&cfg, dir.path(), Some("tok"), &clock).expect("first run");
    assert_eq!(ids(dir.path()), (1..=8).collect::<Vec<u64>>());
    assert!(
        revs(dir.path())
            .iter()
            .all(|(id, rev)| rev.as_deref() == Some(&head(*id)))
    );
    assert_eq!(counter(&first, "pinned"), 8);
    assert_eq!(dropped(&first, "empty"), 1);
    assert_eq!(
        commit_requests(&fake.served()),
        (1..=9).collect::<Vec<u64>>()
    );

    let pushed = "b".repeat(40);
    fake.update(|repos| {
        for r in repos.iter_mut() {
            match r.id {
                1 => r.stars = 150,
                2 => {
                    r.pushed_at += 86_400;
                    r.head = Some(pushed.clone());
                }
                3 => {
                    r.full_name = "o/r3-renamed".into();
                    r.clone_url = "https://github.com/o/r3-renamed.git".into();
                }
                5 => r.license = Some("GPL-3.0".into()),
                7 => r.stars = 3,
                _ => {}
            }
        }
        repos.retain(|r| r.id != 6);
        repos.push(FakeRepo::new(10, "o/r10"));
    });
    clock.advance(Duration::from_secs(86_400));
    let before = fake.served().len();
    let second = run(&cfg, dir.path(), Some("tok"), &clock).expect("second run");
    assert_eq!(ids(dir.path()), vec![1, 2, 3, 4, 8, 10]);
    let r = revs(dir.path());
    assert_eq!(
        r[&1].as_deref(),
        Some(head(1).as_str()),
        "stars alone keep the pin"
    );
    assert_eq!(
        r[&2].as_deref(),
        Some(pushed.as_str()),
        "a push is pinned again"
    );
    assert_eq!(r[&3].as_deref(), Some(head(3).as_str()));
    assert_eq!(r[&10].as_deref(), Some(head(10).as_str()));
    let lines = manifest(dir.path());
    let line = |id: u64| {
        lines
            .iter()
            .find(|l| l.github_id == Some(id))
            .expect("listed")
    };
    assert_eq!(line(1).stars, Some(150));
    assert_eq!(line(3).repo, "o/r3-renamed");
    assert_eq!(line(3).url, "https://github.com/o/r3-renamed.git");
    assert_eq!(commit_requests(&fake.served()[before..]), vec![2, 9, 10]);
    assert_eq!(second.rows_read, 8);
    assert_eq!(counter(&second, "new"), 2); // r10, and the empty r9 tried again
    assert_eq!(counter(&second, "updated"), 3);
    assert_eq!(counter(&second, "unchanged"), 2);
    assert_eq!(counter(&second, "pinned"), 2);
    assert_eq!(dropped(&second, "license"), 1);
    assert_eq!(
        dropped(&second, "not_found"),
        2,
        "deleted r6, r7 under min_stars"
    );

    // Nothing changed: same bytes, no commit read but the empty repository's.
    let text = std::fs::read_to_string(dir.path().join("manifest.jsonl")).expect("manifest");
    let before = fake.served().len();
    let third = run(&cfg, dir.path(), Some("tok"), &clock).expect("third run");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("manifest.jsonl")).expect("manifest"),
        text
    );
    assert_eq!(commit_requests(&fake.served()[before..]), vec![9]);
    assert_eq!(counter(&third, "unchanged"), 6);
    assert_eq!(fake.violations(), 0);
}
