//! The shared answer cases (`tests/data/answer_cases.json`, also run by the reward's Python
//! reader) for the tests of every crate that reads answers: the rollout's reader in
//! `ksmith_core::answer`, select's chains and export's conversations. Included with
//! `#[path = ".../ksmith-core/tests/support/answer_cases.rs"] mod answer_cases;`.
// Each including test reads the fields it needs, from a private module.
#![allow(dead_code, unreachable_pub)]

use serde_json::Value;

/// One case: a parent program, an answer and what the reader must make of it.
pub struct Case {
    /// What the case is about.
    pub name: String,
    /// The program the answer edits.
    pub parent: String,
    /// The teacher's answer.
    pub answer: String,
    /// The teacher's finish reason, when the case gives one.
    pub finish_reason: Option<String>,
    /// The longest program allowed (no limit when the case gives none).
    pub max_chars: usize,
    /// The expected outcome's name (`EditOutcome`).
    pub outcome: String,
    /// The expected format's name (`EditFormat`), when one is recognised.
    pub format: Option<String>,
    /// The expected program, when the answer applies.
    pub program: Option<String>,
    /// A text the error message contains, when the case gives one.
    pub error: Option<String>,
}

/// A text of the case file: a string, or lines joined with a newline.
fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Array(lines) => lines
            .iter()
            .map(|l| l.as_str().expect("a line is a string"))
            .collect::<Vec<_>>()
            .join("\n"),
        other => panic!("not a text: {other}"),
    }
}

fn file() -> Value {
    serde_json::from_str(include_str!("../data/answer_cases.json")).expect("the case file is JSON")
}

/// Every case of the file.
pub fn cases() -> Vec<Case> {
    let file = file();
    let str_of = |v: &Value, key: &str| v.get(key).and_then(Value::as_str).map(str::to_string);
    file["cases"]
        .as_array()
        .expect("cases is a list")
        .iter()
        .map(|c| Case {
            name: str_of(c, "name").expect("a case has a name"),
            parent: text(&file["parents"][c["parent"].as_str().expect("a parent name")]),
            answer: text(&c["answer"]),
            finish_reason: str_of(c, "finish_reason"),
            max_chars: c
                .get("max_chars")
                .map_or(usize::MAX, |m| m.as_u64().expect("a count") as usize),
            outcome: str_of(c, "outcome").expect("a case has an outcome"),
            format: str_of(c, "format"),
            program: (!c["program"].is_null()).then(|| text(&c["program"])),
            error: str_of(c, "error"),
        })
        .collect()
}
