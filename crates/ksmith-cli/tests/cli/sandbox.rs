//! The sandbox as a user meets it on a machine without bubblewrap (here: a `[sandbox] bwrap`
//! path where there is none): by default `ksmith probe` stops before any crawled module runs,
//! with one line saying what is missing and how to fix it; `[sandbox] require = false` runs the
//! modules and says so before the first one.

use std::path::Path;
use std::process::{Command, Output};

const LICENSE: &str = "MIT License\n\nPermission is hereby granted, free of charge, to any person \
obtaining a copy of this software, to deal in the Software without restriction.\n";

/// A module whose forward call leaves a file at `marker`: proof that it ran.
fn module(marker: &Path) -> String {
    format!(
        "import torch\nimport torch.nn as nn\n\n\nclass Touch(nn.Module):\n    def forward(self, \
         x):\n        open({:?}, \"w\").write(\"ran\")\n        return x * 2\n",
        marker.display().to_string()
    )
}

/// crawl, extract and probe of one folder with `--set` overrides; the probe's output.
fn probe(dir: &Path, marker: &Path, sets: &[&str]) -> Output {
    let repo = dir.join("touch");
    std::fs::create_dir_all(&repo).expect("mkdir");
    std::fs::write(repo.join("LICENSE"), LICENSE).expect("write");
    std::fs::write(repo.join("touch.py"), module(marker)).expect("write");
    let config = dir.join("ksmith.toml");
    std::fs::write(
        &config,
        format!(
            "[[source]]\npath = {:?}\n\n[probe.sizing]\nenabled = false\n",
            repo.display().to_string()
        ),
    )
    .expect("write");
    let run = |stage: &str| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_ksmith"));
        command
            .arg(stage)
            .arg("--config")
            .arg(&config)
            .arg("--workdir")
            .arg(dir.join("work"))
            .env_remove("KSMITH_BWRAP");
        for set in sets {
            command.args(["--set", set]);
        }
        command.output().expect("ksmith runs")
    };
    for stage in ["crawl", "extract"] {
        let out = run(stage);
        assert!(out.status.success(), "{stage}: {}", stderr(&out));
    }
    run("probe")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn without_bubblewrap_the_probe_refuses_before_any_module_runs() {
    let dir = tempfile::tempdir().expect("tempdir");
    let marker = dir.path().join("ran");
    let out = probe(
        dir.path(),
        &marker,
        &["sandbox.bwrap=\"/nonexistent/bwrap\""],
    );
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(!marker.exists(), "a crawled module ran: {err}");
    let line = err
        .lines()
        .find(|l| l.contains("refusing to run untrusted code"))
        .unwrap_or_else(|| panic!("no refusal line: {err}"));
    assert!(
        line.contains("probe: ksmith sandbox: refusing to run untrusted code: bubblewrap is not at /nonexistent/bwrap"),
        "{line}"
    );
    assert!(
        line.contains("`make sandbox`, or Debian's `bubblewrap` package")
            && line.contains("[sandbox] require = false"),
        "{line}"
    );
    assert!(
        !err.contains("make venv"),
        "not an environment problem: {err}"
    );
}

#[test]
fn the_explicit_opt_out_says_what_is_missing_before_the_modules_run() {
    let dir = tempfile::tempdir().expect("tempdir");
    let marker = dir.path().join("ran");
    let out = probe(
        dir.path(),
        &marker,
        &[
            "sandbox.bwrap=\"/nonexistent/bwrap\"",
            "sandbox.require=false",
        ],
    );
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    let lines: Vec<&str> = err.lines().collect();
    let warning = lines
        .iter()
        .position(|l| {
            l.starts_with(
                "warning: probe: crawled modules run without part of the sandbox, as \
                           [sandbox] require = false allows: filesystem view: bubblewrap is not \
                           at /nonexistent/bwrap",
            )
        })
        .unwrap_or_else(|| panic!("no warning: {err}"));
    let starting = lines
        .iter()
        .position(|l| l.starts_with("probe: starting 1 sandboxed worker"))
        .unwrap_or_else(|| panic!("no start line: {err}"));
    let done = lines
        .iter()
        .position(|l| l.starts_with("probe: 1/1"))
        .unwrap_or_else(|| panic!("no progress line: {err}"));
    assert!(starting < warning && warning < done, "{err}");
    assert_eq!(
        lines
            .iter()
            .filter(|l| l.starts_with("warning: probe"))
            .count(),
        1,
        "said once: {err}"
    );
}
