//! The dedup stage end to end: planted duplicates of every kind, each method alone,
//! decontamination, survivor choice, determinism across thread counts, hostile input.
#![allow(clippy::unwrap_used)]

mod common;
#[path = "dedup_stage/runs.rs"]
mod runs;

use std::collections::HashMap;
use std::path::Path;

use common::synth::{self, Variant};
use ksmith_core::context::StageContext;
use ksmith_core::progress::ProgressMode;
use ksmith_core::table::{Table, read_table, write_table};
use ksmith_core::tables::{DedupMethod, DedupRow, ModuleRow, ModuleStatus, ProbeRow, ProbeStatus};
use ksmith_dedup::{DedupConfig, DedupError, run};
use ksmith_embed::hashing::SplitMix;

fn module(id: &str, program: &str, license: Option<&str>, stars: Option<i64>) -> ModuleRow {
    ModuleRow {
        id: id.into(),
        repo: format!("repo-{id}"),
        commit: "c0".into(),
        path: "m.py".into(),
        class_name: "Model".into(),
        line: 1,
        status: ModuleStatus::Ok,
        reason: None,
        reason_code: None,
        program: Some(program.into()),
        deps: vec![],
        imports: vec![],
        lines: program.lines().count() as u32,
        license: license.map(str::to_string),
        stars,
        arg_sources: Vec::new(),
    }
}

fn probe(id: &str, status: ProbeStatus, program: Option<&str>) -> ProbeRow {
    ProbeRow {
        program: program.map(str::to_string),
        cpu_time_ms: 1.0,
        attempts: 1,
        ..ProbeRow::empty(id, &format!("repo-{id}"), "Model", status)
    }
}

/// One `ok` probe row (without a repaired program) per module.
fn ok_probes(modules: &[ModuleRow]) -> Vec<ProbeRow> {
    modules
        .iter()
        .map(|m| probe(&m.id, ProbeStatus::Ok, None))
        .collect()
}

/// Records what a probe row's forward ran: `calls` (probe's `aten_calls`), and the trace and
/// counts they imply.
fn ran(p: &mut ProbeRow, calls: &[&str]) {
    p.aten_calls = calls.iter().map(|c| c.to_string()).collect();
    p.aten_trace = calls
        .iter()
        .map(|c| c.split(['(', '@']).next().unwrap_or(c).to_string())
        .collect();
    let mut counts: std::collections::BTreeMap<String, u64> = Default::default();
    for op in &p.aten_trace {
        *counts.entry(op.clone()).or_default() += 1;
    }
    p.aten_ops = Some(
        counts
            .into_iter()
            .map(|(op, count)| ksmith_core::tables::OpCount { op, count })
            .collect(),
    );
}

fn write_inputs(dir: &Path, modules: &[ModuleRow], probes: &[ProbeRow]) {
    write_table(&ModuleRow::path_in(dir), modules, "fp-modules").unwrap();
    write_table(&ProbeRow::path_in(dir), probes, "fp-probes").unwrap();
}

fn run_rows(dir: &Path, cfg: &DedupConfig, threads: usize) -> HashMap<String, DedupRow> {
    let mut ctx = StageContext::new(dir, threads, ProgressMode::Silent);
    ctx.force = true;
    run(cfg, &ctx).unwrap();
    let rows: Vec<DedupRow> = read_table(&DedupRow::path_in(dir)).unwrap();
    rows.into_iter().map(|r| (r.module_id.clone(), r)).collect()
}

/// A corpus written as tables; returns (id -> generated module).
fn planted(dir: &Path, n: usize, seed: u64) -> HashMap<String, synth::Generated> {
    let corpus = synth::corpus(n, 0.3, seed);
    let mut modules = Vec::new();
    let mut probes = Vec::new();
    let mut by_id = HashMap::new();
    for (i, g) in corpus.into_iter().enumerate() {
        let id = format!("m{i:05}");
        modules.push(module(&id, &g.program, Some("MIT"), Some(i as i64 % 7)));
        probes.push(probe(&id, ProbeStatus::Ok, None));
        by_id.insert(id, g);
    }
    write_inputs(dir, &modules, &probes);
    by_id
}

/// Checks every dropped row points to a kept module of its own family, and returns per
/// variant (copies in the same group as their original, copies).
fn score(
    rows: &HashMap<String, DedupRow>,
    corpus_of: &HashMap<String, synth::Generated>,
) -> HashMap<Variant, (usize, usize)> {
    let survivor = |id: &String| -> String {
        let r = &rows[id];
        if r.kept {
            id.clone()
        } else {
            r.duplicate_of.clone().unwrap()
        }
    };
    let mut original_of: HashMap<usize, String> = HashMap::new();
    for (id, g) in corpus_of {
        if g.variant == Variant::Original {
            original_of.insert(g.family, id.clone());
        }
    }
    let mut per: HashMap<Variant, (usize, usize)> = HashMap::new();
    for (id, r) in rows {
        let g = &corpus_of[id];
        if !r.kept {
            let other = r.duplicate_of.as_ref().unwrap();
            assert_eq!(
                corpus_of[other].family, g.family,
                "{id} ({:?}) wrongly matched {other} by {:?}",
                g.variant, r.method
            );
            assert!(rows[other].kept, "duplicate_of must name a kept module");
        }
        if g.variant != Variant::Original {
            let e = per.entry(g.variant).or_default();
            e.1 += 1;
            if survivor(id) == survivor(&original_of[&g.family]) {
                e.0 += 1;
            }
        }
    }
    per
}

#[test]
fn planted_duplicates_of_every_kind_are_found_and_distinct_modules_kept() {
    let dir = tempfile::tempdir().unwrap();
    let corpus_of = planted(dir.path(), 400, 1);
    let rows = run_rows(dir.path(), &DedupConfig::default(), 2);
    assert_eq!(rows.len(), 400);
    let per = score(&rows, &corpus_of);
    for (variant, (found, total)) in &per {
        assert!(*total > 10, "{variant:?}: {total}");
        assert_eq!(found, total, "{variant:?}: found {found} of {total}");
    }
    // Families of one: every original without copies survives.
    let mut fam_size: HashMap<usize, usize> = HashMap::new();
    for g in corpus_of.values() {
        *fam_size.entry(g.family).or_default() += 1;
    }
    for (id, g) in &corpus_of {
        if fam_size[&g.family] == 1 {
            assert!(
                rows[id].kept,
                "distinct module {id} was dropped: {:?}",
                rows[id]
            );
        }
    }
    // Every method contributed.
    for m in [DedupMethod::Exact, DedupMethod::Structural] {
        assert!(rows.values().any(|r| r.method == Some(m)), "{m:?}");
    }
}

#[test]
fn each_method_alone_finds_its_kind() {
    let dir = tempfile::tempdir().unwrap();
    let corpus_of = planted(dir.path(), 240, 2);
    let off = DedupConfig {
        exact: false,
        near: false,
        semantic: false,
        structural: false,
        ..Default::default()
    };
    // Nothing on: everything kept.
    assert!(run_rows(dir.path(), &off, 1).values().all(|r| r.kept));

    let only = |f: &dyn Fn(&mut DedupConfig)| {
        let mut c = off.clone();
        f(&mut c);
        let rows = run_rows(dir.path(), &c, 1);
        score(&rows, &corpus_of)
    };
    let exact = only(&|c| c.exact = true);
    assert_eq!(exact[&Variant::Exact].0, exact[&Variant::Exact].1);
    assert_eq!(
        exact[&Variant::Reformatted].0,
        exact[&Variant::Reformatted].1
    );
    assert_eq!(
        exact.get(&Variant::Renamed).map_or(0, |v| v.0),
        0,
        "exact must not match renamed copies"
    );

    let structural = only(&|c| c.structural = true);
    assert_eq!(
        structural[&Variant::Renamed].0,
        structural[&Variant::Renamed].1
    );
    assert_eq!(
        structural.get(&Variant::Edited).map_or(0, |v| v.0),
        0,
        "edited copies change structure"
    );

    let near = only(&|c| c.near = true);
    assert_eq!(near[&Variant::Edited].0, near[&Variant::Edited].1);
    assert_eq!(near[&Variant::Reformatted].0, near[&Variant::Reformatted].1);

    // Hashed-feature embeddings: copies that keep every token are above the default 0.97; an
    // added statement costs about 0.03-0.09 of cosine, so edited copies need a lower threshold
    // (fine on this small corpus; the default stays high for precision at 100k modules).
    let semantic = only(&|c| c.semantic = true);
    assert_eq!(semantic[&Variant::Exact].0, semantic[&Variant::Exact].1);
    assert_eq!(
        semantic[&Variant::Reformatted].0,
        semantic[&Variant::Reformatted].1
    );
    let loose = only(&|c| {
        c.semantic = true;
        c.semantic_threshold = 0.9;
    });
    // Hyperplane buckets find most, not all, pairs in the 0.9-0.95 band (LSH is probabilistic).
    assert!(
        loose[&Variant::Edited].0 * 3 >= loose[&Variant::Edited].1 * 2,
        "{loose:?}"
    );
}

#[test]
fn same_output_with_one_and_four_threads() {
    let dir = tempfile::tempdir().unwrap();
    planted(dir.path(), 300, 3);
    let cfg = DedupConfig::default();
    let mut ctx = StageContext::new(dir.path(), 1, ProgressMode::Silent);
    ctx.force = true;
    run(&cfg, &ctx).unwrap();
    let one: Vec<DedupRow> = read_table(&DedupRow::path_in(dir.path())).unwrap();
    ctx.threads = 4;
    run(&cfg, &ctx).unwrap();
    let four: Vec<DedupRow> = read_table(&DedupRow::path_in(dir.path())).unwrap();
    assert_eq!(one, four);
    assert!(
        one.windows(2).all(|w| w[0].module_id < w[1].module_id),
        "sorted by id"
    );
    assert!(one.iter().any(|r| !r.kept));
}

const RELU: &str = "import torch\nimport torch.nn as nn\n\nclass Model(nn.Module):\n    \"\"\"Simple model that performs a ReLU activation.\"\"\"\n    def __init__(self):\n        super(Model, self).__init__()\n\n    def forward(self, x: torch.Tensor) -> torch.Tensor:\n        return torch.relu(x)\n\nbatch_size = 16\ndim = 16384\n\ndef get_inputs():\n    x = torch.randn(batch_size, dim)\n    return [x]\n\ndef get_init_inputs():\n    return []\n";
const GEMM: &str = "import torch\nimport torch.nn as nn\n\nclass Model(nn.Module):\n    def __init__(self, in_features, out_features, scaling_factor):\n        super(Model, self).__init__()\n        self.gemm = nn.Linear(in_features, out_features)\n        self.scaling_factor = scaling_factor\n\n    def forward(self, x):\n        x = self.gemm(x)\n        x = torch.sigmoid(x)\n        x = x * self.scaling_factor\n        return x\n\nbatch_size = 128\nin_features = 1024\nout_features = 512\nscaling_factor = 2.0\n\ndef get_inputs():\n    return [torch.randn(batch_size, in_features)]\n\ndef get_init_inputs():\n    return [in_features, out_features, scaling_factor]\n";

#[test]
fn decontamination_drops_copies_of_evaluation_problems() {
    let dir = tempfile::tempdir().unwrap();
    let bench = dir.path().join("bench");
    std::fs::create_dir_all(bench.join("level1")).unwrap();
    std::fs::create_dir_all(bench.join("level2")).unwrap();
    std::fs::write(bench.join("level1/19_ReLU.py"), RELU).unwrap();
    std::fs::write(bench.join("level2/9_Gemm_Sigmoid_Scaling.py"), GEMM).unwrap();
    std::fs::write(bench.join("level2/notes.txt"), "not a problem").unwrap();
    std::fs::write(bench.join("level2/broken.py"), [0xff, 0xfe, 0x00]).unwrap();

    let near_copy = GEMM
        .replace("scaling_factor = 2.0", "scaling_factor = 3.0")
        .replace("batch_size = 128", "batch_size = 64");
    let renamed = RELU.replace("x", "inp").replace("16384", "4096").replace(
        "    \"\"\"Simple model that performs a ReLU activation.\"\"\"\n",
        "",
    );
    let mut rng = SplitMix::new(9);
    let unrelated = synth::original(&mut rng);
    let modules = vec![
        module("a", &near_copy, None, None),
        module("b", &renamed, None, None),
        module("c", &unrelated, None, None),
    ];
    let probes = ok_probes(&modules);
    write_inputs(dir.path(), &modules, &probes);
    let cfg = DedupConfig {
        contamination: vec![bench.display().to_string()],
        ..Default::default()
    };
    let rows = run_rows(dir.path(), &cfg, 1);
    assert_eq!(rows["a"].method, Some(DedupMethod::Contamination));
    assert_eq!(
        rows["a"].duplicate_of.as_deref(),
        Some("level2/9_Gemm_Sigmoid_Scaling.py")
    );
    assert!(rows["a"].similarity.unwrap() >= 0.7);
    assert_eq!(rows["b"].method, Some(DedupMethod::Contamination));
    assert_eq!(rows["b"].duplicate_of.as_deref(), Some("level1/19_ReLU.py"));
    assert!(rows["c"].kept);
    let report: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("reports/dedup.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(report["counters"]["benchmark_problems"], 2);
    assert_eq!(report["counters"]["benchmark_unreadable"], 1);
    assert_eq!(report["dropped"]["contamination"], 2);

    let missing = DedupConfig {
        contamination: vec![dir.path().join("nope").display().to_string()],
        ..Default::default()
    };
    let err = run(&missing, &StageContext::for_tests(dir.path())).unwrap_err();
    assert!(matches!(err, DedupError::Benchmark { .. }));
    assert!(err.to_string().contains("nope"), "{err}");
}

#[test]
fn survivor_is_permissive_then_starred_then_shorter() {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = SplitMix::new(5);
    let p = synth::original(&mut rng);
    let modules = vec![
        module("gpl", &p, Some("GPL-3.0"), Some(10_000)),
        module("mit-few-stars", &p, Some("MIT"), Some(3)),
        module("mit-more-stars", &p, Some("MIT"), Some(50)),
        module("none", &p, None, Some(1_000_000)),
    ];
    let probes = ok_probes(&modules);
    write_inputs(dir.path(), &modules, &probes);
    let rows = run_rows(dir.path(), &DedupConfig::default(), 1);
    assert!(rows["mit-more-stars"].kept);
    for id in ["gpl", "mit-few-stars", "none"] {
        assert!(!rows[id].kept);
        assert_eq!(rows[id].duplicate_of.as_deref(), Some("mit-more-stars"));
        assert_eq!(rows[id].method, Some(DedupMethod::Exact));
        assert_eq!(rows[id].similarity, Some(1.0));
    }
}

#[test]
fn only_runnable_modules_with_the_probe_program_and_hostile_programs() {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = SplitMix::new(6);
    let p1 = synth::original(&mut rng);
    let p2 = synth::original(&mut rng);
    let modules = vec![
        module("ok", &p1, None, None),
        module("failed", &p1, None, None),
        module("repaired", "placeholder that differs", None, None),
        module("empty", "", None, None),
        module("broken", "def (((:\n  '''unterminated", None, None),
        module("binaryish", "\u{0}\u{1}\u{7f} x = = =", None, None),
    ];
    let probes = vec![
        probe("ok", ProbeStatus::Ok, None),
        probe("failed", ProbeStatus::Failed, None),
        probe("repaired", ProbeStatus::Ok, Some(&p2)),
        probe("empty", ProbeStatus::Ok, None),
        probe("broken", ProbeStatus::Ok, None),
        probe("binaryish", ProbeStatus::Ok, None),
        probe("ghost", ProbeStatus::Ok, None),
    ];
    write_inputs(dir.path(), &modules, &probes);
    let rows = run_rows(dir.path(), &DedupConfig::default(), 2);
    assert!(!rows.contains_key("failed") && !rows.contains_key("ghost"));
    assert_eq!(rows.len(), 5);
    assert!(
        rows["ok"].kept && rows["repaired"].kept && rows["broken"].kept && rows["binaryish"].kept
    );
    let report: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("reports/dedup.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(report["counters"]["not_runnable"], 1);
    assert_eq!(report["counters"]["probe_without_module"], 1);
}

#[test]
fn the_probes_program_is_compared_not_the_extracted_source() {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = SplitMix::new(30);
    let [source, repaired_a, repaired_b, shared] =
        std::array::from_fn(|_| synth::original(&mut rng));
    // The same source, probed into two different programs; two different sources probed into
    // one program.
    let modules = vec![
        module("same-src-a", &source, Some("MIT"), Some(4)),
        module("same-src-b", &source, Some("MIT"), Some(3)),
        module("other-src-a", &repaired_a, Some("MIT"), Some(2)),
        module("other-src-b", &repaired_b, Some("MIT"), Some(1)),
    ];
    let probes = vec![
        probe("same-src-a", ProbeStatus::Ok, Some(&repaired_a)),
        probe("same-src-b", ProbeStatus::Ok, Some(&repaired_b)),
        probe("other-src-a", ProbeStatus::Ok, Some(&shared)),
        probe("other-src-b", ProbeStatus::Ok, Some(&shared)),
    ];
    write_inputs(dir.path(), &modules, &probes);
    let rows = run_rows(dir.path(), &DedupConfig::default(), 2);
    assert!(
        rows["same-src-a"].kept && rows["same-src-b"].kept,
        "{rows:?}"
    );
    assert!(rows["other-src-a"].kept, "{rows:?}");
    let dropped = &rows["other-src-b"];
    assert_eq!(dropped.method, Some(DedupMethod::Exact), "{dropped:?}");
    assert_eq!(dropped.duplicate_of.as_deref(), Some("other-src-a"));
}

#[test]
fn skips_when_up_to_date_and_reports_missing_inputs() {
    let dir = tempfile::tempdir().unwrap();
    let err = run(
        &DedupConfig::default(),
        &StageContext::for_tests(dir.path()),
    )
    .unwrap_err();
    assert!(err.to_string().contains("modules.parquet"), "{err}");
    planted(dir.path(), 20, 4);
    let ctx = StageContext::for_tests(dir.path());
    let first = run(&DedupConfig::default(), &ctx).unwrap();
    assert!(!first.skipped);
    assert_eq!(first.rows_written, 20);
    let second = run(&DedupConfig::default(), &ctx).unwrap();
    assert!(second.skipped);
    let changed = DedupConfig {
        near_threshold: 0.8,
        ..Default::default()
    };
    assert!(!run(&changed, &ctx).unwrap().skipped);
    let bad = DedupConfig {
        num_perm: 1,
        ..Default::default()
    };
    assert!(matches!(run(&bad, &ctx), Err(DedupError::Config(_))));
}

#[test]
fn modules_grouped_with_a_copy_of_a_problem_are_dropped_too() {
    let dir = tempfile::tempdir().unwrap();
    let bench = dir.path().join("bench");
    std::fs::create_dir_all(&bench).unwrap();
    std::fs::write(bench.join("9_Gemm_Sigmoid_Scaling.py"), GEMM).unwrap();
    // `copy` is the problem itself; `edited` only a near duplicate of `copy` (one more step),
    // which a strict contamination threshold does not match on its own.
    let edited = GEMM.replace(
        "        x = x * self.scaling_factor\n",
        "        x = x * self.scaling_factor\n        x = x - 0.5\n",
    );
    let mut rng = SplitMix::new(11);
    let unrelated = synth::original(&mut rng);
    let modules = vec![
        module("copy", GEMM, Some("MIT"), Some(1)),
        module("edited", &edited, Some("MIT"), Some(50)),
        module("other", &unrelated, Some("MIT"), Some(1)),
    ];
    let probes = ok_probes(&modules);
    write_inputs(dir.path(), &modules, &probes);
    let cfg = DedupConfig {
        contamination: vec![bench.display().to_string()],
        contamination_threshold: 1.0,
        contamination_canonical_threshold: 1.0,
        contamination_structural: false,
        ..Default::default()
    };
    let rows = run_rows(dir.path(), &cfg, 2);
    assert_eq!(rows["copy"].method, Some(DedupMethod::Contamination));
    assert_eq!(rows["copy"].contaminated_via, None);
    assert_eq!(rows["copy"].similarity, Some(1.0));
    // The survivor of the group (more stars) goes with its copy of the problem.
    let e = &rows["edited"];
    assert!(!e.kept);
    assert_eq!(e.method, Some(DedupMethod::Contamination));
    assert_eq!(e.duplicate_of.as_deref(), Some("9_Gemm_Sigmoid_Scaling.py"));
    assert_eq!(e.contaminated_via.as_deref(), Some("copy"));
    assert_eq!(e.similarity, None);
    assert!(rows["other"].kept);
    // Without the problem, `copy` is a near duplicate of `edited`: the pair that groups them.
    let pairs: Vec<ksmith_core::tables::DedupPairRow> =
        read_table(&ksmith_core::tables::DedupPairRow::path_in(dir.path())).unwrap();
    assert!(pairs.iter().any(|p| p.method == DedupMethod::Near
        && [p.module_id.as_str(), p.other.as_str()] == ["copy", "edited"]));
    let report: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("reports/dedup.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(report["counters"]["contaminated_via_group"], 1);
}

#[test]
fn every_dropped_row_is_a_direct_match_of_a_kept_survivor_recorded_in_the_pairs() {
    let dir = tempfile::tempdir().unwrap();
    planted(dir.path(), 300, 8);
    let rows = run_rows(dir.path(), &DedupConfig::default(), 2);
    let pairs: Vec<ksmith_core::tables::DedupPairRow> =
        read_table(&ksmith_core::tables::DedupPairRow::path_in(dir.path())).unwrap();
    let cfg = DedupConfig::default();
    let mut dropped = 0;
    for r in rows.values().filter(|r| !r.kept) {
        dropped += 1;
        let survivor = r.duplicate_of.as_ref().unwrap();
        assert!(
            rows[survivor].kept,
            "{} -> {survivor}: survivor dropped",
            r.module_id
        );
        let decided: Vec<_> = pairs
            .iter()
            .filter(|p| p.module_id == r.module_id && p.decided)
            .collect();
        assert_eq!(decided.len(), 1, "{}: {decided:?}", r.module_id);
        let p = decided[0];
        assert_eq!(&p.other, survivor);
        assert_eq!(Some(p.method), r.method);
        assert_eq!(p.similarity, r.similarity);
        let threshold = match p.method {
            DedupMethod::Near => Some(cfg.near_threshold),
            DedupMethod::Semantic => Some(cfg.semantic_threshold),
            DedupMethod::Kernel => Some(cfg.aten_threshold),
            _ => None,
        };
        if let Some(t) = threshold {
            assert!(p.similarity.unwrap() >= t, "{p:?}");
        }
    }
    assert!(dropped > 30);
}

#[test]
fn look_alikes_that_run_different_operators_are_not_near_duplicates() {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = SplitMix::new(21);
    let p = synth::original(&mut rng);
    let edited = synth::edited(&p, &mut rng);
    let modules = vec![
        module("a", &p, Some("MIT"), Some(9)),
        module("same-ops", &edited, Some("MIT"), Some(1)),
        module("other-ops", &format!("{edited}\n"), Some("MIT"), Some(1)),
    ];
    let mut probes = ok_probes(&modules);
    let linear = ["aten::t(w)", "aten::addmm(a,w)"];
    ran(
        &mut probes[0],
        &[&linear[..], &linear[..], &["aten::gelu"]].concat(),
    );
    ran(
        &mut probes[1],
        &[&linear[..], &linear[..], &["aten::gelu_"]].concat(),
    );
    ran(
        &mut probes[2],
        &[&linear[..], &linear[..], &["aten::silu"]].concat(),
    );
    write_inputs(dir.path(), &modules, &probes);
    let cfg = DedupConfig {
        exact: false,
        structural: false,
        semantic: false,
        ..Default::default()
    };
    let rows = run_rows(dir.path(), &cfg, 1);
    assert!(rows["a"].kept);
    assert_eq!(rows["same-ops"].method, Some(DedupMethod::Near));
    assert_eq!(rows["same-ops"].duplicate_of.as_deref(), Some("a"));
    // Near in code, but its forward ran another activation: kept.
    assert!(rows["other-ops"].kept, "{:?}", rows["other-ops"]);
    // Without recorded operators, code alone decides.
    let bare = ok_probes(&modules);
    write_inputs(dir.path(), &modules, &bare);
    let rows = run_rows(dir.path(), &cfg, 1);
    assert_eq!(rows["other-ops"].method, Some(DedupMethod::Near));
}

/// A weight-normalized convolution block with attention-like pooling, in 2-D; `three_d` gives
/// its 3-D version (same text but the dimensional calls and the weight's rank).
fn conv_block(three_d: bool, local: &str) -> String {
    let (d, kernel, pad) = if three_d {
        ("3d", "k, k, k", "(1, 1, 1, 1, 1, 1)")
    } else {
        ("2d", "k, k", "(1, 1, 1, 1)")
    };
    format!(
        "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n\
         class Model(nn.Module):\n    def __init__(self, c_in, c_out, k=3, heads=4, eps=1e-4):\n        super().__init__()\n        self.weight = nn.Parameter(torch.randn(c_out, c_in, {kernel}))\n        self.gate = nn.Parameter(torch.zeros(c_out))\n        self.heads = heads\n        self.eps = eps\n        self.scale = (c_in * k) ** -0.5\n\n\
         \x20   def forward(self, x):\n        {local} = F.normalize(self.weight.flatten(1), dim=1, eps=self.eps).view_as(self.weight)\n        {local} = {local} * self.scale\n        x = F.pad(x, {pad}, mode='replicate')\n        y = F.conv{d}(x, {local})\n        b, c = y.shape[0], y.shape[1]\n        q = y.reshape(b, self.heads, c // self.heads, -1)\n        att = torch.softmax(q.mean(dim=2, keepdim=True), dim=-1)\n        pooled = (q * att).sum(dim=-1)\n        g = torch.sigmoid(self.gate).view(1, self.heads, -1)\n        out = pooled * g + pooled.mean(dim=1, keepdim=True)\n        return out.reshape(b, c)\n\n\
         def get_inputs():\n    return [torch.randn(2, 4, 8, 8)]\n\n\
         def get_init_inputs():\n    return [4, 8]\n"
    )
}

#[test]
fn the_two_and_three_dimensional_versions_of_a_module_are_not_duplicates() {
    let dir = tempfile::tempdir().unwrap();
    // Near: a renamed local; semantic: the same code with a comment.
    for (near, copy) in [
        (true, conv_block(false, "kernel")),
        (false, format!("# a copy\n{}", conv_block(false, "w"))),
    ] {
        let modules = vec![
            module("a", &conv_block(false, "w"), Some("MIT"), Some(9)),
            module("copy", &copy, Some("MIT"), Some(1)),
            module("three-d", &conv_block(true, "w"), Some("MIT"), Some(1)),
        ];
        // All recorded the same operator (as if its dimensionality were not recorded; the
        // kernel method, which compares only what ran, is off).
        let mut probes = ok_probes(&modules);
        for p in &mut probes {
            ran(p, &["aten::convolution"]);
        }
        write_inputs(dir.path(), &modules, &probes);
        let cfg = DedupConfig {
            exact: false,
            structural: false,
            near,
            semantic: !near,
            kernel: false,
            ..Default::default()
        };
        let rows = run_rows(dir.path(), &cfg, 1);
        assert!(rows["a"].kept);
        assert_eq!(
            rows["copy"].duplicate_of.as_deref(),
            Some("a"),
            "near: {near}"
        );
        // The 3-D version is another kernel, however alike its text and operators.
        assert!(rows["three-d"].kept, "near: {near}: {:?}", rows["three-d"]);
    }
}
