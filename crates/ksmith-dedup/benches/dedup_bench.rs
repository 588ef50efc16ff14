//! Dedup benchmark: generated modules with planted duplicates (exact, reformatted, renamed,
//! lightly edited), each with recorded calls (a seeded sequence of 12 to 60 attributed ATen
//! calls per family, so the kernel method and the run checks do their work), deduplicated with
//! the default config on a 2-thread pool; recall and
//! precision on the planted copies; the cost of each feature; real programs from a work
//! directory (rows per second, medians of repeated runs, same output on 1 and 2 threads); and
//! the near-duplicate step side by side with Python `datasketch` (same shingles, permutations,
//! bands and threshold): time ratio and pair overlap.
//!
//! `cargo bench -p ksmith-dedup` (env: `KSMITH_BENCH_N` modules, default 100000;
//! `KSMITH_BENCH_THREADS`, default 2; `KSMITH_BENCH_WORKDIR` a work directory with
//! `modules.parquet` and `probes.parquet` for the real-program rows; `KSMITH_BENCH_RUNS`, default
//! 5; `KSMITH_BENCH_DATASKETCH=0` skips the Python side).
#![allow(clippy::unwrap_used)]

#[path = "../tests/common/synth.rs"]
mod synth;

use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::time::Instant;

use ksmith_core::report::StageReport;
use ksmith_core::table::{Table, read_table};
use ksmith_core::tables::{ModuleRow, ProbeRow};
use ksmith_dedup::buckets::bucket_pairs;
use ksmith_dedup::engine::{Candidate, deduplicate};
use ksmith_dedup::features::{Features, Wanted, features};
use ksmith_dedup::minhash::estimated_jaccard;
use ksmith_dedup::pairs::{near_pairs, semantic_pairs};
use ksmith_dedup::{DedupConfig, runnable_candidates};
use ksmith_embed::Program;
use ksmith_embed::calls::Run;
use ksmith_embed::hashing::SplitMix;
use rayon::prelude::*;
use synth::Variant;

/// Attributed calls the synthetic runs are drawn from.
const CALLS: &[&str] = &[
    "aten::convolution(2d,k3x3,s1,p1,d1,dense)",
    "aten::convolution(2d,k3x3,s1,p1,d1,dw)",
    "aten::convolution(2d,k1x1,s1,p0,d1,dense)",
    "aten::native_batch_norm(RKR,train)",
    "aten::relu",
    "aten::gelu",
    "aten::view",
    "aten::t(w)",
    "aten::addmm(a,w)",
    "aten::_unsafe_view",
    "aten::native_layer_norm(KR)",
    "aten::mean(KRKK)",
    "aten::add(b)",
    "aten::mul(s)",
    "aten::bmm(a,a)",
    "aten::_softmax(KR)",
    "aten::permute(p=021)",
    "aten::clone(m=021)",
    "aten::max_pool2d_with_indices(k2,s2)",
    "aten::sigmoid",
    "aten::add",
    "aten::cat(KRKK)",
];

/// The recorded calls of a family's modules (its copies compute the same).
fn family_calls(family: usize) -> Vec<String> {
    let mut rng = SplitMix::new(family as u64 ^ 0x6361_6c6c);
    let len = 12 + rng.below(49);
    (0..len)
        .map(|_| CALLS[rng.below(CALLS.len())].to_string())
        .collect()
}

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

fn pool(threads: usize) -> rayon::ThreadPool {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .unwrap()
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

/// Single-threaded cost of each feature on `programs`, in microseconds per module.
fn breakdown(programs: &[&str], cfg: &DedupConfig) -> Vec<(&'static str, f64)> {
    let per = |secs: f64| secs * 1e6 / programs.len().max(1) as f64;
    let one = pool(1);
    let mut out = Vec::new();
    let t = Instant::now();
    let parsed: Vec<Program<'_>> = programs.iter().map(|p| Program::parse(p)).collect();
    out.push((
        "tokenize + strip docstrings + import aliases",
        per(t.elapsed().as_secs_f64()),
    ));
    let t = Instant::now();
    let slices: usize = parsed
        .iter()
        .map(|p| ksmith_embed::Slice::of(p).helpers.len())
        .sum();
    out.push((
        "slice: top-level statements, scoped global reads, reachability",
        per(t.elapsed().as_secs_f64()),
    ));
    let run = |wanted: Wanted, embedder: bool| {
        let e = embedder.then(|| ksmith_embed::HashedEmbedder::new(&cfg.embedder));
        let t = Instant::now();
        let f = one.install(|| features(programs, cfg, wanted, e.as_ref()));
        std::hint::black_box(f.len());
        per(t.elapsed().as_secs_f64())
    };
    let base = run(Wanted::default(), false);
    out.push(("parse + slice + exact key", base));
    let near = Wanted {
        near: true,
        ..Default::default()
    };
    out.push((
        "+ entry and slice MinHash-256, LSH band keys",
        run(near, false) - base,
    ));
    let structural = Wanted {
        structural: true,
        ..Default::default()
    };
    out.push((
        "+ structural hash (WL per statement)",
        run(structural, false) - base,
    ));
    let contamination = Wanted {
        contamination: true,
        ..Default::default()
    };
    out.push((
        "+ contamination view (text and canonical MinHash-128, WL)",
        run(contamination, false) - base,
    ));
    out.push((
        "+ hashed embeddings of both views",
        run(Wanted::default(), true) - base,
    ));
    std::hint::black_box(slices);
    out
}

/// Rows per second of the whole engine on the runnable programs of a work directory.
fn real_programs(dir: &str, cfg: &DedupConfig, threads: usize, runs: usize) {
    let modules: Vec<ModuleRow> = read_table(&ModuleRow::path_in(dir.as_ref())).unwrap();
    let probes: Vec<ProbeRow> = read_table(&ProbeRow::path_in(dir.as_ref())).unwrap();
    let mut report = StageReport::new("bench");
    let items = runnable_candidates(&modules, &probes, &mut report);
    let problems = ksmith_dedup::benchmark::load_all(cfg, None)
        .unwrap()
        .into_iter()
        .flat_map(|b| b.problems)
        .collect::<Vec<_>>();
    let embedder = cfg.embedder.build().unwrap();
    let mut secs = Vec::new();
    let mut outputs = Vec::new();
    for run in 0..runs {
        let n = if run % 2 == 0 { threads } else { 1 };
        let p = pool(n);
        let t = Instant::now();
        let d = p
            .install(|| deduplicate(&items, &problems, Some(embedder.as_ref()), cfg))
            .unwrap();
        if n == threads {
            secs.push(t.elapsed().as_secs_f64());
        }
        outputs.push((d.rows, d.pairs));
    }
    let same = outputs.windows(2).all(|w| w[0] == w[1]);
    let m = median(secs.clone());
    println!();
    println!(
        "| real programs ({dir}), {threads} threads | rows | median seconds ({} runs) | rows/s | same output on 1 and {threads} threads |",
        secs.len()
    );
    println!("|---|---|---|---|---|");
    println!(
        "| dedup engine (features, contamination against {} problems, all methods, groups) | {} | {m:.3} | {:.0} | {same} |",
        problems.len(),
        items.len(),
        items.len() as f64 / m
    );
}

fn main() {
    let n = env_usize("KSMITH_BENCH_N", 100_000);
    let threads = env_usize("KSMITH_BENCH_THREADS", 2);
    let runs = env_usize("KSMITH_BENCH_RUNS", 5);
    let dup_share = 0.2;
    let cfg = DedupConfig::default();
    if let Ok(dir) = std::env::var("KSMITH_BENCH_WORKDIR") {
        real_programs(&dir, &cfg, threads, runs);
    }
    let t = Instant::now();
    let corpus = synth::corpus(n, dup_share, 2026);
    let recorded: Vec<Vec<String>> = corpus.iter().map(|g| family_calls(g.family)).collect();
    let gen_s = t.elapsed().as_secs_f64();
    let pool = pool(threads);
    let t = Instant::now();
    let runs: Vec<Run> = pool.install(|| {
        recorded
            .par_iter()
            .map(|c| Run::of(c, std::iter::empty()))
            .collect()
    });
    let runs_s = t.elapsed().as_secs_f64();
    let items: Vec<Candidate> = corpus
        .iter()
        .zip(runs)
        .enumerate()
        .map(|(i, (g, run))| Candidate {
            id: format!("m{i:06}"),
            program: g.program.clone(),
            license: Some(if i % 5 == 0 { "GPL-3.0" } else { "MIT" }.to_string()),
            stars: Some((i % 97) as i64),
            lines: g.program.lines().count() as u32,
            run: Some(run),
            intensity: Some(4f64.powi((g.family % 3) as i32 * 2)),
        })
        .collect();
    let bytes: usize = items.iter().map(|c| c.program.len()).sum();
    println!();
    println!(
        "dedup benchmark: {n} modules ({:.1} MB, {:.0}% planted copies), {threads} threads, generated in {gen_s:.1} s",
        bytes as f64 / 1e6,
        dup_share * 100.0
    );

    let embedder = cfg.embedder.build().unwrap();

    // Full run, all methods (the default decontaminates against the committed KernelBench
    // signatures too).
    let problems = ksmith_dedup::benchmark::load_all(&cfg, None)
        .unwrap()
        .into_iter()
        .flat_map(|b| b.problems)
        .collect::<Vec<_>>();
    let cpu0 = cpu_seconds();
    let t = Instant::now();
    let decision = pool
        .install(|| deduplicate(&items, &problems, Some(embedder.as_ref()), &cfg))
        .unwrap();
    let full_s = t.elapsed().as_secs_f64();
    let full_cpu = cpu_seconds() - cpu0;
    let (rows, stats) = (decision.rows, decision.stats);
    // Side by side: the same modules without recorded calls (the code methods alone).
    let bare: Vec<Candidate> = items
        .iter()
        .map(|c| Candidate {
            run: None,
            intensity: None,
            ..c.clone()
        })
        .collect();
    let cpu0 = cpu_seconds();
    let t = Instant::now();
    std::hint::black_box(
        pool.install(|| deduplicate(&bare, &problems, Some(embedder.as_ref()), &cfg))
            .unwrap(),
    );
    let bare_s = t.elapsed().as_secs_f64();
    let bare_cpu = cpu_seconds() - cpu0;

    // Phase timings (separate runs of each step).
    let programs: Vec<&str> = items.iter().map(|c| c.program.as_str()).collect();
    let all = Wanted {
        near: true,
        structural: true,
        contamination: true,
    };
    let t = Instant::now();
    let feats = pool.install(|| features(&programs, &cfg, all, embedder.as_hashed()));
    let feat_s = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let item_runs: Vec<Option<&Run>> = items.iter().map(|c| c.run.as_ref()).collect();
    let near = pool.install(|| near_pairs(&feats, &item_runs, &cfg));
    let near_s = t.elapsed().as_secs_f64();
    let stack = |pick: &dyn Fn(&Features) -> &Vec<f32>| {
        let mut m = ndarray::Array2::<f32>::zeros((feats.len(), cfg.embedder.dim));
        for (mut row, f) in m.outer_iter_mut().zip(&feats) {
            row.assign(&ndarray::ArrayView1::from(&pick(f)[..]));
        }
        m
    };
    let (entry_emb, slice_emb) = (
        stack(&|f| &f.entry_embedding),
        stack(&|f| &f.slice_embedding),
    );
    let t = Instant::now();
    let sem = pool.install(|| semantic_pairs(&feats, &entry_emb, &slice_emb, &item_runs, &cfg));
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
        "| runs: recorded calls made canonical, features, kernel and sequence hashes (before the engine) | {runs_s:.2} |"
    );
    println!(
        "| full dedup (exact + structural + near + semantic + kernel + contamination), end to end | {full_s:.2} (CPU {full_cpu:.1} s) |"
    );
    println!(
        "| the same without recorded calls (no kernel method, no run checks) | {bare_s:.2} (CPU {bare_cpu:.1} s) |"
    );
    println!(
        "| features: parse, slice, exact key, MinHash (2 x 256 + 2 x 128), WL, 2 hashed embeddings | {feat_s:.2} |"
    );
    let (b, r) = cfg.bands_rows();
    println!("| near: LSH {b}x{r} buckets + both views' signature check | {near_s:.2} |");
    println!(
        "| semantic: 16 tables x 16-bit hyperplane buckets (centered) + both views' cosine | {sem_s:.2} |"
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
        "dropped by method: {}; pairs: {:?}; near pairs {}, semantic pairs {}",
        methods.join(", "),
        stats.pairs,
        near.len(),
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

    // datasketch side by side on the near step: the same shingles (the entry view's canonical
    // labels), permutations, bands (datasketch's optimal 25 x 10 at 0.7) and threshold, checked
    // on the entry signature alone.
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
    let dcfg = DedupConfig {
        bands: 0,
        rows: 0,
        ..cfg.clone()
    };
    let dir = tempfile::tempdir().unwrap();
    let tokens_path = dir.path().join("tokens.jsonl");
    let pairs_path = dir.path().join("pairs.txt");
    {
        let mut f = std::io::BufWriter::new(std::fs::File::create(&tokens_path).unwrap());
        for c in &items {
            serde_json::to_writer(&mut f, &ksmith_dedup::features::entry_labels(&c.program))
                .unwrap();
            f.write_all(b"\n").unwrap();
        }
    }
    let t = Instant::now();
    let near_only = Wanted {
        near: true,
        ..Default::default()
    };
    let dfeats = pool.install(|| features(&programs, &dcfg, near_only, None));
    let entries: Vec<(u64, u32)> = dfeats
        .iter()
        .enumerate()
        .flat_map(|(i, f)| f.bands.iter().map(move |&k| (k, i as u32)))
        .collect();
    let ours: HashSet<(u32, u32)> = bucket_pairs(entries, dcfg.max_bucket_pairs)
        .into_iter()
        .filter(|&(a, b)| {
            estimated_jaccard(&dfeats[a as usize].entry_sig, &dfeats[b as usize].entry_sig)
                >= dcfg.near_threshold
        })
        .collect();
    let rust_near_s = t.elapsed().as_secs_f64();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/benches/datasketch_near.py");
    let out = std::process::Command::new(&python)
        .arg(script)
        .arg(&tokens_path)
        .arg(&pairs_path)
        .arg(dcfg.shingle_size.to_string())
        .arg(dcfg.num_perm.to_string())
        .arg(dcfg.near_threshold.to_string())
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
    let both = ours.intersection(&ds_pairs).count();
    let union = ours.union(&ds_pairs).count();
    let planted_pair =
        |&(a, b): &(u32, u32)| corpus[a as usize].family == corpus[b as usize].family;
    let ours_true = ours.iter().filter(|p| planted_pair(p)).count();
    let ds_true = ds_pairs.iter().filter(|p| planted_pair(p)).count();
    println!();
    println!(
        "| near-dup step (entry-view canonical 5-gram shingles, 256 perms, threshold 0.7, b x r = 25 x 10) | seconds | pairs | pairs within a planted family |"
    );
    println!("|---|---|---|---|");
    println!(
        "| ksmith (parse, slice, shingles, MinHash, then LSH + check), {threads} threads | {rust_near_s:.2} | {} | {ours_true} |",
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
