//! Multi-turn chains: per island, the lineage (parent -> child -> ...) of its best step, for the
//! conversations in which a model calls the evaluator as a tool and revises from its report.
//!
//! The rules, in the order they apply (each failure is counted as `chains/<reason>`, once per
//! island):
//!
//! - The chain ends at the island's best step: its fastest correct step (the earliest when
//!   untimed, as on the CPU interpreter). An island without a correct step has no chain.
//! - Every step of the chain has a whole answer (not cut), a program and an evaluation, and its
//!   parent is the step before it; the chain holds the latest `chain_max_turns` steps of the
//!   lineage and at least `chain_min_turns`. A longer lineage starts later.
//! - It ends better than it starts: the last program beats the first turn's program (a failing
//!   one is beaten by any correct program; a correct one by more than `chain_min_gain` times its
//!   speedup, both timed) and the program the first prompt shows (the reference counts as 1.0x
//!   in a timed rollout; an untimed start is not compared).
//! - Its first prompt shows none of its turns' programs (the editable block, compared line by
//!   line without indentation and blank lines): a conversation must never show an answer
//!   before the model writes it.
//! - It fits `chain_max_tokens` (prompt, answers, programs and evaluations, counted with
//!   `approx_chars_div_4`).
//!
//! Of the starts that pass, the earliest (the longest chain) is kept.

use std::collections::{BTreeMap, HashMap};

use ksmith_core::chat::ChatMessage;
use ksmith_core::evaluation::ERROR_TAIL_CHARS;
use ksmith_core::evolve_block::split_block;
use ksmith_core::ids::IdHasher;
use ksmith_core::report::StageReport;
use ksmith_core::tables::{ChainRow, ChainTurn, TaskRow};
use ksmith_core::tokens::{APPROX_CHARS_DIV_4, approx_conversation_tokens, approx_tokens};

use crate::config::SelectConfig;
use crate::drops::{DropReason, SampleSet, count_drop};
use crate::selection::split;
use crate::trajectory::{Parent, StepView, Trajectories};

/// Tokens of an evaluation report besides its error log (the JSON keys and values).
const REPORT_TOKENS: u64 = 40;

/// A program's state, as far as "better" can tell.
#[derive(Debug, Clone, Copy, PartialEq)]
enum State {
    /// Not correct (or not evaluated).
    Failing,
    /// Correct, with its speedup over eager when timed.
    Correct(Option<f64>),
}

impl State {
    fn of(step: &StepView) -> State {
        if step.is_correct() {
            State::Correct(step.speedup())
        } else {
            State::Failing
        }
    }
}

/// True when `end` beats `other` by `gain`. A failing `other` is beaten by any correct end; a
/// correct one only by a timed end faster than `gain` times its timed speedup, unless
/// `untimed_ok` and neither is timed.
fn beats(end: State, other: State, gain: f64, untimed_ok: bool) -> bool {
    match (end, other) {
        (State::Failing, _) => false,
        (State::Correct(_), State::Failing) => true,
        (State::Correct(Some(e)), State::Correct(Some(o))) => e > o * gain,
        (State::Correct(None), State::Correct(None)) => untimed_ok,
        (State::Correct(_), State::Correct(_)) => false,
    }
}

/// A step that can be a turn: a whole answer, a program and an evaluation.
fn usable(step: &StepView) -> bool {
    !step.response.trim().is_empty()
        && !step.response_cut
        && step.program.is_some()
        && step.eval.is_some()
}

/// The program's editable block as the answer reader splits it (the whole program when it has
/// no block), one trimmed line per non-empty line.
fn normalized_block(program: &str) -> String {
    let body = split_block(program).map_or(program, |b| b.body);
    normalized(body.lines())
}

fn normalized<'a>(lines: impl Iterator<Item = &'a str>) -> String {
    lines
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join("\n")
}

/// True when the prompt shows the editable block of one of `turns`' programs.
fn shows_a_turn(prompt: &[ChatMessage], turns: &[&StepView]) -> bool {
    let text = normalized(prompt.iter().flat_map(|m| m.content.lines()));
    turns.iter().any(|t| {
        let block = normalized_block(t.program.as_deref().unwrap_or_default());
        !block.is_empty() && text.contains(&block)
    })
}

/// Approximate tokens of the conversation a chain becomes: its prompt, and per turn the answer,
/// the program and an evaluation report.
fn chain_tokens(prompt: &[ChatMessage], turns: &[&StepView]) -> u64 {
    let per_turn: u64 = turns
        .iter()
        .map(|t| {
            let log = t.eval.as_ref().map(|e| e.error_log.as_str()).unwrap_or("");
            let tail = log.chars().count().min(ERROR_TAIL_CHARS) as u64;
            approx_tokens(&t.response)
                + approx_tokens(t.program.as_deref().unwrap_or_default())
                + tail.div_ceil(4)
                + REPORT_TOKENS
                + 8
        })
        .sum();
    approx_conversation_tokens(prompt) + per_turn
}

/// The island's best step: the fastest correct one (ties and untimed: the earliest).
fn best_step<'a>(island: &[&'a StepView]) -> Option<&'a StepView> {
    island
        .iter()
        .copied()
        .filter(|s| s.is_correct())
        .min_by(|a, b| {
            let (sa, sb) = (a.speedup(), b.speedup());
            sb.is_some()
                .cmp(&sa.is_some())
                .then(sb.unwrap_or(0.0).total_cmp(&sa.unwrap_or(0.0)))
                .then((a.iteration, &a.step_id).cmp(&(b.iteration, &b.step_id)))
        })
}

/// The lineage of `best`, parent first: at most `max` steps, stopping at the reference or at a
/// parent missing from the table. Also returns the parent of the first step.
fn lineage<'a>(
    best: &'a StepView,
    traj: &Trajectories<'a>,
    max: usize,
) -> (Vec<&'a StepView>, Parent<'a>) {
    let mut out = vec![best];
    let mut parent = traj.parent(best);
    while let Parent::Step(p) = parent {
        if out.len() >= max {
            break;
        }
        out.push(p);
        parent = traj.parent(p);
    }
    out.reverse();
    (out, parent)
}

/// The state of the program a chain's first prompt shows (the first step's parent).
fn start_state(parent: Parent<'_>, end: State) -> Option<State> {
    match parent {
        // The reference runs at eager speed by definition; in an untimed rollout it is not
        // compared.
        Parent::Reference => Some(match end {
            State::Correct(Some(_)) => State::Correct(Some(1.0)),
            _ => State::Correct(None),
        }),
        Parent::Step(p) => Some(State::of(p)),
        Parent::Missing => None,
    }
}

/// The chain of `steps[k..]`, or why it is not one.
fn judge_start(
    steps: &[&StepView],
    k: usize,
    first_parent: Parent<'_>,
    cfg: &SelectConfig,
) -> Result<(), DropReason> {
    let turns = &steps[k..];
    let first = turns[0];
    if first.prompt.is_empty() {
        return Err(DropReason::EmptyPrompt);
    }
    let end = State::of(turns[turns.len() - 1]);
    let start_parent = if k == 0 {
        first_parent
    } else {
        Parent::Step(steps[k - 1])
    };
    let gain = cfg.chain_min_gain;
    let beats_start = match start_state(start_parent, end) {
        Some(start) => beats(end, start, gain, true),
        None => true,
    };
    if !beats(end, State::of(first), gain, false) || !beats_start {
        return Err(DropReason::ChainNotBetter);
    }
    if shows_a_turn(&first.prompt, turns) {
        return Err(DropReason::LaterProgramInPrompt);
    }
    if chain_tokens(&first.prompt, turns) > cfg.chain_max_tokens {
        return Err(DropReason::OverTokenBudget);
    }
    Ok(())
}

/// One turn of a chain.
fn turn(step: &StepView) -> Option<ChainTurn> {
    let eval = step.eval.as_ref()?;
    Some(ChainTurn {
        step_id: step.step_id.clone(),
        iteration: step.iteration,
        response: step.response.clone(),
        program: step.program.clone()?,
        status: eval.status,
        hack: eval.hack,
        correct: step.is_correct(),
        speedup: step.speedup(),
        error_log: eval.error_log.clone(),
    })
}

/// The chain row of `turns`, whose first step's parent is `start`.
fn chain_row(
    task: &TaskRow,
    island: u32,
    turns: &[&StepView],
    start: Parent<'_>,
    cfg: &SelectConfig,
) -> Option<ChainRow> {
    let first = turns.first()?;
    let last = turns.last()?;
    let mut id = IdHasher::new();
    id.part("chains");
    for t in turns {
        id.part(&t.step_id);
    }
    let start_speedup = match start_state(start, State::of(last)) {
        Some(State::Correct(s)) => s,
        _ => None,
    };
    Some(ChainRow {
        sample_id: id.finish(),
        backend: last.backend,
        split: split(task, cfg),
        task_id: task.task_id.clone(),
        island,
        family: task.family.clone(),
        level: task.level,
        cluster: task.cluster,
        prompt: first.prompt.clone(),
        start_step_id: first.parent_id.clone(),
        start_speedup,
        turns: turns.iter().map(|s| turn(s)).collect::<Option<Vec<_>>>()?,
        tokens: chain_tokens(&first.prompt, turns),
        token_counter: APPROX_CHARS_DIV_4.to_string(),
        teacher: last.teacher.clone(),
        repo: task.repo.clone(),
        license: task.license.clone(),
    })
}

/// One chain per (task, island) that passes the rules; every island without one is counted
/// under the reason of its shortest candidate.
pub fn chains(
    steps: &[StepView],
    tasks: &HashMap<&str, &TaskRow>,
    cfg: &SelectConfig,
    report: &mut StageReport,
) -> Vec<ChainRow> {
    let traj = Trajectories::new(steps);
    let mut islands: BTreeMap<(&str, u32), Vec<&StepView>> = BTreeMap::new();
    for s in steps {
        islands
            .entry((s.task_id.as_str(), s.island))
            .or_default()
            .push(s);
    }
    let mut out = Vec::new();
    for ((task_id, island), members) in islands {
        let Some(task) = tasks.get(task_id).copied() else {
            count_drop(report, SampleSet::Chains, DropReason::UnknownTask);
            continue;
        };
        let Some(best) = best_step(&members) else {
            count_drop(report, SampleSet::Chains, DropReason::NoCorrectStep);
            continue;
        };
        let (steps, first_parent) = lineage(best, &traj, cfg.chain_max_turns as usize);
        let min = cfg.chain_min_turns as usize;
        // A step that cannot be a turn breaks the chain: it starts after the last such step.
        let lo = steps.iter().rposition(|s| !usable(s)).map_or(0, |i| i + 1);
        if steps.len() < lo + min {
            count_drop(report, SampleSet::Chains, DropReason::ChainTooShort);
            continue;
        }
        let mut verdict = Err(DropReason::ChainTooShort);
        for k in lo..=steps.len() - min {
            verdict = judge_start(&steps, k, first_parent, cfg).map(|()| k);
            if verdict.is_ok() {
                break;
            }
        }
        match verdict {
            Ok(k) => {
                let start = if k == 0 {
                    first_parent
                } else {
                    Parent::Step(steps[k - 1])
                };
                match chain_row(task, island, &steps[k..], start, cfg) {
                    Some(row) => out.push(row),
                    None => count_drop(report, SampleSet::Chains, DropReason::ChainTooShort),
                }
            }
            Err(reason) => count_drop(report, SampleSet::Chains, reason),
        }
    }
    out
}

/// The answer cases the rollout's reader runs, for the tests.
#[cfg(test)]
#[path = "../../ksmith-core/tests/support/answer_cases.rs"]
mod answer_cases;

#[cfg(test)]
mod tests {
    use super::*;
    use ksmith_core::evaluation::{EvalResult, EvalStatus, Hardware, Timing, TimingMethod};
    use ksmith_core::evolve_block::{BLOCK_END, BLOCK_START};

    fn eval(correct: bool, speedup: Option<f64>) -> EvalResult {
        let timing = |ms: f64| Timing {
            median_ms: ms,
            iqr_ms: 0.0,
            cv: 0.0,
            samples: 10,
            method: TimingMethod::CudaEvent,
            l2_policy: "flush".into(),
            process_samples_ms: vec![],
            process_reference_samples_ms: vec![],
        };
        EvalResult {
            status: if correct {
                EvalStatus::Correct
            } else {
                EvalStatus::Incorrect
            },
            hack: None,
            error_log: if correct {
                String::new()
            } else {
                "max abs error 3.2 at output 0".into()
            },
            errors: vec![],
            trials_passed: u32::from(correct),
            trials: 1,
            candidate_timing: speedup.map(|s| timing(1.0 / s)),
            reference_timing: speedup.map(|_| timing(1.0)),
            speedup,
            warnings: vec![],
            hardware: Hardware::default(),
            elapsed_ms: 1,
            speed_of_light: None,
            compile_baseline: None,
        }
    }

    /// Step `i` of task `t`, island `island`, with parent `parent` (an index) and its outcome.
    fn step(
        i: u32,
        island: u32,
        parent: Option<u32>,
        correct: bool,
        speedup: Option<f64>,
    ) -> StepView {
        StepView {
            step_id: format!("s{i}"),
            task_id: "t".into(),
            iteration: i,
            island,
            backend: ksmith_core::evaluation::Backend::Triton,
            parent_id: parent.map(|p| format!("s{p}")),
            parent_program: String::new(),
            prompt: vec![
                ChatMessage::new("system", "be fast"),
                ChatMessage::new("user", format!("prompt of step {i}")),
            ],
            response: format!("idea {i}"),
            response_cut: false,
            program: Some(format!(
                "import torch\n# EVOLVE-BLOCK-START\nclass ModelNew:\n    v = {i}\n# EVOLVE-BLOCK-END\n"
            )),
            eval: Some(eval(correct, speedup)),
            teacher: "m".into(),
        }
    }

    fn task() -> TaskRow {
        TaskRow {
            task_id: "t".into(),
            repo: "org/repo".into(),
            class_name: "Thing".into(),
            program: "class Model: pass\n".into(),
            family: "activation".into(),
            level: 1,
            cluster: -1,
            license: None,
            selected_as: "center".into(),
            alt_sizes: "[]".into(),
        }
    }

    fn run(steps: &[StepView], cfg: &SelectConfig) -> (Vec<ChainRow>, StageReport) {
        let task = task();
        let tasks: HashMap<&str, &TaskRow> = [("t", &task)].into();
        let mut report = StageReport::default();
        let rows = chains(steps, &tasks, cfg, &mut report);
        (rows, report)
    }

    fn dropped(report: &StageReport, reason: DropReason) -> u64 {
        report
            .dropped
            .get(&format!("chains/{reason}"))
            .copied()
            .unwrap_or(0)
    }

    #[test]
    fn a_failing_translation_repaired_then_improved_is_one_chain_ending_at_the_best() {
        let steps = vec![
            step(0, 0, None, false, None),
            step(1, 0, Some(0), true, Some(1.2)),
            step(2, 0, Some(1), true, Some(2.0)),
            // A sibling that failed is not in the lineage.
            step(3, 0, Some(1), false, None),
        ];
        let (rows, _) = run(&steps, &SelectConfig::default());
        assert_eq!(rows.len(), 1);
        let row = &rows[0];
        let ids: Vec<&str> = row.turns.iter().map(|t| t.step_id.as_str()).collect();
        assert_eq!(ids, ["s0", "s1", "s2"]);
        assert_eq!(row.prompt, steps[0].prompt);
        assert_eq!(row.start_step_id, None);
        assert_eq!(
            row.start_speedup,
            Some(1.0),
            "the reference in a timed rollout"
        );
        assert!(!row.turns[0].correct && row.turns[0].error_log.contains("max abs"));
        assert_eq!(row.turns[2].speedup, Some(2.0));
        assert!(row.tokens > 0);
    }

    #[test]
    fn untimed_chains_need_a_failing_first_turn() {
        // CPU interpreter: a repair (failing -> correct) is progress; correct -> correct is not
        // measurable.
        let repaired = vec![
            step(0, 0, None, false, None),
            step(1, 0, Some(0), true, None),
        ];
        assert_eq!(run(&repaired, &SelectConfig::default()).0.len(), 1);
        let unmeasured = vec![
            step(0, 0, None, true, None),
            step(1, 0, Some(0), true, None),
        ];
        let (rows, report) = run(&unmeasured, &SelectConfig::default());
        assert!(rows.is_empty());
        assert_eq!(
            dropped(&report, DropReason::ChainTooShort),
            1,
            "best is step 0"
        );
    }

    #[test]
    fn a_chain_that_does_not_beat_its_start_by_the_gain_is_dropped() {
        let steps = vec![
            step(0, 0, None, true, Some(1.5)),
            step(1, 0, Some(0), true, Some(1.6)),
        ];
        let (rows, _) = run(&steps, &SelectConfig::default());
        assert_eq!(rows.len(), 1);
        let cfg = SelectConfig {
            chain_min_gain: 1.1,
            ..Default::default()
        };
        let (rows, report) = run(&steps, &cfg);
        assert!(rows.is_empty());
        assert_eq!(dropped(&report, DropReason::ChainNotBetter), 1);
        // A failing first turn after a fast start program (migrated from island 1): the end
        // must beat the start too.
        let steps = vec![
            step(0, 1, None, true, Some(1.5)),
            step(1, 0, Some(0), false, None),
            step(2, 0, Some(1), true, Some(1.4)),
        ];
        let cfg = SelectConfig {
            chain_max_turns: 2,
            ..Default::default()
        };
        let (rows, report) = run(&steps, &cfg);
        assert!(rows.is_empty(), "{rows:?}");
        assert_eq!(dropped(&report, DropReason::ChainNotBetter), 1);
        assert_eq!(dropped(&report, DropReason::ChainTooShort), 1, "island 1");
    }

    #[test]
    fn long_lineages_keep_their_latest_steps_and_cut_ones_break_them() {
        let mut steps: Vec<StepView> = (0..6)
            .map(|i| {
                step(
                    i,
                    0,
                    i.checked_sub(1),
                    i > 0,
                    (i > 0).then(|| 1.0 + f64::from(i)),
                )
            })
            .collect();
        let cfg = SelectConfig {
            chain_max_turns: 3,
            ..Default::default()
        };
        let (rows, _) = run(&steps, &cfg);
        let ids: Vec<&str> = rows[0].turns.iter().map(|t| t.step_id.as_str()).collect();
        assert_eq!(ids, ["s3", "s4", "s5"]);
        assert_eq!(rows[0].start_step_id.as_deref(), Some("s2"));
        assert_eq!(rows[0].start_speedup, Some(3.0));
        assert_eq!(rows[0].prompt, steps[3].prompt);
        steps[4].response_cut = true;
        let (rows, report) = run(&steps, &cfg);
        assert!(rows.is_empty());
        assert_eq!(dropped(&report, DropReason::ChainTooShort), 1);
    }

    #[test]
    fn a_first_prompt_showing_a_turns_program_starts_the_chain_later_or_drops_it() {
        let mut steps: Vec<StepView> = (0..3)
            .map(|i| step(i, 0, i.checked_sub(1), true, Some(1.0 + f64::from(i))))
            .collect();
        // Step 0's prompt shows (re-indented) the block of step 2's program.
        steps[0].prompt[1].content = "Top program:\n  class ModelNew:\n        v = 2\n".into();
        let (rows, _) = run(&steps, &SelectConfig::default());
        let ids: Vec<&str> = rows[0].turns.iter().map(|t| t.step_id.as_str()).collect();
        assert_eq!(
            ids,
            ["s1", "s2"],
            "the chain starts after the leaking prompt"
        );
        steps[1].prompt[1].content = steps[0].prompt[1].content.clone();
        let (rows, report) = run(&steps, &SelectConfig::default());
        assert!(rows.is_empty());
        assert_eq!(dropped(&report, DropReason::LaterProgramInPrompt), 1);
    }

    #[test]
    fn the_token_budget_starts_long_chains_later() {
        let steps: Vec<StepView> = (0..4)
            .map(|i| step(i, 0, i.checked_sub(1), true, Some(1.0 + f64::from(i))))
            .collect();
        let all: Vec<&StepView> = steps.iter().collect();
        let two = chain_tokens(&steps[2].prompt, &all[2..]);
        let three = chain_tokens(&steps[1].prompt, &all[1..]);
        let cfg = SelectConfig {
            chain_max_tokens: (two + three) / 2,
            ..Default::default()
        };
        let (rows, _) = run(&steps, &cfg);
        assert_eq!(rows[0].turns.len(), 2);
        assert!(rows[0].tokens <= cfg.chain_max_tokens);
        let cfg = SelectConfig {
            chain_max_tokens: two - 1,
            ..Default::default()
        };
        let (rows, report) = run(&steps, &cfg);
        assert!(rows.is_empty());
        assert_eq!(dropped(&report, DropReason::OverTokenBudget), 1);
    }

    #[test]
    fn islands_without_a_correct_step_have_no_chain() {
        let steps = vec![step(0, 0, None, false, None)];
        let (rows, report) = run(&steps, &SelectConfig::default());
        assert!(rows.is_empty());
        assert_eq!(dropped(&report, DropReason::NoCorrectStep), 1);
    }

    /// Chains find a turn's program in a prompt by its editable block as the answer reader
    /// (`ksmith_core::evolve_block`) splits it: over every parent and program of the shared
    /// answer cases, with marker lines as written and indented or annotated, a prompt that
    /// shows the block shows the turn and one that shows only the fixed code does not.
    #[test]
    fn a_program_in_a_prompt_is_its_block_as_the_reader_splits_it() {
        let mut programs: Vec<String> = Vec::new();
        for c in answer_cases::cases() {
            programs.push(c.parent);
            programs.extend(c.program);
        }
        let variants = programs.iter().flat_map(|p| {
            [
                p.clone(),
                p.replace(BLOCK_START, &format!("    {BLOCK_START}")),
                p.replace(BLOCK_START, &format!("{BLOCK_START} (edit below)"))
                    .replace(BLOCK_END, &format!("{BLOCK_END}: edit above")),
            ]
        });
        let mut checked = 0;
        for program in variants {
            let Ok(block) = split_block(&program) else {
                continue;
            };
            if block.body.trim().is_empty() {
                continue;
            }
            let mut turn = step(1, 0, Some(0), true, Some(2.0));
            turn.program = Some(program.clone());
            let shows = |text: String| shows_a_turn(&[ChatMessage::new("user", text)], &[&turn]);
            assert!(
                shows(format!("Current block:\n{}", block.body)),
                "{program}"
            );
            assert!(
                !shows(format!("{}{}", block.prefix, block.suffix)),
                "{program}"
            );
            checked += 1;
        }
        assert!(checked >= 100, "{checked} programs with a block");
    }
}
