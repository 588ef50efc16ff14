//! The `ksmith` binary as users and cron jobs meet it: exit codes, error messages, the nightly
//! script.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use ksmith_teacher::loopback::{LoopbackServer, Reply};

fn ksmith() -> Command {
    Command::new(env!("CARGO_BIN_EXE_ksmith"))
}

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("repository root")
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn bad_configuration_exits_2_naming_the_file_and_key() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = dir.path().join("bad.toml");
    std::fs::write(&cfg, "[extract]\nmax_linez = 3\n").expect("write");
    let out = ksmith()
        .args(["extract", "--config"])
        .arg(&cfg)
        .arg("--workdir")
        .arg(dir.path().join("w"))
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let msg = text(&out);
    assert!(msg.contains("bad.toml"), "{msg}");
    assert!(msg.contains("max_linez"), "{msg}");
}

#[test]
fn missing_input_table_exits_1_naming_what_to_run() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = ksmith()
        .arg("dedup")
        .arg("--workdir")
        .arg(dir.path())
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("dedup"), "{}", text(&out));
}

#[test]
fn check_accepts_the_shipped_configurations() {
    for cfg in ["configs/default.toml", "configs/nightly.toml"] {
        let out = ksmith()
            .arg("check")
            .arg("--config")
            .arg(repo_root().join(cfg))
            .output()
            .expect("runs");
        assert!(out.status.success(), "{cfg}: {}", text(&out));
    }
}

const LICENSE_MIT: &str = "MIT License\n\nPermission is hereby granted, free of charge, to any \
person obtaining a copy of this software and associated documentation files (the \"Software\"), \
to deal in the Software without restriction, including without limitation the rights to use, \
copy, modify, merge, publish, distribute, sublicense, and/or sell copies of the Software.\n\n\
THE SOFTWARE IS PROVIDED \"AS IS\", WITHOUT WARRANTY OF ANY KIND.\n";

const MODULE: &str = "import torch\nfrom torch import nn\n\n\nclass Double(nn.Module):\n    \
def forward(self, x):\n        return torch.relu(x) * 2.0\n";

const ANSWER: &str = "```python\nimport torch\nimport torch.nn as nn\nimport triton\n\
import triton.language as tl\n\n\n@triton.jit\ndef double_kernel(x_ptr, out_ptr, n, BLOCK: \
tl.constexpr):\n    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n    mask = offs < n\n    \
x = tl.load(x_ptr + offs, mask=mask)\n    tl.store(out_ptr + offs, tl.maximum(x, 0.0) * 2.0, \
mask=mask)\n\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n        x = \
x.contiguous()\n        out = torch.empty_like(x)\n        n = x.numel()\n        \
double_kernel[(triton.cdiv(n, 256),)](x, out, n, BLOCK=256)\n        return out\n```\n";

/// A night on one module, evaluated on the CPU (Triton's interpreter): at the probe's sizes,
/// since sizes chosen for a GPU would take the interpreter hours.
fn nightly_config(dir: &Path, teacher_url: Option<&str>) -> PathBuf {
    let corpus = dir.join("corpus");
    std::fs::create_dir_all(&corpus).expect("mkdir");
    std::fs::write(corpus.join("LICENSE"), LICENSE_MIT).expect("write");
    std::fs::write(corpus.join("double.py"), MODULE).expect("write");
    let mut cfg = format!(
        "[[source]]\npath = \"{}\"\n\n[probe.sizing]\nenabled = false\n\n[cluster]\ntasks = \"all\"\n\n\
         [rollout]\nrequired = true\niterations = 1\nmeasure = false\n\n[eval]\ncpu_workers = 1\n",
        corpus.display()
    );
    if let Some(url) = teacher_url {
        cfg.push_str(&format!(
            "\n[teacher]\nmax_retries = 0\n\n[[teacher.endpoints]]\nurl = \"{url}\"\nmodel = \"scripted\"\n"
        ));
    }
    let path = dir.join(if teacher_url.is_some() {
        "ok.toml"
    } else {
        "no-teacher.toml"
    });
    std::fs::write(&path, cfg).expect("write");
    path
}

fn nightly(state: &Path, config: &Path) -> Output {
    Command::new("bash")
        .arg(repo_root().join("scripts/nightly.sh"))
        .arg(config)
        .env("KSMITH_STATE", state)
        .env("KSMITH_BIN", env!("CARGO_BIN_EXE_ksmith"))
        .env_remove("KSMITH_TEACHER_URL")
        .output()
        .expect("nightly.sh runs")
}

/// Every night's log, for a failure message.
fn night_logs(state: &Path) -> String {
    let Ok(dir) = std::fs::read_dir(state.join("logs")) else {
        return "(no logs)".into();
    };
    dir.flatten()
        .map(|e| std::fs::read_to_string(e.path()).unwrap_or_default())
        .collect::<Vec<_>>()
        .join("\n")
}

/// A good night publishes its datasets with a manifest and repoints `latest`; a failed night
/// (rollout required, no teacher) exits with the rollout's code and leaves `latest` alone; a
/// second run while one holds the lock exits 75.
#[test]
fn nightly_publishes_good_nights_only_and_never_overlaps() {
    let dir = tempfile::tempdir().expect("tempdir");
    let state = dir.path().join("state");
    let teacher = LoopbackServer::start(|_, _| Reply::chat(ANSWER)).expect("teacher");

    let ok = nightly(&state, &nightly_config(dir.path(), Some(teacher.url())));
    assert_eq!(
        ok.status.code(),
        Some(0),
        "{}\n{}",
        text(&ok),
        night_logs(&state)
    );
    assert!(ok.stdout.is_empty(), "quiet on success: {}", text(&ok));
    let latest = state.join("datasets/latest");
    let night = std::fs::read_link(&latest).expect("latest is a link");
    let manifest: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(latest.join("manifest.json")).expect("manifest"),
    )
    .expect("manifest is JSON");
    assert!(
        manifest["config_sha256"]
            .as_str()
            .is_some_and(|h| h.len() == 64)
    );
    assert!(
        manifest["stages"]["rollout"]["rows_written"].as_u64() == Some(1),
        "{manifest}"
    );
    assert!(latest.join("report.html").exists());
    assert!(
        manifest["datasets"]
            .as_object()
            .is_some_and(|d| !d.is_empty()),
        "{manifest}"
    );

    let bad = nightly(&state, &nightly_config(dir.path(), None));
    assert_eq!(bad.status.code(), Some(15), "{}", text(&bad));
    assert!(text(&bad).contains("rollout"), "{}", text(&bad));
    assert_eq!(
        std::fs::read_link(&latest).expect("still a link"),
        night,
        "latest moved"
    );
    let logs = std::fs::read_dir(state.join("logs")).expect("logs").count();
    assert_eq!(logs, 2, "one log per night");

    let lock = std::fs::File::create(state.join("nightly.lock")).expect("lock file");
    let held = Command::new("flock")
        .arg("-n")
        .arg(state.join("nightly.lock"))
        .args(["-c", "sleep 5"])
        .spawn()
        .expect("flock");
    std::thread::sleep(std::time::Duration::from_millis(500));
    let busy = nightly(&state, &nightly_config(dir.path(), Some(teacher.url())));
    assert_eq!(busy.status.code(), Some(75), "{}", text(&busy));
    drop(lock);
    let mut held = held;
    let _ = held.kill();
    let _ = held.wait();
}

#[test]
fn review_serves_the_centers_on_loopback_and_needs_clusters() {
    use std::io::{BufRead, BufReader, Read, Write};

    use ksmith_core::table::{Table, write_table};
    use ksmith_core::tables::ClusterRow;

    let dir = tempfile::tempdir().expect("tempdir");
    let out = ksmith()
        .args(["review", "--port", "0", "--workdir"])
        .arg(dir.path())
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("ksmith cluster"), "{}", text(&out));

    let center = ClusterRow {
        module_id: "m1".into(),
        cluster: 0,
        is_center: true,
        family: "activation".into(),
        family_rule: "operators".into(),
        level: 1,
        level_rule: "operators".into(),
        trivial: None,
    };
    write_table(&ClusterRow::path_in(dir.path()), &[center], "fp").expect("write");
    let mut child = ksmith()
        .args(["review", "--port", "0", "--workdir"])
        .arg(dir.path())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("starts");
    let mut first = String::new();
    BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut first)
        .expect("a line");
    let url = first
        .split_whitespace()
        .find(|w| w.starts_with("http://127.0.0.1:"))
        .unwrap_or_else(|| panic!("no URL in {first:?}"))
        .to_string();
    let host = url.trim_start_matches("http://").trim_end_matches('/');
    let mut s = std::net::TcpStream::connect(host).expect("listening");
    s.write_all(format!("GET / HTTP/1.1\r\nHost: {host}\r\n\r\n").as_bytes())
        .expect("request");
    let mut page = String::new();
    s.read_to_string(&mut page).expect("answer");
    let _ = child.kill();
    let _ = child.wait();
    assert!(page.starts_with("HTTP/1.1 200"), "{page}");
    assert!(page.contains("id=\"c-m1\""), "{page}");
}
