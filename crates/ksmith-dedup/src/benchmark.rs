//! The evaluation benchmarks to decontaminate against, and where their problems come from.
//!
//! `[dedup] contamination` lists them: `"kernelbench"` (KernelBench at `kernelbench_commit`) or
//! the path of a local folder of problems (every `.py` file under it is one). KernelBench comes,
//! by `kernelbench_from`:
//!
//! - `"auto"` (the default): a checkout a previous fetch left in the cache; else the signature
//!   file committed with this crate, when it is of that commit (the pre-seeded cache: it makes
//!   the default work on a machine that cannot reach GitHub); else a fetch into the cache.
//! - `"git"`: the checkout in the cache, fetched when missing.
//! - `"signatures"`: the committed signature file only.
//!
//! Fetching is the [`Fetcher`]'s business (the CLI implements it with the crawl's git
//! machinery: a bare mirror, the pinned commit, blobs read from the object database). A
//! benchmark that cannot be had is an error that says what to do, never a silent skip.
//!
//! The signature file holds, per problem, only features derived from its entry class (the
//! exact key, the structural hash, two MinHash signatures), no benchmark code. It is stamped
//! with [`FEATURE_VERSION`] and a canary (the features of a few programs written for this
//! crate): when the feature code changes, a test fails until the file is regenerated
//! (`make kernelbench-signatures KERNELBENCH=<checkout>`).

use std::path::{Path, PathBuf};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use serde::{Deserialize, Serialize};

use crate::config::DedupConfig;
use crate::contamination::BenchmarkProblem;
use crate::error::DedupError;
use crate::features::{
    CONTAMINATION_PERMS, CONTAMINATION_SEED, CONTAMINATION_SHINGLE, CONTAMINATION_WL,
    ContaminationFeatures, FEATURE_VERSION, Wanted, features,
};

/// The name of the built-in benchmark in `contamination`.
pub const KERNELBENCH: &str = "kernelbench";
/// The folder of a KernelBench checkout that holds the problems (`level1/` ... `level4/`).
pub const KERNELBENCH_SUBDIR: &str = "KernelBench";
/// The committed signatures of KernelBench at the default `kernelbench_commit`.
pub const KERNELBENCH_SIGNATURES: &str = include_str!("../data/kernelbench-signatures.json");

/// Fetches a git repository at a commit into a cache folder (implemented by the CLI).
pub trait Fetcher: Sync {
    /// The folder holding `url`'s files at `commit`, when an earlier fetch left it in `cache`;
    /// never touches the network.
    fn cached(&self, url: &str, commit: &str, cache: &Path) -> Option<PathBuf>;
    /// Fetches `url` at `commit` into `cache` and returns the folder holding its files.
    fn fetch(&self, url: &str, commit: &str, cache: &Path) -> Result<PathBuf, String>;
}

/// Where a benchmark's problems were read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// A local folder named in `contamination`.
    Folder,
    /// A checkout fetched into the cache.
    Checkout,
    /// The committed signature file.
    Signatures,
}

impl Source {
    /// Its name in the report.
    pub fn name(self) -> &'static str {
        match self {
            Source::Folder => "folder",
            Source::Checkout => "checkout",
            Source::Signatures => "signatures",
        }
    }
}

/// One benchmark's problems.
#[derive(Debug, Clone, PartialEq)]
pub struct Benchmark {
    /// `kernelbench@<commit>`, or the folder's path.
    pub name: String,
    /// Where the problems came from.
    pub source: Source,
    /// The problems, sorted by path.
    pub problems: Vec<BenchmarkProblem>,
    /// Files that are not UTF-8 (skipped; the stage warns).
    pub unreadable: Vec<PathBuf>,
}

/// Loads every benchmark of `cfg.contamination`.
pub fn load_all(
    cfg: &DedupConfig,
    fetcher: Option<&dyn Fetcher>,
) -> Result<Vec<Benchmark>, DedupError> {
    cfg.contamination
        .iter()
        .map(|entry| {
            if entry == KERNELBENCH {
                load_kernelbench(cfg, fetcher)
            } else {
                let dir = PathBuf::from(entry);
                let (problems, unreadable) = load_folder(&dir)?;
                Ok(Benchmark {
                    name: entry.clone(),
                    source: Source::Folder,
                    problems,
                    unreadable,
                })
            }
        })
        .collect()
}

/// The cache folder of fetched benchmarks.
pub fn cache_dir(cfg: &DedupConfig) -> Option<PathBuf> {
    cfg.benchmark_cache.clone().or_else(|| {
        std::env::var_os("HOME").filter(|h| !h.is_empty()).map(|h| {
            PathBuf::from(h)
                .join(".cache")
                .join("ksmith")
                .join("benchmarks")
        })
    })
}

fn load_kernelbench(
    cfg: &DedupConfig,
    fetcher: Option<&dyn Fetcher>,
) -> Result<Benchmark, DedupError> {
    let commit = cfg.kernelbench_commit.as_str();
    let name = format!("{KERNELBENCH}@{commit}");
    let unavailable = |message: String| DedupError::BenchmarkUnavailable {
        name: name.clone(),
        message,
    };
    let cache = cache_dir(cfg);
    let from_checkout = |root: PathBuf| -> Result<Benchmark, DedupError> {
        let (problems, unreadable) = load_folder(&root.join(KERNELBENCH_SUBDIR))?;
        Ok(Benchmark {
            name: name.clone(),
            source: Source::Checkout,
            problems,
            unreadable,
        })
    };
    if cfg.kernelbench_from != "signatures"
        && let (Some(f), Some(cache)) = (fetcher, &cache)
        && let Some(root) = f.cached(&cfg.kernelbench_url, commit, cache)
    {
        return from_checkout(root);
    }
    if cfg.kernelbench_from != "git" {
        match committed_signatures(commit) {
            Ok(problems) => {
                return Ok(Benchmark {
                    name,
                    source: Source::Signatures,
                    problems,
                    unreadable: Vec::new(),
                });
            }
            Err(why) if cfg.kernelbench_from == "signatures" => return Err(unavailable(why)),
            Err(_) => {}
        }
    }
    let remedy = "point [dedup] contamination at a local KernelBench checkout (its KernelBench/ \
                  folder), or set contamination = [] to turn decontamination off";
    let Some(fetcher) = fetcher else {
        return Err(unavailable(format!(
            "no committed signatures for this commit and nothing here can fetch it; {remedy}"
        )));
    };
    let Some(cache) = cache else {
        return Err(unavailable(format!(
            "no cache folder (set [dedup] benchmark_cache or HOME); {remedy}"
        )));
    };
    let root = fetcher
        .fetch(&cfg.kernelbench_url, commit, &cache)
        .map_err(|e| {
            unavailable(format!(
                "fetching {} into {} failed: {e}; {remedy}",
                cfg.kernelbench_url,
                cache.display()
            ))
        })?;
    from_checkout(root)
}

/// Every `.py` file under `dir` (recursively, sorted by relative path), as problems.
///
/// A file that is not UTF-8 is skipped and its path returned in the second list, so the stage
/// can warn; a missing or unreadable folder is an error.
pub fn load_folder(dir: &Path) -> Result<(Vec<BenchmarkProblem>, Vec<PathBuf>), DedupError> {
    let err = |path: &Path, message: String| DedupError::Benchmark {
        path: path.to_path_buf(),
        message,
    };
    let meta = std::fs::metadata(dir).map_err(|e| err(dir, e.to_string()))?;
    if !meta.is_dir() {
        return Err(err(dir, "not a directory".into()));
    }
    let mut files = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let entries = std::fs::read_dir(&d).map_err(|e| err(&d, e.to_string()))?;
        for entry in entries {
            let entry = entry.map_err(|e| err(&d, e.to_string()))?;
            let path = entry.path();
            if entry.file_name().to_string_lossy().starts_with('.') {
                continue;
            }
            let ft = entry.file_type().map_err(|e| err(&path, e.to_string()))?;
            if ft.is_dir() {
                stack.push(path);
            } else if ft.is_file() && path.extension().is_some_and(|e| e == "py") {
                files.push(path);
            }
        }
    }
    files.sort();
    let mut paths = Vec::new();
    let mut sources = Vec::new();
    let mut skipped = Vec::new();
    for path in files {
        let bytes = std::fs::read(&path).map_err(|e| err(&path, e.to_string()))?;
        match String::from_utf8(bytes) {
            Ok(source) => {
                let rel = path.strip_prefix(dir).unwrap_or(&path);
                paths.push(rel.to_string_lossy().replace('\\', "/"));
                sources.push(source);
            }
            Err(_) => skipped.push(path),
        }
    }
    Ok((problems_of(paths, &sources), skipped))
}

/// The problems of sources (their contamination features).
pub fn problems_of(paths: Vec<String>, sources: &[String]) -> Vec<BenchmarkProblem> {
    let refs: Vec<&str> = sources.iter().map(String::as_str).collect();
    let wanted = Wanted {
        contamination: true,
        ..Default::default()
    };
    let feats = features(&refs, &DedupConfig::default(), wanted, None);
    paths
        .into_iter()
        .zip(feats)
        .filter_map(|(path, f)| {
            f.contamination
                .map(|features| BenchmarkProblem { path, features })
        })
        .collect()
}

/// The stamped signature file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SignatureFile {
    /// The benchmark's name (`kernelbench`).
    pub benchmark: String,
    /// Where its checkout came from.
    pub url: String,
    /// The commit of the checkout.
    pub commit: String,
    /// The folder of the checkout that holds the problems.
    pub subdir: String,
    /// [`FEATURE_VERSION`] of the code that made the file.
    pub feature_version: u32,
    /// [`canary`] of the code that made the file.
    pub canary: String,
    /// The contamination view's parameters (shingle size, permutations, seed, WL rounds).
    pub parameters: [u64; 4],
    /// The problems.
    pub problems: Vec<SignedProblem>,
}

/// One problem of a signature file: features only, no code.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SignedProblem {
    /// Its path under `subdir`.
    pub path: String,
    /// Exact key, hex.
    pub exact: String,
    /// Structural hash, hex.
    pub structural: String,
    /// Number of text shingles.
    pub shingles: u32,
    /// Text MinHash (16-bit little-endian values), base64.
    pub text: String,
    /// Canonical-label MinHash, base64.
    pub canonical: String,
}

/// The contamination view's parameters, as stamped in a signature file.
pub fn parameters() -> [u64; 4] {
    [
        CONTAMINATION_SHINGLE as u64,
        CONTAMINATION_PERMS as u64,
        CONTAMINATION_SEED,
        CONTAMINATION_WL as u64,
    ]
}

/// Programs written for this crate whose features stamp a signature file: any change to the
/// feature code changes the canary.
const CANARY_PROGRAMS: &[&str] = &[
    "import torch\nimport torch.nn as nn\n\nclass Model(nn.Module):\n    \"\"\"Scales a GEMM.\"\"\"\n    def __init__(self, n_in, n_out, scale):\n        super(Model, self).__init__()\n        self.proj = nn.Linear(n_in, n_out)\n        self.scale = scale\n\n    def forward(self, x: torch.Tensor) -> torch.Tensor:\n        return torch.sigmoid(self.proj(x)) * self.scale\n\nrows = 64\nn_in = 32\n\ndef get_inputs():\n    return [torch.randn(rows, n_in)]\n\ndef get_init_inputs():\n    return [n_in, 16, 0.5]\n",
    "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\ndef halve(t):\n    return t * HALF\n\nHALF = 0.5\n\nclass Block(nn.Module):\n    def __init__(self, c):\n        super().__init__()\n        self.a = nn.Conv2d(c, c, 3, padding=1)\n\n    def forward(self, x):\n        return F.relu(self.a(x)) + x\n\nclass Model(nn.Module):\n    def __init__(self, c=8, depth=2):\n        super().__init__()\n        self.blocks = nn.ModuleList([Block(c) for _ in range(depth)])\n\n    def forward(self, x):\n        for b in self.blocks:\n            x = halve(b(x))\n        return x.mean(dim=(2, 3))\n",
];

/// A hash of the contamination features of [`CANARY_PROGRAMS`] and [`FEATURE_VERSION`].
pub fn canary() -> String {
    let problems = problems_of(
        (0..CANARY_PROGRAMS.len()).map(|i| i.to_string()).collect(),
        &CANARY_PROGRAMS
            .iter()
            .map(|s| s.to_string())
            .collect::<Vec<_>>(),
    );
    let mut h = blake3::Hasher::new();
    h.update(&FEATURE_VERSION.to_le_bytes());
    for p in &problems {
        let s = sign(p);
        h.update(serde_json::to_string(&s).unwrap_or_default().as_bytes());
    }
    h.finalize().to_hex()[..32].to_string()
}

/// The signed form of a problem.
pub fn sign(p: &BenchmarkProblem) -> SignedProblem {
    let hex = |bytes: &[u8]| bytes.iter().map(|b| format!("{b:02x}")).collect::<String>();
    let b64 = |sig: &[u16]| {
        let bytes: Vec<u8> = sig.iter().flat_map(|v| v.to_le_bytes()).collect();
        B64.encode(bytes)
    };
    SignedProblem {
        path: p.path.clone(),
        exact: hex(&p.features.exact),
        structural: hex(&p.features.structural.to_be_bytes()),
        shingles: p.features.shingles,
        text: b64(&p.features.text),
        canonical: b64(&p.features.canonical),
    }
}

/// The problem a signed problem describes.
pub fn unsign(s: &SignedProblem) -> Result<BenchmarkProblem, String> {
    let bad = |what: &str| format!("problem {}: bad {what}", s.path);
    let unhex = |text: &str, n: usize| -> Option<Vec<u8>> {
        if text.len() != 2 * n || !text.is_ascii() {
            return None;
        }
        (0..n)
            .map(|i| u8::from_str_radix(&text[2 * i..2 * i + 2], 16).ok())
            .collect()
    };
    let sig = |text: &str| -> Option<Vec<u16>> {
        let bytes = B64.decode(text).ok()?;
        (bytes.len() == 2 * CONTAMINATION_PERMS).then(|| {
            bytes
                .chunks_exact(2)
                .map(|c| u16::from_le_bytes([c[0], c[1]]))
                .collect()
        })
    };
    let exact: [u8; 16] = unhex(&s.exact, 16)
        .and_then(|v| v.try_into().ok())
        .ok_or_else(|| bad("exact key"))?;
    let structural: [u8; 16] = unhex(&s.structural, 16)
        .and_then(|v| v.try_into().ok())
        .ok_or_else(|| bad("structural hash"))?;
    Ok(BenchmarkProblem {
        path: s.path.clone(),
        features: ContaminationFeatures {
            exact,
            structural: u128::from_be_bytes(structural),
            text: sig(&s.text).ok_or_else(|| bad("text signature"))?,
            canonical: sig(&s.canonical).ok_or_else(|| bad("canonical signature"))?,
            shingles: s.shingles,
        },
    })
}

/// The signature file of a checkout's problem folder.
pub fn signature_file(
    benchmark: &str,
    url: &str,
    commit: &str,
    subdir: &str,
    problems: &[BenchmarkProblem],
) -> SignatureFile {
    SignatureFile {
        benchmark: benchmark.to_string(),
        url: url.to_string(),
        commit: commit.to_string(),
        subdir: subdir.to_string(),
        feature_version: FEATURE_VERSION,
        canary: canary(),
        parameters: parameters(),
        problems: problems.iter().map(sign).collect(),
    }
}

/// Parses a signature file and checks that the code that made it computes features like this
/// code does.
pub fn parse_signatures(text: &str) -> Result<(SignatureFile, Vec<BenchmarkProblem>), String> {
    let file: SignatureFile =
        serde_json::from_str(text).map_err(|e| format!("not a signature file: {e}"))?;
    if file.feature_version != FEATURE_VERSION
        || file.canary != canary()
        || file.parameters != parameters()
    {
        return Err(format!(
            "the signatures were made by other feature code (version {}, canary {}; this is \
             version {FEATURE_VERSION}, canary {}): regenerate them with `make \
             kernelbench-signatures KERNELBENCH=<checkout>`",
            file.feature_version,
            file.canary,
            canary()
        ));
    }
    let problems = file
        .problems
        .iter()
        .map(unsign)
        .collect::<Result<Vec<_>, _>>()?;
    Ok((file, problems))
}

/// The committed KernelBench signatures, when they are of `commit`.
fn committed_signatures(commit: &str) -> Result<Vec<BenchmarkProblem>, String> {
    let (file, problems) = parse_signatures(KERNELBENCH_SIGNATURES)?;
    if file.commit != commit {
        return Err(format!(
            "the committed signatures are of commit {}, not {commit}",
            file.commit
        ));
    }
    Ok(problems)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_committed_signatures_are_of_this_feature_code_and_the_default_commit() {
        let (file, problems) = parse_signatures(KERNELBENCH_SIGNATURES).unwrap_or_else(|e| {
            panic!("crates/ksmith-dedup/data/kernelbench-signatures.json: {e}")
        });
        assert_eq!(file.commit, DedupConfig::default().kernelbench_commit);
        assert_eq!(file.url, DedupConfig::default().kernelbench_url);
        assert_eq!(file.feature_version, FEATURE_VERSION);
        assert!(problems.len() >= 250, "{}", problems.len());
        assert!(problems.iter().all(|p| p.features.shingles > 0));
    }

    #[test]
    fn signatures_round_trip_and_stale_ones_are_refused() {
        let srcs: Vec<String> = CANARY_PROGRAMS.iter().map(|s| s.to_string()).collect();
        let problems = problems_of(vec!["a.py".into(), "b.py".into()], &srcs);
        let file = signature_file("kb", "u", &"a".repeat(40), "KernelBench", &problems);
        let text = serde_json::to_string(&file).unwrap_or_default();
        let (_, back) = parse_signatures(&text).unwrap();
        assert_eq!(back, problems);
        let mut stale = file.clone();
        stale.feature_version += 1;
        let err = parse_signatures(&serde_json::to_string(&stale).unwrap_or_default()).unwrap_err();
        assert!(err.contains("make kernelbench-signatures"), "{err}");
        let mut stale = file;
        stale.canary = "0".repeat(32);
        assert!(parse_signatures(&serde_json::to_string(&stale).unwrap_or_default()).is_err());
        assert!(parse_signatures("{}").is_err());
    }
}
