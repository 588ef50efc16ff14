//! Program features shared by the dedup and cluster stages of ksmith.
//!
//! - [`lexer`]: a fast, forgiving Python tokenizer (layout tokens, no comments).
//! - [`program`]: code tokens without docstrings, canonical labels that forget identifier
//!   names and literal values, the normalized text and key of exact deduplication.
//! - [`scope`]: the global names a piece of code reads, with Python's scoping.
//! - [`slice`]: what a program computes: its entry class and the code that class reaches,
//!   without imports, generated inputs and their constants; and the same without boilerplate.
//! - [`tree`]: a syntax tree built from the tokens and its Weisfeiler-Lehman hash.
//! - [`ops`]: the operators a program calls (`nn.Conv2d`, `F.relu`, `.view`, `@`).
//! - [`aten`]: what the ATen operators a module ran say it computes (kinds, profiles, how alike
//!   two forward passes are).
//! - [`calls`]: the recorded calls with the attributes that decide their kernels, written one
//!   way: the computation, its kernel-deciding calls, and the regime of its sizes.
//! - [`embedder`]: the weight-free hashed embedder and an OpenAI-compatible
//!   `/v1/embeddings` client, behind the [`embedder::Embedder`] trait.
//! - [`hashing`]: small deterministic hashes and a seeded generator.
//!
//! Invariants: every function here is deterministic (no per-process seeds) and total over its
//! input: broken Python still gets tokens, features and hashes.
#![deny(missing_docs)]

pub mod aten;
pub mod calls;
pub mod contract;
pub mod embedder;
pub mod error;
pub mod hashing;
pub mod lexer;
pub mod ops;
pub mod program;
pub mod scope;
pub mod slice;
pub mod tree;

pub use embedder::{Embedder, EmbedderConfig, HashedEmbedder, HttpEmbedder, cosine};
pub use error::EmbedError;
pub use program::Program;
pub use slice::{Slice, SliceText, body_tokens, slice_text, slice_texts};
pub use tree::{SyntaxTree, structural_hash};
