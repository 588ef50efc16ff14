//! The whole selection as a pure function from steps and tasks to SFT and GRPO rows.

use std::collections::{BTreeMap, HashMap, HashSet};

use ksmith_core::chat::ChatMessage;
use ksmith_core::evaluation::Stamp;
use ksmith_core::ids::IdHasher;
use ksmith_core::report::StageReport;
use ksmith_core::tables::{
    ChainRow, GrpoRow, GrpoSelection, SftKind, SftRow, SpeedLabels, Split, TaskRow,
};
use rayon::prelude::*;

use crate::balance::{Member, balance};
use crate::config::{BestScope, GrpoRule, SelectConfig};
use crate::drops::{DropReason, SampleSet, count_drop};
use crate::labels::Labeller;
use crate::rules::{SftVerdict, grpo_verdict, sft_verdict};
use crate::split::{split_of, unit_hash};
use crate::trajectory::{BestSoFar, Parent, StepView, Trajectories};
use ksmith_core::tokens::{APPROX_CHARS_DIV_4, approx_conversation_tokens};

/// The selected rows.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Selection {
    /// SFT samples (correctness and performance), sorted by split, kind, task, iteration.
    pub sft: Vec<SftRow>,
    /// GRPO prompts, sorted by split, task, iteration.
    pub grpo: Vec<GrpoRow>,
    /// Starts of agent environments (`[select] env_rule`), sorted by split, task, iteration.
    pub env: Vec<GrpoRow>,
    /// Multi-turn chains, sorted by split, task, island.
    pub chains: Vec<ChainRow>,
    /// Trivial steps (significantly faster than eager, not than `torch.compile`) per task.
    pub trivial_by_task: BTreeMap<String, u64>,
}

fn sample_id(set: &str, kind: &str, step_id: &str) -> String {
    IdHasher::new().part(set).part(kind).part(step_id).finish()
}

fn grpo_selection(rule: GrpoRule) -> GrpoSelection {
    match rule {
        GrpoRule::BestSteps => GrpoSelection::BestSteps,
        GrpoRule::AllSteps => GrpoSelection::AllSteps,
        GrpoRule::FirstSteps => GrpoSelection::FirstSteps,
    }
}

/// Eager runtime of each task and the stamp of the evaluation that timed it: from the earliest
/// step whose evaluation timed the reference.
fn eager_by_task(steps: &[StepView]) -> HashMap<&str, (f64, Stamp)> {
    let mut out: HashMap<&str, (u32, &str, f64, Stamp)> = HashMap::new();
    for s in steps {
        if let Some(ms) = s.eager_ms() {
            let key = (s.iteration, s.step_id.as_str());
            let e = out.entry(s.task_id.as_str()).or_insert((
                s.iteration,
                s.step_id.as_str(),
                ms,
                s.stamp(),
            ));
            if key < (e.0, e.1) {
                *e = (s.iteration, s.step_id.as_str(), ms, s.stamp());
            }
        }
    }
    out.into_iter().map(|(k, v)| (k, (v.2, v.3))).collect()
}

/// Counts, over the correct timed steps, how many are significantly faster than eager, than
/// `torch.compile` and than their parent (by the SFT factors and `min_gain_over_compile`), how
/// many only look faster (the figure is above the factor, the interval's lower bound is not),
/// how many have no interval, and how many are `trivial`, not trivial or cannot be judged
/// (`labels_*` counters, the `significance` of `selection.json`).
fn count_significance(
    step: &StepView,
    labels: &SpeedLabels,
    cfg: &SelectConfig,
    report: &mut StageReport,
) {
    if step.speedup().is_none() {
        return;
    }
    report.count("labels_timed", 1);
    let trivial = match labels.trivial {
        Some(true) => "labels_trivial",
        Some(false) => "labels_not_trivial",
        None => "labels_trivial_not_judged",
    };
    report.count(trivial, 1);
    let judged = [
        ("over_eager", labels.over_eager, cfg.sft_min_speedup),
        (
            "over_compile",
            labels.over_compile,
            cfg.min_gain_over_compile,
        ),
        (
            "over_parent",
            labels.over_parent,
            cfg.sft_min_gain_over_parent,
        ),
    ];
    for (what, interval, factor) in judged {
        match interval {
            None => report.count(&format!("labels_no_interval_{what}"), 1),
            Some(i) if i.above(factor) => report.count(&format!("labels_significant_{what}"), 1),
            Some(i) if i.value > factor => {
                report.count(&format!("labels_faster_not_significant_{what}"), 1)
            }
            Some(_) => report.count(&format!("labels_not_faster_{what}"), 1),
        }
    }
}

/// A step taken for SFT, before its row is built.
type SftCandidate<'a> = (SftKind, &'a StepView, &'a TaskRow, Parent<'a>);
/// A step taken for GRPO, before its row is built.
type GrpoCandidate<'a> = (&'a StepView, &'a TaskRow, Parent<'a>);

/// Judges prompts for one prompt set (GRPO or environment starts) under one rule, keeping at
/// most `grpo_max_prompts_per_parent` prompts per current program.
struct PromptPicker<'a> {
    set: SampleSet,
    rule: GrpoRule,
    per_parent: HashMap<String, u32>,
    taken: Vec<GrpoCandidate<'a>>,
}

impl<'a> PromptPicker<'a> {
    fn new(set: SampleSet, rule: GrpoRule) -> Self {
        PromptPicker {
            set,
            rule,
            per_parent: HashMap::new(),
            taken: Vec::new(),
        }
    }

    /// Takes `step`'s prompt (whose current program has the labels `current`) or counts why
    /// not.
    fn judge(
        &mut self,
        (step, task, parent): GrpoCandidate<'a>,
        current: &SpeedLabels,
        best: &BestSoFar,
        cfg: &SelectConfig,
        report: &mut StageReport,
    ) {
        match grpo_verdict(self.rule, step, parent, current, best, cfg) {
            Ok(()) if approx_conversation_tokens(&step.prompt) > cfg.max_tokens => {
                count_drop(report, self.set, DropReason::OverTokenBudget);
            }
            Ok(()) => {
                let parent_key = match parent {
                    Parent::Step(p) => format!("step:{}", p.step_id),
                    _ => format!("reference:{}", step.task_id),
                };
                let n = self.per_parent.entry(parent_key).or_default();
                if cfg.grpo_max_prompts_per_parent > 0 && *n >= cfg.grpo_max_prompts_per_parent {
                    count_drop(report, self.set, DropReason::ParentPromptLimit);
                } else {
                    *n += 1;
                    self.taken.push((step, task, parent));
                }
            }
            Err(reason) => count_drop(report, self.set, reason),
        }
    }
}

/// Selects SFT samples, GRPO prompts, environment starts and multi-turn chains from `steps`,
/// counting every drop in `report`.
///
/// Phases: `judge` every step once for each set, build the rows (`sft_row`, `grpo_row`), drop
/// SFT samples over the token budget, pick one chain per island ([`crate::chains`]),
/// `keep_balanced` per set (per kind for SFT), sort, and count what was kept.
pub fn select(
    steps: &[StepView],
    tasks: &[TaskRow],
    cfg: &SelectConfig,
    report: &mut StageReport,
) -> Selection {
    let tasks: HashMap<&str, &TaskRow> = tasks.iter().map(|t| (t.task_id.as_str(), t)).collect();
    let eager = eager_by_task(steps);
    let labeller = Labeller::new(steps, cfg.bootstrap(), cfg.min_gain_over_compile);
    let (sft_candidates, grpo_candidates, env_candidates, trivial_by_task) =
        judge(steps, &tasks, &labeller, cfg, report);
    let selection = grpo_selection(cfg.grpo_rule);
    let env_selection = grpo_selection(cfg.env_rule);
    let mut sft: Vec<SftRow> = sft_candidates
        .par_iter()
        .map(|&(kind, step, task, parent)| sft_row(kind, step, task, parent, &labeller, cfg))
        .collect();
    let grpo: Vec<GrpoRow> = grpo_candidates
        .par_iter()
        .map(|&(step, task, parent)| {
            grpo_row(selection, step, task, parent, &eager, &labeller, cfg)
        })
        .collect();
    let env: Vec<GrpoRow> = env_candidates
        .par_iter()
        .map(|&(step, task, parent)| {
            grpo_row(env_selection, step, task, parent, &eager, &labeller, cfg)
        })
        .collect();
    let chains = crate::chains::chains(steps, &tasks, cfg, report);

    sft.retain(|r| {
        let ok = r.tokens <= cfg.max_tokens;
        if !ok {
            count_drop(report, SampleSet::Sft, DropReason::OverTokenBudget);
        }
        ok
    });
    let mut kept_sft = Vec::new();
    for kind in [SftKind::Correctness, SftKind::Performance] {
        let rows: Vec<SftRow> = sft.iter().filter(|r| r.kind == kind).cloned().collect();
        let member = |r: &SftRow| (r.level, r.family.clone(), r.sample_id.clone());
        kept_sft.extend(keep_balanced(rows, member, SampleSet::Sft, cfg, report));
    }
    let member = |r: &GrpoRow| (r.level, r.family.clone(), r.sample_id.clone());
    let mut kept_grpo = keep_balanced(grpo, member, SampleSet::Grpo, cfg, report);
    let mut kept_env = keep_balanced(env, member, SampleSet::Env, cfg, report);
    let member = |r: &ChainRow| (r.level, r.family.clone(), r.sample_id.clone());
    let mut kept_chains = keep_balanced(chains, member, SampleSet::Chains, cfg, report);

    kept_sft.sort_by(|a, b| {
        (a.split, a.kind, &a.task_id, a.iteration, &a.step_id).cmp(&(
            b.split,
            b.kind,
            &b.task_id,
            b.iteration,
            &b.step_id,
        ))
    });
    for rows in [&mut kept_grpo, &mut kept_env] {
        rows.sort_by(|a, b| {
            (a.split, &a.task_id, a.iteration, &a.step_id).cmp(&(
                b.split,
                &b.task_id,
                b.iteration,
                &b.step_id,
            ))
        });
    }
    kept_chains
        .sort_by(|a, b| (a.split, &a.task_id, a.island).cmp(&(b.split, &b.task_id, b.island)));
    let selection = Selection {
        sft: kept_sft,
        grpo: kept_grpo,
        env: kept_env,
        chains: kept_chains,
        trivial_by_task,
    };
    count_kept(&selection, report);
    selection
}

/// The steps each per-step set took: SFT, GRPO, environment starts; and the trivial steps per
/// task.
type Judged<'a> = (
    Vec<SftCandidate<'a>>,
    Vec<GrpoCandidate<'a>>,
    Vec<GrpoCandidate<'a>>,
    BTreeMap<String, u64>,
);

/// Judges every step once for SFT, once for GRPO and once as an environment start, in a fixed
/// order (so "earliest" decisions do not depend on the input order); returns the steps taken
/// for each set and counts the others by reason.
fn judge<'a>(
    steps: &'a [StepView],
    tasks: &HashMap<&str, &'a TaskRow>,
    labeller: &Labeller<'_>,
    cfg: &SelectConfig,
    report: &mut StageReport,
) -> Judged<'a> {
    let traj = Trajectories::new(steps);
    let best = BestSoFar::new(steps, cfg.grpo_best_scope == BestScope::Island, labeller);
    let mut order: Vec<&StepView> = steps.iter().collect();
    order.sort_by(|a, b| {
        (a.task_id.as_str(), a.iteration, a.step_id.as_str()).cmp(&(
            b.task_id.as_str(),
            b.iteration,
            b.step_id.as_str(),
        ))
    });
    let mut untimed_correct = 0u64;
    let mut sft_candidates: Vec<SftCandidate<'a>> = Vec::new();
    let mut grpo = PromptPicker::new(SampleSet::Grpo, cfg.grpo_rule);
    let mut env = PromptPicker::new(SampleSet::Env, cfg.env_rule);
    let mut answers_seen: HashSet<(String, String)> = HashSet::new();
    let mut trivial_by_task: BTreeMap<String, u64> = BTreeMap::new();
    for step in order {
        let Some(task) = tasks.get(step.task_id.as_str()).copied() else {
            for set in [SampleSet::Sft, SampleSet::Grpo, SampleSet::Env] {
                count_drop(report, set, DropReason::UnknownTask);
            }
            continue;
        };
        let parent = traj.parent(step);
        if step.is_correct() && step.speedup().is_none() {
            untimed_correct += 1;
        }
        let labels = labeller.labels(step, parent);
        count_significance(step, &labels, cfg, report);
        if labels.trivial == Some(true) {
            *trivial_by_task.entry(step.task_id.clone()).or_default() += 1;
        }
        match sft_verdict(step, parent, &labels, cfg) {
            SftVerdict::Take(kind) => {
                let key = (step.task_id.clone(), step.response.trim().to_string());
                if answers_seen.insert(key) {
                    sft_candidates.push((kind, step, task, parent));
                } else {
                    count_drop(report, SampleSet::Sft, DropReason::DuplicateAnswer);
                }
            }
            SftVerdict::Drop(reason) => count_drop(report, SampleSet::Sft, reason),
        }
        // the verdicts read the current program's labels only when it is a step
        let current = labeller.current_program(&step.task_id, parent, false);
        grpo.judge((step, task, parent), &current, &best, cfg, report);
        env.judge((step, task, parent), &current, &best, cfg, report);
    }
    report.count("steps_correct_untimed", untimed_correct);
    (sft_candidates, grpo.taken, env.taken, trivial_by_task)
}

/// The train/validation split of `task` (by its cluster).
pub(crate) fn split(task: &TaskRow, cfg: &SelectConfig) -> Split {
    split_of(
        &cfg.seed,
        cfg.validation_fraction,
        task.cluster,
        &task.task_id,
    )
}

/// The SFT sample of a step: its prompt and the teacher's answer.
fn sft_row(
    kind: SftKind,
    step: &StepView,
    task: &TaskRow,
    parent: Parent<'_>,
    labeller: &Labeller<'_>,
    cfg: &SelectConfig,
) -> SftRow {
    let mut messages = step.prompt.clone();
    messages.push(ChatMessage::new("assistant", step.response.clone()));
    let tokens = approx_conversation_tokens(&messages);
    SftRow {
        sample_id: sample_id("sft", kind.as_str(), &step.step_id),
        backend: step.backend,
        kind,
        split: split(task, cfg),
        task_id: step.task_id.clone(),
        step_id: step.step_id.clone(),
        parent_step_id: step.parent_id.clone(),
        iteration: step.iteration,
        island: step.island,
        family: task.family.clone(),
        level: task.level,
        cluster: task.cluster,
        messages,
        tokens,
        token_counter: APPROX_CHARS_DIV_4.to_string(),
        speedup: step.speedup(),
        parent_speedup: match parent {
            Parent::Step(p) => p.speedup(),
            _ => None,
        },
        labels: labeller.labels(step, parent),
        stamp: step.stamp(),
        teacher: step.teacher.clone(),
        repo: task.repo.clone(),
        license: task.license.clone(),
    }
}

/// The GRPO prompt of a step, with what the reward needs: the program the prompt showed, its
/// speedup and runtimes, and the eager runtime of the task.
fn grpo_row(
    selection: GrpoSelection,
    step: &StepView,
    task: &TaskRow,
    parent: Parent<'_>,
    eager: &HashMap<&str, (f64, Stamp)>,
    labeller: &Labeller<'_>,
    cfg: &SelectConfig,
) -> GrpoRow {
    let task_eager = eager.get(step.task_id.as_str());
    let (stored_parent, parent_speedup, parent_ms, eager_ms, stamp) = match parent {
        Parent::Step(p) => (
            p.program.clone().unwrap_or_default(),
            p.speedup(),
            p.runtime_ms(),
            p.eager_ms().or(task_eager.map(|e| e.0)),
            p.stamp(),
        ),
        _ => (
            task.program.clone(),
            task_eager.map(|_| 1.0),
            task_eager.map(|e| e.0),
            task_eager.map(|e| e.0),
            task_eager
                .map(|e| e.1.clone())
                .unwrap_or_else(|| step.stamp()),
        ),
    };
    // The program exactly as the prompt showed it (the answer edits that text).
    let parent_program = if step.parent_program.is_empty() {
        stored_parent
    } else {
        step.parent_program.clone()
    };
    GrpoRow {
        sample_id: sample_id("grpo", selection.as_str(), &step.step_id),
        selection,
        backend: step.backend,
        split: split(task, cfg),
        task_id: step.task_id.clone(),
        step_id: step.step_id.clone(),
        parent_step_id: step.parent_id.clone(),
        iteration: step.iteration,
        island: step.island,
        family: task.family.clone(),
        level: task.level,
        cluster: task.cluster,
        prompt: step.prompt.clone(),
        prompt_tokens: approx_conversation_tokens(&step.prompt),
        token_counter: APPROX_CHARS_DIV_4.to_string(),
        reference_program: task.program.clone(),
        parent_program,
        parent_speedup,
        parent_runtime_ms: parent_ms,
        eager_runtime_ms: eager_ms,
        hardware: stamp.device.clone(),
        parent_labels: labeller.current_program(&step.task_id, parent, task_eager.is_some()),
        stamp,
        repo: task.repo.clone(),
        license: task.license.clone(),
    }
}

/// The rows balancing keeps across levels and families (`member` gives a row's level, family
/// and sample id); the others are counted by reason under `set`.
fn keep_balanced<R>(
    rows: Vec<R>,
    member: impl Fn(&R) -> (u8, String, String),
    set: SampleSet,
    cfg: &SelectConfig,
    report: &mut StageReport,
) -> Vec<R> {
    let members: Vec<Member> = rows
        .iter()
        .map(|r| {
            let (level, family, sample_id) = member(r);
            Member {
                level,
                family,
                rank: unit_hash(&cfg.seed, &sample_id),
            }
        })
        .collect();
    let verdicts = balance(&members, cfg.max_family_share, |l| cfg.level_share(l));
    let mut kept = Vec::new();
    for (row, v) in rows.into_iter().zip(verdicts) {
        match v.reason() {
            None => kept.push(row),
            Some(reason) => count_drop(report, set, reason),
        }
    }
    kept
}

/// Kept samples by kind and split (`sft_correctness_train`, `grpo_validation`,
/// `env_train`, `chains_train`, ...).
fn count_kept(s: &Selection, report: &mut StageReport) {
    let mut counts: BTreeMap<String, u64> = BTreeMap::new();
    for r in &s.sft {
        *counts
            .entry(format!("sft_{}_{}", r.kind.as_str(), r.split.as_str()))
            .or_default() += 1;
    }
    for (set, rows) in [("grpo", &s.grpo), ("env", &s.env)] {
        for r in rows {
            *counts
                .entry(format!("{set}_{}", r.split.as_str()))
                .or_default() += 1;
        }
    }
    for r in &s.chains {
        *counts
            .entry(format!("chains_{}", r.split.as_str()))
            .or_default() += 1;
    }
    for (k, v) in counts {
        report.count(&k, v);
    }
}
