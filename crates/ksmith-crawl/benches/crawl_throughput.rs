//! Crawl throughput on a generated corpus: cold crawls (read every object, write the
//! snapshot) and no-op re-crawls (nothing changed) of a local git repository, a `file://` URL
//! (clone into the mirror, then fetch) and a plain folder, and many repositories on one thread
//! against all cores. Prints a table of medians.
//!
//! Run with `cargo bench -p ksmith-crawl`. `KSMITH_BENCH_MB` sets the corpus size (default 24).
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::time::Instant;

use git2::{FileMode, Oid, Repository, Signature};
use ksmith_core::config::SourceSpec;
use ksmith_core::context::StageContext;
use ksmith_crawl::{CrawlConfig, run};

const REPS: usize = 3;
const MIT: &str = "Permission is hereby granted, free of charge, to any person obtaining a copy of this software. The above copyright notice and this permission notice shall be included in all copies.";

/// A deterministic Python file of about `size` bytes.
fn python_file(seed: usize, size: usize) -> Vec<u8> {
    let mut out = format!(
        "import torch\nimport torch.nn as nn\n\n\nclass Block{seed}(nn.Module):\n    def __init__(self, dim={}):\n        super().__init__()\n",
        16 + seed % 64
    );
    let mut i = 0;
    while out.len() < size {
        out.push_str(&format!(
            "        self.layer_{i} = nn.Linear(dim, dim)  # generated layer {seed}:{i}\n"
        ));
        i += 1;
    }
    out.push_str("\n    def forward(self, x):\n        return x\n");
    out.into_bytes()
}

/// Files of the corpus: (path, content).
fn corpus(total_bytes: usize, files: usize) -> Vec<(String, Vec<u8>)> {
    let per = total_bytes / files;
    (0..files)
        .map(|i| {
            (
                format!("pkg{}/sub{}/mod_{i}.py", i % 20, i % 7),
                python_file(i, per),
            )
        })
        .collect()
}

fn git_repo(path: &Path, files: &[(String, Vec<u8>)]) {
    let repo = Repository::init_bare(path).unwrap();
    let mut index = git2::Index::new().unwrap();
    let lic = repo.blob(MIT.as_bytes()).unwrap();
    let mut add = |path: &str, oid: Oid| {
        let entry = git2::IndexEntry {
            ctime: git2::IndexTime::new(0, 0),
            mtime: git2::IndexTime::new(0, 0),
            dev: 0,
            ino: 0,
            mode: u32::try_from(i32::from(FileMode::Blob)).unwrap(),
            uid: 0,
            gid: 0,
            file_size: 0,
            id: oid,
            flags: 0,
            flags_extended: 0,
            path: path.as_bytes().to_vec(),
        };
        index.add(&entry).unwrap();
    };
    add("LICENSE", lic);
    for (p, bytes) in files {
        add(p, repo.blob(bytes).unwrap());
    }
    let tree = repo.find_tree(index.write_tree_to(&repo).unwrap()).unwrap();
    let sig = Signature::now("bench", "bench@example.com").unwrap();
    repo.commit(Some("HEAD"), &sig, &sig, "corpus", &tree, &[])
        .unwrap();
}

fn folder(path: &Path, files: &[(String, Vec<u8>)]) {
    std::fs::create_dir_all(path).unwrap();
    std::fs::write(path.join("LICENSE"), MIT).unwrap();
    for (p, bytes) in files {
        let dest = path.join(p);
        std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
        std::fs::write(dest, bytes).unwrap();
    }
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(|a, b| a.total_cmp(b));
    xs[xs.len() / 2]
}

/// Median seconds of a cold crawl (fresh work directory each time) and of a no-op re-crawl.
fn measure(sources: &[SourceSpec], threads: usize, scratch: &Path) -> (f64, f64) {
    let cfg = CrawlConfig::default();
    let mut cold = Vec::new();
    let mut warm = Vec::new();
    for rep in 0..REPS {
        let work = scratch.join(format!("work-{threads}-{rep}"));
        let ctx = StageContext::new(&work, threads, ksmith_core::progress::ProgressMode::Silent);
        let t = Instant::now();
        let report = run(sources, &cfg, &ctx).unwrap();
        cold.push(t.elapsed().as_secs_f64());
        assert_eq!(
            report.counters.get("repos_ok").copied(),
            Some(sources.len() as u64)
        );
        let t = Instant::now();
        let report = run(sources, &cfg, &ctx).unwrap();
        warm.push(t.elapsed().as_secs_f64());
        assert_eq!(
            report.counters.get("repos_unchanged").copied(),
            Some(sources.len() as u64)
        );
        std::fs::remove_dir_all(&work).unwrap();
    }
    (median(cold), median(warm))
}

fn main() {
    let mb: usize = std::env::var("KSMITH_BENCH_MB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(24);
    let total = mb << 20;
    let files = corpus(total, total / 8192);
    let bytes: usize = files.iter().map(|(_, b)| b.len()).sum();
    let tmp = tempfile::tempdir().unwrap();
    let root: PathBuf = tmp.path().to_path_buf();
    git_repo(&root.join("one.git"), &files);
    folder(&root.join("one-folder"), &files);
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let many = 8;
    let mut many_sources = Vec::new();
    for r in 0..many {
        let part: Vec<(String, Vec<u8>)> = files.iter().skip(r).step_by(many).cloned().collect();
        let p = root.join(format!("many-{r}.git"));
        git_repo(&p, &part);
        many_sources.push(SourceSpec {
            git: Some(p.display().to_string()),
            ..Default::default()
        });
    }

    let git = |v: String| SourceSpec {
        git: Some(v),
        ..Default::default()
    };
    let cases: Vec<(String, Vec<SourceSpec>, usize)> = vec![
        (
            "local git, 1 repo".into(),
            vec![git(root.join("one.git").display().to_string())],
            1,
        ),
        (
            "file:// URL (mirror), 1 repo".into(),
            vec![git(format!("file://{}", root.join("one.git").display()))],
            1,
        ),
        (
            "plain folder, 1 repo".into(),
            vec![SourceSpec {
                path: Some(root.join("one-folder")),
                ..Default::default()
            }],
            1,
        ),
        (
            format!("local git, {many} repos, 1 thread"),
            many_sources.clone(),
            1,
        ),
        (
            format!("local git, {many} repos, {cores} threads"),
            many_sources,
            cores,
        ),
    ];
    println!(
        "corpus: {} Python files, {:.1} MB; median of {REPS} runs; {cores} cores",
        files.len(),
        bytes as f64 / 1e6
    );
    println!(
        "{:<40} {:>10} {:>10} {:>12} {:>14}",
        "case", "cold s", "MB/s", "files/s", "no-op re-crawl s"
    );
    for (name, sources, threads) in cases {
        let (cold, warm) = measure(&sources, threads, &root);
        println!(
            "{:<40} {:>10.3} {:>10.1} {:>12.0} {:>14.3}",
            name,
            cold,
            bytes as f64 / 1e6 / cold,
            files.len() as f64 / cold,
            warm
        );
    }
}
