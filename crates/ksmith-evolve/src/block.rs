//! The editable region of a program and the seed program of a task.
//!
//! A program's editable block lies between a line containing [`BLOCK_START`] and a line
//! containing [`BLOCK_END`]; the marker lines themselves belong to the fixed prefix and suffix.

use ksmith_core::evaluation::Backend;

/// Marker opening the editable block.
pub const BLOCK_START: &str = "# EVOLVE-BLOCK-START";
/// Marker closing the editable block.
pub const BLOCK_END: &str = "# EVOLVE-BLOCK-END";

/// The class a candidate program defines (a fenced block that mentions it is the new block).
pub const ENTRY_POINT: &str = "ModelNew";

/// The fixed header of every Triton seed program, outside the block.
const SEED_HEADER: &str = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\nimport triton\nimport triton.language as tl\n\n";
/// The seed's imports for the CUDA backend (KernelBench's inline CUDA).
const SEED_HEADER_CUDA: &str = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\nfrom torch.utils.cpp_extension import load_inline\n\n";

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

/// The seed program of a task: the backend's imports (Triton's, or `load_inline` for CUDA), then
/// the PyTorch reference as the editable block. The first step asks the teacher to rewrite the
/// block as a `ModelNew` of the backend. A reference that already contains a marker is refused.
pub fn seed_program(reference: &str, backend: Backend) -> Result<String, String> {
    if has_marker(reference) {
        return Err("the reference program contains an EVOLVE-BLOCK marker".into());
    }
    let mut out = String::with_capacity(reference.len() + 256);
    out.push_str(match backend {
        Backend::Triton => SEED_HEADER,
        Backend::Cuda => SEED_HEADER_CUDA,
    });
    out.push_str(BLOCK_START);
    out.push('\n');
    out.push_str(reference.trim_end());
    out.push('\n');
    out.push_str(BLOCK_END);
    out.push('\n');
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seed_wraps_the_reference_and_splits_back() {
        let reference = "class Model(nn.Module):\n    pass\n";
        let seed = seed_program(reference, Backend::Triton).unwrap();
        let b = split_block(&seed).unwrap();
        assert_eq!(b.body, reference);
        assert!(b.prefix.ends_with(&format!("{BLOCK_START}\n")));
        assert!(b.suffix.starts_with(BLOCK_END));
        assert_eq!(b.with_body(b.body), seed);
        assert_eq!(b.with_body("x = 1"), seed.replace(reference, "x = 1\n"));
        assert!(seed_program("# EVOLVE-BLOCK-START\n", Backend::Triton).is_err());
        let cuda = seed_program(reference, Backend::Cuda).unwrap();
        assert!(cuda.contains("from torch.utils.cpp_extension import load_inline\n"));
        assert!(!cuda.contains("import triton"));
        assert_eq!(split_block(&cuda).unwrap().body, reference);
    }

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
