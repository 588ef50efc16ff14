//! Embedders: programs to unit vectors.
//!
//! [`HashedEmbedder`] needs no model weights: it hashes a program's called operators, its
//! identifiers (whole and split into words) and its syntax-tree n-grams into a fixed number of
//! dimensions with random signs (the hashing trick, a sparse random projection), weights counts
//! sublinearly and L2-normalizes. [`HttpEmbedder`] calls an OpenAI-compatible `/v1/embeddings`
//! endpoint (TEI, vLLM, a hosted API) for teams that run a code-embedding model.

use std::time::Duration;

use ndarray::{Array2, ArrayViewMut1};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::error::EmbedError;
use crate::hashing::{hash_str, mix};
use crate::lexer::TokenKind;
use crate::ops::summarize;
use crate::program::{Program, is_keyword};
use crate::tree::SyntaxTree;

/// Turns programs into L2-normalized vectors of a fixed dimension.
pub trait Embedder: Send + Sync {
    /// A string that changes whenever the vectors would change (for stage fingerprints).
    fn identity(&self) -> String;
    /// Dimension of the vectors.
    fn dim(&self) -> usize;
    /// One row per program, each row of unit length (a zero row for an empty program).
    fn embed(&self, programs: &[&str]) -> Result<Array2<f32>, EmbedError>;
    /// The weight-free embedder behind this one, if it is one (lets callers that already
    /// parsed a program embed it without parsing again).
    fn as_hashed(&self) -> Option<&HashedEmbedder> {
        None
    }
}

/// Which embedder to use, and its settings: the `[<stage>.embedder]` table of a stage.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EmbedderConfig {
    /// `hashed` (no model weights, the default) or `http` (an OpenAI-compatible endpoint).
    pub kind: String,
    /// Dimension of the hashed embedder's vectors.
    pub dim: usize,
    /// Weight of each called operator (`nn.Conv2d`, `F.relu`, `.view`, `@`).
    pub op_weight: f32,
    /// Weight of each identifier and identifier word.
    pub identifier_weight: f32,
    /// Weight of each syntax-tree n-gram.
    pub ngram_weight: f32,
    /// Base URL of the endpoint for `http`, up to `/v1` (`http://localhost:8080/v1`);
    /// `/embeddings` is appended.
    pub url: Option<String>,
    /// Model name sent to the endpoint.
    pub model: String,
    /// Environment variable holding the bearer token, if the endpoint needs one.
    pub api_key_env: Option<String>,
    /// Programs per request.
    pub batch_size: usize,
    /// Timeout of one request, in seconds.
    pub timeout_s: u64,
    /// Retries of a request that failed with a transport error or a 5xx/429 status.
    pub retries: u32,
    /// Programs longer than this many characters are cut before being sent.
    pub max_chars: usize,
}

impl Default for EmbedderConfig {
    fn default() -> Self {
        EmbedderConfig {
            kind: "hashed".to_string(),
            dim: 256,
            op_weight: 3.0,
            identifier_weight: 0.5,
            ngram_weight: 0.5,
            url: None,
            model: "text-embedding".to_string(),
            api_key_env: None,
            batch_size: 64,
            timeout_s: 60,
            retries: 2,
            max_chars: 16_000,
        }
    }
}

impl EmbedderConfig {
    /// Checks values without doing I/O.
    pub fn validate(&self) -> Result<(), EmbedError> {
        let bad = |m: String| Err(EmbedError::Config(m));
        match self.kind.as_str() {
            "hashed" => {
                if self.dim < 8 {
                    return bad(format!(
                        "embedder.dim must be at least 8 (got {})",
                        self.dim
                    ));
                }
                for (name, w) in [
                    ("op_weight", self.op_weight),
                    ("identifier_weight", self.identifier_weight),
                    ("ngram_weight", self.ngram_weight),
                ] {
                    if !w.is_finite() || w < 0.0 {
                        return bad(format!(
                            "embedder.{name} must be a finite value >= 0 (got {w})"
                        ));
                    }
                }
                Ok(())
            }
            "http" => {
                match &self.url {
                    Some(u) if u.starts_with("http://") || u.starts_with("https://") => {}
                    Some(u) => {
                        return bad(format!(
                            "embedder.url must start with http:// or https:// (got {u:?})"
                        ));
                    }
                    None => return bad("embedder.kind = \"http\" needs embedder.url".to_string()),
                }
                if self.batch_size == 0 {
                    return bad("embedder.batch_size must be at least 1".to_string());
                }
                Ok(())
            }
            other => bad(format!(
                "embedder.kind must be \"hashed\" or \"http\" (got {other:?})"
            )),
        }
    }

    /// Builds the configured embedder.
    pub fn build(&self) -> Result<Box<dyn Embedder>, EmbedError> {
        self.validate()?;
        Ok(match self.kind.as_str() {
            "http" => Box::new(HttpEmbedder::new(self)?),
            _ => Box::new(HashedEmbedder::new(self)),
        })
    }
}

/// The weight-free embedder (see the module documentation).
#[derive(Debug, Clone)]
pub struct HashedEmbedder {
    dim: usize,
    op_weight: f32,
    identifier_weight: f32,
    ngram_weight: f32,
}

impl HashedEmbedder {
    /// An embedder with the settings of `cfg` (`dim` and the weights).
    pub fn new(cfg: &EmbedderConfig) -> Self {
        HashedEmbedder {
            dim: cfg.dim.max(1),
            op_weight: cfg.op_weight,
            identifier_weight: cfg.identifier_weight,
            ngram_weight: cfg.ngram_weight,
        }
    }

    /// Embeds one program into `row` (which must have `dim` entries).
    pub fn embed_into(&self, src: &str, row: ArrayViewMut1<'_, f32>) {
        let p = Program::parse(src);
        let tree = SyntaxTree::build(&p);
        self.embed_parsed(&p, &tree, row);
    }

    /// Embeds an already parsed program and its syntax tree into `row` (`dim` entries).
    pub fn embed_parsed(
        &self,
        p: &Program<'_>,
        tree: &SyntaxTree,
        mut row: ArrayViewMut1<'_, f32>,
    ) {
        let mut feats: Vec<(u64, f32)> = Vec::with_capacity(p.tokens.len() * 3);
        for op in summarize(p).ops {
            feats.push((mix(1, hash_str(&op.qualified)), self.op_weight));
            feats.push((mix(2, hash_str(&op.name)), self.op_weight));
        }
        for t in &p.tokens {
            if t.kind == TokenKind::Name && !is_keyword(t.text) {
                feats.push((mix(3, hash_str(t.text)), self.identifier_weight));
                if t.text.contains('_') {
                    for w in t.text.split('_').filter(|w| !w.is_empty()) {
                        feats.push((mix(4, hash_str(w)), self.identifier_weight));
                    }
                }
            }
        }
        for g in tree.path_ngrams() {
            feats.push((mix(5, g), self.ngram_weight));
        }
        // Count repeated features, then weight sublinearly: w * (1 + ln(count)).
        feats.sort_unstable_by_key(|f| f.0);
        row.fill(0.0);
        let mut i = 0;
        while i < feats.len() {
            let (h, w) = feats[i];
            let mut j = i;
            while j < feats.len() && feats[j].0 == h {
                j += 1;
            }
            let count = (j - i) as f32;
            let value = w * (1.0 + count.ln());
            let slot = (h % self.dim as u64) as usize;
            let sign = if (h >> 63) == 1 { -1.0 } else { 1.0 };
            row[slot] += sign * value;
            i = j;
        }
        let norm = row.iter().map(|v| v * v).sum::<f32>().sqrt();
        if norm > 0.0 {
            row.mapv_inplace(|v| v / norm);
        }
    }
}

impl Embedder for HashedEmbedder {
    fn identity(&self) -> String {
        format!(
            "hashed-v1:dim={}:op={}:id={}:ng={}",
            self.dim, self.op_weight, self.identifier_weight, self.ngram_weight
        )
    }

    fn dim(&self) -> usize {
        self.dim
    }

    fn as_hashed(&self) -> Option<&HashedEmbedder> {
        Some(self)
    }

    fn embed(&self, programs: &[&str]) -> Result<Array2<f32>, EmbedError> {
        let rows: Vec<Vec<f32>> = programs
            .par_iter()
            .map(|src| {
                let mut row = ndarray::Array1::<f32>::zeros(self.dim);
                self.embed_into(src, row.view_mut());
                row.to_vec()
            })
            .collect();
        let mut out = Array2::<f32>::zeros((programs.len(), self.dim));
        for (mut dst, src) in out.outer_iter_mut().zip(rows) {
            dst.assign(&ndarray::ArrayView1::from(&src[..]));
        }
        Ok(out)
    }
}

/// A client of an OpenAI-compatible `/v1/embeddings` endpoint.
pub struct HttpEmbedder {
    endpoint: String,
    model: String,
    api_key: Option<String>,
    batch_size: usize,
    retries: u32,
    max_chars: usize,
    agent: ureq::Agent,
    dim: std::sync::OnceLock<usize>,
}

#[derive(Serialize)]
struct EmbeddingRequest<'a> {
    model: &'a str,
    input: Vec<&'a str>,
}

#[derive(Deserialize)]
struct EmbeddingResponse {
    data: Vec<EmbeddingItem>,
}

#[derive(Deserialize)]
struct EmbeddingItem {
    embedding: Vec<f32>,
    #[serde(default)]
    index: Option<usize>,
}

impl HttpEmbedder {
    /// A client for the endpoint of `cfg` (`url`, `model`, `api_key_env`, ...).
    pub fn new(cfg: &EmbedderConfig) -> Result<Self, EmbedError> {
        let base = cfg
            .url
            .clone()
            .ok_or_else(|| EmbedError::Config("embedder.url is not set".to_string()))?;
        let api_key = match &cfg.api_key_env {
            Some(var) => Some(std::env::var(var).map_err(|_| {
                EmbedError::Config(format!(
                    "embedder.api_key_env names {var}, which is not set in the environment"
                ))
            })?),
            None => None,
        };
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_global(Some(Duration::from_secs(cfg.timeout_s.max(1))))
            .http_status_as_error(false)
            .build()
            .into();
        Ok(HttpEmbedder {
            endpoint: format!("{}/embeddings", base.trim_end_matches('/')),
            model: cfg.model.clone(),
            api_key,
            batch_size: cfg.batch_size.max(1),
            retries: cfg.retries,
            max_chars: cfg.max_chars.max(1),
            agent,
            dim: std::sync::OnceLock::new(),
        })
    }

    fn request(&self, batch: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let inputs: Vec<&str> = batch
            .iter()
            .map(|s| match s.char_indices().nth(self.max_chars) {
                Some((cut, _)) => &s[..cut],
                None => s,
            })
            .collect();
        let body = EmbeddingRequest {
            model: &self.model,
            input: inputs,
        };
        let mut attempt = 0;
        loop {
            let mut req = self.agent.post(&self.endpoint);
            if let Some(key) = &self.api_key {
                req = req.header("Authorization", &format!("Bearer {key}"));
            }
            let outcome = req.send_json(&body);
            let retryable = match outcome {
                Ok(mut resp) => {
                    let status = resp.status().as_u16();
                    if status == 200 {
                        let parsed: EmbeddingResponse =
                            resp.body_mut().read_json().map_err(|e| EmbedError::Http {
                                endpoint: self.endpoint.clone(),
                                message: format!("response is not an embeddings object: {e}"),
                            })?;
                        return self.check(parsed, batch.len());
                    }
                    let text = resp.body_mut().read_to_string().unwrap_or_default();
                    let message = format!(
                        "HTTP {status}: {}",
                        text.chars().take(300).collect::<String>()
                    );
                    if status == 429 || status >= 500 {
                        message
                    } else {
                        return Err(EmbedError::Http {
                            endpoint: self.endpoint.clone(),
                            message,
                        });
                    }
                }
                Err(e) => e.to_string(),
            };
            if attempt >= self.retries {
                return Err(EmbedError::Http {
                    endpoint: self.endpoint.clone(),
                    message: format!("{retryable} (after {} attempts)", attempt + 1),
                });
            }
            attempt += 1;
            std::thread::sleep(Duration::from_millis(200 * (1 << attempt.min(6))));
        }
    }

    fn check(&self, resp: EmbeddingResponse, expected: usize) -> Result<Vec<Vec<f32>>, EmbedError> {
        let err = |m: String| EmbedError::Http {
            endpoint: self.endpoint.clone(),
            message: m,
        };
        if resp.data.len() != expected {
            return Err(err(format!(
                "asked for {expected} embeddings, got {}",
                resp.data.len()
            )));
        }
        let mut rows: Vec<Option<Vec<f32>>> = vec![None; expected];
        for (pos, item) in resp.data.into_iter().enumerate() {
            let idx = item.index.unwrap_or(pos);
            if idx >= expected || rows[idx].is_some() {
                return Err(err(format!("bad or repeated index {idx} in the response")));
            }
            if item.embedding.iter().any(|v| !v.is_finite()) {
                return Err(err(format!("embedding {idx} has a non-finite value")));
            }
            rows[idx] = Some(item.embedding);
        }
        let rows: Vec<Vec<f32>> = rows.into_iter().flatten().collect();
        let dim = rows.first().map_or(0, Vec::len);
        if dim == 0 {
            return Err(err("empty embedding".to_string()));
        }
        let known = *self.dim.get_or_init(|| dim);
        if let Some(bad) = rows.iter().find(|r| r.len() != known) {
            return Err(err(format!(
                "embedding of dimension {} where {known} was expected",
                bad.len()
            )));
        }
        Ok(rows)
    }
}

impl Embedder for HttpEmbedder {
    fn identity(&self) -> String {
        format!("http:{}:{}", self.endpoint, self.model)
    }

    fn dim(&self) -> usize {
        self.dim.get().copied().unwrap_or(0)
    }

    fn embed(&self, programs: &[&str]) -> Result<Array2<f32>, EmbedError> {
        let mut rows: Vec<Vec<f32>> = Vec::with_capacity(programs.len());
        for batch in programs.chunks(self.batch_size) {
            rows.extend(self.request(batch)?);
        }
        let dim = rows.first().map_or(self.dim(), Vec::len);
        let mut out = Array2::<f32>::zeros((programs.len(), dim));
        for (mut dst, src) in out.outer_iter_mut().zip(rows) {
            let norm = src.iter().map(|v| v * v).sum::<f32>().sqrt();
            let scale = if norm > 0.0 { 1.0 / norm } else { 0.0 };
            for (d, s) in dst.iter_mut().zip(src) {
                *d = s * scale;
            }
        }
        Ok(out)
    }
}

/// Cosine similarity of two unit vectors (their dot product).
pub fn cosine(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn emb(src: &str) -> Vec<f32> {
        let e = HashedEmbedder::new(&EmbedderConfig::default());
        e.embed(&[src]).unwrap().row(0).to_vec()
    }

    const CONV: &str = "import torch.nn as nn\nclass Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.conv = nn.Conv2d(3, 16, 3)\n        self.bn = nn.BatchNorm2d(16)\n    def forward(self, x):\n        return self.bn(self.conv(x)).relu()\n";
    const ATTN: &str = "import torch\nclass Model(torch.nn.Module):\n    def forward(self, q, k, v):\n        s = torch.softmax(q @ k.transpose(-1, -2) / 8.0, dim=-1)\n        return s @ v\n";

    #[test]
    fn similar_programs_are_closer_than_different_ones() {
        let a = emb(CONV);
        let renamed = emb(&CONV
            .replace("self.conv", "self.c1")
            .replace("self.bn", "self.n1")
            .replace("16", "32"));
        let other = emb(ATTN);
        let norm: f32 = a.iter().map(|v| v * v).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-4);
        let close = cosine(&a, &renamed);
        let far = cosine(&a, &other);
        assert!(close > 0.8, "close {close}");
        assert!(far < 0.5, "far {far}");
        assert!(close > far + 0.3);
    }

    #[test]
    fn empty_program_is_a_zero_row_and_config_is_checked() {
        assert!(emb("").iter().all(|v| *v == 0.0));
        let mut cfg = EmbedderConfig {
            kind: "magic".into(),
            ..Default::default()
        };
        assert!(cfg.validate().is_err());
        cfg.kind = "http".into();
        assert!(cfg.validate().unwrap_err().to_string().contains("url"));
        cfg.url = Some("ftp://x".into());
        assert!(cfg.validate().is_err());
        cfg.url = Some("http://127.0.0.1:1/v1".into());
        assert!(cfg.validate().is_ok());
    }
}
