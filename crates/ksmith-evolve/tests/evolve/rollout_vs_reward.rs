//! The rollout and the trainers' reward read an answer the same way: a rollout whose teacher
//! answers with whitespace-shifted edits (SEARCH texts indented more or less than the program,
//! inner and trailing whitespace changed, `<think>` sections, CRLF line ends, whole-program and
//! block rewrites), then the reward's reader (`python/ksmith/reward.py`, `extract_program`) run
//! on every step: for each step with a program it rebuilds exactly the program the rollout
//! evaluated, and for each other step it finds none either.

#![allow(clippy::unwrap_used)]

use std::collections::HashSet;
use std::sync::Mutex;
use std::sync::atomic::Ordering;

use crate::support::*;
use ksmith_core::chat::{ChatClient, ChatError, ChatRequest, ChatResponse};
use ksmith_core::context::StageContext;
use ksmith_core::evaluation::{EvalError, EvalRequest, EvalResult, Evaluator, Preflight};
use ksmith_core::table::{Table, read_table};
use ksmith_core::tables::{EditOutcome, StepRow};
use ksmith_evolve::{RolloutConfig, run};

/// The program the prompt shows as the current one.
fn current_program(user: &str) -> &str {
    let after = user.split("## Current program").nth(1).unwrap();
    let start = after.find("```python\n").unwrap() + "```python\n".len();
    let rest = &after[start..];
    &rest[..rest.find("\n```").unwrap()]
}

/// The line of `program` whose trimmed text starts with `start`.
fn line_of<'a>(program: &'a str, start: &str) -> &'a str {
    program
        .lines()
        .find(|l| l.trim_start().starts_with(start))
        .unwrap()
}

fn diff(search: &[String], replace: &[String]) -> String {
    format!(
        "<<<<<<< SEARCH\n{}\n=======\n{}\n>>>>>>> REPLACE\n",
        search.join("\n"),
        replace.join("\n")
    )
}

fn indent_by(line: &str, n: usize) -> String {
    format!("{}{line}", " ".repeat(n))
}

fn dedent_all(line: &str) -> String {
    line.trim_start().to_string()
}

/// Drops the first `n` characters of indentation (all of it when there is less).
fn dedent(line: &str, n: usize) -> String {
    let lead = line.len() - line.trim_start().len();
    line[lead.min(n)..].to_string()
}

/// A teacher whose answers are a pure function of the request and edit the program it is shown
/// with its whitespace shifted in one of several ways.
struct ShiftingTeacher;

fn shifted_answer(req: &ChatRequest) -> String {
    let user = &req.messages.last().unwrap().content;
    let program = current_program(user);
    let r = req.seed.unwrap_or(0);
    let (start, end) = (
        program.find("# EVOLVE-BLOCK-START\n").unwrap() + "# EVOLVE-BLOCK-START\n".len(),
        program.find("# EVOLVE-BLOCK-END").unwrap(),
    );
    if user.contains("translate PyTorch to Triton") {
        let body = kernel_body(0.5 + (r % 5) as f64 * 0.05, "");
        return match r % 3 {
            0 => format!("<think>One kernel, one pass.</think>\n```python\n{body}```\n"),
            1 => format!(
                "The whole program:\n```python\n{}{body}{}\n```\n",
                &program[..start],
                &program[end..]
            ),
            _ => format!("```\n{body}```\nDone."),
        };
    }
    let speed = line_of(program, "SPEED = ");
    let current: f64 = speed["SPEED = ".len()..].trim().parse().unwrap();
    let new_speed = format!("SPEED = {:.2}", current * (1.05 + (r % 4) as f64 * 0.05));
    let forward = line_of(program, "def forward(self, x):");
    let empty = line_of(program, "y = torch.empty_like(x)");
    let tagged = format!("{}  # step {}", empty.trim_end(), r % 1000);
    let speed_edit = diff(
        &[format!("  {}  ", speed.replace(" = ", "  =  "))],
        &[format!("  {new_speed}")],
    );
    match r % 9 {
        // SEARCH without any indentation, replacement relative to it.
        0 => {
            let s = [dedent_all(forward), dedent(empty, 4)];
            let t = [dedent_all(forward), dedent(&tagged, 4)];
            format!("Tag the allocation.\n{}{speed_edit}", diff(&s, &t))
        }
        // SEARCH indented four more than the program, replacement likewise.
        1 => {
            let s = [indent_by(forward, 4), indent_by(empty, 4)];
            let t = [
                indent_by(forward, 4),
                indent_by(&tagged, 4),
                indent_by(empty, 4).replace("y = torch.empty_like(x)", "y.zero_()"),
            ];
            format!("```diff\n{}```\n{speed_edit}", diff(&s, &t))
        }
        // Trailing whitespace and tabs inside the SEARCH lines.
        2 => {
            let s = [format!("{forward} \t "), empty.replace(" = ", "\t=\t")];
            let t = [forward.to_string(), tagged];
            format!("{}{speed_edit}", diff(&s, &t))
        }
        // A think section holding a decoy edit, then the real one.
        3 => format!(
            "<think>\n{}</think>\n{}",
            diff(&[speed.to_string()], &["SPEED = 99.0".to_string()]),
            diff(&[speed.to_string()], std::slice::from_ref(&new_speed))
        ),
        // A reasoning part closed by a lone `</think>`, CRLF line ends.
        4 => format!(
            "Reasoning first.\n{}</think>\n{}",
            diff(&[speed.to_string()], &["SPEED = 99.0".to_string()]),
            diff(&[speed.to_string()], std::slice::from_ref(&new_speed))
        )
        .replace('\n', "\r\n"),
        // The whole program back, with its markers.
        5 => format!(
            "```python\n{}\n```\n",
            program.replacen(speed, &new_speed, 1)
        ),
        // The block back, with the new speed.
        6 => format!(
            "```python\n{}```\n",
            program[start..end].replacen(speed, &new_speed, 1)
        ),
        // A whitespace-only edit: the rollout refuses it as a no-op.
        7 => diff(
            &[forward.to_string()],
            &[forward.replace("(self, x)", "(self,  x)")],
        ),
        // A SEARCH that is not in the program.
        _ => diff(&["    y = torch.zeros(x.shape)".to_string()], &[tagged]),
    }
}

impl ChatClient for ShiftingTeacher {
    fn chat(&self, req: &ChatRequest) -> Result<ChatResponse, ChatError> {
        let content = shifted_answer(req);
        Ok(ChatResponse {
            completion_tokens: content.len() as u64 / 4,
            content,
            reasoning: None,
            finish_reason: Some("stop".into()),
            model: "shifting".into(),
            prompt_tokens: 100,
            cached: false,
        })
    }
}

/// [`FakeEvaluator`] that keeps every candidate it was given.
struct Recording {
    inner: FakeEvaluator,
    candidates: Mutex<HashSet<String>>,
}

impl Evaluator for Recording {
    fn evaluate(&self, r: &EvalRequest) -> Result<EvalResult, EvalError> {
        self.candidates.lock().unwrap().insert(r.candidate.clone());
        self.inner.evaluate(r)
    }

    fn preflight(&self, r: &EvalRequest) -> Result<Preflight, EvalError> {
        self.inner.preflight(r)
    }
}

/// What the reward's reader makes of each (parent, answer): one JSON line per input line, the
/// program or null.
const READ_WITH_THE_REWARD: &str = r#"
import json, sys
sys.path.insert(0, sys.argv[1])
from ksmith.reward import extract_program
for line in open(sys.argv[2]):
    step = json.loads(line)
    program, _ = extract_program(step["answer"], step["parent"])
    print(json.dumps(program))
"#;

#[test]
fn the_reward_rebuilds_every_program_the_rollout_evaluated() {
    let dir = tempfile::tempdir().unwrap();
    write_tasks(dir.path(), &default_tasks(3));
    let cfg = RolloutConfig {
        iterations: 40,
        num_islands: 2,
        parallel_tasks: 2,
        ..Default::default()
    };
    let evaluator = Recording {
        inner: FakeEvaluator::new(),
        candidates: Mutex::new(HashSet::new()),
    };
    run(
        &cfg,
        &StageContext::for_tests(dir.path()),
        &ShiftingTeacher,
        &evaluator,
    )
    .unwrap();
    let steps: Vec<StepRow> = read_table(&StepRow::path_in(dir.path())).unwrap();
    assert_eq!(steps.len(), 120);
    assert!(evaluator.inner.calls.load(Ordering::SeqCst) > 0);
    let evaluated = evaluator.candidates.into_inner().unwrap();
    let with_program: Vec<&StepRow> = steps
        .iter()
        .filter(|s| s.edit_outcome.has_program())
        .collect();
    // Every shifted form applied somewhere, and the refusals happened too.
    assert!(with_program.len() >= 60, "{} applied", with_program.len());
    for outcome in [EditOutcome::NoOp, EditOutcome::SearchNotFound] {
        assert!(
            steps.iter().any(|s| s.edit_outcome == outcome),
            "{outcome:?}"
        );
    }
    for s in &with_program {
        assert!(
            evaluated.contains(s.program.as_deref().unwrap()),
            "step {} recorded a program the evaluator never saw",
            s.iteration
        );
    }

    let input = dir.path().join("answers.jsonl");
    let mut lines = String::new();
    for s in &steps {
        assert_eq!(
            s.response.len() as u64,
            s.response_bytes,
            "a stored answer was cut"
        );
        let row = serde_json::json!({"parent": s.parent_program, "answer": s.response});
        lines.push_str(&format!("{row}\n"));
    }
    std::fs::write(&input, lines).unwrap();
    let python = ksmith_core::python_env::resolve_python(None).unwrap();
    let package = concat!(env!("CARGO_MANIFEST_DIR"), "/../../python");
    let out = std::process::Command::new(python)
        .args(["-c", READ_WITH_THE_REWARD, package])
        .arg(&input)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let read: Vec<Option<String>> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(read.len(), steps.len());
    for (s, program) in steps.iter().zip(&read) {
        assert_eq!(
            program, &s.program,
            "task {} iteration {} ({:?}): the reward read another program from the answer\n{}",
            s.task_id, s.iteration, s.edit_outcome, s.response
        );
    }
}
