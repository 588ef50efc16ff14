//! `ksmith import-tasks`: turns a folder of KernelBench-format programs into `tasks.parquet`.
//!
//! For curated task sets (a KernelBench checkout, hand-written problems with realistic sizes)
//! that should be evolved as they are, without crawling: every `*.py` file under the folder that
//! defines `class Model`, `get_inputs` and `get_init_inputs` becomes a task, labelled with a
//! family and level by the cluster stage's rules; other files are listed as skipped, and so is a
//! program whose `get_init_inputs()` returns `[args, kwargs]` (`init_contract`: the evaluator
//! builds `Model(*get_init_inputs())`). The rollout
//! stage then reads the table like one written by cluster.

use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail};
use ksmith_core::fingerprint::Fingerprint;
use ksmith_core::ids::content_id;
use ksmith_core::report::StageReport;
use ksmith_core::table::{Table, write_table};
use ksmith_core::tables::TaskRow;

/// The name the import's report is saved under.
pub const STAGE: &str = "import-tasks";

fn python_files(dir: &Path, out: &mut Vec<PathBuf>) -> anyhow::Result<()> {
    let entries =
        std::fs::read_dir(dir).with_context(|| format!("cannot read {}", dir.display()))?;
    for entry in entries {
        let entry = entry.with_context(|| format!("cannot read {}", dir.display()))?;
        let kind = entry.file_type()?;
        let path = entry.path();
        if kind.is_dir() {
            python_files(&path, out)?;
        } else if kind.is_file() && path.extension().is_some_and(|e| e == "py") {
            out.push(path);
        }
    }
    Ok(())
}

/// True when `program` looks like a KernelBench reference (a `Model` class and both input
/// functions at the top level).
fn is_reference(program: &str) -> bool {
    let top = |prefix: &str| program.lines().any(|l| l.starts_with(prefix));
    top("class Model(") && top("def get_inputs(") && top("def get_init_inputs(")
}

/// Writes `tasks.parquet` in `workdir` from the programs under `from`.
pub fn import_tasks(from: &Path, workdir: &Path) -> anyhow::Result<StageReport> {
    let mut files = Vec::new();
    python_files(from, &mut files)?;
    files.sort();
    let mut report = StageReport::new(STAGE);
    let mut fingerprint = Fingerprint::new(STAGE, 1);
    let mut tasks = Vec::new();
    let source = from
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| from.display().to_string());
    for path in &files {
        report.rows_read += 1;
        let rel = path
            .strip_prefix(from)
            .unwrap_or(path)
            .display()
            .to_string();
        let Ok(program) = std::fs::read_to_string(path) else {
            report.drop_row("not_utf8");
            continue;
        };
        if !is_reference(&program) {
            report.drop_row("not_a_kernelbench_program");
            continue;
        }
        if let Some(why) = ksmith_cluster::init_inputs_violation(&program) {
            eprintln!("import-tasks: {rel} skipped: {why}");
            report.drop_row("init_contract");
            continue;
        }
        let label = ksmith_cluster::family::label(&program, "Model");
        let task_id = content_id(&program);
        fingerprint = fingerprint.with(&rel, &task_id);
        tasks.push(TaskRow {
            task_id,
            repo: format!("{source}/{rel}"),
            class_name: "Model".to_string(),
            program,
            family: label.family.to_string(),
            level: label.level,
            cluster: -1,
            license: None,
            selected_as: "imported".to_string(),
            // The evaluator derives size sets from the program's own constants.
            alt_sizes: "[]".to_string(),
        });
    }
    if tasks.is_empty() {
        bail!(
            "{}: no KernelBench-format program (class Model, get_inputs, get_init_inputs) found",
            from.display()
        );
    }
    tasks.sort_by(|a, b| a.task_id.cmp(&b.task_id));
    tasks.dedup_by(|a, b| a.task_id == b.task_id);
    let fp = fingerprint.finish();
    std::fs::create_dir_all(workdir)
        .with_context(|| format!("cannot create {}", workdir.display()))?;
    write_table(&TaskRow::path_in(workdir), &tasks, &fp)?;
    report.rows_written = tasks.len() as u64;
    report.fingerprint = fp;
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ksmith_core::table::read_table;

    const RELU: &str = "import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n    \
def forward(self, x):\n        return torch.relu(x)\n\n\ndef get_inputs():\n    return \
[torch.randn(1024, 1024)]\n\n\ndef get_init_inputs():\n    return []\n";

    #[test]
    fn imports_references_and_skips_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("problems");
        std::fs::create_dir_all(src.join("level1")).unwrap();
        std::fs::write(src.join("level1/relu.py"), RELU).unwrap();
        std::fs::write(src.join("level1/copy.py"), RELU).unwrap();
        std::fs::write(src.join("helper.py"), "def f():\n    return 1\n").unwrap();
        std::fs::write(src.join("notes.txt"), "not python").unwrap();
        let work = dir.path().join("work");
        let report = import_tasks(&src, &work).unwrap();
        assert_eq!(report.rows_read, 3);
        assert_eq!(report.dropped.get("not_a_kernelbench_program"), Some(&1));
        let tasks: Vec<TaskRow> = read_table(&TaskRow::path_in(&work)).unwrap();
        assert_eq!(tasks.len(), 1, "identical programs are one task");
        assert_eq!(tasks[0].family, "activation");
        assert_eq!(tasks[0].level, 1);
        assert_eq!(tasks[0].selected_as, "imported");
    }

    #[test]
    fn a_folder_without_programs_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let err = import_tasks(dir.path(), &dir.path().join("w")).unwrap_err();
        assert!(
            err.to_string().contains("no KernelBench-format program"),
            "{err}"
        );
    }
}
