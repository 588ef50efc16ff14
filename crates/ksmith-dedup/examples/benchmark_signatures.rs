//! Writes the signature file of a KernelBench checkout to stdout: the features of each
//! problem's entry class (no code), stamped with the feature version, the canary and the
//! commit. `make kernelbench-signatures KERNELBENCH=<checkout>` runs it and replaces
//! `crates/ksmith-dedup/data/kernelbench-signatures.json`.
//!
//! `cargo run --release -p ksmith-dedup --example benchmark_signatures -- <checkout> <commit> [url]`
#![allow(clippy::unwrap_used)]

use std::path::PathBuf;

use ksmith_dedup::DedupConfig;
use ksmith_dedup::benchmark::{KERNELBENCH, KERNELBENCH_SUBDIR, load_folder, signature_file};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() < 2 {
        eprintln!("usage: benchmark_signatures <checkout> <commit> [url]");
        std::process::exit(2);
    }
    let root = PathBuf::from(&args[0]);
    let commit = &args[1];
    let url = args
        .get(2)
        .cloned()
        .unwrap_or_else(|| DedupConfig::default().kernelbench_url);
    let (problems, unreadable) = match load_folder(&root.join(KERNELBENCH_SUBDIR)) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    };
    if !unreadable.is_empty() {
        eprintln!("not UTF-8, left out: {unreadable:?}");
    }
    let file = signature_file(KERNELBENCH, &url, commit, KERNELBENCH_SUBDIR, &problems);
    println!("{}", serde_json::to_string_pretty(&file).unwrap());
    eprintln!("{} problems signed at {commit}", problems.len());
}
