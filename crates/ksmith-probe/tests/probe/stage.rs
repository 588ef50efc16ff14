//! The stage end to end: modules.parquet in, probes.parquet out, the fingerprint skip, repair
//! written back into the program, and the LLM repair with a fake chat client.

use std::sync::Mutex;

use crate::common::{module, program};
use ksmith_core::chat::{ChatClient, ChatError, ChatRequest, ChatResponse};
use ksmith_core::context::StageContext;
use ksmith_core::progress::Tracker;
use ksmith_core::table::{Table, read_table, write_table};
use ksmith_core::tables::{ModuleRow, ModuleStatus, ProbeRow, ProbeStatus};
use ksmith_probe::{ProbeConfig, probe_programs, run, run_with_chat};

/// The probe alone (the sizing step has tests of its own, `sizing.rs`).
fn quick() -> ProbeConfig {
    let mut cfg = ProbeConfig {
        timeout_s: 20.0,
        ..Default::default()
    };
    cfg.sizing.enabled = false;
    cfg
}

#[test]
fn run_writes_one_row_per_probed_module_and_skips_when_up_to_date() {
    let _workers = crate::common::workers_shared();
    let dir = tempfile::tempdir().unwrap();
    let mut rejected = module("rejected", String::new());
    rejected.status = ModuleStatus::Rejected;
    rejected.program = None;
    let modules = vec![
        module("wrong_conv", program("wrong_conv")),
        rejected,
        module("ok_linear", program("ok_linear")),
    ];
    write_table(&ModuleRow::path_in(dir.path()), &modules, "extract-fp").unwrap();
    let ctx = StageContext::for_tests(dir.path());
    let report = run(&quick(), &ctx).unwrap();
    assert!(!report.skipped);
    assert_eq!(report.rows_read, 3);
    assert_eq!(report.rows_written, 2);
    assert_eq!(report.counters.get("repaired"), Some(&1));
    let rows: Vec<ProbeRow> = read_table(&ProbeRow::path_in(dir.path())).unwrap();
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0].module_id, "wrong_conv");
    assert_eq!(rows[1].module_id, "ok_linear");

    // The conv module needed a 4-D input with 3 channels, larger than its 7x7 kernel.
    let conv = &rows[0];
    assert_eq!(conv.status, ProbeStatus::Ok, "{conv:?}");
    assert!(!conv.repair_steps.is_empty());
    let text = conv.program.as_deref().unwrap();
    assert!(
        text.contains("def get_inputs():\n    return [torch.rand([4, 3, "),
        "{text}"
    );
    assert!(
        !text.contains("torch.rand(4, 4)"),
        "the old get_inputs is gone: {text}"
    );
    assert!(
        text.contains("return [3, 8, 7]"),
        "init args unchanged: {text}"
    );
    assert_eq!(conv.output_dtypes, vec!["torch.float32".to_string()]);
    assert_eq!(conv.param_count, Some(3 * 8 * 7 * 7 + 8 + 8 + 8));
    assert!(conv.attempts >= 4);
    assert!(conv.cpu_time_ms > 0.0);

    // An unchanged program is kept byte for byte.
    let lin = &rows[1];
    assert_eq!(lin.status, ProbeStatus::Ok);
    assert!(lin.repair_steps.is_empty());
    assert_eq!(lin.program.as_deref(), Some(program("ok_linear").as_str()));
    assert_eq!(lin.param_count, Some(16 * 32 + 32));
    assert!(lin.forward_ms.is_some());

    let again = run(&quick(), &ctx).unwrap();
    assert!(again.skipped);
    let other = ProbeConfig { seed: 7, ..quick() };
    assert!(!run(&other, &ctx).unwrap().skipped);
}

#[test]
fn the_emitted_program_runs_as_it_stands() {
    let _workers = crate::common::workers_shared();
    // Probe the repaired program again: it must run without any repair.
    let first = module("wrong_conv", program("wrong_conv"));
    let out = probe_programs(&[&first], &quick(), 1, None, &Tracker::hidden()).unwrap();
    let repaired = out.rows[0].program.clone().unwrap();
    let second = module("again", repaired);
    let out = probe_programs(&[&second], &quick(), 1, None, &Tracker::hidden()).unwrap();
    assert_eq!(out.rows[0].status, ProbeStatus::Ok);
    assert!(out.rows[0].repair_steps.is_empty(), "{:?}", out.rows[0]);
}

/// Answers every request with a fixed text and records the prompts.
struct FakeChat {
    answer: String,
    prompts: Mutex<Vec<String>>,
}

impl ChatClient for FakeChat {
    fn chat(&self, request: &ChatRequest) -> Result<ChatResponse, ChatError> {
        let last = request.messages.last().expect("a message");
        self.prompts
            .lock()
            .expect("prompts lock")
            .push(last.content.clone());
        Ok(ChatResponse {
            content: self.answer.clone(),
            reasoning: None,
            finish_reason: Some("stop".into()),
            model: "fake".into(),
            prompt_tokens: 1,
            completion_tokens: 1,
            cached: false,
        })
    }
}

#[test]
fn llm_repair_is_rerun_and_kept_only_when_it_runs() {
    let _workers = crate::common::workers_shared();
    let good = FakeChat {
        answer: "Sure.\n```python\ndef get_inputs():\n    return [{\"features\": torch.rand(4, 8)}]\n```\n"
            .into(),
        prompts: Mutex::new(Vec::new()),
    };
    let m = module("needs_dict", program("needs_dict"));
    let cfg = ProbeConfig {
        llm_repair: true,
        max_steps: 4,
        ..quick()
    };
    // Off by default: the client is not asked.
    let off = probe_programs(&[&m], &quick(), 1, Some(&good), &Tracker::hidden()).unwrap();
    assert_eq!(off.rows[0].status, ProbeStatus::Failed);
    assert!(good.prompts.lock().unwrap().is_empty());

    let out = probe_programs(&[&m], &cfg, 1, Some(&good), &Tracker::hidden()).unwrap();
    let row = &out.rows[0];
    assert_eq!(row.status, ProbeStatus::Ok, "{row:?}");
    assert!(
        row.repair_steps
            .iter()
            .any(|s| s.starts_with("llm: replaced"))
    );
    assert!(
        row.program
            .as_deref()
            .unwrap()
            .contains("\"features\": torch.rand(4, 8)")
    );
    assert_eq!(out.llm_fixed, 1);
    let prompt = good.prompts.lock().unwrap()[0].clone();
    assert!(prompt.contains("class Model"), "{prompt}");

    // A wrong answer is run, fails, and the module keeps its failure.
    let bad = FakeChat {
        answer: "```python\ndef get_inputs():\n    return [torch.rand(4, 8)]\n```".into(),
        prompts: Mutex::new(Vec::new()),
    };
    let out = probe_programs(&[&m], &cfg, 1, Some(&bad), &Tracker::hidden()).unwrap();
    let row = &out.rows[0];
    assert_eq!(row.status, ProbeStatus::Failed);
    assert!(row.program.is_none());
    assert!(
        row.repair_steps
            .iter()
            .any(|s| s.starts_with("llm: the answer did not run")),
        "{row:?}"
    );
    // Prose without code is not run at all.
    let prose = FakeChat {
        answer: "I cannot help with that.".into(),
        prompts: Mutex::new(Vec::new()),
    };
    let ctx_dir = tempfile::tempdir().unwrap();
    write_table(
        &ModuleRow::path_in(ctx_dir.path()),
        std::slice::from_ref(&m),
        "fp",
    )
    .unwrap();
    let ctx = StageContext::for_tests(ctx_dir.path());
    let report = run_with_chat(&cfg, &ctx, Some(&prose)).unwrap();
    assert_eq!(report.counters.get("llm_asked"), Some(&1));
    let rows: Vec<ProbeRow> = read_table(&ProbeRow::path_in(ctx_dir.path())).unwrap();
    assert!(
        rows[0]
            .repair_steps
            .iter()
            .any(|s| s.contains("defines neither"))
    );
}

#[test]
fn a_missing_interpreter_is_one_clear_error() {
    let _workers = crate::common::workers_shared();
    let m = module("ok_linear", program("ok_linear"));
    let cfg = ProbeConfig {
        python: "/nonexistent/ksmith/python".into(),
        ..quick()
    };
    let err = probe_programs(&[&m], &cfg, 1, None, &Tracker::hidden()).unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("/nonexistent/ksmith/python") && msg.contains("make venv"),
        "{msg}"
    );
}

#[test]
fn a_rerun_probes_only_new_programs() {
    let _workers = crate::common::workers_shared();
    let dir = tempfile::tempdir().unwrap();
    let path = ModuleRow::path_in(dir.path());
    let first = vec![module("ok_linear", program("ok_linear"))];
    write_table(&path, &first, "extract-1").unwrap();
    let ctx = StageContext::for_tests(dir.path());
    let report = run(&quick(), &ctx).unwrap();
    assert_eq!(report.counters.get("reused"), Some(&0));

    // The next extract adds a module; the old one keeps its row, in input order.
    let mut renamed = module("ok_linear", program("ok_linear"));
    renamed.repo = "tests/other".into();
    let second = vec![module("wrong_conv", program("wrong_conv")), renamed];
    write_table(&path, &second, "extract-2").unwrap();
    let report = run(&quick(), &ctx).unwrap();
    assert_eq!(report.counters.get("reused"), Some(&1));
    let rows: Vec<ProbeRow> = read_table(&ProbeRow::path_in(dir.path())).unwrap();
    let ids: Vec<&str> = rows.iter().map(|r| r.module_id.as_str()).collect();
    assert_eq!(ids, ["wrong_conv", "ok_linear"]);
    assert_eq!(rows[1].repo, "tests/other");
    assert_eq!(rows[1].status, ProbeStatus::Ok);
    assert_eq!(rows[0].status, ProbeStatus::Ok);

    // Another config probes everything again; so does --force.
    let other = ProbeConfig {
        max_steps: 15,
        ..quick()
    };
    write_table(&path, &second, "extract-3").unwrap();
    assert_eq!(run(&other, &ctx).unwrap().counters.get("reused"), Some(&0));
    let mut forced = StageContext::for_tests(dir.path());
    forced.force = true;
    assert_eq!(
        run(&other, &forced).unwrap().counters.get("reused"),
        Some(&0)
    );
}
