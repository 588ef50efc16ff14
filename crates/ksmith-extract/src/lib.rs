//! Extract: finds the `nn.Module` subclasses of crawled repositories and emits each, with its
//! dependency closure inlined, as a self-contained KernelBench-format program.
//! Input: `repos.parquet` ([`RepoRow`](ksmith_core::tables::RepoRow), rows with status `ok`,
//! files read from their snapshot folders). Output: `modules.parquet`
//! ([`ModuleRow`](ksmith_core::tables::ModuleRow)).
//!
//! How (one pass per file, then per class):
//! - each file is parsed with tree-sitter-python (one parser per rayon thread) and indexed:
//!   top-level statements with the names they bind and the global names they read (Python
//!   scoping: parameters, assignments, comprehension variables, nested defs, `global`), import
//!   bindings (with what guards them: `try`/`except ImportError`, `if TYPE_CHECKING:`), and for
//!   classes their bases, methods, `__init__` and `forward` signatures; statements CPython
//!   would refuse although tree-sitter accepts them (TabError, empty blocks, Python 2) are
//!   syntax errors;
//! - a class is a module when a base resolves to `torch.nn.Module` (or another `torch.nn`
//!   layer) through any alias (`nn.Module`, `torch.nn.Module`, `import torch.nn as tnn`,
//!   `from torch import nn as N`, `from torch.nn import Module as M`, `Base = nn.Module`) or
//!   through repository classes in any file (absolute, relative, re-exported and star imports
//!   are followed);
//! - its closure (functions, classes, bases, decorators, constants and other assignments, names
//!   in defaults, class bodies and string annotations) is collected across files, method by
//!   method (a method nothing needed names and that needs something new gets a `raise` body);
//!   `mod.attr` uses of repository modules are rewritten to `attr`; imports of allowed packages
//!   are kept, only those used; `os`/`sys` only for reading; an import with an `ImportError`
//!   fallback that cannot be kept makes the program take the fallback;
//! - the program is emitted in an order that runs, the class renamed to `Model` (with
//!   `Original = Model` when the original name is used; a class with required keyword-only
//!   constructor arguments keeps its name and gets a `class Model(Original)` taking them
//!   positionally), then `get_inputs()` and
//!   `get_init_inputs()` guessed from the signatures (names and defaults, paritybench style),
//!   and finally checked: the generated and edited stretches are re-parsed with tree-sitter
//!   (once per distinct text in a repository), unedited inlined statements reuse their file's
//!   error-free parse, and the free names of the whole program must all be defined, imported
//!   or builtins (`verify_whole_program = true` re-parses every program whole instead; the
//!   verdicts are the same, tested on the sample corpus).
//!
//! Invariants: rows are sorted by (repo, path, line); every `ok` row has a program that parses
//! and defines or imports every global name it reads; a bad file or class is a row with a
//! status, a typed `reason_code` ([`ModuleReason`](ksmith_core::tables::ModuleReason)) and the
//! reason in words starting with it (`syntax_error at path:line`, `undefined_name: foo`,
//! `import_not_allowed: scipy`, `no_forward`, `too_large: ...`), never an error, and a panic
//! inside one class or repository is its `internal_error: ...` row, so no input can fail the
//! stage; ids are unique in the table (see [`assign_ids`]). Entry point: [`run`]; table-free:
//! [`extract_repo`].
//!
//! # Example
//!
//! ```
//! use ksmith_extract::{extract_repo, ExtractConfig, RepoInfo, SourceFile};
//!
//! let files = [
//!     SourceFile::new("ops.py", "import torch\n\ndef act(x):\n    return torch.relu(x) * 2\n"),
//!     SourceFile::new(
//!         "net.py",
//!         "import torch.nn as nn\nfrom ops import act\n\nclass Net(nn.Module):\n    def __init__(self, dim):\n        super().__init__()\n        self.fc = nn.Linear(dim, dim)\n\n    def forward(self, x):\n        return act(self.fc(x))\n",
//!     ),
//! ];
//! let rows = extract_repo(&RepoInfo::default(), &files, &ExtractConfig::default());
//! let program = rows[0].program.as_deref().unwrap_or_default();
//! assert!(program.contains("def act(x):"));
//! assert!(program.contains("class Model(nn.Module):"));
//! assert!(program.ends_with("def get_init_inputs():\n    return [4]\n"));
//! ```
#![deny(missing_docs)]

mod builtins;
mod calls;
mod closure;
mod config;
mod consts;
mod contain;
mod emit;
mod error;
mod extract;
mod guess;
mod imports;
mod index;
mod library;
mod names;
mod python_rules;
mod resolve;
mod sites;
mod stage;
mod syntax;

/// CPython's verdicts, shared with the integration tests.
#[cfg(test)]
#[path = "../tests/extract/common/cpython.rs"]
mod cpython_check;

pub use config::{DEFAULT_ALLOWED_IMPORTS, ExtractConfig, READ_ONLY_PACKAGES};
pub use error::Error;
pub use extract::{
    ExtractStats, RepoInfo, SourceFile, assign_ids, extract_repo, extract_repo_with_libraries,
    extract_repo_with_stats,
};
pub use library::{Library, load as load_library, site_packages_of};
pub use stage::{module_order, run};

/// Name of the stage (its config section, report and CLI subcommand).
pub const STAGE: &str = "extract";

/// Bumped whenever the output for the same input changes.
pub const CODE_VERSION: u32 = 7;
