//! The editable block of a program: the code between the `# EVOLVE-BLOCK-START` and
//! `# EVOLVE-BLOCK-END` lines, the only code a teacher's answer may change.
//!
//! One definition for the rollout (which seeds, prompts and edits programs), select (which
//! compares blocks) and export; the trainers' reward has the Python copy in
//! `python/ksmith/answer.py`, held to this one by the shared answer cases.
//!
//! A program's editable block lies between a line containing [`BLOCK_START`] and a line
//! containing [`BLOCK_END`]; the marker lines themselves belong to the fixed prefix and suffix.

/// Marker opening the editable block.
pub const BLOCK_START: &str = "# EVOLVE-BLOCK-START";
/// Marker closing the editable block.
pub const BLOCK_END: &str = "# EVOLVE-BLOCK-END";

/// The class a candidate program defines (a fenced block that mentions it is the new block).
pub const ENTRY_POINT: &str = "ModelNew";

/// A program split around its editable block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Block<'a> {
    /// Everything up to and including the start-marker line.
    pub prefix: &'a str,
    /// The editable text.
    pub body: &'a str,
    /// Everything from the end-marker line on.
    pub suffix: &'a str,
}

impl Block<'_> {
    /// The program with `body` as its block.
    pub fn with_body(&self, body: &str) -> String {
        let mut out = String::with_capacity(self.prefix.len() + body.len() + self.suffix.len() + 1);
        out.push_str(self.prefix);
        out.push_str(body);
        if !body.is_empty() && !body.ends_with('\n') {
            out.push('\n');
        }
        out.push_str(self.suffix);
        out
    }
}

fn marker_lines(code: &str, marker: &str) -> Vec<(usize, usize)> {
    let mut found = Vec::new();
    let mut pos = 0;
    for line in code.split_inclusive('\n') {
        if line.trim_start().starts_with(marker) {
            found.push((pos, pos + line.len()));
        }
        pos += line.len();
    }
    found
}

/// Splits `code` around its block; exactly one start and one end marker line are required, in
/// that order.
pub fn split_block(code: &str) -> Result<Block<'_>, String> {
    let starts = marker_lines(code, BLOCK_START);
    let ends = marker_lines(code, BLOCK_END);
    match (starts.as_slice(), ends.as_slice()) {
        ([(_, s_end)], [(e_start, _)]) if s_end <= e_start => Ok(Block {
            prefix: &code[..*s_end],
            body: &code[*s_end..*e_start],
            suffix: &code[*e_start..],
        }),
        ([_], [_]) => Err(format!("{BLOCK_END} comes before {BLOCK_START}")),
        _ => Err(format!(
            "expected one {BLOCK_START} and one {BLOCK_END} line, found {} and {}",
            starts.len(),
            ends.len()
        )),
    }
}

/// Whether `code` contains either marker.
pub fn has_marker(code: &str) -> bool {
    code.contains("EVOLVE-BLOCK-START") || code.contains("EVOLVE-BLOCK-END")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_duplicate_or_reversed_markers_are_errors() {
        assert!(split_block("a\nb\n").is_err());
        let two = format!("{BLOCK_START}\n{BLOCK_START}\nx\n{BLOCK_END}\n");
        assert!(split_block(&two).unwrap_err().contains("found 2 and 1"));
        let rev = format!("{BLOCK_END}\nx\n{BLOCK_START}\n");
        assert!(split_block(&rev).unwrap_err().contains("before"));
        let indented = format!("    {BLOCK_START}\nx\n    {BLOCK_END}\n");
        assert_eq!(split_block(&indented).unwrap().body, "x\n");
    }
}
