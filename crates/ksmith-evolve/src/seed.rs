//! The seed program of a task. The editable block itself (markers, splitting) is
//! [`ksmith_core::evolve_block`], shared with select, export and the answer reader.

use ksmith_core::evaluation::Backend;
use ksmith_core::evolve_block::{BLOCK_END, BLOCK_START, has_marker};

/// The fixed header of every Triton seed program, outside the block.
const SEED_HEADER: &str = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\nimport triton\nimport triton.language as tl\n\n";
/// The seed's imports for the CUDA backend (KernelBench's inline CUDA).
const SEED_HEADER_CUDA: &str = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\nfrom torch.utils.cpp_extension import load_inline\n\n";

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
    use ksmith_core::evolve_block::split_block;

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
}
