//! Extraction throughput on a generated corpus (at least 50 MB of Python by default).
//!
//! The corpus is generated in memory from templates with randomized names and sizes: many
//! repositories, each a package of files with constants, helper functions and `nn.Module`
//! classes that import helpers and base classes from other files of the package (relative
//! imports) and from a shared `common.py`. It then extracts every repository with rayon pools
//! of 1 thread and of all cores, and prints a table of MB/s of source, modules/s, MB/s per
//! thread and peak memory (VmHWM), next to tree-sitter parsing alone on the same files and
//! to extraction with `verify_whole_program = true` (every program re-parsed whole).
//!
//! `cargo bench -p ksmith-extract` (set `KSMITH_BENCH_MB` to change the corpus size).
use std::time::Instant;

use ksmith_core::tables::ModuleStatus;
use ksmith_extract::{ExtractConfig, RepoInfo, SourceFile, extract_repo};
use rayon::prelude::*;

/// A small deterministic generator (no dependency needed).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len() as u64) as usize]
    }
}

const ACTS: &[&str] = &["relu", "gelu", "silu", "tanh", "sigmoid", "softplus"];
const WORDS: &[&str] = &[
    "Fused", "Gated", "Deep", "Light", "Sparse", "Dense", "Multi", "Cross", "Local", "Global",
    "Res", "Pre", "Post", "Dual", "Tiny", "Wide",
];
const NOUNS: &[&str] = &[
    "Block", "Layer", "Mixer", "Head", "Unit", "Cell", "Stem", "Neck", "Stage", "Fuser",
];

fn class_name(rng: &mut Lcg, file: usize, k: usize) -> String {
    format!("{}{}{file}x{k}", rng.pick(WORDS), rng.pick(NOUNS))
}

/// One generated file; returns its text and the names of its first class.
fn gen_file(rng: &mut Lcg, file: usize, files: usize, out: &mut String) -> String {
    let other = (file + 1 + rng.below(files as u64 - 1) as usize) % files;
    out.push_str(&format!(
        "\"\"\"Generated module {file}.\"\"\"\nimport math\nfrom typing import Optional\n\nimport torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\nfrom .common import shared_norm, SHARED_SCALE\nfrom .f{other} import Base{other}\n\nEPS_{file} = 1e-5\nWIDTH_{file} = {}\nTABLE_{file} = {{'a': {}, 'b': {}}}\n\n\n",
        4 + rng.below(60),
        rng.below(100),
        rng.below(100)
    ));
    for h in 0..3 {
        let act = rng.pick(ACTS);
        out.push_str(&format!(
            "def helper_{file}_{h}(x, scale=SHARED_SCALE):\n    y = F.{act}(x) * scale\n    for _ in range({}):\n        y = y + torch.tanh(y) * {}\n    return shared_norm(y, EPS_{file})\n\n\n",
            1 + rng.below(3),
            rng.below(10) as f64 / 10.0
        ));
    }
    out.push_str(&format!(
        "class Base{file}(nn.Module):\n    \"\"\"Base of this file's blocks.\"\"\"\n\n    def __init__(self, dim, hidden_dim={}, dropout=0.1):\n        super().__init__()\n        self.fc1 = nn.Linear(dim, hidden_dim)\n        self.fc2 = nn.Linear(hidden_dim, dim)\n        self.norm = nn.LayerNorm(dim, eps=EPS_{file})\n        self.drop = nn.Dropout(dropout)\n\n    def forward(self, x):\n        h = helper_{file}_0(self.fc1(self.norm(x)))\n        return x + self.drop(self.fc2(h))\n\n\n",
        8 + rng.below(120)
    ));
    let first = class_name(rng, file, 0);
    let n_classes = 6 + rng.below(6) as usize;
    for k in 0..n_classes {
        let name = if k == 0 {
            first.clone()
        } else {
            class_name(rng, file, k)
        };
        match rng.below(4) {
            0 => out.push_str(&format!(
                "class {name}(Base{other}):\n    def forward(self, x, mask: Optional[torch.Tensor] = None):\n        y = super().forward(x)\n        if mask is not None:\n            y = y * mask\n        return helper_{file}_{}(y) * WIDTH_{file}\n\n\n",
                rng.below(3)
            )),
            1 => {
                let c = 4 + rng.below(60);
                out.push_str(&format!(
                    "class {name}(nn.Module):\n    def __init__(self, in_channels={c}, out_channels={c}, kernel_size=3, stride=1):\n        super().__init__()\n        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, stride, padding=kernel_size // 2)\n        self.bn = nn.BatchNorm2d(out_channels)\n        self.scale = nn.Parameter(torch.ones(1, out_channels, 1, 1) * {})\n\n    def forward(self, x):\n        b, c, h, w = x.shape\n        y = F.{}(self.bn(self.conv(x)))\n        y = y * self.scale + TABLE_{file}['a']\n        return F.max_pool2d(y, 2) if h > 8 else y\n\n\n",
                    rng.below(10) as f64 / 10.0 + 0.1,
                    rng.pick(ACTS)
                ));
            }
            2 => out.push_str(&format!(
                "class {name}(nn.Module):\n    def __init__(self, dim, num_heads={}):\n        super().__init__()\n        self.heads = num_heads\n        self.qkv = nn.Linear(dim, dim * 3)\n        self.proj = nn.Linear(dim, dim)\n\n    def forward(self, x):\n        b, n, d = x.shape\n        q, k, v = self.qkv(x).chunk(3, dim=-1)\n        q, k, v = [t.view(b, n, self.heads, -1).transpose(1, 2) for t in (q, k, v)]\n        att = (q @ k.transpose(-2, -1)) / math.sqrt(q.size(-1))\n        y = (att.softmax(dim=-1) @ v).transpose(1, 2).reshape(b, n, d)\n        return self.proj(y)\n\n\n",
                1 + rng.below(4)
            )),
            _ => out.push_str(&format!(
                "class {name}(Base{file}):\n    def __init__(self, dim, depth={}):\n        super().__init__(dim)\n        self.extra = nn.ModuleList([nn.Linear(dim, dim) for _ in range(depth)])\n\n    def forward(self, x):\n        x = super().forward(x)\n        for i, layer in enumerate(self.extra):\n            x = x + helper_{file}_{}(layer(x)) / (i + 1)\n        return x\n\n\n",
                1 + rng.below(4),
                rng.below(3)
            )),
        }
    }
    first
}

fn gen_repo(rng: &mut Lcg, files: usize) -> Vec<SourceFile> {
    let mut out = Vec::with_capacity(files + 2);
    out.push(SourceFile::new(
        "pkg/__init__.py",
        "\"\"\"Generated package.\"\"\"\n",
    ));
    out.push(SourceFile::new(
        "pkg/common.py",
        "import torch\n\nSHARED_SCALE = 0.5\n\n\ndef shared_norm(x, eps=1e-6):\n    return x / (x.norm(dim=-1, keepdim=True) + eps)\n",
    ));
    for f in 0..files {
        let mut text = String::with_capacity(12_000);
        gen_file(rng, f, files, &mut text);
        out.push(SourceFile::new(format!("pkg/f{f}.py"), text));
    }
    out
}

fn peak_rss_mb() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|kb| kb.parse::<f64>().ok())
        .map(|kb| kb / 1024.0)
        .unwrap_or(f64::NAN)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn main() {
    let target_mb: f64 = std::env::var("KSMITH_BENCH_MB")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(50.0);
    let runs: usize = std::env::var("KSMITH_BENCH_RUNS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3);
    let started = Instant::now();
    let mut rng = Lcg(0x5eed);
    let mut repos: Vec<(RepoInfo, Vec<SourceFile>)> = Vec::new();
    let mut bytes = 0usize;
    while (bytes as f64) < target_mb * 1e6 {
        let n = repos.len();
        let count = 40 + rng.below(40) as usize;
        let files = gen_repo(&mut rng, count);
        bytes += files.iter().map(|f| f.bytes.len()).sum::<usize>();
        let info = RepoInfo {
            repo: format!("bench/repo{n}"),
            commit: format!("{n:040}"),
            ..Default::default()
        };
        repos.push((info, files));
    }
    let n_files: usize = repos.iter().map(|r| r.1.len()).sum();
    let mb = bytes as f64 / 1e6;
    println!(
        "corpus: {} repositories, {n_files} files, {mb:.1} MB of Python (generated in {:.1} s); {runs} runs each, medians",
        repos.len(),
        started.elapsed().as_secs_f64()
    );
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let cfg = ExtractConfig::default();
    // The same extraction with every program re-parsed whole (`verify_whole_program`).
    let whole = ExtractConfig {
        verify_whole_program: true,
        ..Default::default()
    };
    let mut sizes = vec![1];
    if cores > 1 {
        sizes.push(cores);
    }
    println!();
    println!(
        "| {:<22} | {:>7} | {:>9} | {:>10} | {:>12} | {:>11} | {:>9} | {:>13} |",
        "what", "threads", "time s", "MB/s", "MB/s/thread", "modules/s", "modules", "peak RSS MB"
    );
    println!(
        "|{:-<24}|{:->9}|{:->11}|{:->12}|{:->14}|{:->13}|{:->11}|{:->15}|",
        "", "", "", "", "", "", "", ""
    );
    for &threads in &sizes {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .stack_size(16 << 20)
            .build()
            .expect("thread pool");
        // tree-sitter parsing alone, one parser per thread: the floor extraction sits on.
        let mut parse_times = Vec::new();
        for _ in 0..runs {
            let t = Instant::now();
            let nodes: usize = pool.install(|| {
                repos
                    .par_iter()
                    .flat_map(|(_, files)| files.par_iter())
                    .map_init(
                        || {
                            let mut p = tree_sitter::Parser::new();
                            p.set_language(&tree_sitter_python::LANGUAGE.into())
                                .expect("language");
                            p
                        },
                        |p, f| {
                            p.parse(&f.bytes, None)
                                .map(|t| t.root_node().child_count() as usize)
                                .unwrap_or(0)
                        },
                    )
                    .sum()
            });
            assert!(nodes > 0);
            parse_times.push(t.elapsed().as_secs_f64());
        }
        let parse = median(parse_times);
        println!(
            "| {:<22} | {threads:>7} | {parse:>9.2} | {:>10.2} | {:>12.2} | {:>11} | {:>9} | {:>13.0} |",
            "tree-sitter parse only",
            mb / parse,
            mb / parse / threads as f64,
            "-",
            "-",
            peak_rss_mb()
        );
        for (label, cfg) in [
            ("extract (end to end)", &cfg),
            ("extract, whole reparse", &whole),
        ] {
            let mut times = Vec::new();
            let mut modules = 0usize;
            let mut ok = 0usize;
            for _ in 0..runs {
                let t = Instant::now();
                let rows: Vec<_> = pool.install(|| {
                    repos
                        .par_iter()
                        .map(|(info, files)| extract_repo(info, files, cfg))
                        .collect()
                });
                times.push(t.elapsed().as_secs_f64());
                modules = rows.iter().map(|r: &Vec<_>| r.len()).sum();
                ok = rows
                    .iter()
                    .flatten()
                    .filter(|r| r.status == ModuleStatus::Ok)
                    .count();
            }
            let time = median(times);
            println!(
                "| {label:<22} | {threads:>7} | {time:>9.2} | {:>10.2} | {:>12.2} | {:>11.0} | {:>9} | {:>13.0} |",
                mb / time,
                mb / time / threads as f64,
                modules as f64 / time,
                modules,
                peak_rss_mb()
            );
            assert!(
                ok * 10 >= modules * 9,
                "only {ok} of {modules} modules extracted"
            );
        }
    }
}
