//! Writes a synthetic selection (sft.parquet, grpo.parquet, env.parquet, chains.parquet,
//! selection.json, repos.parquet) into a work directory and runs the export stage on it.
//!
//! Used by the Python tests (`python/tests/test_export.py`, `test_reward.py`), which load the
//! exported datasets with pyarrow and `datasets` and score answers with the reward function:
//!
//! ```text
//! cargo run -q -p ksmith-export --example export_fixture -- <workdir> [<sft rows> <grpo rows> [<env rows> <chains>]]
//! ```
//!
//! `KSMITH_FIXTURE_TOKENIZER=<tokenizer.json>` counts tokens with that tokenizer (the trainer
//! tests pass the one of their test model). Prints a JSON summary (rows per dataset and split)
//! on stdout. Every GRPO row carries a real
//! tiny task (a scaled ReLU reference and a correct Triton parent), so the reward function can
//! evaluate answers against it in the Triton CPU interpreter; every environment start is that
//! task's seed (the reference as the editable block, as the rollout builds it), so an agent's
//! evaluations run too; every chain is a failing translation, then the correct program.

use std::collections::BTreeMap;
use std::path::PathBuf;

use ksmith_core::chat::ChatMessage;
use ksmith_core::context::StageContext;
use ksmith_core::evaluation::EvalStatus;
use ksmith_core::table::{Table, write_table};
use ksmith_core::tables::{
    ChainRow, ChainTurn, GrpoRow, GrpoSelection, RepoRow, RepoStatus, SftKind, SftRow, SourceKind,
    Split, env_path_in,
};
use ksmith_export::{ExportConfig, run};

const REFERENCE: &str = include_str!("../tests/data/relu_scale_reference.py");
const PARENT: &str = include_str!("../tests/data/relu_scale_triton.py");
const FAMILIES: [&str; 3] = ["activation", "normalization", "attention"];
/// The imports the rollout's seed program puts before the editable block.
const SEED_HEADER: &str = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\
                           import triton\nimport triton.language as tl\n\n";

/// The seed program of the task: the reference as the editable block (as the rollout builds it).
fn seed() -> String {
    format!("{SEED_HEADER}# EVOLVE-BLOCK-START\n{REFERENCE}# EVOLVE-BLOCK-END\n")
}

/// A translation that runs but computes the wrong thing (no ReLU).
fn wrong_program() -> String {
    PARENT.replace("tl.maximum(x, 0.0) * scale", "x * scale")
}

fn prompt(i: usize, current: &str) -> Vec<ChatMessage> {
    vec![
        ChatMessage::new(
            "system",
            "You are an expert in writing fast, correct Triton kernels.",
        ),
        ChatMessage::new(
            "user",
            format!(
                "Task {i}. Reference:\n```python\n{REFERENCE}```\nCurrent program:\n\
                 ```python\n{current}```\nMake ModelNew faster; answer with the full program."
            ),
        ),
    ]
}

fn split(i: usize) -> Split {
    if i % 5 == 4 {
        Split::Validation
    } else {
        Split::Train
    }
}

fn grpo_rows(n: usize) -> Vec<GrpoRow> {
    (0..n)
        .map(|i| {
            let first = i % 4 == 0;
            let timed = i % 3 != 0;
            let current = if first { REFERENCE } else { PARENT };
            GrpoRow {
                sample_id: format!("grpo-{i:03}"),
                backend: ksmith_core::evaluation::Backend::Triton,
                selection: if first {
                    GrpoSelection::FirstSteps
                } else {
                    GrpoSelection::BestSteps
                },
                split: split(i),
                task_id: "relu_scale".to_string(),
                step_id: format!("step-{i:03}"),
                parent_step_id: (!first).then(|| format!("step-{:03}", i.saturating_sub(1))),
                iteration: i as u32,
                island: (i % 2) as u32,
                family: FAMILIES[i % 3].to_string(),
                level: (i % 3) as u8 + 1,
                cluster: if i % 7 == 0 { -1 } else { (i % 5) as i32 },
                prompt: prompt(i, current),
                prompt_tokens: 300 + i as u64,
                token_counter: "approx_chars_div_4".to_string(),
                reference_program: REFERENCE.to_string(),
                parent_program: current.to_string(),
                parent_speedup: timed.then_some(if first { 1.0 } else { 1.25 }),
                parent_runtime_ms: timed.then_some(0.008),
                eager_runtime_ms: timed.then_some(0.010),
                hardware: if timed { "NVIDIA H200" } else { "" }.to_string(),
                parent_labels: Default::default(),
                stamp: Default::default(),
                repo: if i % 2 == 0 { "org/vision" } else { "org/text" }.to_string(),
                license: Some(if i % 2 == 0 { "MIT" } else { "Apache-2.0" }.to_string()),
            }
        })
        .collect()
}

fn env_rows(n: usize) -> Vec<GrpoRow> {
    let seed = seed();
    (0..n)
        .map(|i| {
            let timed = i % 3 != 0;
            GrpoRow {
                sample_id: format!("env-{i:03}"),
                backend: ksmith_core::evaluation::Backend::Triton,
                selection: GrpoSelection::FirstSteps,
                split: split(i),
                task_id: "relu_scale".to_string(),
                step_id: format!("first-{i:03}"),
                parent_step_id: None,
                iteration: 0,
                island: (i % 2) as u32,
                family: FAMILIES[i % 3].to_string(),
                level: (i % 3) as u8 + 1,
                cluster: (i % 5) as i32,
                prompt: prompt(i, &seed),
                prompt_tokens: 300 + i as u64,
                token_counter: "approx_chars_div_4".to_string(),
                reference_program: REFERENCE.to_string(),
                parent_program: seed.clone(),
                parent_speedup: timed.then_some(1.0),
                parent_runtime_ms: timed.then_some(0.010),
                eager_runtime_ms: timed.then_some(0.010),
                hardware: if timed { "NVIDIA H200" } else { "" }.to_string(),
                parent_labels: Default::default(),
                stamp: Default::default(),
                repo: if i % 2 == 0 { "org/vision" } else { "org/text" }.to_string(),
                license: Some(if i % 2 == 0 { "MIT" } else { "Apache-2.0" }.to_string()),
            }
        })
        .collect()
}

fn chain_rows(n: usize) -> Vec<ChainRow> {
    let seed = seed();
    (0..n)
        .map(|i| {
            let timed = i % 2 == 0;
            let turn = |t: u32, correct: bool| ChainTurn {
                step_id: format!("chain-{i:03}-{t}"),
                iteration: t * 3,
                response: if correct {
                    format!(
                        "The report shows the ReLU is missing; apply it in the kernel.\n\
                         ```python\n{PARENT}```"
                    )
                } else {
                    format!(
                        "One Triton kernel scales every element; ModelNew launches it.\n\
                         ```python\n{}```",
                        wrong_program()
                    )
                },
                program: if correct {
                    PARENT.to_string()
                } else {
                    wrong_program()
                },
                status: if correct {
                    EvalStatus::Correct
                } else {
                    EvalStatus::Incorrect
                },
                hack: None,
                correct,
                speedup: (correct && timed).then_some(1.3 + i as f64 / 10.0),
                error_log: if correct {
                    String::new()
                } else {
                    "output 0: max abs error 2.7 (atol 1e-4) on trial 1 of 3".to_string()
                },
            };
            ChainRow {
                sample_id: format!("chain-{i:03}"),
                backend: ksmith_core::evaluation::Backend::Triton,
                split: split(i),
                task_id: "relu_scale".to_string(),
                island: (i % 4) as u32,
                family: FAMILIES[i % 3].to_string(),
                level: (i % 3) as u8 + 1,
                cluster: (i % 5) as i32,
                prompt: prompt(i, &seed),
                start_step_id: None,
                start_speedup: timed.then_some(1.0),
                turns: vec![turn(0, false), turn(1, true)],
                tokens: 900 + i as u64,
                token_counter: "approx_chars_div_4".to_string(),
                teacher: "teacher-model".to_string(),
                repo: if i % 2 == 0 { "org/vision" } else { "org/text" }.to_string(),
                license: Some(if i % 2 == 0 { "MIT" } else { "Apache-2.0" }.to_string()),
            }
        })
        .collect()
}

fn sft_rows(n: usize) -> Vec<SftRow> {
    (0..n)
        .map(|i| {
            let correctness = i % 3 == 0;
            let mut messages = prompt(i, if correctness { REFERENCE } else { PARENT });
            messages.push(ChatMessage::new(
                "assistant",
                format!("Answer {i}:\n```python\n{PARENT}```"),
            ));
            SftRow {
                sample_id: format!("sft-{i:03}"),
                backend: ksmith_core::evaluation::Backend::Triton,
                kind: if correctness {
                    SftKind::Correctness
                } else {
                    SftKind::Performance
                },
                split: split(i),
                task_id: format!("task-{}", i % 6),
                step_id: format!("s-{i:03}"),
                parent_step_id: (!correctness).then(|| format!("s-{:03}", i.saturating_sub(1))),
                iteration: i as u32,
                island: 0,
                family: FAMILIES[i % 3].to_string(),
                level: (i % 3) as u8 + 1,
                cluster: (i % 4) as i32 - 1,
                messages,
                tokens: 500 + i as u64,
                token_counter: "approx_chars_div_4".to_string(),
                speedup: (!correctness).then_some(1.5),
                parent_speedup: (!correctness).then_some(1.1),
                labels: Default::default(),
                stamp: Default::default(),
                teacher: "teacher-model".to_string(),
                repo: if i % 2 == 0 { "org/vision" } else { "org/text" }.to_string(),
                license: Some(if i % 2 == 0 { "MIT" } else { "Apache-2.0" }.to_string()),
            }
        })
        .collect()
}

fn repo(name: &str, license: &str) -> RepoRow {
    let mut r = RepoRow::failed(name, &format!("https://github.com/{name}"), "");
    r.status = RepoStatus::Ok;
    r.reason = None;
    r.source_kind = SourceKind::Git;
    r.commit = Some(format!("{:0>40}", name.len()));
    r.license = Some(license.to_string());
    r
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let workdir = PathBuf::from(
        std::env::args()
            .nth(1)
            .ok_or("usage: export_fixture <workdir>")?,
    );
    std::fs::create_dir_all(&workdir)?;
    let arg = |i: usize, default: usize| -> Result<usize, Box<dyn std::error::Error>> {
        match std::env::args().nth(i) {
            Some(a) => Ok(a.parse()?),
            None => Ok(default),
        }
    };
    let (n_sft, n_grpo) = (arg(2, 23)?, arg(3, 17)?);
    let (n_env, n_chains) = (arg(4, 9)?, arg(5, 11)?);
    let sft = sft_rows(n_sft);
    let grpo = grpo_rows(n_grpo);
    let env = env_rows(n_env);
    let chains = chain_rows(n_chains);
    // The fingerprints stand for the content, as select's would.
    write_table(
        &SftRow::path_in(&workdir),
        &sft,
        &format!("fixture-sft-{n_sft}"),
    )?;
    write_table(
        &GrpoRow::path_in(&workdir),
        &grpo,
        &format!("fixture-grpo-{n_grpo}"),
    )?;
    write_table(
        &env_path_in(&workdir),
        &env,
        &format!("fixture-env-{n_env}"),
    )?;
    write_table(
        &ChainRow::path_in(&workdir),
        &chains,
        &format!("fixture-chains-{n_chains}"),
    )?;
    write_table(
        &RepoRow::path_in(&workdir),
        &[repo("org/vision", "MIT"), repo("org/text", "Apache-2.0")],
        "fixture-repos",
    )?;
    let manifest = serde_json::json!({
        "config": {},
        "config_hash": "fixture-select-config",
        "fingerprint": "fixture",
        "token_counter": "approx_chars_div_4",
        "rules": ["Fixture rule: every synthetic sample is selected."],
    });
    std::fs::write(
        workdir.join("selection.json"),
        serde_json::to_vec_pretty(&manifest)?,
    )?;
    let cfg = ExportConfig {
        // Small shards and row groups so the fixture has several of each.
        shard_rows: 6,
        row_group_rows: 4,
        tokenizer: std::env::var_os("KSMITH_FIXTURE_TOKENIZER")
            .map(PathBuf::from)
            .unwrap_or_default(),
        ..Default::default()
    };
    let report = run(&cfg, &StageContext::for_tests(&workdir))?;
    let mut expected: BTreeMap<&str, BTreeMap<&str, usize>> = BTreeMap::new();
    let count = |rows: Vec<Split>| {
        let mut m = BTreeMap::new();
        for s in rows {
            *m.entry(s.as_str()).or_insert(0) += 1;
        }
        m
    };
    expected.insert("sft", count(sft.iter().map(|r| r.split).collect()));
    expected.insert("grpo", count(grpo.iter().map(|r| r.split).collect()));
    expected.insert("env", count(env.iter().map(|r| r.split).collect()));
    expected.insert("chains", count(chains.iter().map(|r| r.split).collect()));
    println!(
        "{}",
        serde_json::json!({
            "workdir": workdir,
            "rows": expected,
            "shard_rows": cfg.shard_rows,
            "row_group_rows": cfg.row_group_rows,
            "counters": report.counters,
            "fingerprint": report.fingerprint,
            "skipped": report.skipped,
        })
    );
    Ok(())
}
