//! What dedup compares: features of the code a module computes, not of its whole program.
//!
//! Every feature is computed on the program's [`Slice`]: its entry class (`Model`) and the
//! top-level code that class reaches, never its imports, its generated `get_inputs()` /
//! `get_init_inputs()` or the constants only those read. Two views of the slice are measured:
//!
//! - the **entry** view: the entry class alone, without the lines every module has (class and
//!   `def` headers, decorators, `super().__init__()`), so that two small modules are similar only
//!   when their code is, not because of the boilerplate around it;
//! - the **slice** view: the entry view plus the bodies of the helpers it reaches, so that two
//!   classes that look alike but call different helpers are told apart.
//!
//! Near and semantic similarity are the smaller of the two views' similarities: a shared helper
//! cannot make two different classes similar, nor a shared class two different helpers. Near
//! shingles are made of canonical labels (names chosen by the author and literal values
//! forgotten, library calls and operators kept), so a near copy of a module is as near to the
//! module's renamed copies, whichever of them survives.
//! The exact key and the structural hash cover the whole slice with its headers (entry first,
//! helpers in a canonical order). Decontamination uses its own view: the whole slice with its
//! headers (a leaked benchmark problem keeps them), as text shingles and as canonical labels.

use ksmith_embed::lexer::Token;
use ksmith_embed::program::canonical_label;
use ksmith_embed::{HashedEmbedder, Program, Slice, SyntaxTree, body_tokens};
use rayon::prelude::*;

use crate::config::DedupConfig;
use crate::minhash::{MinHasher, band_key, shingles_of_token_hashes, truncate};
use ksmith_embed::hashing::{hash_str, mix};

/// Bumped whenever a feature of the same program changes (the benchmark signature file is
/// stamped with it and must be regenerated then).
pub const FEATURE_VERSION: u32 = 2;

/// Tokens per shingle of the contamination view.
pub const CONTAMINATION_SHINGLE: usize = 5;
/// MinHash permutations of the contamination view.
pub const CONTAMINATION_PERMS: usize = 128;
/// Seed of the contamination view's permutations.
pub const CONTAMINATION_SEED: u64 = 0x6b65_726e_656c_6265;
/// Weisfeiler-Lehman rounds of the contamination view's structural hash.
pub const CONTAMINATION_WL: usize = 4;

/// The contamination view of a program or benchmark problem: the whole slice with its
/// headers. Its parameters are fixed (not the `[dedup]` near settings) so that precomputed
/// benchmark signatures stay valid whatever the configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContaminationFeatures {
    /// The exact key (as [`Features::exact`]).
    pub exact: [u8; 16],
    /// Structural hash with [`CONTAMINATION_WL`] rounds.
    pub structural: u128,
    /// MinHash of the text shingles, 16 bits per permutation.
    pub text: Vec<u16>,
    /// MinHash of the canonical-label shingles (names and literal values forgotten).
    pub canonical: Vec<u16>,
    /// Number of text shingles (0: nothing to compare).
    pub shingles: u32,
}

/// Which features to compute.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Wanted {
    /// Entry and slice MinHash signatures and the entry's LSH band keys (near dedup).
    pub near: bool,
    /// The structural hash.
    pub structural: bool,
    /// The contamination view ([`ContaminationFeatures`]).
    pub contamination: bool,
}

/// The features of one program.
#[derive(Debug, Clone, Default)]
pub struct Features {
    /// False when the program has no code to compare (nothing but imports and inputs).
    pub has_code: bool,
    /// Key of exact dedup: the slice's normalized text.
    pub exact: [u8; 16],
    /// Structural hash of the slice (0 when not wanted).
    pub structural: u128,
    /// MinHash of the entry view's shingles, 16 bits per permutation (empty when not wanted).
    pub entry_sig: Vec<u16>,
    /// LSH band keys of the entry signature.
    pub bands: Vec<u64>,
    /// MinHash of the slice view's shingles, 16 bits per permutation.
    pub slice_sig: Vec<u16>,
    /// Shingles of the entry view.
    pub entry_shingles: u32,
    /// Shingles of the slice view.
    pub slice_shingles: u32,
    /// The contamination view (when wanted).
    pub contamination: Option<ContaminationFeatures>,
    /// Hashed embedding of the entry view (empty unless an embedder was given).
    pub entry_embedding: Vec<f32>,
    /// Hashed embedding of the slice view.
    pub slice_embedding: Vec<f32>,
    /// Hash of the library calls of a fixed dimensionality the slice makes ([`dimensional_calls`]:
    /// `conv2d`, `nn.BatchNorm3d`, `max_pool1d`); 0 when it makes none.
    pub dims: u64,
}

/// Computes the features of every program in parallel (in the current rayon pool).
pub fn features(
    programs: &[&str],
    cfg: &DedupConfig,
    wanted: Wanted,
    embedder: Option<&HashedEmbedder>,
) -> Vec<Features> {
    let hasher = MinHasher::new(cfg.num_perm, cfg.seed);
    programs
        .par_iter()
        .map(|src| program_features(src, cfg, wanted, embedder, &hasher))
        .collect()
}

/// The views of one program's slice.
struct Views<'a> {
    /// Whether the program has an entry class (the first statement is then the entry).
    has_entry: bool,
    /// Token ranges of the slice's statements: the entry first (when there is one).
    statements: Vec<std::ops::Range<usize>>,
    /// The entry view's tokens.
    entry: Vec<Token<'a>>,
    /// The helpers' view tokens, one list per helper.
    helpers: Vec<Vec<Token<'a>>>,
}

fn views<'a>(p: &Program<'a>) -> Views<'a> {
    let slice = Slice::of(p);
    let statements: Vec<_> = slice.ranges().collect();
    // Without an entry class, the whole slice is the entry view.
    let (entry_ranges, helper_ranges) = match &slice.entry {
        Some(e) => (vec![e.clone()], slice.helpers.clone()),
        None => (slice.helpers.clone(), Vec::new()),
    };
    Views {
        has_entry: slice.entry.is_some(),
        statements,
        entry: entry_ranges
            .into_iter()
            .flat_map(|r| body_tokens(&p.tokens, r))
            .collect(),
        helpers: helper_ranges
            .into_iter()
            .map(|r| body_tokens(&p.tokens, r))
            .collect(),
    }
}

fn program_features(
    src: &str,
    cfg: &DedupConfig,
    wanted: Wanted,
    embedder: Option<&HashedEmbedder>,
    hasher: &MinHasher,
) -> Features {
    let p = Program::parse(src);
    let v = views(&p);
    let mut f = Features {
        has_code: !v.statements.is_empty(),
        exact: exact_key(&p, &v.statements, v.has_entry),
        dims: dimensional_calls(&p, &v.statements),
        ..Default::default()
    };
    if wanted.structural {
        f.structural = structural_hash(&p, &v.statements, v.has_entry, cfg.wl_iterations);
    }
    let entry_view = p.view(v.entry);
    let helper_views: Vec<Program<'_>> = v.helpers.into_iter().map(|h| p.view(h)).collect();
    if wanted.near {
        let entry = label_shingles(&entry_view, cfg.shingle_size);
        let mut sig = hasher.signature(&entry);
        let (bands, rows) = cfg.bands_rows();
        if !entry.is_empty() {
            f.bands = (0..bands).map(|b| band_key(&sig, b, rows)).collect();
        }
        f.entry_sig = truncate(&sig);
        f.entry_shingles = entry.len() as u32;
        let mut rest: Vec<u64> = helper_views
            .iter()
            .flat_map(|h| label_shingles(h, cfg.shingle_size))
            .collect();
        rest.sort_unstable();
        rest.dedup();
        hasher.fold_into(&rest, &mut sig);
        f.slice_shingles = (entry.len() + rest.len()) as u32;
        f.slice_sig = truncate(&sig);
    }
    if wanted.contamination {
        // The same hash when the rounds are the same: computed once.
        let structural =
            (wanted.structural && cfg.wl_iterations == CONTAMINATION_WL).then_some(f.structural);
        f.contamination = Some(contamination_features(
            &p,
            &v.statements,
            v.has_entry,
            f.exact,
            structural,
        ));
    }
    if let Some(e) = embedder {
        f.entry_embedding = embed(e, &entry_view);
        let mut all = entry_view.tokens;
        for h in helper_views {
            all.extend(h.tokens);
        }
        f.slice_embedding = embed(e, &p.view(all));
    }
    f
}

fn embed(e: &HashedEmbedder, view: &Program<'_>) -> Vec<f32> {
    let mut row = ndarray::Array1::<f32>::zeros(ksmith_embed::Embedder::dim(e));
    e.embed_parsed(view, &SyntaxTree::build(view), row.view_mut());
    row.to_vec()
}

/// Shingle hashes of a view's canonical labels (layout tokens left out): names chosen by the
/// author and literal values are forgotten, library calls and operators stay. Near copies of
/// one module then stay near copies of its renamed copies, so a survivor that is a renamed copy
/// still matches them directly.
fn label_shingles(view: &Program<'_>, k: usize) -> Vec<u64> {
    let hashes: Vec<u64> = labels(view).map(hash_str).collect();
    shingles_of_token_hashes(&hashes, k)
}

/// A hash of the sorted, distinct library calls of a fixed dimensionality (a name kept by
/// [`canonical_label`] that ends in `1d`, `2d` or `3d`) in the slice's statements; 0 for none.
///
/// The 2-D and the 3-D version of a module share nearly all their text and dispatch the same
/// ATen operators (`aten::convolution` either way), yet are different kernels: a pair whose
/// dimensional calls differ is no near or semantic duplicate. Author-chosen names (a helper
/// class called `Conv3d`) are not library calls and do not count.
fn dimensional_calls(p: &Program<'_>, statements: &[std::ops::Range<usize>]) -> u64 {
    let mut calls: Vec<String> = statements
        .iter()
        .flat_map(|r| r.clone())
        .filter(|&i| p.tokens[i].kind == ksmith_embed::lexer::TokenKind::Name)
        .filter_map(|i| {
            let label = canonical_label(p, i);
            let lower = label.to_ascii_lowercase();
            let fixed = ["1d", "2d", "3d"].iter().any(|d| lower.ends_with(d));
            (label == p.tokens[i].text && fixed).then_some(lower)
        })
        .collect();
    calls.sort_unstable();
    calls.dedup();
    calls
        .iter()
        .fold(0, |acc, c| mix(acc ^ 0x6469_6d73, hash_str(c)))
}

/// The canonical labels of a view's text tokens.
fn labels<'v, 'a>(view: &'v Program<'a>) -> impl Iterator<Item = &'a str> + 'v {
    (0..view.tokens.len())
        .filter(|&i| !view.tokens[i].is_layout())
        .map(|i| canonical_label(view, i))
}

/// The canonical labels near dedup shingles for the entry view of a program (what the
/// benchmark hands to datasketch).
pub fn entry_labels(src: &str) -> Vec<String> {
    let p = Program::parse(src);
    let v = views(&p);
    let view = p.view(v.entry);
    labels(&view).map(str::to_string).collect()
}

fn contamination_hasher() -> &'static MinHasher {
    static HASHER: std::sync::OnceLock<MinHasher> = std::sync::OnceLock::new();
    HASHER.get_or_init(|| MinHasher::new(CONTAMINATION_PERMS, CONTAMINATION_SEED))
}

fn contamination_features(
    p: &Program<'_>,
    statements: &[std::ops::Range<usize>],
    has_entry: bool,
    exact: [u8; 16],
    structural: Option<u128>,
) -> ContaminationFeatures {
    let mut text = Vec::new();
    let mut canon = Vec::new();
    for r in statements {
        let toks: Vec<u64> = p.tokens[r.clone()]
            .iter()
            .filter(|t| !t.is_layout())
            .map(|t| hash_str(t.text))
            .collect();
        text.extend(shingles_of_token_hashes(&toks, CONTAMINATION_SHINGLE));
        let labels: Vec<u64> = r
            .clone()
            .filter(|&i| !p.tokens[i].is_layout())
            .map(|i| hash_str(canonical_label(p, i)))
            .collect();
        canon.extend(shingles_of_token_hashes(&labels, CONTAMINATION_SHINGLE));
    }
    for s in [&mut text, &mut canon] {
        s.sort_unstable();
        s.dedup();
    }
    let hasher = contamination_hasher();
    ContaminationFeatures {
        exact,
        structural: structural
            .unwrap_or_else(|| structural_hash(p, statements, has_entry, CONTAMINATION_WL)),
        text: truncate(&hasher.signature(&text)),
        canonical: truncate(&hasher.signature(&canon)),
        shingles: text.len() as u32,
    }
}

/// The exact key: the entry's normalized text, then the helpers' in sorted order (their order
/// in a program is the extractor's, not the author's).
fn exact_key(p: &Program<'_>, statements: &[std::ops::Range<usize>], has_entry: bool) -> [u8; 16] {
    let mut texts: Vec<String> = statements
        .iter()
        .map(|r| ksmith_embed::program::normalized_text_of(&p.tokens[r.clone()]))
        .collect();
    texts[usize::from(has_entry).min(statements.len())..].sort_unstable();
    let mut h = blake3::Hasher::new();
    for t in &texts {
        h.update(t.as_bytes());
        h.update(b"\n\0");
    }
    let mut key = [0u8; 16];
    key.copy_from_slice(&h.finalize().as_bytes()[..16]);
    key
}

/// The structural hash: WL hashes of the statements' trees, the entry's first and the
/// helpers' as a sorted list.
fn structural_hash(
    p: &Program<'_>,
    statements: &[std::ops::Range<usize>],
    has_entry: bool,
    iterations: usize,
) -> u128 {
    let mut hashes: Vec<u128> = statements
        .iter()
        .map(|r| SyntaxTree::build_range(p, r.clone()).wl_hash(iterations))
        .collect();
    hashes[usize::from(has_entry).min(statements.len())..].sort_unstable();
    let (mut hi, mut lo) = (0x7374_7275_6374u64, hashes.len() as u64);
    for h in hashes {
        hi = mix(hi, (h >> 64) as u64);
        lo = mix(lo, h as u64);
    }
    (u128::from(hi) << 64) | u128::from(lo)
}
