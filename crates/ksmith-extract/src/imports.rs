//! Import statements: what name each one binds to what, and the canonical import line of a
//! binding.

use tree_sitter::Node;

use crate::syntax::{Kinds, text};

/// What an import binds a local name to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Target {
    /// A module object. `import a.b as c` binds `c` to `a.b`; `import a.b` binds `a` to `a` and
    /// loads `a.b` (`loads` holds the full dotted path written in the statement).
    Module {
        /// Dotted path of the module the name is bound to.
        path: String,
        /// Dotted path the statement imports (differs from `path` for `import a.b`).
        loads: String,
    },
    /// A name in a module: `from <level dots><module> import name`.
    Name {
        /// Leading dots of a relative import (0 for absolute).
        level: u32,
        /// Dotted module path after the dots (may be empty for `from . import x`).
        module: String,
        /// The imported name.
        name: String,
    },
    /// `from <level dots><module> import *`.
    Star {
        /// Leading dots of a relative import.
        level: u32,
        /// Dotted module path.
        module: String,
    },
}

impl Target {
    /// The top-level package an absolute import reaches (`torch` for `torch.nn`), or `None`
    /// for relative imports.
    pub(crate) fn top_package(&self) -> Option<&str> {
        let (level, path) = match self {
            Target::Module { loads, .. } => (0, loads.as_str()),
            Target::Name { level, module, .. } | Target::Star { level, module } => {
                (*level, module.as_str())
            }
        };
        if level > 0 {
            return None;
        }
        path.split('.').next().filter(|s| !s.is_empty())
    }

    /// True for `from __future__ import ...`.
    pub(crate) fn is_future(&self) -> bool {
        matches!(self, Target::Name { level: 0, module, .. } if module == "__future__")
    }
}

/// One name bound by an import statement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Binding {
    /// The name bound in the importing scope.
    pub(crate) local: String,
    /// What it is bound to.
    pub(crate) target: Target,
}

impl Binding {
    /// The import line that binds `local` to this binding's target in an emitted program.
    pub(crate) fn line_as(&self, local: &str) -> String {
        match &self.target {
            Target::Module { path, loads } => {
                if local == path && path.split('.').count() == 1 {
                    if loads == path {
                        format!("import {path}")
                    } else {
                        format!("import {loads}")
                    }
                } else {
                    format!("import {path} as {local}")
                }
            }
            Target::Name {
                level,
                module,
                name,
            } => {
                let dots = ".".repeat(*level as usize);
                if local == name {
                    format!("from {dots}{module} import {name}")
                } else {
                    format!("from {dots}{module} import {name} as {local}")
                }
            }
            Target::Star { level, module } => {
                format!("from {}{module} import *", ".".repeat(*level as usize))
            }
        }
    }
}

/// Removes whitespace and comments that a multi-line dotted name may carry.
fn clean_dotted(s: &str) -> String {
    s.chars().filter(|c| !c.is_whitespace()).collect()
}

/// The bindings of an `import_statement`, `import_from_statement` or `future_import_statement`
/// node. Returns an empty list for any other node.
pub(crate) fn bindings_of(node: Node<'_>, src: &str) -> Vec<Binding> {
    let k = Kinds::get();
    let kind = node.kind_id();
    let mut out = Vec::new();
    let mut cursor = node.walk();
    if kind == k.import_statement {
        for child in node.children_by_field_name("name", &mut cursor) {
            if child.kind_id() == k.aliased_import {
                let (Some(name), Some(alias)) = (
                    child.child_by_field_id(k.f_name),
                    child.child_by_field_id(k.f_alias),
                ) else {
                    continue;
                };
                let path = clean_dotted(text(src, name));
                out.push(Binding {
                    local: text(src, alias).to_string(),
                    target: Target::Module {
                        path: path.clone(),
                        loads: path,
                    },
                });
            } else if child.kind_id() == k.dotted_name {
                let loads = clean_dotted(text(src, child));
                let top = loads.split('.').next().unwrap_or("").to_string();
                if top.is_empty() {
                    continue;
                }
                out.push(Binding {
                    local: top.clone(),
                    target: Target::Module { path: top, loads },
                });
            }
        }
    } else if kind == k.import_from_statement || kind == k.future_import_statement {
        let (level, module) = if kind == k.future_import_statement {
            (0, "__future__".to_string())
        } else {
            match node.child_by_field_id(k.f_module_name) {
                Some(m) if m.kind_id() == k.relative_import => {
                    let mut level = 0;
                    let mut module = String::new();
                    let mut c = m.walk();
                    for part in m.named_children(&mut c) {
                        if part.kind_id() == k.import_prefix {
                            level = text(src, part).chars().filter(|c| *c == '.').count() as u32;
                        } else if part.kind_id() == k.dotted_name {
                            module = clean_dotted(text(src, part));
                        }
                    }
                    (level, module)
                }
                Some(m) => (0, clean_dotted(text(src, m))),
                None => return out,
            }
        };
        let mut c = node.walk();
        for child in node.named_children(&mut c) {
            if child.kind_id() == k.wildcard_import {
                out.push(Binding {
                    local: "*".to_string(),
                    target: Target::Star {
                        level,
                        module: module.clone(),
                    },
                });
            }
        }
        for child in node.children_by_field_name("name", &mut cursor) {
            let (name, local) = if child.kind_id() == k.aliased_import {
                let (Some(name), Some(alias)) = (
                    child.child_by_field_id(k.f_name),
                    child.child_by_field_id(k.f_alias),
                ) else {
                    continue;
                };
                (clean_dotted(text(src, name)), text(src, alias).to_string())
            } else {
                let name = clean_dotted(text(src, child));
                (name.clone(), name)
            };
            if name.is_empty() || local.is_empty() {
                continue;
            }
            out.push(Binding {
                local,
                target: Target::Name {
                    level,
                    module: module.clone(),
                    name,
                },
            });
        }
    }
    out
}

/// What the import targets of a repository's files are, as indexing needs to know.
pub(crate) trait ImportKinds: Sync {
    /// True when the target is a module of the repository itself.
    fn is_local(&self, target: &Target) -> bool;
    /// True when `package` (top-level) may be imported for its read-only uses only.
    fn is_read_only(&self, package: &str) -> bool;
}

/// A program on its own: no repository around it, every import external.
pub(crate) struct Standalone;

impl ImportKinds for Standalone {
    fn is_local(&self, _: &Target) -> bool {
        false
    }
    fn is_read_only(&self, _: &str) -> bool {
        false
    }
}

/// The read-only uses of `os` and `sys`: a use whose full dotted path is one of these, or (for
/// those marked `true`) lies below one, only reads.
const READ_ONLY_USES: &[(&str, bool)] = &[
    ("os.environ", false),
    ("os.environ.get", false),
    ("os.getenv", false),
    ("os.path", true),
    ("os.sep", false),
    ("os.pathsep", false),
    ("os.linesep", false),
    ("os.extsep", false),
    ("os.altsep", false),
    ("os.curdir", false),
    ("os.pardir", false),
    ("os.devnull", false),
    ("os.name", false),
    ("os.cpu_count", false),
    ("os.getpid", false),
    ("os.getcwd", false),
    ("os.fspath", false),
    ("os.PathLike", false),
    ("sys.version_info", true),
    ("sys.version", false),
    ("sys.hexversion", false),
    ("sys.implementation", true),
    ("sys.platform", true),
    ("sys.byteorder", false),
    ("sys.maxsize", false),
    ("sys.float_info", true),
    ("sys.int_info", true),
    ("sys.modules", false),
    ("sys.modules.get", false),
    ("sys.argv", false),
    ("sys.getrecursionlimit", false),
    ("sys.getsizeof", false),
    ("sys.getdefaultencoding", false),
    ("sys.stdout", false),
    ("sys.stdout.write", false),
    ("sys.stdout.flush", false),
    ("sys.stderr", false),
    ("sys.stderr.write", false),
    ("sys.stderr.flush", false),
];

/// True when using `path` (a full dotted path such as `os.environ.get`) only reads: it names
/// a read-only use or something below one that reads below (`os.path.join`,
/// `sys.version_info.major`). A bare package (`os`) is not a read-only use.
pub(crate) fn read_only_use(path: &str) -> bool {
    READ_ONLY_USES.iter().any(|(prefix, below)| {
        path == *prefix
            || (*below
                && path
                    .strip_prefix(prefix)
                    .is_some_and(|rest| rest.starts_with('.')))
    })
}

/// True when `package` (a top-level package name) is allowed by `allowed`, a list of top-level
/// package names.
pub(crate) fn is_allowed(package: &str, allowed: &[String]) -> bool {
    package == "__future__" || allowed.iter().any(|a| a == package)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn first_stmt_bindings(code: &str) -> Vec<Binding> {
        let tree = crate::syntax::parse(code, std::time::Duration::from_secs(5)).unwrap();
        let root = tree.root_node();
        let stmt = root.named_child(0).unwrap();
        bindings_of(stmt, code)
    }

    #[test]
    fn import_forms_bind_the_right_names() {
        let b = first_stmt_bindings("import torch.nn as tnn, math\n");
        assert_eq!(b.len(), 2);
        assert_eq!(b[0].local, "tnn");
        assert_eq!(b[0].line_as("tnn"), "import torch.nn as tnn");
        assert_eq!(b[1].line_as("math"), "import math");

        let b = first_stmt_bindings("import torch.nn.functional\n");
        assert_eq!(b[0].local, "torch");
        assert_eq!(b[0].line_as("torch"), "import torch.nn.functional");

        let b = first_stmt_bindings("from torch import nn as N, Tensor\n");
        assert_eq!(b[0].local, "N");
        assert_eq!(b[0].line_as("N"), "from torch import nn as N");
        assert_eq!(b[1].line_as("Tensor"), "from torch import Tensor");
        assert_eq!(b[0].target.top_package(), Some("torch"));

        let b = first_stmt_bindings("from ..layers.conv import (Conv,\n  Block as B)\n");
        assert_eq!(
            b[1].target,
            Target::Name {
                level: 2,
                module: "layers.conv".into(),
                name: "Block".into()
            }
        );
        assert_eq!(b[1].local, "B");
        assert_eq!(b[1].target.top_package(), None);

        let b = first_stmt_bindings("from . import layers\n");
        assert_eq!(
            b[0].target,
            Target::Name {
                level: 1,
                module: String::new(),
                name: "layers".into()
            }
        );

        let b = first_stmt_bindings("from numpy import *\n");
        assert_eq!(b[0].local, "*");
        assert_eq!(b[0].line_as("*"), "from numpy import *");
    }

    #[test]
    fn only_reading_uses_of_os_and_sys_are_read_only() {
        for path in [
            "os.environ",
            "os.environ.get",
            "os.getenv",
            "os.path",
            "os.path.join",
            "os.path.exists",
            "sys.version_info",
            "sys.version_info.major",
            "sys.platform.startswith",
            "sys.stderr.write",
        ] {
            assert!(read_only_use(path), "{path}");
        }
        for path in [
            "os",
            "sys",
            "os.makedirs",
            "os.system",
            "os.environ.setdefault",
            "os.environ.update",
            "os.pathlike",
            "os.path_x",
            "sys.exit",
            "sys.path.append",
            "sys.argv.append",
            "sys.modules.pop",
        ] {
            assert!(!read_only_use(path), "{path}");
        }
    }
}
