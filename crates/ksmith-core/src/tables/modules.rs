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

crate::vocabulary! {
    /// Why an extracted module is not `ok` (the `reason` column says it in words, with details).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
    pub enum ModuleReason {
        /// The repository has no usable snapshot folder.
        NoSnapshot = "no_snapshot",
        /// A listed file path would leave the snapshot folder.
        UnsafePath = "unsafe_path",
        /// A listed file could not be read.
        UnreadableFile = "unreadable_file",
        /// The file is larger than `max_file_bytes`.
        FileTooLarge = "file_too_large",
        /// The file holds NUL bytes.
        BinaryFile = "binary_file",
        /// The file is not valid UTF-8.
        NotUtf8 = "not_utf8",
        /// The parser ran past its time budget.
        ParseTimeout = "parse_timeout",
        /// The parser gave up.
        Unparsable = "unparsable",
        /// The class or a statement it needs has a syntax error.
        SyntaxError = "syntax_error",
        /// A statement nests deeper than `max_nesting`.
        TooDeeplyNested = "too_deeply_nested",
        /// The class has no usable `forward` (or is abstract).
        NoForward = "no_forward",
        /// It needs a package off the allow-list.
        ImportNotAllowed = "import_not_allowed",
        /// A repository-local import leads nowhere.
        UnresolvedImport = "unresolved_import",
        /// It reads a global name nothing defines.
        UndefinedName = "undefined_name",
        /// Two definitions would bind one name in the flattened program.
        NameConflict = "name_conflict",
        /// A repository module object is used as a value.
        ModuleReference = "module_reference",
        /// Definitions need each other while the program is being defined.
        DependencyCycle = "dependency_cycle",
        /// `forward` has a required keyword-only parameter.
        ForwardKeywordOnlyArg = "forward_keyword_only_arg",
        /// The program is longer than `max_lines`.
        TooLarge = "too_large",
        /// The emitted program has a syntax error.
        EmittedSyntaxError = "emitted_syntax_error",
        /// The emitted program could not be parsed.
        EmittedProgramUnparsable = "emitted_program_unparsable",
        /// The emitted program lacks `Model`, `get_inputs` or `get_init_inputs`.
        EmittedProgramLacks = "emitted_program_lacks",
        /// Extraction of the class or repository panicked (a bug; the others finish).
        InternalError = "internal_error",
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
    /// Why it was rejected or failed, in words (e.g. `import_not_allowed: scipy`).
    pub reason: Option<String>,
    /// Why it was rejected or failed, as a code.
    #[serde(default)]
    pub reason_code: Option<ModuleReason>,
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
    /// Where each argument of `get_init_inputs()` came from, in order: `name=value: call
    /// path:line` (a call in the repository that builds the class, `(default of p)` when the
    /// value is the default of the enclosing function's parameter `p`; `call path:line via
    /// p= of A at :line` when that call is `A.__init__` calling its parameter `p`, which a call
    /// site of `A` at that line binds to the class, `via p=B, a default of A` when the class is
    /// that parameter's default; a value that is a constructor call of a repository class,
    /// `fn=LinearAttention(128, heads=4): call path:line (dim of Block: call path2:line2;
    /// heads of Block: ...)`, lists the parameters of the enclosing class its arguments took,
    /// and the program defines that class), `name=value: default` (an optional
    /// parameter's own default, filling a gap), `name=value: guess`, or `name=value: guess
    /// (why)` when the call passes an argument that is not constant.
    #[serde(default)]
    pub arg_sources: Vec<String>,
}

impl Table for ModuleRow {
    const NAME: &'static str = "modules";
    const SCHEMA_VERSION: u32 = 3;
}
