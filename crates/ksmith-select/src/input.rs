//! Reading `steps.parquet` and `tasks.parquet` into what select works on.

use ksmith_core::chat::ChatMessage;
use ksmith_core::tables::StepRow;

use crate::trajectory::StepView;

/// The view of one stored step. `eval_unreadable` is set when the step carries an evaluation
/// whose JSON cannot be decoded (the step is then treated as not evaluated).
pub fn step_view(row: StepRow) -> (StepView, bool) {
    let (eval, eval_unreadable) = match row.decode_eval() {
        Ok(eval) => (eval, false),
        Err(_) => (None, true),
    };
    let response_cut = row.response_cut();
    let mut prompt = Vec::with_capacity(2);
    if !row.system_prompt.is_empty() {
        prompt.push(ChatMessage::new("system", row.system_prompt));
    }
    if !row.user_prompt.is_empty() {
        prompt.push(ChatMessage::new("user", row.user_prompt));
    }
    let program = if row.edit_outcome.has_program() {
        row.program
    } else {
        None
    };
    (
        StepView {
            step_id: row.step_id,
            task_id: row.task_id,
            iteration: row.iteration,
            island: row.island,
            backend: row.backend,
            parent_id: row.parent_step_id,
            parent_program: row.parent_program,
            prompt,
            response: row.response,
            response_cut,
            program,
            eval,
            teacher: row.teacher_model.unwrap_or_default(),
        },
        eval_unreadable,
    )
}
