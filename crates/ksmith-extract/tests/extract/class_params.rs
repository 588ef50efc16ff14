//! Constructor arguments of a class the repository builds only through a class-valued
//! parameter: `Stage.__init__` calls its parameter `downsample(input_resolution, dim=dim, ...)`
//! and a call site of `Stage` passes the class (`downsample=Merge`), so that inner call builds
//! the class with the arguments that site gives `Stage` (sample repository
//! `tests/data/stagenet`).
#![allow(clippy::unwrap_used)] // Tests may unwrap.

use crate::common::*;
use ksmith_core::tables::ModuleRow;
use ksmith_extract::extract_repo;

fn stagenet() -> Vec<ModuleRow> {
    extract_repo(
        &info(),
        &test_data_files("stagenet"),
        &ksmith_extract::ExtractConfig::default(),
    )
}

/// `Stage(48, (8, 8), 2, Merge)` (the class passed by position): `Merge` is built by
/// `downsample(input_resolution, dim=dim, ...)` in `Stage.__init__`, with the values that site
/// gives `Stage`, and the provenance names both places.
#[test]
fn a_class_passed_for_a_parameter_the_constructor_calls_takes_that_call_sites_arguments() {
    let rows = stagenet();
    assert_eq!(
        row(&rows, "Merge").arg_sources,
        vec![
            "input_resolution=(8, 8): call models/layers.py:77 via downsample= of Stage at models/tiny.py:9 (input_resolution of Stage: call models/tiny.py:9)",
            "dim=48: call models/layers.py:77 via downsample= of Stage at models/tiny.py:9 (dim of Stage: call models/tiny.py:9)",
        ]
    );
    let p = ok_program(&rows, "Merge");
    assert!(
        p.ends_with("def get_init_inputs():\n    return [(8, 8), 48]\n"),
        "{p}"
    );
}

/// `downsample=None if i == self.num_stages - 1 else Shrink` in a loop: the class is built in
/// the iterations the condition (unknown here) selects it, with the loop's first iteration's
/// values, folded from `PyramidNet`'s defaults.
#[test]
fn a_class_in_a_conditional_expression_is_built_with_the_call_sites_arguments() {
    let rows = stagenet();
    assert_eq!(
        row(&rows, "Shrink").arg_sources,
        vec![
            "input_resolution=(16, 16): call models/layers.py:77 via downsample= of Stage at models/net.py:31 (input_resolution of Stage: call models/net.py:31 (`(size, size // 2**i)`))",
            "dim=32: call models/layers.py:77 via downsample= of Stage at models/net.py:31 (dim of Stage: call models/net.py:31 (`int(embed_dim * 2**i)`))",
        ]
    );
    let p = ok_program(&rows, "Shrink");
    assert!(
        p.ends_with("def get_init_inputs():\n    return [(16, 16), 32]\n"),
        "{p}"
    );
}

/// `FoldNet` passes `input_resolution=(grid[0], grid[1] // 2**i)`, `grid` read from a submodule:
/// not constant, so `Fold`'s resolution is guessed as at any call site, the guess saying which
/// expression at which call it stands for; its `dim` still comes from the site.
#[test]
fn an_argument_that_cannot_be_folded_is_guessed_with_the_reason() {
    let rows = stagenet();
    assert_eq!(
        row(&rows, "Fold").arg_sources,
        vec![
            "input_resolution=4: guess (`input_resolution` is not constant at call models/layers.py:77 via downsample= of Stage at models/net.py:55)",
            "dim=32: call models/layers.py:77 via downsample= of Stage at models/net.py:55 (dim of Stage: call models/net.py:55 (default of embed_dim))",
        ]
    );
    let p = ok_program(&rows, "Fold");
    assert!(
        p.ends_with("def get_init_inputs():\n    return [4, 32]\n"),
        "{p}"
    );
}

/// A class no call site passes keeps its guesses: `Stage(..., downsample=None)` and the calls of
/// `norm_layer` (a torch class at every site) build no repository class, and `Spare((2, 2),
/// dim)` in `Tower.__init__(self, Spare, dim=8)` calls the parameter, not the class of that
/// name.
#[test]
fn a_class_no_call_site_passes_keeps_its_guesses() {
    let rows = stagenet();
    assert_eq!(
        row(&rows, "Spare").arg_sources,
        vec!["input_resolution=4: guess", "dim=4: guess"]
    );
    let p = ok_program(&rows, "Spare");
    assert!(
        p.ends_with("def get_init_inputs():\n    return [4, 4]\n"),
        "{p}"
    );
}

/// `Mixer.__init__(self, dim, norm=Norm)` calls `norm(dim)`: `Norm` is built there whenever a
/// `Mixer` is built without `norm`, so its `dim` comes from `Mixer(40)`, not from `Mixer(56,
/// norm=nn.LayerNorm)` (the first call in the file), which builds torch's norm instead.
#[test]
fn a_class_that_is_a_parameters_default_takes_the_arguments_of_a_call_without_it() {
    let rows = stagenet();
    assert_eq!(
        row(&rows, "Norm").arg_sources,
        vec![
            "dim=40: call models/layers.py:117 via norm=Norm, a default of Mixer (dim of Mixer: call models/tiny.py:21)"
        ]
    );
    let p = ok_program(&rows, "Norm");
    assert!(
        p.ends_with("def get_init_inputs():\n    return [40]\n"),
        "{p}"
    );
}
