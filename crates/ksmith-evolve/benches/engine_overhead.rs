//! The engine's own overhead per rollout step, excluding teacher and evaluator time, at
//! archive sizes of 10 to 5,000 programs.
//!
//! Each size: a task archive is filled with synthetic Triton programs spread over the islands,
//! then 200 full steps run with an instant scripted teacher and an instant evaluator (their time
//! is measured and subtracted). The components (sampling, prompt building, edit application,
//! archive update, journal append with fsync, checkpoint) are also timed alone. The work
//! directory is under Cargo's target tmp dir (a real disk, so fsync costs what it costs).
//! Run with `cargo bench -p ksmith-evolve`.

use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use ksmith_core::answer::apply_answer;
use ksmith_core::chat::{ChatClient, ChatError, ChatRequest, ChatResponse};
use ksmith_core::evaluation::{
    EvalError, EvalRequest, EvalResult, EvalStatus, Evaluator, Hardware, Preflight, Timing,
    TimingMethod,
};
use ksmith_core::evolve_block::{BLOCK_END, BLOCK_START};
use ksmith_evolve::RolloutConfig;
use ksmith_evolve::engine::TaskRun;
use ksmith_evolve::journal::Journal;
use ksmith_evolve::prompt::{Prompts, build_prompt};
use ksmith_evolve::select::plan_step;
use rand::SeedableRng;
use rand_chacha::ChaCha12Rng;

const REFERENCE: &str = "import torch\nimport torch.nn as nn\n\nclass Model(nn.Module):\n    def __init__(self, dim):\n        super().__init__()\n        self.norm = nn.LayerNorm(dim)\n    def forward(self, x):\n        return torch.relu(self.norm(x)) * 2.0\n\ndef get_inputs():\n    return [torch.randn(4096, 1024)]\n\ndef get_init_inputs():\n    return [1024]\n";
const STEPS: usize = 200;

fn program(i: usize, speed: f64) -> String {
    let mut body = String::new();
    for k in 0..(1 + i % 4) {
        body.push_str(&format!(
            "@triton.jit\ndef fused_kernel_{k}(x_ptr, w_ptr, b_ptr, y_ptr, n_cols, eps, BLOCK: tl.constexpr):\n    row = tl.program_id(0)\n    cols = tl.arange(0, BLOCK)\n    mask = cols < n_cols\n    x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=0.0).to(tl.float32)\n    mean = tl.sum(x, axis=0) / n_cols\n    var = tl.sum((x - mean) * (x - mean), axis=0) / n_cols\n    y = (x - mean) * tl.rsqrt(var + eps)\n    y = y * tl.load(w_ptr + cols, mask=mask) + tl.load(b_ptr + cols, mask=mask)\n    tl.store(y_ptr + row * n_cols + cols, tl.maximum(y, 0.0) * 2.0, mask=mask)\n\n"
        ));
    }
    format!(
        "import torch\nimport torch.nn as nn\nimport triton\nimport triton.language as tl\n\n{BLOCK_START}\n# variant {i}\nSPEED = {speed:.2}\n{body}class ModelNew(nn.Module):\n    def __init__(self, dim):\n        super().__init__()\n        self.norm = nn.LayerNorm(dim)\n    def forward(self, x):\n        y = torch.empty_like(x)\n        fused_kernel_0[(x.shape[0],)](x, self.norm.weight, self.norm.bias, y, x.shape[1], 1e-5, BLOCK=1024)\n        return y\n{BLOCK_END}\n"
    )
}

fn timing(ms: f64) -> Timing {
    Timing {
        median_ms: ms,
        iqr_ms: ms * 0.01,
        cv: 0.01,
        samples: 100,
        method: TimingMethod::CudaGraph,
        l2_policy: "flushed".into(),
        process_samples_ms: vec![],
        process_reference_samples_ms: vec![],
    }
}

fn eval(speed: f64) -> EvalResult {
    EvalResult {
        status: EvalStatus::Correct,
        hack: None,
        error_log: String::new(),
        errors: vec![],
        trials_passed: 5,
        trials: 5,
        candidate_timing: Some(timing(1.0 / speed)),
        reference_timing: Some(timing(1.0)),
        speedup: Some(speed),
        warnings: vec![],
        hardware: Hardware {
            device: "NVIDIA H200".into(),
            driver: Some("570".into()),
            torch: "2.11".into(),
            triton: "3.6".into(),
            cuda: None,
            timing: String::new(),
        },
        elapsed_ms: 900,
        speed_of_light: None,
        compile_baseline: None,
    }
}

fn current_speed(user: &str) -> f64 {
    user.split("## Current program")
        .nth(1)
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.trim().strip_prefix("SPEED = "))
                .and_then(|v| v.trim().parse().ok())
        })
        .unwrap_or(1.0)
}

fn diff_answer(speed: f64, salt: u64) -> String {
    let old = format!("{speed:.2}");
    let mut new = format!("{:.2}", speed * (0.8 + (salt % 7) as f64 * 0.07));
    if new == old {
        new = format!("{:.2}", speed + 0.01);
    }
    format!(
        "Fuse the scale into the store and widen the block.\n<<<<<<< SEARCH\nSPEED = {old}\n=======\nSPEED = {new}\n>>>>>>> REPLACE\n"
    )
}

/// Instant teacher; its own time is accumulated so it can be subtracted.
struct Teacher {
    spent: Mutex<Duration>,
}

impl ChatClient for Teacher {
    fn chat(&self, req: &ChatRequest) -> Result<ChatResponse, ChatError> {
        let t = Instant::now();
        let user = &req.messages[1].content;
        let answer = diff_answer(current_speed(user), req.seed.unwrap_or(0));
        let r = ChatResponse {
            content: answer,
            reasoning: None,
            finish_reason: Some("stop".into()),
            model: "bench".into(),
            prompt_tokens: user.len() as u64 / 4,
            completion_tokens: 40,
            cached: false,
        };
        *self.spent.lock().unwrap_or_else(|e| e.into_inner()) += t.elapsed();
        Ok(r)
    }
}

/// Instant evaluator reading the SPEED line; its time is accumulated too.
struct Eval {
    spent: Mutex<Duration>,
}

impl Evaluator for Eval {
    fn evaluate(&self, r: &EvalRequest) -> Result<EvalResult, EvalError> {
        let t = Instant::now();
        let e = eval(current_speed(&format!(
            "## Current program\n{}",
            r.candidate
        )));
        *self.spent.lock().unwrap_or_else(|e| e.into_inner()) += t.elapsed();
        Ok(e)
    }

    /// Every reference runs (the bench drives steps, not the stage).
    fn preflight(&self, _: &EvalRequest) -> Result<Preflight, EvalError> {
        Ok(Preflight::default())
    }
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn p90(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[(v.len() * 9) / 10]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

struct Row {
    size: usize,
    step_median: f64,
    step_p90: f64,
    sample: f64,
    prompt: f64,
    edit: f64,
    archive: f64,
    journal: f64,
    checkpoint: f64,
    checkpoint_interval: u32,
}

fn measure(size: usize, root: &Path) -> Row {
    let cfg = RolloutConfig {
        iterations: 1_000_000,
        ..Default::default()
    };
    let prompts = Prompts::load(None).expect("templates");
    let dir = root.join(format!("size-{size}"));
    let _ = std::fs::remove_dir_all(&dir);
    let mut run = TaskRun::open("bench", REFERENCE, &cfg, &prompts, &dir).expect("open");
    {
        let a = run.archive_mut();
        for i in 0..size {
            let speed = 0.3 + (i * 37 % 101) as f64 * 0.04;
            let island = i % cfg.num_islands as usize;
            a.add_program(program(i, speed), 0, "prefill", 0, island, eval(speed));
        }
    }
    // Components, on the filled archive.
    let a = run.state().archive.clone();
    let mut rng = ChaCha12Rng::seed_from_u64(1);
    let (mut sample, mut prompt, mut edit) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..STEPS as u32 {
        let t = Instant::now();
        let plan = plan_step(&mut rng, &a, i, &cfg);
        sample.push(ms(t.elapsed()));
        let t = Instant::now();
        let p = build_prompt(&prompts, &plan, &a, REFERENCE, &cfg);
        prompt.push(ms(t.elapsed()));
        let parent = &a.programs[plan.parent].code;
        let answer = diff_answer(current_speed(&p.user), u64::from(i));
        let t = Instant::now();
        let r = apply_answer(parent, &answer, Some("stop"), cfg.max_program_chars);
        edit.push(ms(t.elapsed()));
        assert!(r.program.is_some(), "{:?}", r.error);
    }
    let mut archive = Vec::new();
    let mut grown = a.clone();
    for i in 0..STEPS {
        let code = program(size + i, 1.5);
        let t = Instant::now();
        grown.add_program(code, 1, "s", 1, i % cfg.num_islands as usize, eval(1.5));
        archive.push(ms(t.elapsed()));
    }
    let mut journal = Vec::new();
    {
        let (mut j, _) = Journal::open(
            "bench",
            &dir.join("journal-bench.jsonl"),
            std::time::Duration::ZERO,
        )
        .expect("journal");
        let teacher = Teacher {
            spent: Mutex::new(Duration::ZERO),
        };
        let ev = Eval {
            spent: Mutex::new(Duration::ZERO),
        };
        let mut probe =
            TaskRun::open("probe", REFERENCE, &cfg, &prompts, &dir.join("probe")).expect("probe");
        let row = probe.step(&teacher, &ev).expect("probe step");
        for _ in 0..STEPS {
            let t = Instant::now();
            j.append(&row).expect("append");
            journal.push(ms(t.elapsed()));
        }
    }
    let interval = run.checkpoint_interval();
    let mut checkpoint = Vec::new();
    for _ in 0..5 {
        let t = Instant::now();
        run.checkpoint().expect("checkpoint");
        checkpoint.push(ms(t.elapsed()));
    }
    // Whole steps, teacher and evaluator time subtracted.
    let teacher = Teacher {
        spent: Mutex::new(Duration::ZERO),
    };
    let ev = Eval {
        spent: Mutex::new(Duration::ZERO),
    };
    let mut steps = Vec::new();
    for _ in 0..STEPS {
        let t0 = *teacher.spent.lock().unwrap_or_else(|e| e.into_inner());
        let e0 = *ev.spent.lock().unwrap_or_else(|e| e.into_inner());
        let t = Instant::now();
        run.step(&teacher, &ev).expect("step");
        let total = t.elapsed();
        let t1 = *teacher.spent.lock().unwrap_or_else(|e| e.into_inner());
        let e1 = *ev.spent.lock().unwrap_or_else(|e| e.into_inner());
        steps.push(ms(total - (t1 - t0) - (e1 - e0)));
    }
    let _ = std::fs::remove_dir_all(&dir);
    Row {
        size,
        step_median: median(&mut steps.clone()),
        step_p90: p90(&mut steps),
        sample: median(&mut sample),
        prompt: median(&mut prompt),
        edit: median(&mut edit),
        archive: median(&mut archive),
        journal: median(&mut journal),
        checkpoint: median(&mut checkpoint),
        checkpoint_interval: interval,
    }
}

fn table(root: &Path) {
    println!("work dir: {}", root.display());
    println!(
        "| programs | step median | step p90 | sample | prompt | edit | archive add | journal append+fsync | checkpoint | checkpoint interval | checkpoint per step |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for size in [10, 100, 1_000, 5_000] {
        let r = measure(size, root);
        println!(
            "| {} | {:.3} | {:.3} | {:.4} | {:.3} | {:.4} | {:.4} | {:.3} | {:.1} | {} | {:.3} |",
            r.size,
            r.step_median,
            r.step_p90,
            r.sample,
            r.prompt,
            r.edit,
            r.archive,
            r.journal,
            r.checkpoint,
            r.checkpoint_interval,
            r.checkpoint / f64::from(r.checkpoint_interval)
        );
    }
    let _ = std::fs::remove_dir_all(root);
}

fn main() {
    println!(
        "engine overhead per step (ms, medians over {STEPS} steps; teacher and evaluator time excluded)"
    );
    println!("\non disk (fsync reaches the device):");
    table(&Path::new(env!("CARGO_TARGET_TMPDIR")).join("ksmith-evolve-bench"));
    let shm = Path::new("/dev/shm");
    if shm.is_dir() {
        println!("\non tmpfs (fsync is free: the engine's own cost):");
        table(&shm.join(format!("ksmith-evolve-bench-{}", std::process::id())));
    }
}
