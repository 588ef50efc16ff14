//! Constructor arguments that are module instances built from the enclosing class's values:
//! `Stage.__init__(self, dim, heads)` builds `Residual(PreNorm(dim, LinearAttention(dim,
//! heads=heads)))`, and a call site of `Stage` gives `dim` and `heads`, so `Residual` and
//! `PreNorm` are built with the attention they wrap (sample repository `tests/data/prenet`).
#![allow(clippy::unwrap_used)] // Tests may unwrap.

use crate::common::*;
use ksmith_core::tables::ModuleRow;
use ksmith_extract::extract_repo;

fn prenet() -> Vec<ModuleRow> {
    extract_repo(
        &info(),
        &test_data_files("prenet"),
        &ksmith_extract::ExtractConfig::default(),
    )
}

/// `PreNorm(dim, LinearAttention(dim, heads=heads))` in `Stage.__init__`, with `Stage(dim,
/// heads=2)` in `Net.__init__(self, dim=4)`: `fn` is that attention with the values `Stage` is
/// built with, the program defines it (and what it needs), and runs as KernelBench runs it.
#[test]
fn a_module_argument_built_from_the_enclosing_classs_values_is_that_module() {
    let rows = prenet();
    assert_eq!(
        row(&rows, "PreNorm").arg_sources,
        vec![
            "dim=4: call models/blocks.py:66 (dim of Stage: call models/net.py:9 (default of dim))",
            "fn=LinearAttention(4, heads=2): call models/blocks.py:66 (dim of Stage: call models/net.py:9 (default of dim); heads of Stage: call models/net.py:9)",
        ]
    );
    let p = ok_program(&rows, "PreNorm");
    assert!(p.contains("\nclass LinearAttention(nn.Module):"), "{p}");
    assert!(p.contains("\nclass RMSNorm(nn.Module):"), "{p}");
    assert!(
        p.ends_with("def get_init_inputs():\n    return [4, LinearAttention(4, heads=2)]\n"),
        "{p}"
    );
    assert_eq!(crate::common::cpython::run_verdicts(&[p]), vec![None]);
}

/// `Residual(PreNorm(dim, LinearAttention(dim, heads=heads)))`: the nested calls are folded the
/// same way, and the program defines both classes.
#[test]
fn a_nested_module_argument_is_built_with_its_own_module_argument() {
    let rows = prenet();
    let residual = row(&rows, "Residual");
    assert_eq!(
        residual.arg_sources,
        vec![
            "fn=PreNorm(4, LinearAttention(4, heads=2)): call models/blocks.py:66 (dim of Stage: call models/net.py:9 (default of dim); heads of Stage: call models/net.py:9)",
        ]
    );
    let p = ok_program(&rows, "Residual");
    for class in ["PreNorm", "LinearAttention", "RMSNorm"] {
        assert!(p.contains(&format!("\nclass {class}(nn.Module):")), "{p}");
    }
    assert!(
        p.ends_with(
            "def get_init_inputs():\n    return [PreNorm(4, LinearAttention(4, heads=2))]\n"
        ),
        "{p}"
    );
    for dep in [
        "models/blocks.py::PreNorm",
        "models/blocks.py::LinearAttention",
    ] {
        assert!(
            residual.deps.iter().any(|d| d == dep),
            "{:?}",
            residual.deps
        );
    }
    assert_eq!(crate::common::cpython::run_verdicts(&[p]), vec![None]);
}

/// `Gated(LinearAttention(d_in), scale=0.5)`, `d_in` a loop variable over a list computed in
/// `Net.__init__` (not constant): the module argument is guessed as before, the guess saying
/// which call it stands for, and the program does not define the attention.
#[test]
fn a_module_argument_whose_arguments_cannot_be_folded_is_guessed_with_the_reason() {
    let rows = prenet();
    assert_eq!(
        row(&rows, "Gated").arg_sources,
        vec![
            "fn=torch.nn.Identity(): guess (`LinearAttention(d_in)` is not constant at call models/net.py:13)",
            "scale=0.5: call models/net.py:13",
        ]
    );
    let p = ok_program(&rows, "Gated");
    assert!(!p.contains("class LinearAttention"), "{p}");
    assert!(
        p.ends_with("def get_init_inputs():\n    return [torch.nn.Identity(), 0.5]\n"),
        "{p}"
    );
}
