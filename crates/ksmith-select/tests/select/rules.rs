//! Select's rules on hand-built trajectories: which steps become SFT samples and GRPO prompts,
//! with which reasons the others are dropped, the token budget, balance and the split.

use std::collections::{BTreeMap, HashMap, HashSet};

use ksmith_core::chat::ChatMessage;
use ksmith_core::evaluation::{
    CompileBaseline, EvalResult, EvalStatus, Hardware, SpeedOfLight, Timing,
};
use ksmith_core::report::StageReport;
use ksmith_core::speedup_interval::{SplitMix, timing_from_samples};
use ksmith_core::tables::{GrpoSelection, SftKind, Split, TaskRow};
use ksmith_select::{GrpoRule, SelectConfig, StepView, TrivialSteps, select};

/// The candidate's and the reference's timings of a program `speedup` times faster than an
/// eager reference of `eager` ms: 100 pairs, the reference's samples spread by 2 % and each
/// candidate sample by `own` (relative) around its pair's share (factors evenly spaced over
/// `1 +- own / 2`, shuffled, so centered on the figure): the interval's width follows `own`.
fn timings(eager: f64, speedup: f64, own: f64) -> (Timing, Timing) {
    let n = 100;
    let mut rng = SplitMix::from_text(&format!("{speedup} {own}"));
    let reference: Vec<f64> = (0..n)
        .map(|_| eager * (1.0 + 0.02 * (rng.unit() - 0.5)))
        .collect();
    let mut factors: Vec<f64> = (0..n)
        .map(|k| 1.0 + own * (k as f64 / (n - 1) as f64 - 0.5))
        .collect();
    for i in (1..n).rev() {
        factors.swap(i, rng.below(i + 1));
    }
    let cand: Vec<f64> = reference
        .iter()
        .zip(&factors)
        .map(|(r, f)| r / speedup * f)
        .collect();
    let mut c = timing_from_samples(vec![cand], vec![reference.clone()]);
    c.median_ms = eager / speedup;
    let mut r = timing_from_samples(vec![reference], vec![]);
    r.median_ms = eager;
    (c, r)
}

/// An evaluation: `speedup` None with `correct` means the CPU interpreter (untimed).
fn eval(status: EvalStatus, speedup: Option<f64>) -> EvalResult {
    noisy_eval(status, speedup, 0.002)
}

/// An evaluation whose candidate samples spread by `own` (relative) around their pair's share.
fn noisy_eval(status: EvalStatus, speedup: Option<f64>, own: f64) -> EvalResult {
    let eager = 2.0;
    let t = speedup.map(|s| timings(eager, s, own));
    EvalResult {
        status,
        hack: None,
        error_log: String::new(),
        errors: vec![],
        trials_passed: 5,
        trials: 5,
        candidate_timing: t.as_ref().map(|t| t.0.clone()),
        reference_timing: t.map(|t| t.1),
        speedup,
        warnings: vec![],
        hardware: Hardware {
            device: if speedup.is_some() {
                "NVIDIA H200".into()
            } else {
                "cpu (triton interpreter)".into()
            },
            driver: None,
            torch: "2.15".into(),
            triton: "3.9".into(),
            cuda: None,
            timing: String::new(),
        },
        elapsed_ms: 10,
        // eager (2 ms) at a quarter of the speed-of-light; on the CPU, none and why
        speed_of_light: Some(SpeedOfLight {
            ms: speedup.map(|_| 0.5),
            why: speedup.is_none().then(|| "no GPU".into()),
            bound: speedup.map(|_| "memory".into()),
            gpu: speedup.map(|_| "H200 SXM".into()),
            flops: 0.0,
            bytes: 2.4e9,
            dtype: "float32".into(),
            tf32_policy: "torch_flags".into(),
        }),
        compile_baseline: None,
    }
}

fn step(
    id: &str,
    task: &str,
    iteration: u32,
    parent: Option<&str>,
    status: EvalStatus,
    speedup: Option<f64>,
) -> StepView {
    StepView {
        step_id: id.into(),
        task_id: task.into(),
        iteration,
        island: 0,
        backend: ksmith_core::evaluation::Backend::Triton,
        parent_id: parent.map(Into::into),
        parent_program: String::new(),
        prompt: vec![
            ChatMessage::new("system", "You write Triton kernels."),
            ChatMessage::new(
                "user",
                format!("Improve the program of {task} (step {id})."),
            ),
        ],
        response: format!("```python\n# answer of {id}\nclass ModelNew: pass\n```"),
        response_cut: false,
        program: Some(format!("# program of {id}\nclass ModelNew: pass\n")),
        eval: Some(eval(status, speedup)),
        teacher: "teacher-a".into(),
    }
}

fn task(id: &str, family: &str, level: u8, cluster: i32) -> TaskRow {
    TaskRow {
        task_id: id.into(),
        repo: "org/repo".into(),
        class_name: "Thing".into(),
        program: format!("# reference of {id}\nclass Model: pass\n"),
        family: family.into(),
        level,
        cluster,
        license: Some("MIT".into()),
        selected_as: "center".into(),
        alt_sizes: "[]".into(),
    }
}

use EvalStatus::{CompileError, Correct, Incorrect};

/// Task A's trajectory (timed on a GPU) plus odd cases; see each step's comment.
fn trajectory_a() -> Vec<StepView> {
    let mut ghost = step("s6", "A", 1, Some("ghost"), Correct, Some(1.0));
    ghost.island = 1;
    let mut failed_edit = step("s9", "A", 6, Some("s5"), Correct, Some(9.0));
    failed_edit.program = None;
    vec![
        // First step, correct, slower than eager: correctness SFT.
        step("s0", "A", 0, None, Correct, Some(0.8)),
        // Faster than eager and than s0: performance SFT; a new best.
        step("s1", "A", 1, Some("s0"), Correct, Some(1.5)),
        // Correct but slower than its parent: no SFT; its prompt's program s1 is a best.
        step("s2", "A", 2, Some("s1"), Correct, Some(1.2)),
        // Performance SFT; a second prompt on s1 (over the per-parent limit of 1).
        step("s3", "A", 3, Some("s1"), Correct, Some(2.0)),
        // Incorrect; its parent s2 (1.2x) never was a best.
        step("s4", "A", 4, Some("s2"), Incorrect, None),
        // Performance SFT; its parent s3 (2.0x) was a new best.
        step("s5", "A", 5, Some("s3"), Correct, Some(2.5)),
        // Parent id names no step.
        ghost,
        // A first step that does not compile.
        step("s7", "A", 0, None, CompileError, None),
        // Correct but untimed (CPU interpreter): never a performance sample.
        step("s8", "A", 2, Some("s1"), Correct, None),
        // The edit failed: no program.
        failed_edit,
    ]
}

fn by_id<T>(rows: &[T], id: impl Fn(&T) -> &str) -> HashSet<String> {
    rows.iter().map(|r| id(r).to_string()).collect()
}

fn set(ids: &[&str]) -> HashSet<String> {
    ids.iter().map(|s| s.to_string()).collect()
}

fn no_balance() -> SelectConfig {
    SelectConfig {
        max_family_share: 1.0,
        validation_fraction: 0.0,
        ..Default::default()
    }
}

/// Selects from `steps` of task A (activation, level 1) without balancing.
fn select_a(steps: &[StepView]) -> (ksmith_select::Selection, StageReport) {
    let mut report = StageReport::new("select");
    let out = select(steps, &[task("A", "act", 1, 0)], &no_balance(), &mut report);
    (out, report)
}

#[test]
fn sft_takes_correct_first_steps_and_faster_triton_steps() {
    let steps = trajectory_a();
    let mut report = StageReport::new("select");
    let out = select(
        &steps,
        &[task("A", "act", 1, 0)],
        &no_balance(),
        &mut report,
    );
    let kinds: HashMap<String, SftKind> = out
        .sft
        .iter()
        .map(|r| (r.step_id.clone(), r.kind))
        .collect();
    assert_eq!(
        kinds,
        HashMap::from([
            ("s0".to_string(), SftKind::Correctness),
            ("s1".to_string(), SftKind::Performance),
            ("s3".to_string(), SftKind::Performance),
            ("s5".to_string(), SftKind::Performance),
        ])
    );
    let d = &report.dropped;
    assert_eq!(d.get("sft/not_faster_than_parent"), Some(&1), "{d:?}");
    assert_eq!(d.get("sft/not_correct"), Some(&2), "s4, s7: {d:?}");
    assert_eq!(d.get("sft/parent_missing"), Some(&1), "{d:?}");
    assert_eq!(d.get("sft/not_timed"), Some(&1), "{d:?}");
    assert_eq!(d.get("sft/edit_failed"), Some(&1), "{d:?}");
    assert_eq!(report.counters.get("steps_correct_untimed"), Some(&1));
    // The conversation is the prompt plus the teacher's answer.
    let s5 = out.sft.iter().find(|r| r.step_id == "s5").unwrap();
    assert_eq!(s5.messages.len(), 3);
    assert_eq!(s5.messages[2].role, "assistant");
    assert!(s5.messages[2].content.contains("answer of s5"));
    assert_eq!(s5.speedup, Some(2.5));
    assert_eq!(s5.parent_speedup, Some(2.0));
    assert_eq!((s5.family.as_str(), s5.level, s5.cluster), ("act", 1, 0));
    assert_eq!(s5.token_counter, "approx_chars_div_4");
}

#[test]
fn thresholds_come_from_the_config() {
    let steps = trajectory_a();
    let cfg = SelectConfig {
        sft_min_speedup: 2.2,
        ..no_balance()
    };
    let out = select(
        &steps,
        &[task("A", "act", 1, 0)],
        &cfg,
        &mut StageReport::new("select"),
    );
    let perf = by_id(
        &out.sft
            .iter()
            .filter(|r| r.kind == SftKind::Performance)
            .cloned()
            .collect::<Vec<_>>(),
        |r| &r.step_id,
    );
    assert_eq!(perf, set(&["s5"]));
    let cfg = SelectConfig {
        sft_min_gain_over_parent: 1.3,
        ..no_balance()
    };
    let out = select(
        &steps,
        &[task("A", "act", 1, 0)],
        &cfg,
        &mut StageReport::new("select"),
    );
    // s5 is 2.5 / 2.0 = 1.25x its parent: below a required gain of 1.3.
    assert!(!by_id(&out.sft, |r| &r.step_id).contains("s5"));
    assert!(by_id(&out.sft, |r| &r.step_id).contains("s3"));
}

#[test]
fn grpo_best_steps_uses_prompts_on_best_so_far_programs() {
    let steps = trajectory_a();
    let mut report = StageReport::new("select");
    let out = select(
        &steps,
        &[task("A", "act", 1, 0)],
        &no_balance(),
        &mut report,
    );
    // s9's edit failed, but its prompt (on the best program s5) is a valid GRPO prompt.
    assert_eq!(by_id(&out.grpo, |r| &r.step_id), set(&["s2", "s5", "s9"]));
    let d = &report.dropped;
    assert_eq!(d.get("grpo/parent_prompt_limit"), Some(&2), "s3, s8: {d:?}");
    assert_eq!(d.get("grpo/parent_not_best_so_far"), Some(&1), "s4: {d:?}");
    assert_eq!(d.get("grpo/first_step"), Some(&2), "s0, s7: {d:?}");
    assert_eq!(
        d.get("grpo/parent_not_faster_than_eager"),
        Some(&1),
        "s1 (parent s0 at 0.8x): {d:?}"
    );
    let s2 = out.grpo.iter().find(|r| r.step_id == "s2").unwrap();
    assert_eq!(s2.selection, GrpoSelection::BestSteps);
    assert_eq!(s2.parent_step_id.as_deref(), Some("s1"));
    assert!(s2.parent_program.contains("program of s1"));
    assert!(s2.reference_program.contains("reference of A"));
    assert_eq!(s2.parent_speedup, Some(1.5));
    assert!((s2.parent_runtime_ms.unwrap() - 2.0 / 1.5).abs() < 1e-12);
    assert_eq!(s2.eager_runtime_ms, Some(2.0));
    assert_eq!(s2.hardware, "NVIDIA H200");
}

#[test]
fn a_parent_overtaken_before_the_prompt_was_built_is_not_a_best_step() {
    // x1 was a new best when found (iteration 1), but x2 beat it at iteration 2: the prompt of
    // x3 (iteration 3, on x1) would show x2 among the top programs. x4's parent x2 is the best.
    let steps = vec![
        step("x0", "A", 0, None, Correct, Some(0.9)),
        step("x1", "A", 1, Some("x0"), Correct, Some(1.5)),
        step("x2", "A", 2, Some("x0"), Correct, Some(1.8)),
        step("x3", "A", 3, Some("x1"), Correct, Some(1.6)),
        step("x4", "A", 3, Some("x2"), Correct, Some(1.9)),
    ];
    let mut report = StageReport::new("select");
    let out = select(
        &steps,
        &[task("A", "act", 1, 0)],
        &no_balance(),
        &mut report,
    );
    assert_eq!(by_id(&out.grpo, |r| &r.step_id), set(&["x4"]));
    assert_eq!(report.dropped.get("grpo/parent_not_best_so_far"), Some(&1));
}

#[test]
fn a_parent_within_noise_of_the_fastest_earlier_program_is_judged_alike_in_every_run() {
    // The rollout bench run twice on an H200: a first step and its child within 0.6 % of each
    // other, the noise putting one or the other ahead. The child's prompt (on y1) is a GRPO
    // best step in both runs, as y1 is not significantly slower than y0 in either.
    let grpo_of = |first: f64, second: f64| {
        let mut steps = vec![
            step("y0", "A", 0, None, Correct, Some(first)),
            step("y1", "A", 1, Some("y0"), Correct, Some(second)),
            step("y2", "A", 2, Some("y1"), Incorrect, None),
        ];
        for (s, speedup) in steps.iter_mut().zip([first, second]) {
            s.eval = Some(noisy_eval(Correct, Some(speedup), 0.05));
        }
        let mut report = StageReport::new("select");
        let out = select(
            &steps,
            &[task("A", "act", 1, 0)],
            &no_balance(),
            &mut report,
        );
        by_id(&out.grpo, |r| &r.step_id)
    };
    assert_eq!(grpo_of(2.264, 2.272), set(&["y1", "y2"]));
    assert_eq!(grpo_of(2.281, 2.267), set(&["y1", "y2"]), "y1 ties with y0");
    // Clearly slower (12 % with the same noise): y0 is better, and the prompt on y1 is no best step.
    assert_eq!(grpo_of(2.281, 2.0), set(&["y1"]));
}

#[test]
fn grpo_prompt_limit_per_parent_is_configurable() {
    let steps = trajectory_a();
    let cfg = SelectConfig {
        grpo_max_prompts_per_parent: 0,
        ..no_balance()
    };
    let out = select(
        &steps,
        &[task("A", "act", 1, 0)],
        &cfg,
        &mut StageReport::new("select"),
    );
    assert_eq!(
        by_id(&out.grpo, |r| &r.step_id),
        set(&["s2", "s3", "s5", "s8", "s9"])
    );
}

#[test]
fn grpo_ablations_all_steps_and_first_steps() {
    let steps = trajectory_a();
    let tasks = [task("A", "act", 1, 0)];
    let cfg = SelectConfig {
        grpo_rule: GrpoRule::FirstSteps,
        grpo_max_prompts_per_parent: 0,
        ..no_balance()
    };
    let out = select(&steps, &tasks, &cfg, &mut StageReport::new("select"));
    assert_eq!(by_id(&out.grpo, |r| &r.step_id), set(&["s0", "s7"]));
    let s0 = out.grpo.iter().find(|r| r.step_id == "s0").unwrap();
    assert_eq!(s0.selection, GrpoSelection::FirstSteps);
    // The current program of a first step is the reference, at eager speed.
    assert_eq!(s0.parent_program, s0.reference_program);
    // When the step records the program its prompt showed (the seed with its editable block
    // marked), that text is the current program.
    let mut steps = trajectory_a();
    steps[0].parent_program = "# EVOLVE-BLOCK-START\nseed\n# EVOLVE-BLOCK-END\n".into();
    let out = select(&steps, &tasks, &cfg, &mut StageReport::new("select"));
    let s0 = out.grpo.iter().find(|r| r.step_id == "s0").unwrap();
    assert!(s0.parent_program.contains("EVOLVE-BLOCK-START\nseed"));
    assert_eq!(s0.parent_speedup, Some(1.0));
    assert_eq!(s0.parent_runtime_ms, s0.eager_runtime_ms);
    assert!(s0.parent_step_id.is_none());

    let cfg = SelectConfig {
        grpo_rule: GrpoRule::AllSteps,
        grpo_max_prompts_per_parent: 0,
        ..no_balance()
    };
    let out = select(&steps, &tasks, &cfg, &mut StageReport::new("select"));
    // Every prompt whose current program is correct or the reference (s4's parent s2 is
    // correct, so s4 counts); s6's parent is missing.
    assert_eq!(
        by_id(&out.grpo, |r| &r.step_id),
        set(&["s0", "s1", "s2", "s3", "s4", "s5", "s7", "s8", "s9"])
    );
}

#[test]
fn environment_starts_follow_their_own_rule() {
    let steps = trajectory_a();
    let tasks = [task("A", "act", 1, 0)];
    // Default: first steps, one per task (s0 and s7 are both first steps of task A).
    let out = select(
        &steps,
        &tasks,
        &no_balance(),
        &mut StageReport::new("select"),
    );
    let env: Vec<&str> = out.env.iter().map(|r| r.step_id.as_str()).collect();
    assert_eq!(env, ["s0"]);
    assert_eq!(out.env[0].selection, GrpoSelection::FirstSteps);
    assert_eq!(out.env[0].parent_program, out.env[0].reference_program);
    // `best_steps`: the same prompts as the GRPO set.
    let cfg = SelectConfig {
        env_rule: GrpoRule::BestSteps,
        ..no_balance()
    };
    let mut report = StageReport::new("select");
    let out = select(&steps, &tasks, &cfg, &mut report);
    assert!(!out.grpo.is_empty());
    assert_eq!(out.env, out.grpo);
    assert_eq!(
        report.dropped.get("env/first_step"),
        report.dropped.get("grpo/first_step")
    );
}

#[test]
fn untimed_rollouts_give_no_performance_samples_and_no_best_steps() {
    // A CPU-interpreter rollout: everything correct, nothing timed.
    let steps = vec![
        step("c0", "A", 0, None, Correct, None),
        step("c1", "A", 1, Some("c0"), Correct, None),
        step("c2", "A", 2, Some("c1"), Correct, None),
    ];
    let mut report = StageReport::new("select");
    let out = select(
        &steps,
        &[task("A", "act", 1, 0)],
        &no_balance(),
        &mut report,
    );
    assert_eq!(by_id(&out.sft, |r| &r.step_id), set(&["c0"]));
    assert!(out.grpo.is_empty());
    assert_eq!(report.dropped.get("sft/not_timed"), Some(&2));
    assert_eq!(report.dropped.get("grpo/parent_not_timed"), Some(&2));
    assert_eq!(report.counters.get("steps_correct_untimed"), Some(&3));
}

#[test]
fn best_so_far_can_be_judged_per_island() {
    // Island 1's best (1.3x) is below island 0's earlier 2.0x.
    let mut steps = vec![
        step("a0", "A", 0, None, Correct, Some(0.9)),
        step("a1", "A", 1, Some("a0"), Correct, Some(2.0)),
        step("b1", "A", 2, Some("a0"), Correct, Some(1.3)),
        step("a2", "A", 3, Some("a1"), Correct, Some(2.1)),
        step("b2", "A", 3, Some("b1"), Correct, Some(1.4)),
    ];
    for s in steps.iter_mut().filter(|s| s.step_id.starts_with('b')) {
        s.island = 1;
    }
    let tasks = [task("A", "act", 1, 0)];
    let out = select(
        &steps,
        &tasks,
        &no_balance(),
        &mut StageReport::new("select"),
    );
    assert_eq!(by_id(&out.grpo, |r| &r.step_id), set(&["a2"]));
    let cfg = SelectConfig {
        grpo_best_scope: ksmith_select::BestScope::Island,
        ..no_balance()
    };
    let out = select(&steps, &tasks, &cfg, &mut StageReport::new("select"));
    assert_eq!(by_id(&out.grpo, |r| &r.step_id), set(&["a2", "b2"]));
}

#[test]
fn samples_over_the_token_budget_are_dropped_and_counted() {
    let mut steps = trajectory_a();
    steps[0].response = "x".repeat(10_000);
    let cfg = SelectConfig {
        max_tokens: 1_000,
        ..no_balance()
    };
    let mut report = StageReport::new("select");
    let out = select(&steps, &[task("A", "act", 1, 0)], &cfg, &mut report);
    assert!(!by_id(&out.sft, |r| &r.step_id).contains("s0"));
    assert_eq!(report.dropped.get("sft/over_token_budget"), Some(&1));
    assert!(out.sft.iter().all(|r| r.tokens <= 1_000));
    // A prompt over the budget drops the GRPO prompt too.
    let mut steps = trajectory_a();
    steps[2].prompt[1].content = "y".repeat(8_000);
    let mut report = StageReport::new("select");
    let out = select(&steps, &[task("A", "act", 1, 0)], &cfg, &mut report);
    // The budget applies before the per-parent limit: s8 takes the slot s2 left on s1.
    assert_eq!(by_id(&out.grpo, |r| &r.step_id), set(&["s5", "s8", "s9"]));
    assert_eq!(report.dropped.get("grpo/over_token_budget"), Some(&1));
}

#[test]
fn duplicate_answers_to_one_task_are_kept_once() {
    let mut steps = vec![
        step("d0", "A", 0, None, Correct, None),
        step("d1", "A", 0, None, Correct, None),
    ];
    steps[1].response = steps[0].response.clone();
    let mut report = StageReport::new("select");
    let out = select(
        &steps,
        &[task("A", "act", 1, 0)],
        &no_balance(),
        &mut report,
    );
    assert_eq!(by_id(&out.sft, |r| &r.step_id), set(&["d0"]));
    assert_eq!(report.dropped.get("sft/duplicate_answer"), Some(&1));
}

#[test]
fn steps_of_unknown_tasks_are_counted() {
    let steps = vec![step("u0", "nowhere", 0, None, Correct, None)];
    let mut report = StageReport::new("select");
    let out = select(
        &steps,
        &[task("A", "act", 1, 0)],
        &no_balance(),
        &mut report,
    );
    assert!(out.sft.is_empty() && out.grpo.is_empty());
    assert_eq!(report.dropped.get("sft/unknown_task"), Some(&1));
    assert_eq!(report.dropped.get("grpo/unknown_task"), Some(&1));
}

/// Many tasks in few clusters: first steps only (correctness SFT).
fn many_tasks(n: usize) -> (Vec<StepView>, Vec<TaskRow>) {
    let families = ["act", "norm", "conv", "attn"];
    let mut steps = Vec::new();
    let mut tasks = Vec::new();
    for i in 0..n {
        let id = format!("t{i}");
        let cluster = if i % 7 == 0 { -1 } else { (i % 13) as i32 };
        tasks.push(task(&id, families[i % 4], (i % 3) as u8 + 1, cluster));
        steps.push(step(&format!("{id}-s0"), &id, 0, None, Correct, None));
    }
    (steps, tasks)
}

#[test]
fn the_split_never_puts_a_cluster_on_both_sides() {
    let (steps, tasks) = many_tasks(300);
    let cfg = SelectConfig {
        validation_fraction: 0.3,
        max_family_share: 1.0,
        ..Default::default()
    };
    let out = select(&steps, &tasks, &cfg, &mut StageReport::new("select"));
    assert_eq!(out.sft.len(), 300);
    let mut sides: BTreeMap<i32, HashSet<Split>> = BTreeMap::new();
    for r in &out.sft {
        if r.cluster >= 0 {
            sides.entry(r.cluster).or_default().insert(r.split);
        }
    }
    assert!(sides.values().all(|s| s.len() == 1), "{sides:?}");
    let val = out
        .sft
        .iter()
        .filter(|r| r.split == Split::Validation)
        .count();
    assert!(val > 0 && val < 300, "validation {val}");
    // Rows are ordered train first.
    let first_val = out.sft.iter().position(|r| r.split == Split::Validation);
    assert!(
        out.sft[first_val.unwrap()..]
            .iter()
            .all(|r| r.split == Split::Validation)
    );
}

#[test]
fn selection_is_deterministic_whatever_the_input_order() {
    let (mut steps, tasks) = many_tasks(120);
    steps.extend(trajectory_a());
    let mut tasks = tasks;
    tasks.push(task("A", "act", 1, 0));
    let cfg = SelectConfig {
        validation_fraction: 0.2,
        max_family_share: 0.3,
        level_proportions: [("1".into(), 0.5), ("2".into(), 0.25), ("3".into(), 0.25)].into(),
        ..Default::default()
    };
    let a = select(&steps, &tasks, &cfg, &mut StageReport::new("select"));
    steps.reverse();
    tasks.reverse();
    let b = select(&steps, &tasks, &cfg, &mut StageReport::new("select"));
    assert_eq!(a, b);
}

#[test]
fn balance_applies_level_proportions_and_family_caps() {
    let (steps, tasks) = many_tasks(120);
    let cfg = SelectConfig {
        validation_fraction: 0.0,
        max_family_share: 1.0,
        level_proportions: [("1".into(), 0.5), ("2".into(), 0.5), ("3".into(), 0.0)].into(),
        ..Default::default()
    };
    let mut report = StageReport::new("select");
    let out = select(&steps, &tasks, &cfg, &mut report);
    let count = |l: u8| out.sft.iter().filter(|r| r.level == l).count();
    assert_eq!((count(1), count(2), count(3)), (40, 40, 0));
    assert_eq!(
        report.dropped.get("sft/balance_level_proportion"),
        Some(&40)
    );
}

#[test]
fn a_correct_repair_of_a_failed_translation_is_a_correctness_sample_without_timings() {
    // A CPU-interpreter rollout: the first translation fails, a repair of it is correct, then an
    // untimed optimization of the repaired program.
    let steps = vec![
        step("r0", "A", 0, None, Incorrect, None),
        step("r1", "A", 1, Some("r0"), CompileError, None),
        step("r2", "A", 2, Some("r1"), Correct, None),
        step("r3", "A", 3, Some("r2"), Correct, None),
    ];
    let (out, report) = select_a(&steps);
    let kinds: Vec<(String, SftKind)> = out
        .sft
        .iter()
        .map(|r| (r.step_id.clone(), r.kind))
        .collect();
    assert_eq!(kinds, [("r2".to_string(), SftKind::Correctness)]);
    let r2 = &out.sft[0];
    assert_eq!(r2.parent_step_id.as_deref(), Some("r1"));
    assert_eq!((r2.speedup, r2.parent_speedup), (None, None));
    assert_eq!(report.dropped.get("sft/not_correct"), Some(&2), "r0, r1");
    assert_eq!(report.dropped.get("sft/not_timed"), Some(&1), "r3");
}

#[test]
fn a_cut_answer_is_never_an_sft_sample() {
    let mut cut = step("x0", "A", 0, None, Correct, Some(0.9));
    cut.response_cut = true;
    let (out, report) = select_a(&[cut]);
    assert!(out.sft.is_empty());
    assert_eq!(report.dropped.get("sft/answer_cut"), Some(&1));
}

/// `step` with its evaluation's candidate samples spread by `own` around their pairs' shares.
fn noisy(mut s: StepView, speedup: f64, own: f64) -> StepView {
    s.eval = Some(noisy_eval(Correct, Some(speedup), own));
    s
}

#[test]
fn faster_means_significantly_faster() {
    let mut no_samples = step("y4", "A", 4, Some("y1"), Correct, Some(3.0));
    if let Some(t) = no_samples
        .eval
        .as_mut()
        .and_then(|e| e.candidate_timing.as_mut())
    {
        t.process_samples_ms.clear();
        t.process_reference_samples_ms.clear();
    }
    let steps = vec![
        step("y0", "A", 0, None, Correct, Some(1.0)),
        // 1.5x eager, 1.5x its parent, tightly measured: a performance sample.
        step("y1", "A", 1, Some("y0"), Correct, Some(1.5)),
        // 1 % faster than y1 by its figure, but its samples spread by 50 %: not significant.
        noisy(step("y2", "A", 2, Some("y1"), Correct, None), 1.515, 0.5),
        // 2 % faster than y1, tightly measured: significant.
        step("y3", "A", 3, Some("y1"), Correct, Some(1.53)),
        // Timed, but without samples: no interval, never "faster".
        no_samples,
    ];
    let (out, report) = select_a(&steps);
    let perf: HashSet<String> = out
        .sft
        .iter()
        .filter(|r| r.kind == SftKind::Performance)
        .map(|r| r.step_id.clone())
        .collect();
    assert_eq!(perf, set(&["y1", "y3"]));
    let d = &report.dropped;
    assert_eq!(d.get("sft/not_faster_than_parent"), Some(&1), "y2: {d:?}");
    assert_eq!(d.get("sft/no_interval"), Some(&1), "y4: {d:?}");
    let c = &report.counters;
    assert_eq!(c.get("labels_timed"), Some(&5), "{c:?}");
    assert_eq!(
        c.get("labels_faster_not_significant_over_parent"),
        Some(&1),
        "{c:?}"
    );
    assert_eq!(c.get("labels_no_interval_over_eager"), Some(&1), "{c:?}");
    // y1, y3 over their parents; y0 over the reference is its speedup over eager (1.0: not
    // faster).
    assert_eq!(c.get("labels_significant_over_parent"), Some(&2), "{c:?}");

    let y3 = out.sft.iter().find(|r| r.step_id == "y3").unwrap();
    let gain = y3.labels.over_parent.unwrap();
    assert!((gain.value - 1.53 / 1.5).abs() < 1e-12, "{gain:?}");
    assert!(gain.low > 1.0 && gain.low < gain.value && gain.value < gain.high && gain.high < 1.03);
    let eager = y3.labels.over_eager.unwrap();
    assert!(eager.low < 1.53 && 1.53 < eager.high && eager.high - eager.low < 0.01);
    // no evaluation carries a compile baseline here: only that figure is missing
    assert_eq!(
        y3.labels.why_null.as_deref(),
        Some("over torch.compile: no evaluation of the task carries a compile baseline")
    );
    // SOL 0.5 ms over y3's 2 / 1.53 ms.
    let sol = y3.labels.sol_fraction.unwrap();
    assert!((sol - 0.5 * 1.53 / 2.0).abs() < 1e-12, "{sol}");
    assert_eq!(y3.stamp.device, "NVIDIA H200");
    assert_eq!(y3.stamp.method, "cuda_graph");
    assert_eq!(y3.stamp.ksmith, env!("CARGO_PKG_VERSION"));
    // The first step's parent is the reference: over it is over eager.
    let y0 = out.sft.iter().find(|r| r.step_id == "y0").unwrap();
    assert_eq!(y0.labels.over_parent, y0.labels.over_eager);
    // GRPO prompts carry their current program's interval over eager.
    // (y2's prompt, the first on y1, is the one kept for it.)
    let g = out.grpo.iter().find(|r| r.step_id == "y2").unwrap();
    assert_eq!(g.parent_labels.over_eager, y3_parent_interval(&out));
    assert_eq!(g.stamp.device, "NVIDIA H200");
}

/// y1's interval over eager as its own SFT row carries it.
fn y3_parent_interval(
    out: &ksmith_select::Selection,
) -> Option<ksmith_core::speedup_interval::Interval> {
    out.sft
        .iter()
        .find(|r| r.step_id == "y1")
        .and_then(|r| r.labels.over_eager)
}

#[test]
fn untimed_rows_have_null_labels_with_a_reason_and_a_cpu_stamp() {
    let steps = vec![step("c0", "A", 0, None, Correct, None)];
    let (out, report) = select_a(&steps);
    let c0 = out.sft.iter().find(|r| r.step_id == "c0").unwrap();
    assert_eq!(c0.kind, SftKind::Correctness);
    assert_eq!((c0.labels.over_eager, c0.labels.over_parent), (None, None));
    let why = c0.labels.why_null.as_deref().unwrap();
    assert!(why.contains("over eager: not timed"), "{why}");
    assert!(
        why.contains("speed-of-light: not a correct, timed program"),
        "{why}"
    );
    assert_eq!(c0.labels.sol_fraction, None);
    assert_eq!((c0.labels.over_compile, c0.labels.trivial), (None, None));
    assert!(why.contains("over torch.compile: not timed"), "{why}");
    assert_eq!(c0.stamp.device, "cpu (triton interpreter)");
    assert_eq!(c0.stamp.method, "not_measured");
    assert_eq!(report.counters.get("labels_timed"), None);
}

/// `s` with its task's `torch.compile` baseline `compile` times faster than eager: timed with
/// the eager reference beside it, every compiled sample exactly its pair's share.
fn with_compile(mut s: StepView, compile: f64) -> StepView {
    let (_, eager) = timings(2.0, 1.0, 0.0);
    let reference = eager.process_samples_ms[0].clone();
    let compiled: Vec<f64> = reference.iter().map(|r| r / compile).collect();
    let mut timing = timing_from_samples(vec![compiled], vec![reference]);
    timing.median_ms = 2.0 / compile;
    if let Some(e) = s.eval.as_mut() {
        e.compile_baseline = Some(CompileBaseline {
            mode: "default".into(),
            timing: Some(timing),
            speedup_over_eager: Some(compile),
            compile_s: Some(4.0),
            why: None,
        });
    }
    s
}

/// Task A's steps with a compile baseline 1.5x faster than eager: t1 gains 1.5x over eager
/// and nothing over compile (trivial), t2 and t3 gain over both.
fn trivial_trajectory() -> Vec<StepView> {
    vec![
        with_compile(step("t0", "A", 0, None, Correct, Some(1.0)), 1.5),
        with_compile(step("t1", "A", 1, Some("t0"), Correct, Some(1.5)), 1.5),
        with_compile(step("t2", "A", 2, Some("t1"), Correct, Some(2.0)), 1.5),
        with_compile(step("t3", "A", 3, Some("t2"), Correct, Some(2.5)), 1.5),
    ]
}

#[test]
fn a_step_that_only_matches_torch_compile_is_trivial_and_dropped_by_default() {
    let steps = trivial_trajectory();
    let (out, report) = select_a(&steps);
    let perf: HashSet<String> = out
        .sft
        .iter()
        .filter(|r| r.kind == SftKind::Performance)
        .map(|r| r.step_id.clone())
        .collect();
    assert_eq!(perf, set(&["t2", "t3"]), "t1 is trivial");
    assert_eq!(
        report.dropped.get("sft/trivial"),
        Some(&1),
        "{:?}",
        report.dropped
    );
    // t2's prompt shows t1, the best so far, but trivial: not a best-step prompt
    assert_eq!(by_id(&out.grpo, |r| &r.step_id), set(&["t3"]));
    assert_eq!(report.dropped.get("grpo/parent_trivial"), Some(&1));
    let c = &report.counters;
    assert_eq!(c.get("labels_trivial"), Some(&1), "{c:?}");
    assert_eq!(c.get("labels_not_trivial"), Some(&2), "{c:?}");
    assert_eq!(c.get("labels_trivial_not_judged"), Some(&1), "t0: {c:?}");
    assert_eq!(c.get("labels_significant_over_compile"), Some(&2), "{c:?}");
    assert_eq!(out.trivial_by_task, [("A".to_string(), 1)].into());
    // the labels: t2 is 2.0 / 1.5 over compile, its interval above 1
    let t2 = out.sft.iter().find(|r| r.step_id == "t2").unwrap();
    let over = t2.labels.over_compile.unwrap();
    assert!((over.value - 2.0 / 1.5).abs() < 1e-12, "{over:?}");
    assert!(over.low > 1.3 && over.high < 1.37, "{over:?}");
    assert_eq!(t2.labels.trivial, Some(false));
    // a GRPO prompt's current program carries its speedup over compile too
    let g = out.grpo.iter().find(|r| r.step_id == "t3").unwrap();
    assert_eq!(g.parent_labels.over_compile, Some(over));
    // the first step's prompt shows the reference: 1 / 1.5 over compile
    let t0 = out.sft.iter().find(|r| r.step_id == "t0").unwrap();
    assert_eq!(
        t0.labels.trivial, None,
        "no significant gain over eager to explain"
    );
}

#[test]
fn trivial_steps_can_be_kept_and_the_margin_is_configurable() {
    let steps = trivial_trajectory();
    let mut report = StageReport::new("select");
    let keep = SelectConfig {
        trivial_steps: TrivialSteps::Keep,
        ..no_balance()
    };
    let out = select(&steps, &[task("A", "act", 1, 0)], &keep, &mut report);
    let perf = by_id(
        &out.sft
            .iter()
            .filter(|r| r.kind == SftKind::Performance)
            .cloned()
            .collect::<Vec<_>>(),
        |r| &r.step_id,
    );
    assert_eq!(perf, set(&["t1", "t2", "t3"]));
    assert_eq!(by_id(&out.grpo, |r| &r.step_id), set(&["t2", "t3"]));
    let t1 = out.sft.iter().find(|r| r.step_id == "t1").unwrap();
    assert_eq!(t1.labels.trivial, Some(true), "kept, still labelled");
    assert_eq!(report.counters.get("labels_trivial"), Some(&1));
    // a margin of 40 % over compile: t2 (1.33x over compile) is trivial too
    let mut report = StageReport::new("select");
    let wide = SelectConfig {
        min_gain_over_compile: 1.4,
        ..no_balance()
    };
    let out = select(&steps, &[task("A", "act", 1, 0)], &wide, &mut report);
    assert_eq!(report.counters.get("labels_trivial"), Some(&2));
    assert_eq!(out.trivial_by_task, [("A".to_string(), 2)].into());
}
