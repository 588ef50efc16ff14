//! Assembling a KernelBench-format program from a closure, and checking it: it must parse
//! without ERROR or MISSING nodes and read no global name that it does not define or import.

use std::collections::HashSet;

use crate::builtins::is_builtin;
use crate::closure::{NodeId, Plan};
use crate::imports::Target;
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

/// The program: imports, the closure in order (entry renamed to `Model`), alias lines, then
/// `get_inputs()` and `get_init_inputs()` (given as `inputs`).
pub(crate) fn program(repo: &Repo, entry: NodeId, plan: &Plan, inputs: &str) -> String {
    let mut text = String::new();
    for line in import_lines(plan) {
        text.push_str(&line);
        text.push('\n');
    }
    let entry_info = match &repo.files[entry.0].stmts[entry.1].kind {
        StmtKind::Class(info) => Some(info),
        _ => None,
    };
    for &node in &plan.order {
        text.push_str("\n\n");
        let rename = if node == entry {
            entry_info.filter(|i| i.name != ENTRY).map(|i| i.name_range)
        } else {
            None
        };
        text.push_str(&statement_text(repo, node, plan, rename));
        text.push('\n');
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
    }
    text.push_str("\n\n");
    text.push_str(inputs);
    text
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

/// Checks an emitted program; the error is the row's reason.
pub(crate) fn validate(program: &str, limits: &Limits) -> Result<(), String> {
    let never_local = |_: &Target| false;
    let index = FileIndex::build("<program>", program.as_bytes(), &never_local, limits);
    if let Some(problem) = &index.problem {
        return Err(format!(
            "emitted_program_unparsable: {}",
            problem.reason("program")
        ));
    }
    if let Some(line) = index.error_line {
        return Err(format!("emitted_syntax_error at line {line}"));
    }
    let mut defined: HashSet<&str> = index.defs.keys().map(|s| s.as_str()).collect();
    defined.extend(index.imports.keys().map(|s| s.as_str()));
    let has_star = !index.stars.is_empty();
    for name in ["Model", "get_inputs", "get_init_inputs"] {
        if !defined.contains(name) {
            return Err(format!("emitted_program_lacks: {name}"));
        }
    }
    let mut undefined: Vec<&str> = Vec::new();
    for stmt in &index.stmts {
        for read in &stmt.names.reads {
            let name = read.name.as_str();
            if !defined.contains(name) && !is_builtin(name) && !has_star {
                undefined.push(name);
            }
        }
    }
    undefined.sort_unstable();
    undefined.dedup();
    if let Some(first) = undefined.first() {
        return Err(format!("undefined_name: {first}"));
    }
    Ok(())
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
            validate(&p, &limits()),
            Err("undefined_name: helper".into())
        );
        let p = format!("import torch\n\n\nclass Model(torch.nn.Module:\n    pass\n\n\n{INPUTS}");
        assert!(
            validate(&p, &limits())
                .unwrap_err()
                .starts_with("emitted_syntax_error")
        );
        let p = "import torch\n\n\nclass Model(torch.nn.Module):\n    pass\n".to_string();
        assert_eq!(
            validate(&p, &limits()),
            Err("emitted_program_lacks: get_inputs".into())
        );
    }
}
