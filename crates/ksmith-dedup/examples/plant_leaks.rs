//! Plants leaks of real benchmark problems into a folder, for measuring decontamination on
//! real code (never for tests: those use problems written for them). Samples problems from a
//! KernelBench checkout's `level1..3` folders, writes each leaked in the eight ways of
//! `tests/common/leaks.rs` under `<out>/<way>/`, and a `manifest.jsonl` saying which file
//! leaks which problem in which class. Crawl `<out>` as a folder source next to a real corpus,
//! run extract, probe and dedup, then score with `benches/score_leaks.py`.
//!
//! `cargo run --release -p ksmith-dedup --example plant_leaks -- <KernelBench folder> <out> [level1 level2 level3 counts]`
#![allow(clippy::unwrap_used)]

#[path = "../tests/common/leaks.rs"]
mod leaks;
#[path = "../tests/common/synth.rs"]
mod synth;

use std::io::Write;
use std::path::{Path, PathBuf};

use ksmith_embed::hashing::SplitMix;

fn problems(level: &Path, n: usize) -> Vec<PathBuf> {
    let mut files: Vec<(u32, PathBuf)> = std::fs::read_dir(level)
        .unwrap()
        .filter_map(|e| {
            let p = e.ok()?.path();
            let name = p.file_name()?.to_str()?.to_string();
            let num: u32 = name.split('_').next()?.parse().ok()?;
            (p.extension()? == "py").then_some((num, p))
        })
        .collect();
    files.sort();
    let step = (files.len() as f64 / n.max(1) as f64).max(1.0);
    (0..n.min(files.len()))
        .map(|k| files[(k as f64 * step) as usize].1.clone())
        .collect()
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() < 2 {
        eprintln!("usage: plant_leaks <KernelBench folder> <out> [n1 n2 n3]");
        std::process::exit(2);
    }
    let bench = PathBuf::from(&args[0]);
    let out = PathBuf::from(&args[1]);
    let counts: Vec<usize> = args[2..].iter().filter_map(|a| a.parse().ok()).collect();
    let counts = if counts.len() == 3 {
        counts
    } else {
        vec![25, 20, 15]
    };
    let mut manifest = std::fs::File::create(out.join("manifest.jsonl"))
        .or_else(|_| {
            std::fs::create_dir_all(&out)?;
            std::fs::File::create(out.join("manifest.jsonl"))
        })
        .unwrap();
    let mut rng = SplitMix::new(14);
    let mut seed = 0usize;
    for (level, n) in ["level1", "level2", "level3"].iter().zip(counts) {
        for path in problems(&bench.join(level), n) {
            let src = std::fs::read_to_string(&path).unwrap();
            let stem = path.file_stem().unwrap().to_string_lossy().to_string();
            let problem = format!("{level}/{stem}.py");
            // Host code for the embedded leak: two unrelated classes written by the generator.
            let host: Vec<String> = ["Encoder", "Decoder"]
                .iter()
                .map(|name| {
                    let m = synth::original(&mut rng);
                    let class = m.split("\n\n\ndef get_inputs").next().unwrap_or(&m);
                    class
                        .split_once("class Model")
                        .map(|(_, rest)| format!("class {name}{rest}"))
                        .unwrap_or_default()
                })
                .collect();
            for how in leaks::ALL {
                seed += 1;
                let leaked = leaks::leak(&src, how, &host, seed);
                let dir = out.join(how.name());
                std::fs::create_dir_all(&dir).unwrap();
                let file = dir.join(format!("{level}_{stem}.py"));
                std::fs::write(&file, &leaked.text).unwrap();
                let rel = file
                    .strip_prefix(&out)
                    .unwrap()
                    .to_string_lossy()
                    .to_string();
                let line = serde_json::json!({
                    "file": rel,
                    "leak": how.name(),
                    "problem": problem,
                    "class": leaked.class,
                });
                writeln!(manifest, "{line}").unwrap();
            }
        }
    }
    eprintln!("planted leaks in {}", out.display());
}
