//! Cluster benchmark: 60,000 generated modules (topics of related modules plus unrelated ones)
//! clustered end to end (embed, PCA, HDBSCAN on a sample, nearest-sample assignment, medoids,
//! families) on a 2-thread pool, and the trade-off of the sample size and PCA dimensions against
//! a full HDBSCAN run on a 20,000-module subset (adjusted Rand index).
//!
//! `cargo bench -p ksmith-cluster` (env: `KSMITH_BENCH_N`, default 60000;
//! `KSMITH_BENCH_THREADS`, default 2; `KSMITH_BENCH_SWEEP=0` skips the trade-off table).
#![allow(clippy::unwrap_used)]

use std::collections::HashMap;
use std::time::Instant;

use ksmith_cluster::{ClusterConfig, Unit, cluster_units};
use ksmith_embed::hashing::SplitMix;

const OPS: &[&str] = &[
    "{x} = F.relu({x})",
    "{x} = F.gelu({x})",
    "{x} = torch.sigmoid({x})",
    "{x} = torch.tanh({x})",
    "{x} = torch.softmax({x}, dim=-1)",
    "{x} = {x}.mean(dim=1, keepdim=True)",
    "{x} = torch.clamp({x}, -1.0, 1.0)",
    "{x} = F.layer_norm({x}, {x}.shape[-1:])",
    "{x} = F.max_pool1d({x}, 2)",
    "{x} = F.avg_pool1d({x}, 2)",
    "{x} = {x} @ {x}.transpose(-1, -2)",
    "{x} = torch.logsumexp({x}, dim=-1, keepdim=True)",
    "{x} = F.dropout({x}, 0.1)",
    "{x} = F.interpolate({x}, scale_factor=2)",
    "{x} = torch.cumsum({x}, dim=-1)",
    "{x} = {x} * 0.5 + 1.0",
    "{x} = torch.exp({x})",
    "{x} = F.silu({x})",
    "{x} = self.{a}({x})",
];
const LAYERS: &[&str] = &[
    "nn.Linear({c}, {c})",
    "nn.Conv1d({c}, {c}, 3, padding=1)",
    "nn.Conv2d({c}, {c}, 3, padding=1)",
    "nn.BatchNorm1d({c})",
    "nn.LayerNorm({c})",
    "nn.GRU({c}, {c})",
    "nn.Embedding(512, {c})",
    "nn.GroupNorm(4, {c})",
];
const NAMES: &[&str] = &["x", "h", "out", "feat", "y", "z", "t", "inp"];

/// A topic: a fixed op sequence; members vary names, sizes and one or two ops.
fn program(topic: &[usize], layer: usize, rng: &mut SplitMix) -> String {
    let x = NAMES[rng.below(NAMES.len())];
    let a = format!("m{}", rng.below(50));
    let c = 8 * (1 + rng.below(32));
    let mut ops: Vec<usize> = topic.to_vec();
    for _ in 0..rng.below(3) {
        let pos = rng.below(ops.len() + 1);
        if rng.below(2) == 0 && ops.len() > 2 {
            ops.remove(pos.min(ops.len() - 1));
        } else {
            ops.insert(pos, rng.below(OPS.len()));
        }
    }
    let mut s = format!(
        "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\nclass Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.{a} = {}\n\n    def forward(self, {x}):\n",
        LAYERS[layer].replace("{c}", &c.to_string())
    );
    for &o in &ops {
        s.push_str(&format!(
            "        {}\n",
            OPS[o].replace("{x}", x).replace("{a}", &a)
        ));
    }
    s.push_str(&format!(
        "        return {x}\n\ndef get_inputs():\n    return [torch.randn(4, {c}, {c})]\n\ndef get_init_inputs():\n    return []\n"
    ));
    s
}

fn corpus(n: usize, seed: u64) -> Vec<(Unit, usize)> {
    let mut rng = SplitMix::new(seed);
    let n_topics = (n / 200).max(1);
    let topics: Vec<(Vec<usize>, usize)> = (0..n_topics)
        .map(|_| {
            let len = 3 + rng.below(6);
            (
                (0..len).map(|_| rng.below(OPS.len())).collect(),
                rng.below(LAYERS.len()),
            )
        })
        .collect();
    (0..n)
        .map(|i| {
            // 85% of modules belong to a topic, 15% are unrelated.
            let (ops, layer, topic) = if rng.below(100) < 85 {
                let t = rng.below(n_topics);
                (topics[t].0.clone(), topics[t].1, t)
            } else {
                let len = 3 + rng.below(6);
                (
                    (0..len).map(|_| rng.below(OPS.len())).collect(),
                    rng.below(LAYERS.len()),
                    usize::MAX,
                )
            };
            let program = program(&ops, layer, &mut rng);
            (
                Unit {
                    id: format!("u{i:06}"),
                    program,
                    repo: "bench".into(),
                    class_name: "Model".into(),
                    license: None,
                    aten_ops: None,
                    alt_sizes: "[]".into(),
                    computation: None,
                    intensity: None,
                },
                topic,
            )
        })
        .collect()
}

/// Adjusted Rand index of two labelings (noise = its own label -1, as sklearn does).
fn ari(a: &[i32], b: &[i32]) -> f64 {
    let mut table: HashMap<(i32, i32), u64> = HashMap::new();
    let mut ra: HashMap<i32, u64> = HashMap::new();
    let mut rb: HashMap<i32, u64> = HashMap::new();
    for (&x, &y) in a.iter().zip(b) {
        *table.entry((x, y)).or_default() += 1;
        *ra.entry(x).or_default() += 1;
        *rb.entry(y).or_default() += 1;
    }
    let c2 = |n: u64| (n * n.saturating_sub(1)) as f64 / 2.0;
    let index: f64 = table.values().map(|&n| c2(n)).sum();
    let sa: f64 = ra.values().map(|&n| c2(n)).sum();
    let sb: f64 = rb.values().map(|&n| c2(n)).sum();
    let total = c2(a.len() as u64);
    let expected = sa * sb / total;
    let max = (sa + sb) / 2.0;
    if (max - expected).abs() < 1e-12 {
        return 1.0;
    }
    (index - expected) / (max - expected)
}

fn summary(labels: &[i32]) -> (usize, f64) {
    let clusters = labels
        .iter()
        .filter(|&&l| l >= 0)
        .map(|&l| l as usize + 1)
        .max()
        .unwrap_or(0);
    let noise = labels.iter().filter(|&&l| l < 0).count() as f64 / labels.len().max(1) as f64;
    (clusters, noise)
}

fn main() {
    let n = std::env::var("KSMITH_BENCH_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(60_000);
    let threads = std::env::var("KSMITH_BENCH_THREADS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2);
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .unwrap();
    let data = corpus(n, 7);
    let units: Vec<Unit> = data.iter().map(|d| d.0.clone()).collect();
    let topics: Vec<i32> = data
        .iter()
        .map(|d| if d.1 == usize::MAX { -1 } else { d.1 as i32 })
        .collect();
    let cfg = ClusterConfig::default();
    let embedder = cfg.embedder.build().unwrap();
    println!(
        "cluster benchmark: {n} modules, {} topics + 15% unrelated, {threads} threads",
        n / 200
    );
    println!();
    println!(
        "| run | modules | HDBSCAN points | PCA dims | seconds | clusters | noise share | ARI vs generated topics |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    let t = Instant::now();
    let r = pool
        .install(|| cluster_units(&units, embedder.as_ref(), &cfg))
        .unwrap();
    let secs = t.elapsed().as_secs_f64();
    let (k, noise) = summary(&r.labels);
    println!(
        "| default, end to end (embed, PCA, HDBSCAN, assign, medoids, families) | {n} | {} | {} | {secs:.1} | {k} | {noise:.3} | {:.3} |",
        cfg.max_cluster_points.min(n),
        cfg.pca_dims,
        ari(&r.labels, &topics)
    );
    let mut fam: HashMap<&str, usize> = HashMap::new();
    for f in &r.families {
        *fam.entry(f.family).or_default() += 1;
    }
    let mut fam: Vec<_> = fam.into_iter().collect();
    fam.sort_by_key(|f| std::cmp::Reverse(f.1));
    println!();
    println!("families: {fam:?}");
    println!("centers: {}", r.is_center.iter().filter(|&&c| c).count());

    if std::env::var("KSMITH_BENCH_SWEEP").as_deref() == Ok("0") {
        return;
    }
    // Trade-off on a subset: full HDBSCAN versus a sample, and PCA dims.
    let m = 20_000.min(n);
    let sub: Vec<Unit> = units[..m].to_vec();
    let sub_topics = &topics[..m];
    println!();
    println!(
        "trade-off on {m} modules (ARI against the full-HDBSCAN labels of the same PCA dims):"
    );
    println!();
    println!(
        "| HDBSCAN points | PCA dims | seconds | clusters | noise share | ARI vs full | ARI vs topics |"
    );
    println!("|---|---|---|---|---|---|---|");
    for dims in [8usize, 16, 32] {
        let full_cfg = ClusterConfig {
            pca_dims: dims,
            max_cluster_points: m,
            ..ClusterConfig::default()
        };
        let t = Instant::now();
        let full = pool
            .install(|| cluster_units(&sub, embedder.as_ref(), &full_cfg))
            .unwrap();
        let full_s = t.elapsed().as_secs_f64();
        let (k, noise) = summary(&full.labels);
        println!(
            "| {m} (all) | {dims} | {full_s:.1} | {k} | {noise:.3} | 1.000 | {:.3} |",
            ari(&full.labels, sub_topics)
        );
        for points in [5_000usize, 10_000] {
            let c = ClusterConfig {
                max_cluster_points: points,
                ..full_cfg.clone()
            };
            let t = Instant::now();
            let s = pool
                .install(|| cluster_units(&sub, embedder.as_ref(), &c))
                .unwrap();
            let secs = t.elapsed().as_secs_f64();
            let (k, noise) = summary(&s.labels);
            println!(
                "| {points} | {dims} | {secs:.1} | {k} | {noise:.3} | {:.3} | {:.3} |",
                ari(&s.labels, &full.labels),
                ari(&s.labels, sub_topics)
            );
        }
    }
}
