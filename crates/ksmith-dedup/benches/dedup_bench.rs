//! Dedup benchmark: generated modules with planted duplicates (exact, reformatted, renamed,
//! lightly edited), deduplicated with the default config on a 2-thread pool; recall and
//! precision on the planted copies; the near-duplicate step side by side with Python
//! `datasketch` (same shingles, permutations and threshold): time ratio and pair overlap.
//!
//! `cargo bench -p ksmith-dedup` (env: `KSMITH_BENCH_N` modules, default 100000;
//! `KSMITH_BENCH_THREADS`, default 2; `KSMITH_BENCH_DATASKETCH=0` skips the Python side).
#![allow(clippy::unwrap_used)]

#[path = "../tests/common/synth.rs"]
mod synth;

use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::time::Instant;

use ksmith_dedup::engine::{Candidate, deduplicate, features, near_pairs};
use ksmith_dedup::{DedupConfig, engine};
use ksmith_embed::Program;
use synth::Variant;

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// CPU seconds (user + system) used by this process so far, from /proc (0 elsewhere).
fn cpu_seconds() -> f64 {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return 0.0;
    };
    // Fields after the command name (which is in parentheses): utime is 14th, stime 15th.
    let Some(rest) = stat.rsplit_once(')').map(|r| r.1) else {
        return 0.0;
    };
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = f.get(11).and_then(|v| v.parse().ok()).unwrap_or(0.0)
        + f.get(12).and_then(|v| v.parse().ok()).unwrap_or(0.0);
    ticks / 100.0
}

/// Single-threaded cost of each feature on `programs`, in microseconds per module.
fn breakdown(programs: &[&str], cfg: &DedupConfig) -> Vec<(&'static str, f64)> {
    use ksmith_dedup::minhash::{MinHasher, shingle_hashes};
    use ksmith_embed::{HashedEmbedder, SyntaxTree};
    let per = |secs: f64| secs * 1e6 / programs.len().max(1) as f64;
    let mut out = Vec::new();
    let t = Instant::now();
    let parsed: Vec<Program<'_>> = programs.iter().map(|p| Program::parse(p)).collect();
    out.push((
        "tokenize + strip docstrings + import aliases",
        per(t.elapsed().as_secs_f64()),
    ));
    let t = Instant::now();
    let keys: usize = parsed.iter().map(|p| p.exact_key()[0] as usize).sum();
    out.push((
        "exact key (normalized text + blake3)",
        per(t.elapsed().as_secs_f64()),
    ));
    let t = Instant::now();
    let shingles: Vec<Vec<u64>> = parsed
        .iter()
        .map(|p| shingle_hashes(p, cfg.shingle_size))
        .collect();
    out.push(("5-gram shingle hashes", per(t.elapsed().as_secs_f64())));
    let hasher = MinHasher::new(cfg.num_perm, cfg.seed);
    let t = Instant::now();
    let sigs: usize = shingles
        .iter()
        .map(|s| hasher.signature(s)[0] as usize)
        .sum();
    out.push((
        "MinHash signature (256 perms)",
        per(t.elapsed().as_secs_f64()),
    ));
    let t = Instant::now();
    let trees: Vec<SyntaxTree> = parsed.iter().map(SyntaxTree::build).collect();
    out.push((
        "syntax tree (canonical labels)",
        per(t.elapsed().as_secs_f64()),
    ));
    let t = Instant::now();
    let wl: u128 = trees.iter().map(|t| t.wl_hash(cfg.wl_iterations) & 1).sum();
    out.push(("WL hash (4 iterations)", per(t.elapsed().as_secs_f64())));
    let e = HashedEmbedder::new(&cfg.embedder);
    let t = Instant::now();
    let mut row = ndarray::Array1::<f32>::zeros(cfg.embedder.dim);
    for p in programs {
        e.embed_into(p, row.view_mut());
    }
    out.push((
        "hashed embedding (parse again + features)",
        per(t.elapsed().as_secs_f64()),
    ));
    std::hint::black_box((keys, sigs, wl));
    out
}

fn main() {
    let n = env_usize("KSMITH_BENCH_N", 100_000);
    let threads = env_usize("KSMITH_BENCH_THREADS", 2);
    let dup_share = 0.2;
    let t = Instant::now();
    let corpus = synth::corpus(n, dup_share, 2026);
    let gen_s = t.elapsed().as_secs_f64();
    let items: Vec<Candidate> = corpus
        .iter()
        .enumerate()
        .map(|(i, g)| Candidate {
            id: format!("m{i:06}"),
            program: g.program.clone(),
            license: Some(if i % 5 == 0 { "GPL-3.0" } else { "MIT" }.to_string()),
            stars: Some((i % 97) as i64),
            lines: g.program.lines().count() as u32,
        })
        .collect();
    let bytes: usize = items.iter().map(|c| c.program.len()).sum();
    println!(
        "dedup benchmark: {n} modules ({:.1} MB, {:.0}% planted copies), {threads} threads, generated in {gen_s:.1} s",
        bytes as f64 / 1e6,
        dup_share * 100.0
    );

    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .unwrap();
    let cfg = DedupConfig::default();
    let embedder = cfg.embedder.build().unwrap();

    // Full run, all methods.
    let cpu0 = cpu_seconds();
    let t = Instant::now();
    let (rows, stats) = pool
        .install(|| deduplicate(&items, &[], Some(embedder.as_ref()), &cfg))
        .unwrap();
    let full_s = t.elapsed().as_secs_f64();
    let full_cpu = cpu_seconds() - cpu0;

    // Phase timings (separate runs of each step).
    let programs: Vec<&str> = items.iter().map(|c| c.program.as_str()).collect();
    let t = Instant::now();
    let feats = pool.install(|| features(&programs, &cfg, true, true, embedder.as_hashed()));
    let feat_s = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let near_feats = pool.install(|| features(&programs, &cfg, true, false, None));
    let near_feat_s = t.elapsed().as_secs_f64();
    drop(near_feats);
    let t = Instant::now();
    let near = pool.install(|| near_pairs(&feats, &cfg));
    let near_s = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let emb = pool.install(|| embedder.embed(&programs)).unwrap();
    let embed_s = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let sem = pool.install(|| engine::semantic_pairs(&emb, &cfg));
    let sem_s = t.elapsed().as_secs_f64();

    // Recall and precision on the planted copies.
    let id_index: HashMap<&str, usize> = items
        .iter()
        .enumerate()
        .map(|(i, c)| (c.id.as_str(), i))
        .collect();
    let survivor: Vec<usize> = rows
        .iter()
        .enumerate()
        .map(|(i, r)| r.duplicate_of.as_deref().map_or(i, |d| id_index[d]))
        .collect();
    let mut original_of: HashMap<usize, usize> = HashMap::new();
    for (i, g) in corpus.iter().enumerate() {
        if g.variant == Variant::Original {
            original_of.insert(g.family, i);
        }
    }
    let mut per: HashMap<Variant, (usize, usize)> = HashMap::new();
    for (i, g) in corpus.iter().enumerate() {
        if g.variant != Variant::Original {
            let e = per.entry(g.variant).or_default();
            e.1 += 1;
            if survivor[i] == survivor[original_of[&g.family]] {
                e.0 += 1;
            }
        }
    }
    let dropped: Vec<usize> = (0..rows.len()).filter(|&i| !rows[i].kept).collect();
    let correct = dropped
        .iter()
        .filter(|&&i| corpus[survivor[i]].family == corpus[i].family)
        .count();
    let mut fam_size: HashMap<usize, usize> = HashMap::new();
    for g in &corpus {
        *fam_size.entry(g.family).or_default() += 1;
    }
    let should_drop: usize = fam_size.values().map(|s| s - 1).sum();
    let mut by_method: HashMap<&'static str, usize> = HashMap::new();
    for r in &rows {
        if let Some(m) = r.method {
            *by_method.entry(m.as_str()).or_default() += 1;
        }
    }

    println!();
    println!("| step | seconds |");
    println!("|---|---|");
    println!(
        "| full dedup (exact + structural + near + semantic), end to end | {full_s:.2} (CPU {full_cpu:.1} s) |"
    );
    println!(
        "| features: tokenize, exact key, shingles, MinHash-256, WL hash, hashed embedding | {feat_s:.2} |"
    );
    println!("| near: LSH 25x10 buckets + signature check | {near_s:.2} |");
    println!("| embed alone (hashed features, 256 dims, parsing again) | {embed_s:.2} |");
    println!(
        "| semantic: 16 tables x 16-bit hyperplane buckets (centered) + cosine check | {sem_s:.2} |"
    );
    println!();
    println!("| planted copies | found (same group as original) | recall |");
    println!("|---|---|---|");
    for v in [
        Variant::Exact,
        Variant::Reformatted,
        Variant::Renamed,
        Variant::Edited,
    ] {
        let (f, t) = per.get(&v).copied().unwrap_or((0, 0));
        println!("| {v:?} | {f} / {t} | {:.4} |", f as f64 / t.max(1) as f64);
    }
    let found_all: usize = per.values().map(|v| v.0).sum();
    let total_all: usize = per.values().map(|v| v.1).sum();
    println!(
        "| all | {found_all} / {total_all} | {:.4} |",
        found_all as f64 / total_all.max(1) as f64
    );
    println!();
    println!(
        "dropped {} (should drop {should_drop}); precision (dropped in the right family) {:.4}; module-level recall {:.4}",
        dropped.len(),
        correct as f64 / dropped.len().max(1) as f64,
        correct as f64 / should_drop.max(1) as f64
    );
    let mut methods: Vec<String> = by_method.iter().map(|(m, c)| format!("{m}={c}")).collect();
    methods.sort();
    println!(
        "dropped by method: {}; pairs: {:?}; semantic pairs {}",
        methods.join(", "),
        stats.pairs,
        sem.len()
    );

    let sample: Vec<&str> = programs.iter().take(5000).copied().collect();
    println!();
    println!(
        "| feature, 1 thread, {} modules | microseconds per module |",
        sample.len()
    );
    println!("|---|---|");
    for (name, us) in breakdown(&sample, &cfg) {
        println!("| {name} | {us:.1} |");
    }

    // datasketch side by side on the near step.
    if std::env::var("KSMITH_BENCH_DATASKETCH").as_deref() == Ok("0") {
        return;
    }
    let python = match ksmith_core::python_env::resolve_python(None) {
        Ok(p) => p,
        Err(e) => {
            println!("datasketch comparison skipped: {e}");
            return;
        }
    };
    let dir = tempfile::tempdir().unwrap();
    let tokens_path = dir.path().join("tokens.jsonl");
    let pairs_path = dir.path().join("pairs.txt");
    {
        let mut f = std::io::BufWriter::new(std::fs::File::create(&tokens_path).unwrap());
        for c in &items {
            let p = Program::parse(&c.program);
            let toks: Vec<&str> = p.text_tokens().map(|t| t.text).collect();
            serde_json::to_writer(&mut f, &toks).unwrap();
            f.write_all(b"\n").unwrap();
        }
    }
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/benches/datasketch_near.py");
    let out = std::process::Command::new(&python)
        .arg(script)
        .arg(&tokens_path)
        .arg(&pairs_path)
        .arg(cfg.shingle_size.to_string())
        .arg(cfg.num_perm.to_string())
        .arg(cfg.near_threshold.to_string())
        .output()
        .unwrap();
    if !out.status.success() {
        println!(
            "datasketch comparison failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        return;
    }
    let timing: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let ds_s = timing["total_s"].as_f64().unwrap_or(f64::NAN);
    let ds_pairs: HashSet<(u32, u32)> = std::fs::read_to_string(&pairs_path)
        .unwrap()
        .lines()
        .filter_map(|l| {
            let (a, b) = l.split_once(' ')?;
            Some((a.parse().ok()?, b.parse().ok()?))
        })
        .collect();
    let ours: HashSet<(u32, u32)> = near.iter().map(|e| (e.a, e.b)).collect();
    let both = ours.intersection(&ds_pairs).count();
    let union = ours.union(&ds_pairs).count();
    let planted_pair =
        |&(a, b): &(u32, u32)| corpus[a as usize].family == corpus[b as usize].family;
    let ours_true = ours.iter().filter(|p| planted_pair(p)).count();
    let ds_true = ds_pairs.iter().filter(|p| planted_pair(p)).count();
    let rust_near_s = near_feat_s + near_s;
    println!();
    println!(
        "| near-dup step (5-gram shingles, 256 perms, threshold 0.7, b x r = 25 x 10) | seconds | pairs | pairs within a planted family |"
    );
    println!("|---|---|---|---|");
    println!(
        "| ksmith (tokenize, shingles, MinHash, then LSH + check), {threads} threads | {rust_near_s:.2} | {} | {ours_true} |",
        ours.len()
    );
    println!(
        "| datasketch (MinHash.update_batch + MinHashLSH insert/query), 1 process | {ds_s:.2} | {} | {ds_true} |",
        ds_pairs.len()
    );
    println!();
    println!(
        "time ratio datasketch / ksmith: {:.1}x; pair overlap |both| / |either| = {both} / {union} = {:.4} (only ksmith {}, only datasketch {}); datasketch phases: {}",
        ds_s / rust_near_s,
        both as f64 / union.max(1) as f64,
        ours.len() - both,
        ds_pairs.len() - both,
        timing
    );
}
