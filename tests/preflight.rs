//! A task whose reference cannot run on the evaluation device reaches neither the teacher nor a
//! dataset: the rollout's preflight on the real evaluator pool (two CPU workers standing for two
//! devices, Triton's interpreter standing for the GPU) refuses it before any teacher call, the
//! report counts it with its error, and select and export make no sample of it, while a healthy
//! task beside it is evolved and exported as usual.

use std::path::{Path, PathBuf};

use ksmith_cli::stages::Stage;
use ksmith_core::report::StageReport;
use ksmith_core::table::{Table, read_table, write_table};
use ksmith_core::tables::{ChainRow, GrpoRow, SftRow, StepRow, TaskRow, env_path_in};
use ksmith_teacher::loopback::{LoopbackServer, Reply};

use crate::e2e::session;

fn candidates() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("python/tests/candidates")
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(candidates().join(rel)).expect("a test candidate")
}

fn task(id: &str, program: &str, cluster: i32) -> TaskRow {
    TaskRow {
        task_id: id.into(),
        repo: "demo".into(),
        class_name: "Model".into(),
        program: program.into(),
        family: "elementwise".into(),
        level: 1,
        cluster,
        license: None,
        selected_as: "center".into(),
        alt_sizes: "[]".into(),
    }
}

/// Every file under `dir` as text (its rows as JSON for a Parquet file), read by `python`
/// (pyarrow), one `(path, text)` each.
fn texts_under(python: &Path, dir: &Path) -> Vec<(String, String)> {
    const DUMP: &str = r#"
import json, pathlib, sys
import pyarrow.parquet as pq
out = {}
for p in sorted(pathlib.Path(sys.argv[1]).rglob("*")):
    if p.is_file():
        out[str(p)] = json.dumps(pq.read_table(p).to_pylist(), default=str) if p.suffix == ".parquet" else p.read_text(errors="replace")
print(json.dumps(out))
"#;
    let done = std::process::Command::new(python)
        .arg("-c")
        .arg(DUMP)
        .arg(dir)
        .output()
        .expect("python runs");
    assert!(
        done.status.success(),
        "{}",
        String::from_utf8_lossy(&done.stderr)
    );
    let files: std::collections::BTreeMap<String, String> =
        serde_json::from_slice(&done.stdout).expect("the dump is JSON");
    files.into_iter().collect()
}

#[test]
fn a_task_whose_reference_fails_on_the_device_reaches_no_teacher_and_no_dataset() {
    let dir = tempfile::tempdir().expect("tempdir");
    let work = dir.path().join("work");
    std::fs::create_dir_all(&work).expect("mkdir");
    let healthy = read("tasks/elementwise.py");
    let swin = read("tasks/cpu_tensor_in_forward.py");
    // The same program runs where the probe runs it: a plain CPU interpreter.
    let python = ksmith_core::python_env::resolve_python(None).expect("the ksmith Python env");
    let plain = std::process::Command::new(&python)
        .arg("-c")
        .arg(format!("{swin}\nprint(Model()(*get_inputs()).shape)\n"))
        .env_remove("TRITON_INTERPRET")
        .output()
        .expect("python runs");
    assert!(
        plain.status.success(),
        "{}",
        String::from_utf8_lossy(&plain.stderr)
    );
    write_table(
        &TaskRow::path_in(&work),
        &[task("healthy", &healthy, 0), task("swin-v2", &swin, 1)],
        "tasks-fp",
    )
    .expect("tasks written");

    // Every request gets the honest Triton program of the healthy task.
    let answer = format!("```python\n{}```\n", read("honest/elementwise.py"));
    let teacher = LoopbackServer::start(move |_, _| Reply::chat(answer.clone())).expect("teacher");
    let config = format!(
        r#"[rollout]
iterations = 2
num_islands = 1
parallel_tasks = 2
measure = false

[select]
grpo_rule = "all_steps"

[teacher]
max_retries = 0
timeout_s = 60.0

[[teacher.endpoints]]
url = "{url}"
model = "scripted"

[eval]
cpu_workers = 2
"#,
        url = teacher.url()
    );
    let s = session(dir.path(), &config);
    s.run(&[Stage::Rollout, Stage::Select, Stage::Export])
        .expect("rollout, select and export run");

    // No teacher call for the refused task: only the healthy task's program was shown.
    let received = teacher.received();
    assert_eq!(received.len(), 2, "two steps of the healthy task");
    for r in &received {
        let user = r.message("user");
        assert!(user.contains("relu(x) * y + x."), "{user}");
        assert!(!user.contains("Swin-V2"), "{user}");
    }

    // Counted and named.
    let text = std::fs::read_to_string(StageReport::path_in(&work, "rollout")).expect("report");
    let report: StageReport = serde_json::from_str(&text).expect("report JSON");
    let error = "RuntimeError: Expected all tensors to be on the same device, but found at least \
                 two devices, cuda:0 and cpu!";
    assert_eq!(report.counters["tasks_refused_reference"], 1, "{report:?}");
    assert_eq!(
        report.counters[&format!("tasks_refused_reference/{error}")],
        1
    );
    assert_eq!(report.counters["tasks_done"], 1);
    assert_eq!(
        report.counters["eval_devices_failed"], 0,
        "a reference's own failure takes no device out"
    );
    let endings: serde_json::Value = serde_json::from_slice(
        &std::fs::read(ksmith_evolve::endings_path(&work)).expect("endings"),
    )
    .expect("endings JSON");
    assert_eq!(endings["swin-v2"]["ending"], "refused_reference");
    let reason = endings["swin-v2"]["reason"].as_str().expect("a reason");
    assert!(reason.ends_with(error), "{reason}");

    // Only the healthy task's steps, and samples of it alone.
    let steps: Vec<StepRow> = read_table(&StepRow::path_in(&work)).expect("steps");
    assert_eq!(steps.len(), 2);
    assert!(steps.iter().all(|r| r.task_id == "healthy"));
    assert!(
        steps[0].correct || steps[1].correct,
        "{:?}",
        steps[0].eval_json
    );
    let sft: Vec<SftRow> = read_table(&SftRow::path_in(&work)).expect("sft");
    let grpo: Vec<GrpoRow> = read_table(&GrpoRow::path_in(&work)).expect("grpo");
    let env: Vec<GrpoRow> = read_table(&env_path_in(&work)).expect("env");
    let chains: Vec<ChainRow> = read_table(&ChainRow::path_in(&work)).expect("chains");
    assert!(!sft.is_empty() && !grpo.is_empty() && !env.is_empty());
    assert!(sft.iter().all(|r| r.task_id == "healthy"));
    assert!(grpo.iter().all(|r| r.task_id == "healthy"));
    assert!(env.iter().all(|r| r.task_id == "healthy"));
    assert!(chains.iter().all(|r| r.task_id == "healthy"));

    // The exported datasets show the healthy reference and never the refused one.
    let exported = texts_under(&python, &work.join("datasets"));
    assert!(
        exported.iter().any(|(_, t)| t.contains("relu(x) * y + x.")),
        "the healthy task is exported"
    );
    for (path, text) in &exported {
        assert!(
            !text.contains("Swin-V2") && !text.contains("swin-v2"),
            "{path} holds the refused task"
        );
    }
}
