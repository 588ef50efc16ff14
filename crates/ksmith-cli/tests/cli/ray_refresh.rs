//! `scripts/ray_refresh.py` on a private one-node Ray cluster: two crawl/extract shards as Ray
//! tasks, merged on the head, probed on the cluster's actor pool; the probe table equals the one
//! of a plain local run of the same corpus.

use std::path::{Path, PathBuf};
use std::process::Command;

use ksmith_core::table::{Table, read_table};
use ksmith_core::tables::ProbeRow;

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn statuses(workdir: &Path) -> Vec<(String, String, String)> {
    read_table::<ProbeRow>(&ProbeRow::path_in(workdir))
        .expect("probes.parquet")
        .into_iter()
        .map(|p| (p.repo, p.class_name, p.status.as_str().to_string()))
        .collect()
}

#[test]
fn a_refresh_on_a_loopback_ray_cluster_probes_what_a_local_run_probes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = repo_root();
    let mut config = String::new();
    for name in ["tinyact", "normzoo", "convnets"] {
        config.push_str(&format!(
            "[[source]]\npath = \"{}\"\n\n",
            root.join("data/corpus").join(name).display()
        ));
    }
    let config_path = dir.path().join("ksmith.toml");
    std::fs::write(&config_path, config).expect("config");
    let python = ksmith_core::python_env::resolve_python(None).expect("make venv");
    let on_ray = dir.path().join("ray");
    let out = Command::new(&python)
        .arg(root.join("scripts/ray_refresh.py"))
        .args(["--address", "local", "--shards", "2", "--until", "probe"])
        .arg("--config")
        .arg(&config_path)
        .arg("--workdir")
        .arg(&on_ray)
        .arg("--ksmith")
        .arg(env!("CARGO_BIN_EXE_ksmith"))
        .env("RAY_USAGE_STATS_ENABLED", "0")
        .output()
        .expect("the script runs");
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{text}");
    assert!(text.contains("2 shard(s) of crawl + extract"), "{text}");
    assert!(text.contains("--set probe.ray_address=local"), "{text}");

    let local = dir.path().join("local");
    let out = Command::new(env!("CARGO_BIN_EXE_ksmith"))
        .args(["run", "--quiet", "--config"])
        .arg(&config_path)
        .arg("--workdir")
        .arg(&local)
        .output()
        .expect("ksmith runs");
    assert!(
        ProbeRow::path_in(&local).exists(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let ray_rows = statuses(&on_ray);
    assert!(!ray_rows.is_empty());
    assert_eq!(ray_rows, statuses(&local));
}
