//! The per-task loop: plan, prompt, ask, edit, evaluate, record, absorb.
//!
//! A task's state (archive, RNG, counters) is a pure function of the configuration and the
//! journal of completed steps: the engine appends each step to the journal (synced) before it
//! changes the state, checkpoints the state every few steps, and on opening restores the last
//! checkpoint and replays the journal lines written after it, re-drawing every random choice and
//! checking that it leads to the recorded island and parent. A run killed at any point resumes
//! with no lost and no duplicated step; the interrupted step is asked again with the same
//! request (so the teacher's response cache answers it).

use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use ksmith_core::answer::{EditResult, apply_answer};
use ksmith_core::chat::{ChatClient, ChatError, ChatMessage, ChatRequest, ChatResponse};
use ksmith_core::evaluation::{
    Backend, EvalError, EvalRequest, EvalResult, Evaluator, SizeSet, Stamp,
};
use ksmith_core::ids::{IdHasher, content_id};
use ksmith_core::table::write_bytes_atomically;
use ksmith_core::tables::{EditOutcome, StepKind, StepRow, stored_text};
use rand::SeedableRng;
use rand_chacha::ChaCha12Rng;
use serde::{Deserialize, Serialize};

use crate::archive::{Archive, Attempt};
use crate::config::RolloutConfig;
use crate::error::Error;
use crate::journal::Journal;
use crate::prompt::{Prompts, build_prompt, trim_middle};
use crate::seed::seed_program;
use crate::select::{Plan, plan_step};

/// Version of the checkpoint format.
const CHECKPOINT_FORMAT: u32 = 1;

/// Counters of one task, part of its checkpoint.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskCounters {
    /// Prompts that had history trimmed to fit the budget.
    pub prompts_trimmed: u64,
    /// Prompts still over budget after trimming.
    pub prompts_over_budget: u64,
    /// Programs placed on another island by migration.
    pub migrated: u64,
    /// Teacher prompt tokens (answers from the cache included).
    pub prompt_tokens: u64,
    /// Teacher completion tokens (answers from the cache included).
    pub completion_tokens: u64,
}

/// The full state of a task's rollout.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskState {
    /// Checkpoint format version.
    pub format: u32,
    /// The task.
    pub task_id: String,
    /// [`RolloutConfig::search_hash`] of the configuration that made it.
    pub search_hash: String,
    /// Steps completed (the next iteration).
    pub steps_done: u32,
    /// The archive.
    pub archive: Archive,
    /// The random generator, positioned after the last completed step.
    pub rng: ChaCha12Rng,
    /// Counters.
    pub counters: TaskCounters,
}

/// Why a step could not complete; nothing was recorded and the task stops (a rerun resumes it).
#[derive(Debug, thiserror::Error)]
pub enum StepAbort {
    /// The teacher could not be reached after all retries.
    #[error("teacher unavailable: {0}")]
    Teacher(String),
    /// The evaluator could not evaluate.
    #[error("evaluator unavailable: {0}")]
    Evaluator(String),
    /// The task's reference program does not run.
    #[error("broken reference: {0}")]
    BrokenReference(String),
    /// Recording the step failed.
    #[error(transparent)]
    Storage(#[from] Error),
}

/// The folder of a task's journal and checkpoint inside `root`.
pub fn task_dir(root: &Path, task_id: &str) -> PathBuf {
    let safe = !task_id.is_empty()
        && task_id.len() <= 64
        && task_id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if safe {
        root.join(task_id)
    } else {
        root.join(content_id(task_id))
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// One task's rollout, open for stepping.
pub struct TaskRun<'a> {
    reference: String,
    /// The task's recorded alternate size sets, sent with every evaluation (hidden shapes).
    alt_sizes: Vec<SizeSet>,
    /// The task's kernel language (`RolloutConfig::backend_of`).
    backend: Backend,
    cfg: &'a RolloutConfig,
    prompts: &'a Prompts,
    dir: PathBuf,
    state: TaskState,
    journal: Journal,
    /// Steps restored from the journal when the run was opened.
    pub replayed: u32,
    /// Things worth a warning found when opening (an unusable checkpoint, ...).
    pub notes: Vec<String>,
    /// `steps_done` at the last checkpoint written or restored.
    last_checkpoint: u32,
}

/// Programs per extra step of checkpoint interval: a checkpoint costs time in proportion to the
/// archive, so the interval grows with it and the amortized cost per step stays flat.
const PROGRAMS_PER_CHECKPOINT_STEP: usize = 50;

impl<'a> TaskRun<'a> {
    /// Opens the rollout of a task in `dir` (created if needed), restoring any recorded steps;
    /// `prompts` must be those of the task's backend (`RolloutConfig::backend_of`).
    pub fn open(
        task_id: &str,
        reference: &str,
        cfg: &'a RolloutConfig,
        prompts: &'a Prompts,
        dir: &Path,
    ) -> Result<TaskRun<'a>, Error> {
        let backend = cfg.backend_of(task_id);
        let seed = seed_program(reference, backend).map_err(|m| Error::Corrupt {
            task: task_id.to_string(),
            path: dir.to_path_buf(),
            message: m,
        })?;
        let fresh = TaskState {
            format: CHECKPOINT_FORMAT,
            task_id: task_id.to_string(),
            search_hash: cfg.search_hash(),
            steps_done: 0,
            archive: Archive::new(&seed, cfg),
            rng: ChaCha12Rng::seed_from_u64(task_seed(cfg.seed, task_id)),
            counters: TaskCounters::default(),
        };
        let (journal, rows) = Journal::open(
            task_id,
            &dir.join("steps.jsonl"),
            std::time::Duration::from_millis(cfg.journal_sync_ms),
        )?;
        let mut notes = Vec::new();
        let ckpt_path = dir.join("checkpoint.json");
        let mut state = match std::fs::read(&ckpt_path) {
            Err(_) => fresh.clone(),
            Ok(bytes) => match serde_json::from_slice::<TaskState>(&bytes) {
                Ok(mut s) if s.format == CHECKPOINT_FORMAT && s.task_id == task_id => {
                    s.archive.rebuild_index();
                    s
                }
                Ok(_) => {
                    notes.push(format!(
                        "{}: checkpoint of another format or task; replaying the journal from the start",
                        ckpt_path.display()
                    ));
                    fresh.clone()
                }
                Err(e) => {
                    notes.push(format!(
                        "{}: unreadable checkpoint ({e}); replaying the journal from the start",
                        ckpt_path.display()
                    ));
                    fresh.clone()
                }
            },
        };
        if state.search_hash != fresh.search_hash {
            return Err(Error::Replay {
                task: task_id.to_string(),
                path: ckpt_path,
                iteration: state.steps_done,
                message: "the stored rollout was made with another search configuration".into(),
            });
        }
        if state.steps_done as usize > rows.len() {
            notes.push(format!(
                "{}: checkpoint is ahead of the journal ({} > {} steps); replaying the journal from the start",
                ckpt_path.display(),
                state.steps_done,
                rows.len()
            ));
            state = fresh;
        }
        let restored = state.steps_done;
        let mut run = TaskRun {
            last_checkpoint: restored,
            reference: reference.to_string(),
            alt_sizes: Vec::new(),
            backend,
            cfg,
            prompts,
            dir: dir.to_path_buf(),
            state,
            journal,
            replayed: 0,
            notes,
        };
        let start = run.state.steps_done as usize;
        for row in &rows[start..] {
            run.replay(row)?;
        }
        Ok(run)
    }

    fn replay(&mut self, row: &StepRow) -> Result<(), Error> {
        let it = self.state.steps_done;
        let (task, path) = (
            self.state.task_id.clone(),
            self.journal.path().to_path_buf(),
        );
        let mismatch = move |message: String| Error::Replay {
            task: task.clone(),
            path: path.clone(),
            iteration: it,
            message,
        };
        if row.iteration != it {
            return Err(mismatch(format!(
                "the journal holds iteration {} where {it} was expected",
                row.iteration
            )));
        }
        let mut rng = self.state.rng.clone();
        let plan = plan_step(&mut rng, &self.state.archive, it, self.cfg);
        let parent_id = &self.state.archive.programs[plan.parent].id;
        if row.island as usize != plan.island || &row.parent_id != parent_id {
            return Err(mismatch(format!(
                "recorded island {} / parent {}, replay chose island {} / parent {}",
                row.island, row.parent_id, plan.island, parent_id
            )));
        }
        self.state.rng = rng;
        self.absorb(&plan, row).map_err(mismatch)?;
        self.replayed += 1;
        Ok(())
    }

    /// Sends `sets` (the task's recorded alternate size sets) with every evaluation, for the
    /// evaluator's hidden-shape check; without them it derives sets from the task's constants.
    pub fn with_alt_sizes(mut self, sets: Vec<SizeSet>) -> Self {
        self.alt_sizes = sets;
        self
    }

    /// The task's evaluation request without a candidate: its reference, alternate size sets,
    /// backend and whether to time (each step's request with the step's candidate put in; as
    /// it is, the request of the task's preflight, `Evaluator::preflight`).
    pub fn reference_request(&self) -> EvalRequest {
        EvalRequest {
            task_id: self.state.task_id.clone(),
            reference: self.reference.clone(),
            candidate: String::new(),
            measure: self.cfg.measure,
            alt_sizes: self.alt_sizes.clone(),
            backend: self.backend,
        }
    }

    /// The task's state.
    pub fn state(&self) -> &TaskState {
        &self.state
    }

    /// The archive, for tools and benchmarks that seed it.
    pub fn archive_mut(&mut self) -> &mut Archive {
        &mut self.state.archive
    }

    /// Whether all configured iterations are done.
    pub fn finished(&self) -> bool {
        self.state.steps_done >= self.cfg.iterations
    }

    /// Steps between checkpoints now: `checkpoint_every`, or more for large archives (one more
    /// step per 50 programs), so checkpoint cost per step stays flat.
    pub fn checkpoint_interval(&self) -> u32 {
        let by_size = self.state.archive.programs.len() / PROGRAMS_PER_CHECKPOINT_STEP;
        self.cfg
            .checkpoint_every
            .max(u32::try_from(by_size).unwrap_or(u32::MAX))
    }

    /// Writes the checkpoint atomically.
    pub fn checkpoint(&mut self) -> Result<(), Error> {
        // The checkpoint never gets ahead of the journal on disk.
        self.journal.sync()?;
        self.last_checkpoint = self.state.steps_done;
        let bytes = serde_json::to_vec(&self.state).map_err(|e| Error::Corrupt {
            task: self.state.task_id.clone(),
            path: self.dir.join("checkpoint.json"),
            message: format!("cannot encode the checkpoint: {e}"),
        })?;
        write_bytes_atomically(&self.dir.join("checkpoint.json"), &bytes)?;
        Ok(())
    }

    /// Runs one step: plan, prompt, ask the teacher, apply the edit, evaluate, record durably,
    /// update the archive. Returns the recorded step.
    pub fn step(
        &mut self,
        teacher: &dyn ChatClient,
        evaluator: &dyn Evaluator,
    ) -> Result<StepRow, StepAbort> {
        let it = self.state.steps_done;
        let task_id = self.state.task_id.clone();
        let started = now_ms();
        let mut rng = self.state.rng.clone();
        let a = &self.state.archive;
        let plan = plan_step(&mut rng, a, it, self.cfg);
        let prompt = build_prompt(self.prompts, &plan, a, &self.reference, self.cfg);
        let request = ChatRequest {
            messages: vec![
                ChatMessage::new("system", prompt.system.clone()),
                ChatMessage::new("user", prompt.user.clone()),
            ],
            temperature: self.cfg.temperature,
            top_p: self.cfg.top_p,
            max_tokens: self.cfg.max_output_tokens,
            seed: Some(request_seed(self.cfg.seed, &task_id, it)),
        };
        let parent = &a.programs[plan.parent];
        let answer = ask(teacher, &request)?;
        let edit = edit_of(&answer, &parent.code, self.cfg);
        let program_id = edit.program.as_deref().map(content_id);
        let (duplicate, eval) = evaluate_program(
            a,
            edit.program.as_deref(),
            program_id.as_deref(),
            self.reference_request(),
            evaluator,
        )?;
        let outcome = if duplicate {
            EditOutcome::Duplicate
        } else {
            edit.outcome
        };
        let correct = eval.as_ref().is_some_and(|e| e.is_correct());
        let fit = crate::features::fitness(correct, eval.as_ref().and_then(|e| e.speedup));
        let (response, reasoning, finish_reason, model, pt, ct, cached) = match answer {
            Ok(r) => (
                r.content,
                r.reasoning,
                r.finish_reason,
                Some(r.model),
                r.prompt_tokens,
                r.completion_tokens,
                r.cached,
            ),
            Err(_) => (String::new(), None, None, None, 0, 0, false),
        };
        // The edit above read the whole answer; the record keeps at most the configured bytes.
        let cap = self.cfg.max_stored_answer_bytes;
        let (response, response_bytes) = stored_text(response, cap);
        let (reasoning, reasoning_bytes) = match reasoning.map(|r| stored_text(r, cap)) {
            Some((text, bytes)) => (Some(text), bytes),
            None => (None, 0),
        };
        let row = StepRow {
            step_id: step_id(self.cfg.seed, &task_id, it),
            task_id: task_id.clone(),
            iteration: it,
            island: plan.island as u32,
            kind: plan.kind,
            backend: self.backend,
            parent_id: parent.id.clone(),
            parent_step_id: parent.step_id.clone(),
            parent_program: parent.code.clone(),
            parent_correct: parent.correct,
            parent_speedup: parent.speedup(),
            parent_was_best: plan.parent_is_best,
            system_prompt: prompt.system,
            user_prompt: prompt.user,
            response,
            response_bytes,
            reasoning,
            reasoning_bytes,
            finish_reason,
            teacher_model: model,
            prompt_tokens: pt,
            completion_tokens: ct,
            cached,
            edit_format: edit.format,
            edit_outcome: outcome,
            edit_error: edit.error,
            program_id,
            program: edit.program,
            eval_status: eval.as_ref().map(|e| e.status),
            correct,
            speedup: eval.as_ref().and_then(|e| e.speedup),
            speedup_over_compile: eval.as_ref().and_then(|e| e.speedup_over_compile().ok()),
            hack: eval.as_ref().and_then(|e| e.hack),
            eval_json: StepRow::encode_eval(eval.as_ref()),
            stamp: eval.as_ref().map(Stamp::of).unwrap_or_default(),
            is_new_best: outcome == EditOutcome::Applied && correct && fit > a.best_fitness(),
            started_at_ms: started,
            finished_at_ms: now_ms(),
        };
        if prompt.trimmed > 0 {
            self.state.counters.prompts_trimmed += 1;
        }
        if prompt.over_budget {
            self.state.counters.prompts_over_budget += 1;
        }
        self.journal.append(&row)?;
        self.state.rng = rng;
        let task = task_id.clone();
        let path = self.journal.path().to_path_buf();
        self.absorb(&plan, &row).map_err(|message| Error::Corrupt {
            task,
            path,
            message,
        })?;
        if self.state.steps_done - self.last_checkpoint >= self.checkpoint_interval()
            || self.finished()
        {
            self.checkpoint()?;
        }
        Ok(row)
    }

    /// Applies a recorded step to the state (live and in replay alike).
    fn absorb(&mut self, plan: &Plan, row: &StepRow) -> Result<(), String> {
        let a = &mut self.state.archive;
        a.programs[plan.parent].children += 1;
        let eval = row
            .decode_eval()
            .map_err(|e| format!("step {}: unreadable evaluation: {e}", row.iteration))?;
        let program = match row.edit_outcome {
            EditOutcome::Applied => {
                let (Some(code), Some(ev)) = (&row.program, &eval) else {
                    return Err(format!(
                        "step {}: applied edit without program or evaluation",
                        row.iteration
                    ));
                };
                if a.find(&content_id(code)).is_some() {
                    return Err(format!(
                        "step {}: applied program already in the archive",
                        row.iteration
                    ));
                }
                Some(a.add_program(
                    code.clone(),
                    plan.parent,
                    &row.step_id,
                    row.iteration,
                    plan.island,
                    ev.clone(),
                ))
            }
            EditOutcome::Duplicate => {
                let idx = row
                    .program_id
                    .as_deref()
                    .and_then(|id| a.find(id))
                    .ok_or_else(|| {
                        format!("step {}: duplicate of an unknown program", row.iteration)
                    })?;
                a.place(plan.island, idx, false);
                Some(idx)
            }
            _ => None,
        };
        let error = row.edit_error.clone().or_else(|| {
            eval.as_ref()
                .filter(|e| !e.is_correct() && !e.error_log.is_empty())
                .map(|e| trim_middle(&e.error_log, 600))
        });
        a.push_attempt(
            plan.island,
            Attempt {
                iteration: row.iteration,
                parent: plan.parent,
                kind: plan.kind,
                outcome: row.edit_outcome,
                program,
                status: row.eval_status,
                speedup: row.speedup,
                error,
            },
        );
        let c = &mut self.state.counters;
        c.prompt_tokens += row.prompt_tokens;
        c.completion_tokens += row.completion_tokens;
        self.state.steps_done += 1;
        let n = self.state.steps_done;
        if self.cfg.migration_interval > 0 && n.is_multiple_of(self.cfg.migration_interval) {
            let placed = self.state.archive.migrate(self.cfg.migration_rate);
            self.state.counters.migrated += placed as u64;
        }
        Ok(())
    }

    /// The kind of the next step (for reports).
    pub fn next_kind(&self) -> StepKind {
        let mut rng = self.state.rng.clone();
        plan_step(
            &mut rng,
            &self.state.archive,
            self.state.steps_done,
            self.cfg,
        )
        .kind
    }
}

fn task_seed(seed: u64, task_id: &str) -> u64 {
    let id = IdHasher::new()
        .part("task-rng")
        .part(seed.to_le_bytes())
        .part(task_id)
        .finish();
    u64::from_str_radix(&id[..16], 16).unwrap_or(seed)
}

/// The seed sent with the request of a step (stable across runs, so caches match).
pub fn request_seed(seed: u64, task_id: &str, iteration: u32) -> u64 {
    let id = IdHasher::new()
        .part("request-seed")
        .part(seed.to_le_bytes())
        .part(task_id)
        .part(iteration.to_le_bytes())
        .finish();
    u64::from_str_radix(&id[..15], 16).unwrap_or(0)
}

/// The id of a step.
pub fn step_id(seed: u64, task_id: &str, iteration: u32) -> String {
    IdHasher::new()
        .part("step")
        .part(seed.to_le_bytes())
        .part(task_id)
        .part(iteration.to_le_bytes())
        .finish()
}

/// The teacher's answer, or the edit outcome a failed request is recorded as; a teacher that
/// cannot be reached aborts the step (it is resumed later).
fn ask(
    teacher: &dyn ChatClient,
    request: &ChatRequest,
) -> Result<Result<ChatResponse, (EditOutcome, String)>, StepAbort> {
    match teacher.chat(request) {
        Ok(r) => Ok(Ok(r)),
        Err(ChatError::Unreachable { attempts, message }) => Err(StepAbort::Teacher(format!(
            "{attempts} attempts: {message}"
        ))),
        Err(ChatError::Refused(m)) => Ok(Err((EditOutcome::TeacherRefused, m))),
        Err(e) => Ok(Err((EditOutcome::TeacherMalformed, e.to_string()))),
    }
}

/// The candidate the answer makes of the parent's code (or why there is none).
fn edit_of(
    answer: &Result<ChatResponse, (EditOutcome, String)>,
    parent_code: &str,
    cfg: &RolloutConfig,
) -> EditResult {
    match answer {
        Ok(r) => apply_answer(
            parent_code,
            &r.content,
            r.finish_reason.as_deref(),
            cfg.max_program_chars,
        ),
        Err((outcome, m)) => EditResult {
            format: None,
            outcome: *outcome,
            program: None,
            error: Some(m.clone()),
        },
    }
}

/// The evaluation of the candidate `program` (with content id `program_id`): the archive's
/// earlier result when it already holds that program (then `true`, a duplicate), else the
/// evaluator's answer to `request` with the program as candidate. A broken reference or an
/// unavailable evaluator aborts the step.
fn evaluate_program(
    archive: &Archive,
    program: Option<&str>,
    program_id: Option<&str>,
    request: EvalRequest,
    evaluator: &dyn Evaluator,
) -> Result<(bool, Option<EvalResult>), StepAbort> {
    let (Some(code), Some(id)) = (program, program_id) else {
        return Ok((false, None));
    };
    if let Some(i) = archive.find(id) {
        return Ok((true, archive.programs[i].eval.clone()));
    }
    let request = EvalRequest {
        candidate: code.to_string(),
        ..request
    };
    match evaluator.evaluate(&request) {
        Ok(r) => Ok((false, Some(r))),
        Err(EvalError::BrokenReference { message, .. }) => Err(StepAbort::BrokenReference(message)),
        Err(e) => Err(StepAbort::Evaluator(e.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn task_dirs_never_escape_the_root() {
        let root = Path::new("/r");
        assert_eq!(task_dir(root, "abc-1_2"), root.join("abc-1_2"));
        for hostile in ["../x", "a/b", "", ".", "x y", &"z".repeat(200)] {
            let d = task_dir(root, hostile);
            assert_eq!(d.parent(), Some(root), "{hostile}");
            assert_eq!(d.file_name().unwrap().len(), 32, "{hostile}");
        }
    }

    #[test]
    fn seeds_and_ids_depend_on_every_part() {
        assert_eq!(request_seed(1, "t", 2), request_seed(1, "t", 2));
        assert_ne!(request_seed(1, "t", 2), request_seed(1, "t", 3));
        assert_ne!(request_seed(1, "t", 2), request_seed(2, "t", 2));
        assert_ne!(step_id(1, "t", 2), step_id(1, "u", 2));
    }
}
