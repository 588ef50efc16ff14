//! `chains.parquet`: multi-turn samples chosen by select: a lineage of one island's steps
//! (parent -> child -> ...) that ends at the island's best step, with each step's answer, program
//! and evaluation, for the conversations in which a model calls the evaluator as a tool.

use serde::{Deserialize, Serialize};

use crate::chat::ChatMessage;
use crate::evaluation::{EvalStatus, HackKind};
use crate::table::Table;
use crate::tables::Split;

/// One step of a chain: the teacher's answer, the program it gave and what the evaluator said.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChainTurn {
    /// The step.
    pub step_id: String,
    /// Its iteration in the task's rollout.
    pub iteration: u32,
    /// The teacher's answer as stored (whole: a chain never holds a cut answer).
    pub response: String,
    /// The program the answer gave (the whole file, `ModelNew` included).
    pub program: String,
    /// The evaluator's verdict.
    pub status: EvalStatus,
    /// The hack found, when the verdict is `hacked`.
    pub hack: Option<HackKind>,
    /// Whether the program is correct.
    pub correct: bool,
    /// Its speedup over PyTorch eager, when correct and timed.
    pub speedup: Option<f64>,
    /// The evaluator's error log (empty when it had nothing to say).
    pub error_log: String,
}

/// One multi-turn sample: the prompt of the chain's first step, then its steps in order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChainRow {
    /// Stable id: content hash of the chain's step ids.
    pub sample_id: String,
    /// The kernel language of the chain's programs.
    pub backend: crate::evaluation::Backend,
    /// Train or validation (by the task's cluster, as SFT and GRPO).
    pub split: Split,
    /// The task (reference module).
    pub task_id: String,
    /// The island whose best step ends the chain.
    pub island: u32,
    /// Functional family of the task.
    pub family: String,
    /// Difficulty level of the task (1 to 3).
    pub level: u8,
    /// Cluster of the task (-1 is noise).
    pub cluster: i32,
    /// The first step's prompt (system, user) exactly as the teacher saw it.
    pub prompt: Vec<ChatMessage>,
    /// The step holding the program the first prompt shows; `None` when it is the reference.
    pub start_step_id: Option<String>,
    /// Speedup over eager of the program the first prompt shows, when known (1.0 for the
    /// reference in a timed rollout).
    pub start_speedup: Option<f64>,
    /// The steps, parent before child; the last is the island's best step.
    pub turns: Vec<ChainTurn>,
    /// Tokens of the conversation (prompt, answers, programs, evaluations), counted by
    /// `token_counter`.
    pub tokens: u64,
    /// How tokens were counted (e.g. `approx_chars_div_4`).
    pub token_counter: String,
    /// The teacher model of the last step.
    pub teacher: String,
    /// The task's source repository (provenance).
    pub repo: String,
    /// The repository's license (SPDX), when known.
    pub license: Option<String>,
}

impl ChainRow {
    /// The last turn (the island's best step).
    pub fn last(&self) -> Option<&ChainTurn> {
        self.turns.last()
    }
}

impl Table for ChainRow {
    const NAME: &'static str = "chains";
    const SCHEMA_VERSION: u32 = 2;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::{read_table, write_table};

    #[test]
    fn chains_round_trip_with_nullable_fields() {
        let turn = |i: u32, correct: bool| ChainTurn {
            step_id: format!("s{i}"),
            iteration: i,
            response: "idea".into(),
            program: "class ModelNew: pass".into(),
            status: if correct {
                EvalStatus::Correct
            } else {
                EvalStatus::CompileError
            },
            hack: None,
            correct,
            speedup: correct.then_some(1.5),
            error_log: if correct { "" } else { "SyntaxError" }.into(),
        };
        let row = ChainRow {
            sample_id: "c".into(),
            backend: crate::evaluation::Backend::Triton,
            split: Split::Train,
            task_id: "t".into(),
            island: 1,
            family: "activation".into(),
            level: 1,
            cluster: -1,
            prompt: vec![ChatMessage::new("user", "go")],
            start_step_id: None,
            start_speedup: None,
            turns: vec![turn(0, false), turn(3, true)],
            tokens: 10,
            token_counter: "approx_chars_div_4".into(),
            teacher: "m".into(),
            repo: "r".into(),
            license: None,
        };
        let dir = tempfile::tempdir().unwrap();
        let path = ChainRow::path_in(dir.path());
        write_table(&path, std::slice::from_ref(&row), "fp").unwrap();
        let back: Vec<ChainRow> = read_table(&path).unwrap();
        assert_eq!(back, vec![row]);
        assert_eq!(back[0].last().map(|t| t.iteration), Some(3));
    }
}
