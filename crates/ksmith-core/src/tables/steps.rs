//! `steps.parquet`: one row per rollout step (a trajectory step of the evolution engine).

use serde::{Deserialize, Serialize};

use crate::evaluation::{Backend, EvalResult, EvalStatus, HackKind, Stamp};
use crate::table::Table;

crate::vocabulary! {
    /// What a step asked the teacher to do.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
    pub enum StepKind {
        /// Translate the PyTorch reference into a Triton `ModelNew` (the parent is the seed).
        Translate = "translate",
        /// Improve a correct Triton program.
        Optimize = "optimize",
        /// Fix a failing Triton program (its island has no correct program yet).
        Repair = "repair",
    }
}

crate::vocabulary! {
    /// How the teacher's answer was turned (or not) into a candidate program.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
    pub enum EditOutcome {
        /// The edit applied and the candidate was evaluated.
        Applied = "applied",
        /// The edit applied but gave a program already evaluated for this task; its earlier result
        /// is reused.
        Duplicate = "duplicate",
        /// The edit left the program unchanged.
        NoOp = "no_op",
        /// No fenced code and no SEARCH/REPLACE block could be read from the answer.
        Unparseable = "unparseable",
        /// A SEARCH text was not found in the editable block.
        SearchNotFound = "search_not_found",
        /// The edit touched code outside `EVOLVE-BLOCK-START` / `EVOLVE-BLOCK-END`.
        OutsideBlock = "outside_block",
        /// The resulting program is longer than the configured limit.
        TooLong = "too_long",
        /// The answer was cut off (`finish_reason = length`).
        Truncated = "truncated",
        /// The teacher's answer was not a chat completion.
        TeacherMalformed = "teacher_malformed",
        /// The teacher refused the request (4xx).
        TeacherRefused = "teacher_refused",
    }
}

impl EditOutcome {
    /// True when a candidate program exists for the step (applied or duplicate).
    pub fn has_program(self) -> bool {
        matches!(self, EditOutcome::Applied | EditOutcome::Duplicate)
    }
}

crate::vocabulary! {
    /// The edit format the teacher answered with.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
    pub enum EditFormat {
        /// A full rewrite of the editable block (fenced code).
        FullRewrite = "full_rewrite",
        /// SEARCH/REPLACE blocks.
        Diff = "diff",
    }
}

/// One completed rollout step: prompt, answer, applied program and its evaluation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepRow {
    /// Stable id of the step (task, seed, iteration).
    pub step_id: String,
    /// The task.
    pub task_id: String,
    /// Iteration within the task's rollout, from 0.
    pub iteration: u32,
    /// The island the step ran on.
    pub island: u32,
    /// Translate, optimize or repair.
    pub kind: StepKind,
    /// The kernel language the step's program is written in (journals of older versions lack
    /// it: Triton).
    #[serde(default)]
    pub backend: Backend,
    /// Id of the parent program (the seed's id for translations).
    pub parent_id: String,
    /// The step that produced the parent program; `None` when the parent is the seed (the
    /// PyTorch reference).
    pub parent_step_id: Option<String>,
    /// The parent program's code.
    pub parent_program: String,
    /// Whether the parent was correct.
    pub parent_correct: bool,
    /// The parent's speedup, when measured.
    pub parent_speedup: Option<f64>,
    /// Whether the parent was the task's best program when the step started.
    pub parent_was_best: bool,
    /// The system message sent to the teacher.
    pub system_prompt: String,
    /// The user message sent to the teacher.
    pub user_prompt: String,
    /// The teacher's answer text (empty when there was no answer), at most
    /// `[rollout] max_stored_answer_bytes` of it.
    pub response: String,
    /// Size in bytes of the whole answer (more than `response` holds when it was cut). Journals
    /// of older versions lack it (0: unknown).
    #[serde(default)]
    pub response_bytes: u64,
    /// Reasoning text of thinking models, at most `[rollout] max_stored_answer_bytes` of it.
    pub reasoning: Option<String>,
    /// Size in bytes of the whole reasoning text (0 without one).
    #[serde(default)]
    pub reasoning_bytes: u64,
    /// The teacher's finish reason.
    pub finish_reason: Option<String>,
    /// The model that answered.
    pub teacher_model: Option<String>,
    /// Prompt tokens reported by the teacher.
    pub prompt_tokens: u64,
    /// Completion tokens reported by the teacher.
    pub completion_tokens: u64,
    /// True when the answer came from the response cache.
    pub cached: bool,
    /// The edit format of the answer, when one was recognised.
    pub edit_format: Option<EditFormat>,
    /// What became of the answer.
    pub edit_outcome: EditOutcome,
    /// Why the edit failed (or the teacher error), fed back into the next prompt.
    pub edit_error: Option<String>,
    /// Id of the candidate program (content hash), when there is one.
    pub program_id: Option<String>,
    /// The candidate program, when there is one.
    pub program: Option<String>,
    /// The evaluator's verdict.
    pub eval_status: Option<EvalStatus>,
    /// Whether the candidate is correct.
    pub correct: bool,
    /// The candidate's speedup over the reference, when measured.
    pub speedup: Option<f64>,
    /// The candidate's speedup over the task's `torch.compile` baseline (its speedup over eager
    /// over the baseline's, `EvalResult::speedup_over_compile`), when both were measured.
    /// Journals of older versions lack it.
    #[serde(default)]
    pub speedup_over_compile: Option<f64>,
    /// The hack found, when the verdict is `hacked`.
    pub hack: Option<HackKind>,
    /// The evaluator's full result as JSON (see `ksmith_core::evaluation::EvalResult`).
    pub eval_json: Option<String>,
    /// What the evaluation ran on and how it was timed (empty when the step was not
    /// evaluated). Journals of older versions lack it.
    #[serde(default)]
    pub stamp: Stamp,
    /// Whether the candidate became the task's best program.
    pub is_new_best: bool,
    /// When the step started (milliseconds since the Unix epoch).
    pub started_at_ms: u64,
    /// When the step finished (milliseconds since the Unix epoch).
    pub finished_at_ms: u64,
}

/// `text` cut to at most `max_bytes` bytes at a character boundary, and its full size in bytes.
pub fn stored_text(mut text: String, max_bytes: usize) -> (String, u64) {
    let full = text.len() as u64;
    if text.len() > max_bytes {
        let mut end = max_bytes;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
    }
    (text, full)
}

impl StepRow {
    /// True when the stored answer is only the start of what the teacher sent.
    pub fn response_cut(&self) -> bool {
        self.response_bytes > self.response.len() as u64
    }

    /// The stored form of an evaluation ([`StepRow::eval_json`]); the one encoder.
    pub fn encode_eval(eval: Option<&EvalResult>) -> Option<String> {
        eval.and_then(|e| serde_json::to_string(e).ok())
    }

    /// The evaluator's full result, decoded from [`StepRow::eval_json`]; the one decoder.
    /// `Ok(None)` when the step was not evaluated, an error when the stored JSON cannot be read.
    pub fn decode_eval(&self) -> Result<Option<EvalResult>, serde_json::Error> {
        self.eval_json
            .as_deref()
            .map(serde_json::from_str)
            .transpose()
    }

    /// The evaluator's full result, or `None` when there is none or it cannot be read.
    pub fn eval_result(&self) -> Option<EvalResult> {
        self.decode_eval().ok().flatten()
    }
}

impl Table for StepRow {
    const NAME: &'static str = "steps";
    const SCHEMA_VERSION: u32 = 5;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::evaluation::Hardware;
    use crate::table::{read_table, write_table};

    fn row(i: u32, eval: Option<EvalResult>) -> StepRow {
        StepRow {
            step_id: format!("s{i}"),
            task_id: "t".into(),
            iteration: i,
            island: i % 2,
            kind: if i == 0 {
                StepKind::Translate
            } else {
                StepKind::Optimize
            },
            backend: if i % 2 == 1 {
                Backend::Cuda
            } else {
                Backend::Triton
            },
            parent_id: "p".into(),
            parent_step_id: (i > 0).then(|| "s0".into()),
            parent_program: "code".into(),
            parent_correct: i > 0,
            parent_speedup: (i > 0).then_some(1.5),
            parent_was_best: true,
            system_prompt: "sys".into(),
            user_prompt: "user".into(),
            response: "resp".into(),
            response_bytes: 4,
            reasoning: None,
            reasoning_bytes: 0,
            finish_reason: Some("stop".into()),
            teacher_model: Some("m".into()),
            prompt_tokens: 10,
            completion_tokens: 5,
            cached: false,
            edit_format: eval.as_ref().map(|_| EditFormat::Diff),
            edit_outcome: if eval.is_some() {
                EditOutcome::Applied
            } else {
                EditOutcome::NoOp
            },
            edit_error: None,
            program_id: eval.as_ref().map(|_| "c".into()),
            program: eval.as_ref().map(|_| "child".into()),
            eval_status: eval.as_ref().map(|e| e.status),
            correct: eval.as_ref().is_some_and(|e| e.is_correct()),
            speedup: eval.as_ref().and_then(|e| e.speedup),
            speedup_over_compile: eval.as_ref().and_then(|e| e.speedup_over_compile().ok()),
            hack: None,
            eval_json: StepRow::encode_eval(eval.as_ref()),
            stamp: eval.as_ref().map(Stamp::of).unwrap_or_default(),
            is_new_best: false,
            started_at_ms: 1,
            finished_at_ms: 2,
        }
    }

    #[test]
    fn stored_text_cuts_at_a_character_boundary_and_keeps_the_full_size() {
        assert_eq!(stored_text("short".into(), 10), ("short".to_string(), 5));
        // "é" is two bytes: a cut at 3 bytes keeps "a" and one "é".
        assert_eq!(stored_text("aééé".into(), 4), ("aé".to_string(), 7));
        let mut r = row(0, None);
        (r.response, r.response_bytes) = stored_text("x".repeat(100), 10);
        assert!(r.response_cut());
        (r.response, r.response_bytes) = stored_text("x".repeat(10), 10);
        assert!(!r.response_cut());
    }

    #[test]
    fn journal_lines_of_older_versions_read_without_the_sizes_or_backend() {
        let mut v = serde_json::to_value(row(1, None)).unwrap();
        let obj = v.as_object_mut().unwrap();
        obj.remove("response_bytes");
        obj.remove("reasoning_bytes");
        obj.remove("speedup_over_compile");
        obj.remove("backend");
        let back: StepRow = serde_json::from_value(v).unwrap();
        assert_eq!((back.response_bytes, back.response_cut()), (0, false));
        assert_eq!(back.speedup_over_compile, None);
        // journals written before the CUDA backend are Triton's
        assert_eq!(back.backend, Backend::Triton);
    }

    #[test]
    fn steps_round_trip_with_and_without_evaluation() {
        let eval = EvalResult {
            status: EvalStatus::Correct,
            hack: None,
            error_log: String::new(),
            errors: vec![],
            trials_passed: 3,
            trials: 3,
            candidate_timing: None,
            reference_timing: None,
            speedup: Some(1.25),
            warnings: vec![],
            hardware: Hardware::default(),
            elapsed_ms: 7,
            speed_of_light: None,
            compile_baseline: Some(crate::evaluation::CompileBaseline {
                mode: "default".into(),
                timing: None,
                speedup_over_eager: Some(2.5),
                compile_s: Some(4.0),
                why: None,
            }),
        };
        let rows = vec![row(0, Some(eval.clone())), row(1, None)];
        let dir = tempfile::tempdir().unwrap();
        let path = StepRow::path_in(dir.path());
        write_table(&path, &rows, "fp").unwrap();
        let back: Vec<StepRow> = read_table(&path).unwrap();
        assert_eq!(back, rows);
        assert_eq!(back[0].eval_result(), Some(eval));
        assert_eq!(back[0].speedup_over_compile, Some(0.5));
        assert_eq!(back[1].speedup_over_compile, None);
        assert_eq!(back[1].eval_result(), None);
        assert_eq!(back[1].decode_eval().ok(), Some(None));
        let broken = StepRow {
            eval_json: Some("{not json".into()),
            ..back[0].clone()
        };
        assert!(broken.decode_eval().is_err());
        assert_eq!(broken.eval_result(), None);
        assert!(EditOutcome::Duplicate.has_program());
        assert!(!EditOutcome::NoOp.has_program());
    }
}
