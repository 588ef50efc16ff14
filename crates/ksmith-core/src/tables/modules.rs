//! `modules.parquet`: one row per `nn.Module` subclass found by extract.

use serde::{Deserialize, Serialize};

use crate::table::Table;

crate::vocabulary! {
    /// Whether an extracted module goes downstream.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
    pub enum ModuleStatus {
        /// A self-contained program was emitted.
        Ok = "ok",
        /// Refused by a rule (a package off the allow-list, too large, abstract, ...).
        Rejected = "rejected",
        /// The extractor could not produce a valid program (syntax error, undefined name, ...).
        Failed = "failed",
    }
}

/// One extracted module and its self-contained KernelBench-format program.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModuleRow {
    /// Stable id: content hash of the program, or of (repo, commit, path, class) when there is
    /// no program.
    pub id: String,
    /// The repository (as in `repos.parquet`).
    pub repo: String,
    /// The pinned commit of the repository.
    pub commit: String,
    /// File of the class, relative to the repository root.
    pub path: String,
    /// Name of the class in its file.
    pub class_name: String,
    /// Line of the class definition (1-based).
    pub line: u32,
    /// Whether it goes downstream.
    pub status: ModuleStatus,
    /// Why it was rejected or failed (e.g. `import_not_allowed: scipy`).
    pub reason: Option<String>,
    /// The emitted program: the class as `Model`, its dependencies inlined,
    /// `get_init_inputs()` and `get_inputs()`.
    pub program: Option<String>,
    /// Names of the inlined definitions, in emission order (`path::name`).
    pub deps: Vec<String>,
    /// Import statements kept in the program.
    pub imports: Vec<String>,
    /// Lines of the program.
    pub lines: u32,
    /// License of the repository (SPDX), carried for provenance and dedup.
    pub license: Option<String>,
    /// Stars of the repository, carried for dedup tie-breaks.
    pub stars: Option<i64>,
}

impl Table for ModuleRow {
    const NAME: &'static str = "modules";
    const SCHEMA_VERSION: u32 = 1;
}
