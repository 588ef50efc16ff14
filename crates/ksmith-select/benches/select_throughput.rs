//! Select's throughput on synthetic trajectories: steps judged per second at 10k, 100k and
//! 300k steps (40 iterations per task, 4 KB prompts). Prints a table of medians over 5 runs.
//!
//! `cargo bench -p ksmith-select`

use std::time::Instant;

use ksmith_core::chat::ChatMessage;
use ksmith_core::evaluation::{EvalResult, EvalStatus, Hardware, Timing, TimingMethod};
use ksmith_core::report::StageReport;
use ksmith_core::tables::TaskRow;
use ksmith_select::{SelectConfig, StepView, select};

fn timing(ms: f64) -> Timing {
    Timing {
        median_ms: ms,
        iqr_ms: 0.0,
        cv: 0.0,
        samples: 100,
        method: TimingMethod::CudaGraph,
        l2_policy: "flushed".into(),
        process_samples_ms: vec![],
        process_reference_samples_ms: vec![],
    }
}

fn data(n: usize) -> (Vec<StepView>, Vec<TaskRow>) {
    let iterations = 40;
    let prompt = "x".repeat(4000);
    let mut steps = Vec::with_capacity(n);
    let mut tasks = Vec::new();
    for i in 0..n {
        let task = i / iterations;
        let it = (i % iterations) as u32;
        if it == 0 {
            tasks.push(TaskRow {
                task_id: format!("t{task}"),
                repo: "r".into(),
                class_name: "C".into(),
                program: "ref".into(),
                family: ["act", "norm", "conv", "attn", "loss"][task % 5].into(),
                level: (task % 3) as u8 + 1,
                cluster: (task % 97) as i32 - 1,
                license: None,
                selected_as: "all".into(),
                alt_sizes: "[]".into(),
            });
        }
        // A pseudo-random but fixed speedup trajectory; a third of the steps fail.
        let h = (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40;
        let correct = !h.is_multiple_of(3);
        let speedup = 0.5 + (h % 1000) as f64 / 400.0;
        steps.push(StepView {
            step_id: format!("s{i}"),
            task_id: format!("t{task}"),
            iteration: it,
            island: it % 4,
            backend: ksmith_core::evaluation::Backend::Triton,
            parent_id: (it > 0).then(|| format!("s{}", i - 1 - (h as usize % it as usize))),
            parent_program: String::new(),
            prompt: vec![
                ChatMessage::new("system", "sys"),
                ChatMessage::new("user", prompt.clone()),
            ],
            response: format!("answer {i}"),
            response_cut: false,
            program: Some(format!("program {i}")),
            eval: Some(EvalResult {
                status: if correct {
                    EvalStatus::Correct
                } else {
                    EvalStatus::Incorrect
                },
                hack: None,
                error_log: String::new(),
                errors: vec![],
                trials_passed: 5,
                trials: 5,
                candidate_timing: correct.then(|| timing(1.0 / speedup)),
                reference_timing: correct.then(|| timing(1.0)),
                speedup: correct.then_some(speedup),
                warnings: vec![],
                hardware: Hardware::default(),
                elapsed_ms: 1,
                speed_of_light: None,
                compile_baseline: None,
            }),
            teacher: "t".into(),
        });
    }
    (steps, tasks)
}

fn main() {
    let cfg = SelectConfig::default();
    println!("| steps | median ms | steps/s | sft rows | grpo rows |\n|---|---|---|---|---|");
    for n in [10_000, 100_000, 300_000] {
        let (steps, tasks) = data(n);
        let mut times = Vec::new();
        let mut rows = (0, 0);
        for _ in 0..5 {
            let mut report = StageReport::new("select");
            let t = Instant::now();
            let out = select(&steps, &tasks, &cfg, &mut report);
            times.push(t.elapsed().as_secs_f64());
            rows = (out.sft.len(), out.grpo.len());
        }
        times.sort_by(f64::total_cmp);
        let median = times[2];
        println!(
            "| {n} | {:.1} | {:.0} | {} | {} |",
            median * 1e3,
            n as f64 / median,
            rows.0,
            rows.1
        );
    }
}
