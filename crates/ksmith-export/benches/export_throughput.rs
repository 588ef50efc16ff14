//! Export's throughput: all thirteen formats written from N SFT rows, N GRPO rows, N
//! environment starts (the GRPO rows again) and N / 4 three-step chains (4 KB prompts, 1 KB
//! programs, 2 KB answers; repetitive text, so files compress far better than real data), with
//! 1 and 2 threads. Prints a table of medians over 3 runs.
//!
//! `cargo bench -p ksmith-export`

use std::time::Instant;

use ksmith_core::chat::ChatMessage;
use ksmith_core::context::StageContext;
use ksmith_core::evaluation::EvalStatus;
use ksmith_core::table::{Table, write_table};
use ksmith_core::tables::{
    ChainRow, ChainTurn, GrpoRow, GrpoSelection, SftKind, SftRow, Split, env_path_in,
};
use ksmith_export::{ExportConfig, run};

fn prompt(i: usize) -> Vec<ChatMessage> {
    vec![
        ChatMessage::new("system", "s".repeat(1000)),
        ChatMessage::new("user", format!("{i} {}", "u".repeat(3000))),
    ]
}

fn main() {
    println!(
        "| rows per table | threads | median s | input rows/s (all formats) | MB written |\n|---|---|---|---|---|"
    );
    for (n, threads) in [(2_000usize, 1usize), (20_000, 1), (20_000, 2)] {
        let dir = tempfile::tempdir().expect("tempdir");
        let split = |i: usize| {
            if i.is_multiple_of(10) {
                Split::Validation
            } else {
                Split::Train
            }
        };
        let grpo: Vec<GrpoRow> = (0..n)
            .map(|i| GrpoRow {
                sample_id: format!("g{i}"),
                backend: ksmith_core::evaluation::Backend::Triton,
                selection: GrpoSelection::BestSteps,
                split: split(i),
                task_id: format!("t{}", i / 10),
                step_id: format!("s{i}"),
                parent_step_id: Some(format!("s{}", i.saturating_sub(1))),
                iteration: (i % 40) as u32,
                island: 0,
                family: "activation".into(),
                level: 1,
                cluster: (i / 100) as i32,
                prompt: prompt(i),
                prompt_tokens: 1000,
                token_counter: "approx_chars_div_4".into(),
                reference_program: "r".repeat(1000),
                parent_program: format!("{i}{}", "p".repeat(1000)),
                parent_speedup: Some(1.3),
                parent_runtime_ms: Some(0.1),
                eager_runtime_ms: Some(0.13),
                hardware: "NVIDIA H200".into(),
                parent_labels: Default::default(),
                stamp: Default::default(),
                repo: "org/repo".into(),
                license: Some("MIT".into()),
            })
            .collect();
        let sft: Vec<SftRow> = (0..n)
            .map(|i| {
                let mut messages = prompt(i);
                messages.push(ChatMessage::new("assistant", "a".repeat(2000)));
                SftRow {
                    sample_id: format!("f{i}"),
                    backend: ksmith_core::evaluation::Backend::Triton,
                    kind: SftKind::Performance,
                    split: split(i),
                    task_id: format!("t{}", i / 10),
                    step_id: format!("s{i}"),
                    parent_step_id: None,
                    iteration: 0,
                    island: 0,
                    family: "activation".into(),
                    level: 1,
                    cluster: 0,
                    messages,
                    tokens: 1500,
                    token_counter: "approx_chars_div_4".into(),
                    speedup: Some(1.5),
                    parent_speedup: Some(1.2),
                    labels: Default::default(),
                    stamp: Default::default(),
                    teacher: "t".into(),
                    repo: "org/repo".into(),
                    license: Some("MIT".into()),
                }
            })
            .collect();
        let chains: Vec<ChainRow> = (0..n / 4)
            .map(|i| ChainRow {
                sample_id: format!("c{i}"),
                backend: ksmith_core::evaluation::Backend::Triton,
                split: split(i),
                task_id: format!("t{}", i / 10),
                island: (i % 4) as u32,
                family: "activation".into(),
                level: 1,
                cluster: (i / 100) as i32,
                prompt: prompt(i),
                start_step_id: None,
                start_speedup: Some(1.0),
                turns: (0..3)
                    .map(|t| ChainTurn {
                        step_id: format!("c{i}-{t}"),
                        iteration: t,
                        response: format!("idea {t}\n```python\n{}\n```", "a".repeat(2000)),
                        program: format!("{t}{}", "p".repeat(1000)),
                        status: EvalStatus::Correct,
                        hack: None,
                        correct: true,
                        speedup: Some(1.0 + f64::from(t)),
                        error_log: String::new(),
                    })
                    .collect(),
                tokens: 3000,
                token_counter: "approx_chars_div_4".into(),
                teacher: "t".into(),
                repo: "org/repo".into(),
                license: Some("MIT".into()),
            })
            .collect();
        write_table(&SftRow::path_in(dir.path()), &sft, "sft").expect("write");
        write_table(&GrpoRow::path_in(dir.path()), &grpo, "grpo").expect("write");
        write_table(&env_path_in(dir.path()), &grpo, "env").expect("write");
        write_table(&ChainRow::path_in(dir.path()), &chains, "chains").expect("write");
        write_table::<ksmith_core::tables::RepoRow>(
            &ksmith_core::tables::RepoRow::path_in(dir.path()),
            &[],
            "repos",
        )
        .expect("write");
        std::fs::write(
            dir.path().join("selection.json"),
            r#"{"config_hash": "h", "rules": []}"#,
        )
        .expect("write");
        let mut ctx = StageContext::new(
            dir.path(),
            threads,
            ksmith_core::progress::ProgressMode::Silent,
        );
        ctx.force = true;
        let cfg = ExportConfig::default();
        let mut times = Vec::new();
        for _ in 0..3 {
            let t = Instant::now();
            run(&cfg, &ctx).expect("export");
            times.push(t.elapsed().as_secs_f64());
        }
        times.sort_by(f64::total_cmp);
        let bytes: u64 = walk(&dir.path().join("datasets"));
        println!(
            "| {n} | {threads} | {:.2} | {:.0} | {:.1} |",
            times[1],
            (3 * n + chains.len()) as f64 / times[1],
            bytes as f64 / 1e6
        );
    }
}

fn walk(p: &std::path::Path) -> u64 {
    std::fs::read_dir(p)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .map(|e| {
                    let path = e.path();
                    if path.is_dir() {
                        walk(&path)
                    } else {
                        e.metadata().map(|m| m.len()).unwrap_or(0)
                    }
                })
                .sum()
        })
        .unwrap_or(0)
}
