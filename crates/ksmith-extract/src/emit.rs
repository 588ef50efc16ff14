//! Assembling a KernelBench-format program from a closure, and checking it: it must parse
//! without ERROR or MISSING nodes and read no global name that it does not define or import.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use ksmith_core::tables::ModuleReason;

use crate::builtins::is_builtin;
use crate::closure::{NodeId, Plan};
use crate::imports::Standalone;
use crate::index::{FileIndex, Limits, StmtKind};
use crate::resolve::Repo;

/// Name of the entry class in every program.
pub(crate) const ENTRY: &str = "Model";

/// The text of one statement with its edits applied.
fn statement_text(
    repo: &Repo,
    node: NodeId,
    plan: &Plan,
    rename: Option<(usize, usize)>,
) -> String {
    let file = &repo.files[node.0];
    let stmt = &file.stmts[node.1];
    let src = &file.source;
    let mut edits: Vec<(usize, usize, &str)> = plan
        .edits
        .get(&node)
        .map(|v| {
            v.iter()
                .map(|e| (e.start, e.end, e.text.as_str()))
                .collect()
        })
        .unwrap_or_default();
    if let Some((s, e)) = rename {
        edits.push((s, e, ENTRY));
    }
    edits.sort_by_key(|e| e.0);
    let mut out = String::with_capacity(stmt.end - stmt.start + 16);
    let mut at = stmt.start;
    for (s, e, t) in edits {
        if s < at || e > stmt.end {
            continue;
        }
        out.push_str(src.get(at..s).unwrap_or(""));
        out.push_str(t);
        at = e;
    }
    out.push_str(src.get(at..stmt.end).unwrap_or(""));
    out
}

/// An emitted program and what each stretch of it is.
pub(crate) struct Emitted {
    /// The program text.
    pub(crate) text: String,
    /// Consecutive stretches of `text`, each a sequence of whole top-level statements.
    pub(crate) parts: Vec<Part>,
    /// The entry class is renamed to `Model` (rather than wrapped by a generated `Model`).
    pub(crate) entry_renamed: bool,
}

/// A stretch of an emitted program.
pub(crate) struct Part {
    /// Byte range in the program.
    pub(crate) range: std::ops::Range<usize>,
    /// An inlined statement (with whether its text was edited beyond the entry rename), or
    /// generated text (imports, alias lines, input functions).
    pub(crate) origin: Option<(NodeId, bool)>,
}

/// The program: imports, the closure in order (entry renamed to `Model`, or followed by
/// `wrapper`, a generated `class Model(<entry>)`), alias lines, then `get_inputs()` and
/// `get_init_inputs()` (given as `inputs`).
pub(crate) fn program(
    repo: &Repo,
    entry: NodeId,
    plan: &Plan,
    inputs: &str,
    wrapper: Option<&str>,
) -> Emitted {
    let mut text = String::new();
    let mut parts = Vec::with_capacity(2 * plan.order.len() + 2);
    let mut generated_from = 0;
    for line in import_lines(plan) {
        text.push_str(&line);
        text.push('\n');
    }
    let entry_info = match &repo.files[entry.0].stmts[entry.1].kind {
        StmtKind::Class(info) if wrapper.is_none() => Some(info),
        _ => None,
    };
    for &node in &plan.order {
        text.push_str("\n\n");
        let rename = if node == entry {
            entry_info.filter(|i| i.name != ENTRY).map(|i| i.name_range)
        } else {
            None
        };
        let start = text.len();
        if generated_from < start {
            parts.push(Part {
                range: generated_from..start,
                origin: None,
            });
        }
        text.push_str(&statement_text(repo, node, plan, rename));
        text.push('\n');
        let edited = plan.edits.get(&node).is_some_and(|e| !e.is_empty());
        parts.push(Part {
            range: start..text.len(),
            origin: Some((node, edited)),
        });
        generated_from = text.len();
        if node == entry
            && plan.entry_name_read
            && let Some(info) = entry_info.filter(|i| i.name != ENTRY)
        {
            text.push_str(&format!("{} = {ENTRY}\n", info.name));
        }
        if let Some(aliases) = plan.aliases.get(&node) {
            for (alias, name) in aliases {
                text.push_str(&format!("{alias} = {name}\n"));
            }
        }
        if node == entry
            && let Some(wrapper) = wrapper
        {
            text.push_str("\n\n");
            text.push_str(wrapper);
        }
    }
    text.push_str("\n\n");
    text.push_str(inputs);
    parts.push(Part {
        range: generated_from..text.len(),
        origin: None,
    });
    Emitted {
        text,
        parts,
        entry_renamed: entry_info.is_some_and(|i| i.name != ENTRY),
    }
}

/// What re-parsing one top-level piece of a program found.
#[derive(Debug, Clone, Default)]
pub(crate) struct PieceCheck {
    /// 1-based line (within the piece) of its first syntax error.
    error_line: Option<u32>,
    /// Why it could not be parsed at all.
    problem: Option<String>,
    /// Names it binds at top level (definitions and imports).
    bound: Vec<String>,
    /// Global names it reads.
    reads: Vec<String>,
    /// It holds a star import.
    star: bool,
}

impl PieceCheck {
    /// Re-parses `text` (one or more top-level statements) and analyses its names.
    pub(crate) fn new(text: &str, limits: &Limits) -> PieceCheck {
        let index = FileIndex::build("<program>", text.as_bytes(), &Standalone, limits);
        if let Some(problem) = &index.problem {
            return PieceCheck {
                problem: Some(problem.reason("program")),
                ..Default::default()
            };
        }
        let mut bound: Vec<String> = index.defs.keys().cloned().collect();
        bound.extend(index.imports.keys().cloned());
        let mut reads: Vec<String> = index
            .stmts
            .iter()
            .flat_map(|s| s.names.reads.iter().map(|r| r.name.clone()))
            .collect();
        reads.sort_unstable();
        reads.dedup();
        PieceCheck {
            error_line: index.error_line,
            problem: None,
            bound,
            reads,
            star: !index.stars.is_empty(),
        }
    }
}

/// Re-parse results of statement texts, shared by the programs of one repository (the same
/// dependency is inlined into many programs).
#[derive(Default)]
pub(crate) struct PieceCache {
    map: Mutex<HashMap<String, Arc<PieceCheck>>>,
}

impl PieceCache {
    fn get(&self, text: &str, limits: &Limits) -> Arc<PieceCheck> {
        if let Ok(map) = self.map.lock()
            && let Some(found) = map.get(text)
        {
            return Arc::clone(found);
        }
        let check = Arc::new(PieceCheck::new(text, limits));
        if let Ok(mut map) = self.map.lock() {
            map.insert(text.to_string(), Arc::clone(&check));
        }
        check
    }
}

/// Checks an emitted program stretch by stretch, with the same verdict as [`validate`]:
///
/// - generated text (imports, alias lines, input functions) and inlined statements whose text
///   was edited (module attribute chains flattened, local imports replaced) are re-parsed with
///   tree-sitter in their emitted form, once per distinct text in the repository (`cache`);
/// - an inlined statement whose text was not edited (or only had the entry's class name
///   swapped for `Model`, one identifier for another) is byte for byte a top-level statement
///   that tree-sitter already parsed without ERROR or MISSING nodes in its file (extraction
///   refuses statements with syntax errors), so its parse and its names analysis are reused.
///
/// A module is a sequence of top-level statements, each starting at column 0 and ending with a
/// newline, so the program parses exactly when each stretch does. `verify_whole_program`
/// switches to [`validate`] (one parse of the whole text) instead.
pub(crate) fn validate_pieces(
    emitted: &Emitted,
    repo: &Repo,
    entry: NodeId,
    cache: &PieceCache,
    limits: &Limits,
) -> Result<(), Invalid> {
    let text = &emitted.text;
    let mut bound: HashSet<&str> = HashSet::new();
    let mut star = false;
    let mut checks: Vec<Arc<PieceCheck>> = Vec::new();
    let mut reads: Vec<&String> = Vec::new();
    for part in &emitted.parts {
        match part.origin {
            Some((node, false)) => {
                let stmt = &repo.files[node.0].stmts[node.1];
                if let Some(line) = stmt.error_line {
                    return Err(Invalid::syntax_error(line));
                }
                let renamed = match (&stmt.kind, node == entry && emitted.entry_renamed) {
                    (StmtKind::Class(info), true) => Some(info.name.as_str()),
                    _ => None,
                };
                for d in &stmt.names.defines {
                    if Some(d.as_str()) == renamed {
                        bound.insert(ENTRY);
                    } else {
                        bound.insert(d.as_str());
                    }
                }
                reads.extend(stmt.names.reads.iter().map(|r| &r.name));
            }
            _ => {
                let piece = text.get(part.range.clone()).unwrap_or("");
                let check = cache.get(piece, limits);
                if let Some(problem) = &check.problem {
                    return Err(Invalid::unparsable(problem));
                }
                if let Some(line) = check.error_line {
                    let offset = text[..part.range.start].matches('\n').count() as u32;
                    return Err(Invalid::syntax_error(offset + line));
                }
                checks.push(check);
            }
        }
    }
    for check in &checks {
        bound.extend(check.bound.iter().map(|s| s.as_str()));
        star |= check.star;
        reads.extend(check.reads.iter());
    }
    undefined_check(&bound, reads.into_iter(), star)
}

fn undefined_check<'a>(
    bound: &HashSet<&str>,
    reads: impl Iterator<Item = &'a String>,
    star: bool,
) -> Result<(), Invalid> {
    for name in ["Model", "get_inputs", "get_init_inputs"] {
        if !bound.contains(name) {
            return Err(Invalid {
                code: ModuleReason::EmittedProgramLacks,
                text: format!("emitted_program_lacks: {name}"),
            });
        }
    }
    if star {
        return Ok(());
    }
    let mut undefined: Vec<&str> = reads
        .map(|s| s.as_str())
        .filter(|n| !bound.contains(n) && !is_builtin(n))
        .collect();
    undefined.sort_unstable();
    match undefined.first() {
        Some(first) => Err(Invalid {
            code: ModuleReason::UndefinedName,
            text: format!("undefined_name: {first}"),
        }),
        None => Ok(()),
    }
}

/// The import lines of a program: the plan's plus `import torch` (the input functions use it),
/// `__future__` imports first, then sorted.
pub(crate) fn import_lines(plan: &Plan) -> Vec<String> {
    let mut lines: Vec<String> = plan.imports.iter().cloned().collect();
    if !plan.imports.contains("import torch") {
        lines.push("import torch".to_string());
    }
    lines.sort_by(|a, b| {
        (!a.starts_with("from __future__"), a).cmp(&(!b.starts_with("from __future__"), b))
    });
    lines
}

/// Why an emitted program is refused: the row's reason code and words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Invalid {
    /// The code.
    pub(crate) code: ModuleReason,
    /// The reason in words.
    pub(crate) text: String,
}

impl Invalid {
    fn syntax_error(line: u32) -> Self {
        Invalid {
            code: ModuleReason::EmittedSyntaxError,
            text: format!("emitted_syntax_error at line {line}"),
        }
    }

    fn unparsable(problem: impl std::fmt::Display) -> Self {
        Invalid {
            code: ModuleReason::EmittedProgramUnparsable,
            text: format!("emitted_program_unparsable: {problem}"),
        }
    }
}

/// Checks a whole emitted program with one re-parse; the error is the row's reason.
pub(crate) fn validate(program: &str, limits: &Limits) -> Result<(), Invalid> {
    let check = PieceCheck::new(program, limits);
    if let Some(problem) = &check.problem {
        return Err(Invalid::unparsable(problem));
    }
    if let Some(line) = check.error_line {
        return Err(Invalid::syntax_error(line));
    }
    let bound: HashSet<&str> = check.bound.iter().map(|s| s.as_str()).collect();
    undefined_check(&bound, check.reads.iter(), check.star)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn limits() -> Limits {
        Limits {
            max_file_bytes: 1 << 20,
            parse_budget: Duration::from_secs(5),
            max_depth: 400,
        }
    }

    const INPUTS: &str =
        "def get_inputs():\n    return []\n\n\ndef get_init_inputs():\n    return []\n";

    #[test]
    fn valid_program_passes() {
        let p = format!(
            "import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n    def forward(self, x):\n        return torch.relu(x)\n\n\n{INPUTS}"
        );
        validate(&p, &limits()).unwrap();
    }

    #[test]
    fn undefined_and_broken_programs_are_caught() {
        let p = format!(
            "import torch\n\n\nclass Model(nn.Module):\n    def forward(self, x):\n        return helper(x)\n\n\n{INPUTS}"
        );
        assert_eq!(
            validate(&p, &limits()).map_err(|e| (e.code, e.text)),
            Err((ModuleReason::UndefinedName, "undefined_name: helper".into()))
        );
        let p = format!("import torch\n\n\nclass Model(torch.nn.Module:\n    pass\n\n\n{INPUTS}");
        let err = validate(&p, &limits()).unwrap_err();
        assert!(err.text.starts_with("emitted_syntax_error"));
        assert_eq!(err.code, ModuleReason::EmittedSyntaxError);
        let p = "import torch\n\n\nclass Model(torch.nn.Module):\n    pass\n".to_string();
        assert_eq!(
            validate(&p, &limits()).map_err(|e| (e.code, e.text)),
            Err((
                ModuleReason::EmittedProgramLacks,
                "emitted_program_lacks: get_inputs".into()
            ))
        );
    }
}
