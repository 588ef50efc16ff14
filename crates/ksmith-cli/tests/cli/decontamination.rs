//! Decontamination through the real stages: KernelBench-style problems written for these
//! tests, leaked into crawled files in eight ways (generated here), crawled and extracted by
//! the real crawl and extract, then matched by dedup entry class against entry class; and the
//! default KernelBench path: fetched once through the crawl's git machinery into the cache,
//! found there afterwards, and a clear error when it cannot be had.

#[path = "../../../ksmith-dedup/tests/common/leaks.rs"]
mod leaks;
#[path = "../../../ksmith-dedup/tests/common/synth.rs"]
mod synth;

use std::collections::BTreeMap;
use std::path::Path;

use ksmith_cli::benchmarks::CrawlFetcher;
use ksmith_core::config::SourceSpec;
use ksmith_core::context::StageContext;
use ksmith_core::progress::ProgressMode;
use ksmith_core::table::{Table, read_table, write_table};
use ksmith_core::tables::{
    DedupMethod, DedupPairRow, DedupRow, ModuleRow, ModuleStatus, ProbeRow, ProbeStatus,
};
use ksmith_dedup::DedupConfig;
use ksmith_embed::hashing::SplitMix;

/// KernelBench-style problems written for these tests: module constants named like the
/// constructor's parameters, generated inputs, helpers at levels 2 and 3.
const PROBLEMS: &[(&str, &str)] = &[
    (
        "level1/1_RowL2Norm.py",
        "import torch\nimport torch.nn as nn\n\nclass Model(nn.Module):\n    \"\"\"Normalizes each row to unit L2 norm.\"\"\"\n    def __init__(self, eps: float):\n        super(Model, self).__init__()\n        self.eps = eps\n\n    def forward(self, x: torch.Tensor) -> torch.Tensor:\n        norm = torch.sqrt(torch.sum(x * x, dim=1, keepdim=True) + self.eps)\n        return x / norm\n\nbatch_size = 256\ndim = 4096\neps = 1e-6\n\ndef get_inputs():\n    return [torch.randn(batch_size, dim)]\n\ndef get_init_inputs():\n    return [eps]\n",
    ),
    (
        "level1/2_ShiftedSoftplus.py",
        "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\nclass Model(nn.Module):\n    \"\"\"Softplus shifted so that it passes through zero.\"\"\"\n    def __init__(self, beta):\n        super(Model, self).__init__()\n        self.beta = beta\n        self.shift = float(torch.log(torch.tensor(2.0)) / beta)\n\n    def forward(self, x):\n        return F.softplus(x, beta=self.beta) - self.shift\n\nbatch_size = 64\nfeatures = 65536\nbeta = 2.0\n\ndef get_inputs():\n    return [torch.randn(batch_size, features)]\n\ndef get_init_inputs():\n    return [beta]\n",
    ),
    (
        "level2/3_Conv2d_GroupNorm_HardSwish_Scale.py",
        "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\nclass Model(nn.Module):\n    \"\"\"Convolution, group normalization, hard-swish and a learned per-channel scale.\"\"\"\n    def __init__(self, in_channels, out_channels, kernel_size, groups):\n        super(Model, self).__init__()\n        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2)\n        self.norm = nn.GroupNorm(groups, out_channels)\n        self.scale = nn.Parameter(torch.ones(out_channels, 1, 1))\n\n    def forward(self, x):\n        x = self.conv(x)\n        x = self.norm(x)\n        x = F.hardswish(x)\n        return x * self.scale\n\nbatch_size = 32\nin_channels = 16\nout_channels = 64\nheight, width = 64, 64\nkernel_size = 3\ngroups = 8\n\ndef get_inputs():\n    return [torch.randn(batch_size, in_channels, height, width)]\n\ndef get_init_inputs():\n    return [in_channels, out_channels, kernel_size, groups]\n",
    ),
    (
        "level2/4_Gemm_LayerNorm_Mish_Residual.py",
        "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\nclass Model(nn.Module):\n    def __init__(self, in_features, out_features):\n        super(Model, self).__init__()\n        self.gemm = nn.Linear(in_features, out_features)\n        self.ln = nn.LayerNorm(out_features)\n        self.skip = nn.Linear(in_features, out_features, bias=False)\n\n    def forward(self, x):\n        y = self.gemm(x)\n        y = self.ln(y)\n        y = F.mish(y)\n        return y + self.skip(x)\n\nbatch_size = 512\nin_features = 1024\nout_features = 2048\n\ndef get_inputs():\n    return [torch.randn(batch_size, in_features)]\n\ndef get_init_inputs():\n    return [in_features, out_features]\n",
    ),
    (
        "level3/5_TinyResNet.py",
        "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\ndef conv3x3(cin, cout, stride=1):\n    return nn.Conv2d(cin, cout, kernel_size=3, stride=stride, padding=1, bias=False)\n\nclass Basic(nn.Module):\n    def __init__(self, cin, cout, stride):\n        super(Basic, self).__init__()\n        self.c1 = conv3x3(cin, cout, stride)\n        self.b1 = nn.BatchNorm2d(cout)\n        self.c2 = conv3x3(cout, cout)\n        self.b2 = nn.BatchNorm2d(cout)\n        self.down = None\n        if stride != 1 or cin != cout:\n            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride=stride, bias=False), nn.BatchNorm2d(cout))\n\n    def forward(self, x):\n        out = F.relu(self.b1(self.c1(x)))\n        out = self.b2(self.c2(out))\n        identity = x if self.down is None else self.down(x)\n        return F.relu(out + identity)\n\nclass Model(nn.Module):\n    def __init__(self, num_classes, width):\n        super(Model, self).__init__()\n        self.stem = conv3x3(3, width)\n        self.stages = nn.Sequential(Basic(width, width, 1), Basic(width, 2 * width, 2), Basic(2 * width, 4 * width, 2))\n        self.head = nn.Linear(4 * width, num_classes)\n\n    def forward(self, x):\n        x = F.relu(self.stem(x))\n        x = self.stages(x)\n        x = torch.flatten(F.adaptive_avg_pool2d(x, 1), 1)\n        return self.head(x)\n\nbatch_size = 8\nnum_classes = 100\nwidth = 32\n\ndef get_inputs():\n    return [torch.randn(batch_size, 3, 64, 64)]\n\ndef get_init_inputs():\n    return [num_classes, width]\n",
    ),
    (
        "level3/6_CausalSelfAttention.py",
        "import math\nimport torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\ndef split_heads(t, heads):\n    b, n, d = t.shape\n    return t.view(b, n, heads, d // heads).transpose(1, 2)\n\nclass Model(nn.Module):\n    def __init__(self, embed_dim, num_heads, max_len):\n        super(Model, self).__init__()\n        self.qkv = nn.Linear(embed_dim, 3 * embed_dim)\n        self.out = nn.Linear(embed_dim, embed_dim)\n        self.heads = num_heads\n        self.register_buffer('mask', torch.tril(torch.ones(max_len, max_len)).view(1, 1, max_len, max_len))\n\n    def forward(self, x):\n        b, n, d = x.shape\n        q, k, v = self.qkv(x).split(d, dim=2)\n        q, k, v = split_heads(q, self.heads), split_heads(k, self.heads), split_heads(v, self.heads)\n        att = (q @ k.transpose(-2, -1)) / math.sqrt(k.size(-1))\n        att = att.masked_fill(self.mask[:, :, :n, :n] == 0, float('-inf'))\n        att = F.softmax(att, dim=-1)\n        y = (att @ v).transpose(1, 2).contiguous().view(b, n, d)\n        return self.out(y)\n\nbatch_size = 16\nembed_dim = 256\nnum_heads = 8\nmax_len = 128\n\ndef get_inputs():\n    return [torch.randn(batch_size, max_len, embed_dim)]\n\ndef get_init_inputs():\n    return [embed_dim, num_heads, max_len]\n",
    ),
];

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    std::fs::write(path, text).expect("write");
}

fn folder(path: &Path, name: &str) -> SourceSpec {
    SourceSpec {
        name: Some(name.to_string()),
        git: None,
        path: Some(path.to_path_buf()),
        manifest: None,
        rev: None,
        license: None,
        stars: None,
    }
}

/// Crawls and extracts `sources` into `work`; every ok module gets an ok probe row (dedup
/// reads the extracted program then).
fn extract(work: &Path, sources: &[SourceSpec]) -> Vec<ModuleRow> {
    let ctx = StageContext::new(work, 2, ProgressMode::Silent);
    let crawl = ksmith_crawl::CrawlConfig {
        accept_unlicensed: true,
        ..Default::default()
    };
    ksmith_crawl::run(sources, &crawl, &ctx).expect("crawl");
    ksmith_extract::run(&ksmith_extract::ExtractConfig::default(), &ctx).expect("extract");
    let modules: Vec<ModuleRow> = read_table(&ModuleRow::path_in(work)).expect("modules");
    let probes: Vec<ProbeRow> = modules
        .iter()
        .filter(|m| m.status == ModuleStatus::Ok)
        .map(|m| ProbeRow {
            cpu_time_ms: 1.0,
            attempts: 1,
            ..ProbeRow::empty(&m.id, &m.repo, &m.class_name, ProbeStatus::Ok)
        })
        .collect();
    write_table(&ProbeRow::path_in(work), &probes, "fp-probes").expect("probes");
    modules
}

fn dedup(work: &Path, cfg: &DedupConfig) -> anyhow::Result<BTreeMap<String, DedupRow>> {
    let mut ctx = StageContext::new(work, 2, ProgressMode::Silent);
    ctx.force = true;
    ksmith_dedup::run_with_fetcher(cfg, &ctx, Some(&CrawlFetcher::new(ProgressMode::Silent)))?;
    let rows: Vec<DedupRow> = read_table(&DedupRow::path_in(work))?;
    Ok(rows.into_iter().map(|r| (r.module_id.clone(), r)).collect())
}

fn report(work: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(work.join("reports/dedup.json")).expect("report");
    serde_json::from_str(&text).expect("json")
}

#[test]
fn leaks_of_every_kind_are_caught_through_the_real_extractor() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let bench = tmp.path().join("bench");
    for (path, text) in PROBLEMS {
        write(&bench.join(path), text);
    }
    // The leaks, and unrelated modules of the same shape (class, inputs, constants).
    let corpus = tmp.path().join("corpus");
    let mut rng = SplitMix::new(7);
    let host: Vec<String> = (0..2)
        .map(|k| {
            let m = synth::original(&mut rng);
            let class = m
                .split("\n\n\ndef get_inputs")
                .next()
                .unwrap_or(&m)
                .to_string();
            class.replace("class Model", &format!("class Host{k}"))
        })
        .collect();
    let mut expected: Vec<(String, String, leaks::Leak, &str)> = Vec::new();
    for (n, (path, text)) in PROBLEMS.iter().enumerate() {
        for how in leaks::ALL {
            let leaked = leaks::leak(text, how, &host, n);
            let file = format!("{}/p{n}.py", how.name());
            write(&corpus.join(&file), &leaked.text);
            expected.push((file, leaked.class, how, path));
        }
    }
    let others = tmp.path().join("others");
    for i in 0..40 {
        write(&others.join(format!("m{i}.py")), &synth::original(&mut rng));
    }
    let work = tmp.path().join("work");
    let modules = extract(
        &work,
        &[folder(&corpus, "leaks"), folder(&others, "others")],
    );
    let cfg = DedupConfig {
        contamination: vec![bench.display().to_string()],
        ..Default::default()
    };
    let rows = dedup(&work, &cfg).expect("dedup");
    let pairs: Vec<DedupPairRow> = read_table(&DedupPairRow::path_in(&work)).expect("pairs");

    let mut caught: BTreeMap<leaks::Leak, (usize, usize)> = BTreeMap::new();
    for (file, class, how, problem) in &expected {
        let m = modules
            .iter()
            .find(|m| m.repo == "leaks" && &m.path == file && &m.class_name == class)
            .unwrap_or_else(|| panic!("{file}: no module for class {class}"));
        assert_eq!(m.status, ModuleStatus::Ok, "{file}: {:?}", m.reason);
        let row = &rows[&m.id];
        let e = caught.entry(*how).or_default();
        e.1 += 1;
        if row.method == Some(DedupMethod::Contamination) {
            e.0 += 1;
            if row.contaminated_via.is_none() {
                assert_eq!(row.duplicate_of.as_deref(), Some(*problem), "{file}");
            }
        }
        // Through the same extractor, the entry class of a verbatim, constants-changed or
        // class-only leak is the problem's own: an exact match.
        if matches!(
            how,
            leaks::Leak::Verbatim | leaks::Leak::ConstantsChanged | leaks::Leak::ClassOnly
        ) {
            let pair = pairs
                .iter()
                .find(|p| p.module_id == m.id && p.decided)
                .unwrap_or_else(|| panic!("{file}: no decided pair"));
            assert_eq!(pair.evidence.as_deref(), Some("exact"), "{file}: {pair:?}");
        }
    }
    for how in leaks::ALL {
        let (found, total) = caught[&how];
        if how != leaks::Leak::Wrapped {
            assert_eq!(found, total, "{}: caught {found} of {total}", how.name());
        }
    }
    // No unrelated module is dropped as contamination.
    for m in modules
        .iter()
        .filter(|m| m.repo == "others" && m.status == ModuleStatus::Ok)
    {
        assert_ne!(
            rows[&m.id].method,
            Some(DedupMethod::Contamination),
            "{} was dropped as contamination",
            m.path
        );
    }
    assert_eq!(
        report(&work)["counters"][format!("benchmark:{}:folder", bench.display())],
        PROBLEMS.len()
    );
}

/// A git repository at `dir` holding `files`, committed; returns the commit id.
fn git_repo(dir: &Path, files: &[(&str, &str)]) -> String {
    let repo = git2::Repository::init(dir).expect("init");
    for (path, text) in files {
        write(&dir.join(path), text);
    }
    let mut index = repo.index().expect("index");
    index
        .add_all(["*"], git2::IndexAddOption::DEFAULT, None)
        .expect("add");
    let tree = repo
        .find_tree(index.write_tree().expect("tree"))
        .expect("tree");
    let sig = git2::Signature::now("t", "t@example.com").expect("sig");
    repo.commit(Some("HEAD"), &sig, &sig, "problems", &tree, &[])
        .expect("commit")
        .to_string()
}

#[test]
fn kernelbench_is_fetched_once_into_the_cache_and_found_there_afterwards() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let upstream = tmp.path().join("upstream");
    let files: Vec<(String, &str)> = PROBLEMS
        .iter()
        .map(|(p, t)| (format!("KernelBench/{p}"), *t))
        .collect();
    let refs: Vec<(&str, &str)> = files.iter().map(|(p, t)| (p.as_str(), *t)).collect();
    let commit = git_repo(&upstream, &refs);
    let corpus = tmp.path().join("corpus");
    write(&corpus.join("copy.py"), PROBLEMS[2].1);
    let mut rng = SplitMix::new(3);
    write(&corpus.join("other.py"), &synth::original(&mut rng));
    let work = tmp.path().join("work");
    let modules = extract(&work, &[folder(&corpus, "corpus")]);
    let cache = tmp.path().join("cache");
    let cfg = DedupConfig {
        kernelbench_url: upstream.display().to_string(),
        kernelbench_commit: commit.clone(),
        benchmark_cache: Some(cache.clone()),
        ..Default::default()
    };
    assert_eq!(
        cfg.contamination,
        vec!["kernelbench".to_string()],
        "on by default"
    );
    let id = |path: &str| {
        modules
            .iter()
            .find(|m| m.path == path)
            .map(|m| m.id.clone())
            .expect("module")
    };
    let check = |rows: &BTreeMap<String, DedupRow>| {
        assert_eq!(
            rows[&id("copy.py")].method,
            Some(DedupMethod::Contamination)
        );
        assert_eq!(
            rows[&id("copy.py")].duplicate_of.as_deref(),
            Some(PROBLEMS[2].0)
        );
        assert!(rows[&id("other.py")].kept);
        let counters = &report(&work)["counters"];
        assert_eq!(
            counters[format!("benchmark:kernelbench@{commit}:checkout")],
            PROBLEMS.len(),
            "{counters}"
        );
    };
    // Not in the committed signatures (another commit): fetched into the cache.
    check(&dedup(&work, &cfg).expect("first run fetches"));
    // Found in the cache afterwards: the upstream is no longer needed.
    std::fs::remove_dir_all(&upstream).expect("rm");
    check(&dedup(&work, &cfg).expect("second run reads the cache"));

    // Neither cached nor reachable: a clear error that says what to do.
    let missing = DedupConfig {
        kernelbench_commit: "0".repeat(40),
        ..cfg.clone()
    };
    let err = dedup(&work, &missing).expect_err("nothing to decontaminate against");
    let msg = format!("{err:#}");
    assert!(msg.contains("kernelbench@0000"), "{msg}");
    assert!(msg.contains("contamination = []"), "{msg}");
    assert!(msg.contains("local KernelBench checkout"), "{msg}");
}

#[test]
fn the_default_decontaminates_against_the_committed_signatures_without_network() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let corpus = tmp.path().join("corpus");
    let mut rng = SplitMix::new(5);
    write(&corpus.join("m.py"), &synth::original(&mut rng));
    let work = tmp.path().join("work");
    extract(&work, &[folder(&corpus, "corpus")]);
    let cfg = DedupConfig {
        // An empty cache: nothing fetched before, and nothing may be fetched now.
        benchmark_cache: Some(tmp.path().join("cache")),
        ..Default::default()
    };
    let rows = dedup(&work, &cfg).expect("dedup");
    assert!(rows.values().all(|r| r.kept));
    let counters = &report(&work)["counters"];
    let key = format!(
        "benchmark:kernelbench@{}:signatures",
        cfg.kernelbench_commit
    );
    assert!(counters[&key].as_u64().unwrap_or(0) > 200, "{counters}");
    assert!(!tmp.path().join("cache").exists(), "nothing was fetched");
}
