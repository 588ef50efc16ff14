//! Code search finds repositories the repository search misses (sliced by file size past the
//! cap, one metadata request per repository), and the token goes only where it must.

use ksmith_discover::Error;
use ksmith_discover::loopback::{FakeFile, FakeGitHub, FakeRepo, Fault, Limits};

use crate::support::{clock, config, counter, dropped, ids, off, run, while_on};

const MODULE: &str = "import torch\nfrom torch import nn\n\nclass Net(nn.Module):\n    pass\n";

fn file(repo_id: u64, path: &str, size: u64) -> FakeFile {
    FakeFile {
        repo_id,
        path: path.into(),
        size,
        text: MODULE.into(),
    }
}

fn world() -> (Vec<FakeRepo>, Vec<FakeFile>) {
    let mut repos = Vec::new();
    let mut files = Vec::new();
    for id in [1, 2, 3] {
        repos.push(FakeRepo::new(id, &format!("o/k{id}")));
        files.push(file(id, "model.py", 300));
    }
    for id in 11..=17 {
        let mut r = FakeRepo::new(id, &format!("o/k{id}"));
        r.description = "deep nets".into();
        match id {
            14 => r.stars = 2,
            15 => r.private = true,
            _ => {}
        }
        repos.push(r);
        files.push(file(id, if id == 16 { "notes.md" } else { "net.py" }, 500));
    }
    // Enough files in one repository that code search must be sliced by size.
    for i in 0..1200 {
        files.push(file(11, &format!("zoo/m{i}.py"), 100 + i));
    }
    (repos, files)
}

#[test]
fn code_search_adds_the_repositories_only_it_finds() {
    let (repos, files) = world();
    let clock = clock();
    // One repository GitHub refuses to describe: skipped, the search goes on.
    let fake = FakeGitHub::start(repos, files, clock.clone(), Limits::github(), |s, _| {
        (s.path == "/repos/o/k17").then(|| Fault::Status {
            status: 403,
            body: "{\"message\": \"Repository access blocked\"}".into(),
            retry_after: None,
        })
    })
    .expect("fake");
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cfg = config(fake.url());
    cfg.code_search = true;
    let report = run(&cfg, dir.path(), Some("tok"), &clock).expect("discover");
    assert_eq!(ids(dir.path()), vec![1, 2, 3, 11, 12, 13]);
    assert_eq!(dropped(&report, "stars"), 1);
    assert_eq!(dropped(&report, "private"), 1);

    let served = fake.served();
    let mut looked_up: Vec<&str> = served
        .iter()
        .filter(|s| s.path.starts_with("/repos/"))
        .map(|s| s.path.as_str())
        .collect();
    looked_up.sort_unstable();
    // Once each, however many files matched; never for what repository search returned.
    assert_eq!(
        looked_up,
        vec![
            "/repos/o/k11",
            "/repos/o/k12",
            "/repos/o/k13",
            "/repos/o/k14",
            "/repos/o/k15",
            "/repos/o/k17"
        ]
    );
    assert_eq!(counter(&report, "repositories_looked_up"), 6);
    assert_eq!(counter(&report, "lookups_refused"), 1);
    let code: Vec<_> = served.iter().filter(|s| s.path == "/search/code").collect();
    assert!(code.len() > 10, "sliced past the cap: {}", code.len());
    for s in &code {
        let q = &s.query["q"];
        assert!(q.contains("nn.Module language:Python size:"), "{q}");
    }
    assert!(counter(&report, "slices_split") >= 1);
    assert_eq!(fake.violations(), 0);
}

#[test]
fn code_search_without_a_token_is_a_configuration_error() {
    let (repos, files) = world();
    let clock = clock();
    let fake =
        FakeGitHub::start(repos, files, clock.clone(), Limits::none(), |_, _| None).expect("fake");
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cfg = config(fake.url());
    cfg.code_search = true;
    let err = run(&cfg, dir.path(), None, &clock).expect_err("needs a token");
    assert!(matches!(err, Error::Config { .. }), "{err}");
    assert!(err.to_string().contains("GITHUB_TOKEN"), "{err}");
    assert!(fake.served().is_empty());
}

#[test]
fn the_token_is_sent_as_a_bearer_header_and_written_nowhere() {
    const SECRET: &str = "ghp_TOPSECRET123";
    let (repos, _) = world();
    let clock = clock();
    // An answer that echoes the token it was sent.
    let (broken, faults) = while_on("language:Cuda", |s| Fault::Status {
        status: 500,
        body: format!(
            "{{\"message\": \"echo {}\"}}",
            s.authorization.clone().unwrap_or_default()
        ),
        retry_after: None,
    });
    let fake =
        FakeGitHub::start(repos, Vec::new(), clock.clone(), Limits::none(), faults).expect("fake");
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cfg = config(fake.url());
    cfg.languages = vec!["Python".into(), "Cuda".into()];
    cfg.max_retries = 1;
    cfg.pin_commits = true;
    let err = run(&cfg, dir.path(), Some(SECRET), &clock).expect_err("the Cuda search fails");
    assert!(
        fake.served()
            .iter()
            .all(|s| s.authorization.as_deref() == Some("Bearer ghp_TOPSECRET123"))
    );
    let files_written = [
        dir.path().join("manifest.jsonl"),
        dir.path().join("manifest.progress.json"),
    ];
    for f in &files_written {
        let text = std::fs::read_to_string(f).expect("written");
        assert!(!text.contains(SECRET), "{}", f.display());
    }
    assert!(!format!("{err} {err:?}").contains("TOPSECRET"));

    off(&broken);
    let report = run(&cfg, dir.path(), Some(SECRET), &clock).expect("discover");
    let json = serde_json::to_string(&report).expect("json");
    assert!(!json.contains("TOPSECRET"));

    let without = tempfile::tempdir().expect("tempdir");
    let before = fake.served().len();
    run(&cfg, without.path(), None, &clock).expect("discover without a token");
    assert!(
        fake.served()[before..]
            .iter()
            .all(|s| s.authorization.is_none())
    );
}
