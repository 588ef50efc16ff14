//! Scripted fakes shared by the integration tests: an evaluator that reads a `SPEED = x` line
//! and markers from the candidate, a teacher whose answer is a pure function of the request,
//! and helpers to set up a work directory.
#![allow(dead_code, unreachable_pub, clippy::unwrap_used)]

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use ksmith_core::chat::{ChatClient, ChatError, ChatRequest, ChatResponse};
use ksmith_core::evaluation::{
    EvalError, EvalRequest, EvalResult, EvalStatus, Evaluator, Hardware, OutputError, Preflight,
};
use ksmith_core::table::{Table, write_table};
use ksmith_core::tables::{StepRow, TaskRow};

pub const REFERENCE: &str = "import torch\nimport torch.nn as nn\n\nclass Model(nn.Module):\n    def forward(self, x):\n        return torch.relu(x)\n\ndef get_inputs():\n    return [torch.randn(64)]\n\ndef get_init_inputs():\n    return []\n";

/// A kernel program body with a tunable speed.
pub fn kernel_body(speed: f64, extra: &str) -> String {
    format!(
        "import torch\nimport torch.nn as nn\nimport triton\nimport triton.language as tl\n\n@triton.jit\ndef relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):\n    pid = tl.program_id(0)\n    offs = pid * BLOCK + tl.arange(0, BLOCK)\n    mask = offs < n\n    tl.store(y_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=mask), 0.0), mask=mask)\n\nSPEED = {speed:.2}\n{extra}\nclass ModelNew(nn.Module):\n    def forward(self, x):\n        y = torch.empty_like(x)\n        relu_kernel[(triton.cdiv(x.numel(), 64),)](x, y, x.numel(), BLOCK=64)\n        return y\n"
    )
}

fn speed_of(code: &str) -> Option<f64> {
    code.lines()
        .find_map(|l| l.trim().strip_prefix("SPEED = "))
        .and_then(|v| v.trim().parse().ok())
}

/// Evaluates by markers: no `@triton.jit` -> static_rejected, `BROKEN` -> compile_error,
/// `WRONG` -> incorrect, `REFBROKEN` -> broken reference (found by an evaluation only, as one
/// whose inputs are not reproducible may be), otherwise correct at `SPEED`. Its preflight finds
/// a reference with `DEVICEBROKEN` broken (as one that makes a CPU tensor in `forward` is on a
/// GPU); while `device_down` is set it answers every preflight as an evaluator whose devices
/// are all out.
pub struct FakeEvaluator {
    pub delay: Duration,
    pub calls: AtomicU64,
    pub preflights: AtomicU64,
    pub device_down: std::sync::atomic::AtomicBool,
}

impl FakeEvaluator {
    pub fn new() -> Self {
        FakeEvaluator {
            delay: Duration::ZERO,
            calls: AtomicU64::new(0),
            preflights: AtomicU64::new(0),
            device_down: std::sync::atomic::AtomicBool::new(false),
        }
    }
}

/// The message of a reference that makes a CPU tensor in `forward` on a GPU.
pub const DEVICE_ERROR: &str = "RuntimeError: Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!";

pub fn result(status: EvalStatus, speedup: Option<f64>, log: &str) -> EvalResult {
    EvalResult {
        status,
        hack: None,
        error_log: log.to_string(),
        errors: if status == EvalStatus::Incorrect {
            vec![OutputError {
                index: 0,
                max_abs: 0.5,
                mean_abs: 0.1,
                max_rel: 1.0,
                mean_rel: 0.2,
            }]
        } else {
            vec![]
        },
        trials_passed: if status == EvalStatus::Correct { 3 } else { 0 },
        trials: 3,
        candidate_timing: None,
        reference_timing: None,
        speedup,
        warnings: vec![],
        hardware: Hardware {
            device: "fake".into(),
            ..Default::default()
        },
        elapsed_ms: 1,
        speed_of_light: None,
        compile_baseline: None,
    }
}

impl Evaluator for FakeEvaluator {
    fn preflight(&self, r: &EvalRequest) -> Result<Preflight, EvalError> {
        self.preflights.fetch_add(1, Ordering::SeqCst);
        if self.device_down.load(Ordering::SeqCst) {
            return Err(EvalError::Unavailable(
                "every device of the evaluator pool was taken out (fake:0: the device check failed)"
                    .into(),
            ));
        }
        if r.reference.contains("DEVICEBROKEN") {
            return Err(EvalError::BrokenReference {
                task_id: r.task_id.clone(),
                message: format!("{DEVICE_ERROR}\nTraceback (most recent call last):\n  ..."),
            });
        }
        Ok(Preflight::default())
    }

    fn evaluate(&self, r: &EvalRequest) -> Result<EvalResult, EvalError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        if !self.delay.is_zero() {
            std::thread::sleep(self.delay);
        }
        let c = &r.candidate;
        if r.reference.contains("REFBROKEN") {
            return Err(EvalError::BrokenReference {
                task_id: r.task_id.clone(),
                message: "NameError: name 'foo' is not defined".into(),
            });
        }
        Ok(if !c.contains("@triton.jit") {
            result(
                EvalStatus::StaticRejected,
                None,
                "no @triton.jit kernel in ModelNew",
            )
        } else if c.contains("BROKEN") {
            result(
                EvalStatus::CompileError,
                None,
                "SyntaxError: invalid syntax (line 12)",
            )
        } else if c.contains("WRONG") {
            result(EvalStatus::Incorrect, None, "output 0 differs: max abs 0.5")
        } else {
            result(EvalStatus::Correct, speed_of(c), "")
        })
    }
}

/// The scripted answer to a request: a pure function of the request (its seed and prompt).
pub fn scripted_answer(req: &ChatRequest) -> (String, &'static str) {
    let user = &req.messages.last().unwrap().content;
    let r = req.seed.unwrap_or(0) % 10;
    let current = user
        .split("## Current program")
        .nth(1)
        .and_then(speed_of)
        .unwrap_or(0.5);
    if user.contains("translate PyTorch to Triton") {
        if r < 2 {
            return (
                format!("```python\n{}```", kernel_body(0.5, "BROKEN = (")),
                "stop",
            );
        }
        return (
            format!(
                "Plan: one kernel.\n```python\n{}```",
                kernel_body(0.5 + r as f64 * 0.05, "")
            ),
            "stop",
        );
    }
    if user.contains("fix the kernel") {
        return (format!("```python\n{}```", kernel_body(0.7, "")), "stop");
    }
    let line = format!("SPEED = {current:.2}");
    let diff =
        |new: String| format!("Idea.\n<<<<<<< SEARCH\n{line}\n=======\n{new}\n>>>>>>> REPLACE\n");
    match r {
        0..=3 => (diff(format!("SPEED = {:.2}", current * (1.1 + r as f64 * 0.1))), "stop"),
        4 => (diff(line.clone()), "stop"),
        5 => ("I would tile the loads differently.".into(), "stop"),
        6 => (
            "<<<<<<< SEARCH\n    acc = tl.zeros((64,), dtype=tl.float32)\n=======\n    acc = 0\n>>>>>>> REPLACE\n".into(),
            "stop",
        ),
        7 => (diff(format!("{line}\nWRONG = True")), "stop"),
        8 => ("```python\nimport triton\n@triton.jit\ndef k(".into(), "length"),
        _ => (diff(format!("SPEED = {:.2}", current * 0.9)), "stop"),
    }
}

/// An in-process teacher answering with [`scripted_answer`].
pub struct ScriptedTeacher {
    pub calls: AtomicU64,
}

impl ScriptedTeacher {
    pub fn new() -> Self {
        ScriptedTeacher {
            calls: AtomicU64::new(0),
        }
    }
}

impl ChatClient for ScriptedTeacher {
    fn chat(&self, req: &ChatRequest) -> Result<ChatResponse, ChatError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let (content, finish) = scripted_answer(req);
        Ok(ChatResponse {
            completion_tokens: content.len() as u64 / 4,
            content,
            reasoning: None,
            finish_reason: Some(finish.into()),
            model: "scripted".into(),
            prompt_tokens: req
                .messages
                .iter()
                .map(|m| m.content.len() as u64 / 4)
                .sum(),
            cached: false,
        })
    }
}

pub fn task(id: &str, program: &str) -> TaskRow {
    TaskRow {
        task_id: id.into(),
        repo: "demo".into(),
        class_name: "Model".into(),
        program: program.into(),
        family: "activation".into(),
        level: 1,
        cluster: 0,
        license: None,
        selected_as: "center".into(),
        alt_sizes: "[]".into(),
    }
}

pub fn write_tasks(workdir: &Path, tasks: &[TaskRow]) {
    write_table(&TaskRow::path_in(workdir), tasks, "tasks-fp").unwrap();
}

pub fn default_tasks(n: usize) -> Vec<TaskRow> {
    (0..n)
        .map(|i| task(&format!("task{i}"), REFERENCE))
        .collect()
}

/// A step without the fields that legitimately differ between runs (timestamps, cache flag).
pub fn comparable(mut r: StepRow) -> StepRow {
    r.started_at_ms = 0;
    r.finished_at_ms = 0;
    r.cached = false;
    r
}
