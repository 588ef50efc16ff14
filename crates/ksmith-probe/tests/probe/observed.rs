//! A class its repository builds only inside a model is probed again with the arguments and
//! input shapes that model gave it when it ran, and keeps that row when it runs.

use crate::common::{module, program};
use ksmith_core::context::StageContext;
use ksmith_core::table::{Table, read_table, write_table};
use ksmith_core::tables::{ModuleRow, ProbeRow, ProbeStatus};
use ksmith_probe::observed::{NOT_RUN, STEP};
use ksmith_probe::{ProbeConfig, run};

fn in_file(mut m: ModuleRow, class: &str, deps: &[&str]) -> ModuleRow {
    m.path = "models/net.py".into();
    m.class_name = class.into();
    m.deps = deps.iter().map(|d| d.to_string()).collect();
    m
}

fn config(observed: bool) -> ProbeConfig {
    let mut cfg = ProbeConfig {
        timeout_s: 30.0,
        workers: 1,
        observed_configs: observed,
        ..Default::default()
    };
    cfg.sizing.enabled = false;
    cfg
}

fn probe(observed: bool) -> Vec<ProbeRow> {
    let dir = tempfile::tempdir().expect("temp dir");
    let modules = vec![
        in_file(module("merge", program("merge_alone")), "Merge", &[]),
        in_file(module("lookup", program("lookup_alone")), "Lookup", &[]),
        in_file(
            module("net", program("observed_net")),
            "Net",
            &["models/net.py::Merge", "models/net.py::Lookup"],
        ),
    ];
    write_table(&ModuleRow::path_in(dir.path()), &modules, "extract-fp").expect("modules table");
    run(&config(observed), &StageContext::for_tests(dir.path())).expect("probe stage");
    read_table(&ProbeRow::path_in(dir.path())).expect("probes table")
}

#[test]
fn a_class_built_inside_a_model_takes_the_models_configuration() {
    let _workers = crate::common::workers_shared();
    let rows = probe(true);
    let (merge, lookup, net) = (&rows[0], &rows[1], &rows[2]);
    assert_eq!(net.status, ProbeStatus::Ok, "{:?}", net.error_message);
    let names: Vec<&str> = net
        .submodules
        .iter()
        .map(|s| s.class_name.as_str())
        .collect();
    assert_eq!(names, ["Merge", "Lookup"]);

    // Built as the model builds it: the resolution the model computed, the width it passed,
    // called on the tokens the patch embedding made.
    assert_eq!(merge.status, ProbeStatus::Ok, "{:?}", merge.error_message);
    assert_eq!(
        merge.repair_steps[0],
        format!("{STEP}Merge((8, 8), 16) called on ([2, 64, 16] float32) in Net (models/net.py:1)")
    );
    let program = merge.program.as_deref().unwrap();
    assert!(program.contains("return [(8, 8), 16]"), "{program}");
    assert!(program.contains("torch.rand([2, 64, 16])"), "{program}");
    assert_eq!(merge.output_shapes, ["[2, 16, 32]"]);

    // Reads a table only the model fills: it does not run alone either way, keeps its own
    // row and says why the observed configuration was not kept.
    assert_eq!(lookup.status, ProbeStatus::Failed);
    assert!(
        lookup.attempt_log.iter().any(|l| l.starts_with(NOT_RUN)
            && l.contains("Lookup(32) called on ([2, 16, 32] float32) in Net")),
        "{:?}",
        lookup.attempt_log
    );
}

#[test]
fn without_observed_configs_a_class_keeps_its_own_guesses() {
    let _workers = crate::common::workers_shared();
    let rows = probe(false);
    assert_eq!(rows[0].status, ProbeStatus::Ok);
    assert!(
        rows[0].repair_steps.iter().all(|s| !s.starts_with(STEP)),
        "{:?}",
        rows[0].repair_steps
    );
    assert!(
        rows[0]
            .program
            .as_deref()
            .unwrap()
            .contains("return [(2, 2), 4]")
    );
}
