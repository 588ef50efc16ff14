//! The cluster stage end to end: clusters of related modules, medoid centers, noise, task
//! selection modes, determinism across thread counts, bad input.
#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use ksmith_cluster::{ClusterConfig, ClusterError, run};
use ksmith_core::context::StageContext;
use ksmith_core::progress::ProgressMode;
use ksmith_core::table::{Table, read_table, write_table};
use ksmith_core::tables::{
    ClusterRow, DedupMethod, DedupRow, ModuleRow, ModuleStatus, ProbeRow, ProbeStatus, TaskRow,
};
use ksmith_embed::hashing::SplitMix;
use ksmith_embed::{Embedder, EmbedderConfig, HashedEmbedder};

const GROUPS: &[(&str, &str)] = &[
    (
        "self.{a} = nn.Conv2d({c}, {c}, 3, padding=1)\n        self.{b} = nn.BatchNorm2d({c})",
        "{x} = F.relu(self.{b}(self.{a}({x})))\n        {x} = F.max_pool2d({x}, 2)",
    ),
    (
        "self.{a} = nn.Linear({c}, {c})\n        self.{b} = nn.Linear({c}, {c})",
        "{x} = self.{b}(F.gelu(self.{a}({x})))\n        {x} = F.dropout({x}, 0.1)",
    ),
    (
        "self.{a} = nn.LSTM({c}, {c}, batch_first=True)\n        self.{b} = nn.Embedding(100, {c})",
        "{x}, _ = self.{a}(self.{b}({x}))\n        {x} = {x}[:, -1]",
    ),
    (
        "self.{a} = nn.LayerNorm({c})",
        "{x} = torch.softmax(self.{a}({x}) @ {x}.transpose(-1, -2), dim=-1) @ {x}\n        {x} = torch.logsumexp({x}, dim=1)",
    ),
];

fn member(group: usize, rng: &mut SplitMix) -> String {
    let names = ["x", "h", "inp", "feat", "t"];
    let attrs = ["l1", "conv", "proj", "layer", "core", "m"];
    let (init, fwd) = GROUPS[group];
    let x = names[rng.below(names.len())];
    let a = attrs[rng.below(attrs.len())];
    let b = format!("{}2", attrs[rng.below(attrs.len())]);
    let c = 8 * (1 + rng.below(8));
    let fill = |t: &str| {
        t.replace("{a}", a)
            .replace("{b}", &b)
            .replace("{x}", x)
            .replace("{c}", &c.to_string())
    };
    format!(
        "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\nclass Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n        {}\n\n    def forward(self, {x}):\n        {}\n        return {x}\n\ndef get_inputs():\n    return [torch.randn(2, {c}, {c})]\n\ndef get_init_inputs():\n    return []\n",
        fill(init),
        fill(fwd)
    )
}

const ODD: &[&str] = &[
    "import torch\nclass Model(torch.nn.Module):\n    def forward(self, a, b):\n        return torch.cdist(a, b).amin(dim=0)\n",
    "import torch\nimport torch.nn.functional as F\nclass Model(torch.nn.Module):\n    def forward(self, img):\n        return F.pixel_shuffle(F.pad(img, (1, 1, 1, 1), mode='reflect'), 2)\n",
    "import torch\nclass Model(torch.nn.Module):\n    def forward(self, s):\n        return torch.fft.rfft(s).abs().cumsum(-1)\n",
];

struct Fixture {
    group_of: HashMap<String, usize>,
}

/// A runnable module of `repo` (MIT, one star) whose program the caller sets.
fn module_row(id: &str, repo: &str) -> ModuleRow {
    ModuleRow {
        id: id.into(),
        repo: repo.into(),
        commit: "c".into(),
        path: "m.py".into(),
        class_name: "Model".into(),
        line: 1,
        status: ModuleStatus::Ok,
        reason: None,
        reason_code: None,
        program: None,
        deps: vec![],
        imports: vec![],
        lines: 1,
        license: Some("MIT".into()),
        stars: Some(1),
        arg_sources: Vec::new(),
    }
}

fn write_inputs(dir: &Path, per_group: usize, seed: u64) -> Fixture {
    let mut rng = SplitMix::new(seed);
    let mut modules = Vec::new();
    let mut probes = Vec::new();
    let mut dedup = Vec::new();
    let mut group_of = HashMap::new();
    let mut add = |id: String, program: String, kept: bool, via_probe: bool| {
        modules.push(ModuleRow {
            program: Some(if via_probe {
                "stale".into()
            } else {
                program.clone()
            }),
            lines: program.lines().count() as u32,
            ..module_row(&id, &format!("repo/{id}"))
        });
        probes.push(ProbeRow {
            program: via_probe.then(|| program.clone()),
            cpu_time_ms: 1.0,
            attempts: 1,
            ..ProbeRow::empty(&id, &format!("repo/{id}"), "Model", ProbeStatus::Ok)
        });
        dedup.push(DedupRow {
            module_id: id,
            kept,
            method: (!kept).then_some(DedupMethod::Exact),
            duplicate_of: (!kept).then(|| "g0_000".to_string()),
            similarity: None,
            contaminated_via: None,
        });
    };
    for g in 0..GROUPS.len() {
        for k in 0..per_group {
            let id = format!("g{g}_{k:03}");
            group_of.insert(id.clone(), g);
            add(id, member(g, &mut rng), true, k % 2 == 0);
        }
    }
    for (k, p) in ODD.iter().enumerate() {
        add(format!("odd{k}"), p.to_string(), true, false);
    }
    add("dropped".into(), member(0, &mut rng), false, false);
    write_table(&ModuleRow::path_in(dir), &modules, "fp-m").unwrap();
    write_table(&ProbeRow::path_in(dir), &probes, "fp-p").unwrap();
    write_table(&DedupRow::path_in(dir), &dedup, "fp-d").unwrap();
    Fixture { group_of }
}

fn run_in(dir: &Path, cfg: &ClusterConfig, threads: usize) -> (Vec<ClusterRow>, Vec<TaskRow>) {
    let mut ctx = StageContext::new(dir, threads, ProgressMode::Silent);
    ctx.force = true;
    run(cfg, &ctx).unwrap();
    (
        read_table(&ClusterRow::path_in(dir)).unwrap(),
        read_table(&TaskRow::path_in(dir)).unwrap(),
    )
}

/// Small clusters; 16 PCA dims keep the debug-build suite fast (PCA itself is unit-tested).
fn small_cfg() -> ClusterConfig {
    ClusterConfig {
        min_cluster_size: 5,
        min_samples: 3,
        pca_dims: 16,
        ..Default::default()
    }
}

#[test]
fn groups_become_clusters_with_medoid_centers_and_noise_is_labelled() {
    let dir = tempfile::tempdir().unwrap();
    let fx = write_inputs(dir.path(), 25, 1);
    let centers_only = ClusterConfig {
        tasks: "centers".into(),
        ..small_cfg()
    };
    let (rows, tasks) = run_in(dir.path(), &centers_only, 2);
    assert_eq!(rows.len(), 4 * 25 + ODD.len(), "one row per kept module");
    assert!(rows.iter().all(|r| r.module_id != "dropped"));

    // Each generated group is (mostly) one cluster, and different groups differ.
    let mut label_of_group: BTreeMap<usize, BTreeMap<i32, usize>> = BTreeMap::new();
    for r in &rows {
        if let Some(&g) = fx.group_of.get(&r.module_id) {
            *label_of_group
                .entry(g)
                .or_default()
                .entry(r.cluster)
                .or_default() += 1;
        }
    }
    let mut majority = Vec::new();
    for (g, counts) in &label_of_group {
        let (&label, &count) = counts.iter().max_by_key(|(_, c)| **c).unwrap();
        assert!(label >= 0 && count >= 20, "group {g}: {counts:?}");
        majority.push(label);
    }
    majority.sort();
    majority.dedup();
    assert_eq!(
        majority.len(),
        GROUPS.len(),
        "groups must land in different clusters"
    );

    // Exactly one center per cluster, never on noise; centers are medoids in the original space.
    let mut centers: BTreeMap<i32, Vec<&ClusterRow>> = BTreeMap::new();
    for r in &rows {
        if r.cluster < 0 {
            assert!(!r.is_center, "noise cannot be a center");
        }
        if r.is_center {
            centers.entry(r.cluster).or_default().push(r);
        }
    }
    let clusters: std::collections::BTreeSet<i32> =
        rows.iter().map(|r| r.cluster).filter(|&c| c >= 0).collect();
    assert_eq!(centers.len(), clusters.len());
    assert!(centers.values().all(|c| c.len() == 1));

    let modules: Vec<ModuleRow> = read_table(&ModuleRow::path_in(dir.path())).unwrap();
    let probes: Vec<ProbeRow> = read_table(&ProbeRow::path_in(dir.path())).unwrap();
    let program = |id: &str| -> String {
        probes
            .iter()
            .find(|p| p.module_id == id)
            .and_then(|p| p.program.clone())
            .or_else(|| {
                modules
                    .iter()
                    .find(|m| m.id == id)
                    .and_then(|m| m.program.clone())
            })
            .unwrap()
    };
    let emb = HashedEmbedder::new(&EmbedderConfig::default());
    for (&label, c) in &centers {
        let members: Vec<&ClusterRow> = rows.iter().filter(|r| r.cluster == label).collect();
        // Modules are embedded by what they compute: the entry class and the code it reaches.
        let progs: Vec<String> = members
            .iter()
            .map(|r| ksmith_embed::slice_text(&program(&r.module_id)))
            .collect();
        let refs: Vec<&str> = progs.iter().map(String::as_str).collect();
        let m = emb.embed(&refs).unwrap();
        let cost = |i: usize| -> f64 {
            (0..members.len())
                .map(|j| {
                    let d = &m.row(i) - &m.row(j);
                    f64::from(d.dot(&d)).sqrt()
                })
                .sum()
        };
        let best = (0..members.len()).map(cost).fold(f64::INFINITY, f64::min);
        let center_idx = members
            .iter()
            .position(|r| r.module_id == c[0].module_id)
            .unwrap();
        assert!(
            (cost(center_idx) - best).abs() < 1e-3,
            "cluster {label}: center is not a medoid"
        );
    }

    // With tasks = "centers": the centers, with their family and level.
    assert_eq!(tasks.len(), centers.len());
    for t in &tasks {
        let r = rows.iter().find(|r| r.module_id == t.task_id).unwrap();
        assert!(r.is_center);
        assert_eq!(t.selected_as, "center");
        assert_eq!(
            (t.family.as_str(), t.level, t.cluster),
            (r.family.as_str(), r.level, r.cluster)
        );
        assert_eq!(
            t.program,
            program(&t.task_id),
            "tasks carry the repaired program"
        );
    }
    // Families follow the operators.
    let fam = |id: &str| {
        rows.iter()
            .find(|r| r.module_id == id)
            .unwrap()
            .family
            .clone()
    };
    assert_eq!(fam("g0_000"), "convolution");
    assert_eq!(fam("g1_000"), "linear_mlp");
    assert_eq!(fam("g2_000"), "recurrent");
    assert_eq!(fam("g3_000"), "attention");
    assert_eq!(fam("odd0"), "distance");
}

#[test]
fn task_modes_all_balanced_and_noise() {
    let dir = tempfile::tempdir().unwrap();
    write_inputs(dir.path(), 20, 2);
    let (rows, all) = run_in(
        dir.path(),
        &ClusterConfig {
            tasks: "all".into(),
            ..small_cfg()
        },
        1,
    );
    assert_eq!(all.len(), rows.len());
    assert!(all.iter().all(|t| t.selected_as == "all"));

    let (_, balanced) = run_in(
        dir.path(),
        &ClusterConfig {
            tasks: "balanced".into(),
            balanced_per_cell: 3,
            ..small_cfg()
        },
        1,
    );
    let mut cells: BTreeMap<(String, u8), usize> = BTreeMap::new();
    for t in &balanced {
        *cells.entry((t.family.clone(), t.level)).or_default() += 1;
    }
    assert!(cells.values().all(|&n| n <= 3), "{cells:?}");
    assert!(cells.len() >= 4);

    // Without PCA the odd modules keep their own directions and stay noise.
    let (rows, with_noise) = run_in(
        dir.path(),
        &ClusterConfig {
            tasks: "centers".into(),
            noise_tasks: true,
            pca_dims: 0,
            ..small_cfg()
        },
        1,
    );
    let noise = rows.iter().filter(|r| r.cluster < 0).count();
    let centers = rows.iter().filter(|r| r.is_center).count();
    assert!(noise > 0, "the odd modules are noise");
    assert_eq!(with_noise.len(), noise + centers);
    assert_eq!(
        with_noise
            .iter()
            .filter(|t| t.selected_as == "noise")
            .count(),
        noise
    );
}

#[test]
fn same_output_with_one_and_four_threads_and_with_sampling() {
    let dir = tempfile::tempdir().unwrap();
    write_inputs(dir.path(), 30, 3);
    let one = run_in(dir.path(), &small_cfg(), 1);
    let four = run_in(dir.path(), &small_cfg(), 4);
    assert_eq!(one, four);
    // HDBSCAN on a sample of 60 of 123 points, the rest by nearest sample: still one
    // cluster per group, still deterministic.
    let sampled = ClusterConfig {
        max_cluster_points: 60,
        ..small_cfg()
    };
    let a = run_in(dir.path(), &sampled, 1);
    let b = run_in(dir.path(), &sampled, 4);
    assert_eq!(a, b);
    let clusters: std::collections::BTreeSet<i32> =
        a.0.iter().map(|r| r.cluster).filter(|&c| c >= 0).collect();
    assert!(clusters.len() >= GROUPS.len(), "{clusters:?}");
}

#[test]
fn bad_input_and_up_to_date() {
    let dir = tempfile::tempdir().unwrap();
    let err = run(&small_cfg(), &StageContext::for_tests(dir.path())).unwrap_err();
    assert!(err.to_string().contains("dedup.parquet"), "{err}");
    write_inputs(dir.path(), 6, 4);
    let ctx = StageContext::for_tests(dir.path());
    assert!(!run(&small_cfg(), &ctx).unwrap().skipped);
    assert!(run(&small_cfg(), &ctx).unwrap().skipped);
    let bad = ClusterConfig {
        tasks: "some".into(),
        ..small_cfg()
    };
    assert!(matches!(run(&bad, &ctx), Err(ClusterError::Config(_))));
    // More neighbours than points must not crash HDBSCAN.
    let many = ClusterConfig {
        min_samples: 500,
        ..small_cfg()
    };
    assert!(!run(&many, &ctx).unwrap().skipped);
    let bad = ClusterConfig {
        min_cluster_size: 1,
        ..small_cfg()
    };
    assert!(matches!(run(&bad, &ctx), Err(ClusterError::Config(_))));

    // A kept module without any program is an inconsistent input: a clear error naming it.
    let mut dedup: Vec<DedupRow> = read_table(&DedupRow::path_in(dir.path())).unwrap();
    dedup.push(DedupRow {
        module_id: "ghost".into(),
        kept: true,
        method: None,
        duplicate_of: None,
        similarity: None,
        contaminated_via: None,
    });
    write_table(&DedupRow::path_in(dir.path()), &dedup, "fp-d2").unwrap();
    let err = run(&small_cfg(), &ctx).unwrap_err();
    assert!(err.to_string().contains("ghost"), "{err}");

    // Nothing kept: empty tables, no error.
    let none: Vec<DedupRow> = dedup
        .into_iter()
        .map(|mut r| {
            r.kept = false;
            r
        })
        .collect();
    write_table(&DedupRow::path_in(dir.path()), &none, "fp-d3").unwrap();
    let (rows, tasks) = run_in(dir.path(), &small_cfg(), 1);
    assert!(rows.is_empty() && tasks.is_empty());
}

#[test]
fn an_experts_review_rejects_and_relabels_centers() {
    use ksmith_core::tables::{AnnotationRow, ReviewVerdict};

    let dir = tempfile::tempdir().unwrap();
    write_inputs(dir.path(), 20, 3);
    let cfg = small_cfg();
    let (rows, tasks) = run_in(dir.path(), &cfg, 1);
    let centers: Vec<&ClusterRow> = rows.iter().filter(|r| r.is_center).collect();
    assert!(centers.len() >= 3, "{centers:?}");
    let (rejected, relabelled, accepted) = (centers[0], centers[1], centers[2]);
    let answer = |r: &ClusterRow, verdict, family: Option<&str>, level| AnnotationRow {
        module_id: r.module_id.clone(),
        verdict,
        family: family.map(Into::into),
        level,
        note: "looked at it".into(),
        rule_family: r.family.clone(),
        rule_level: r.level,
        cluster: r.cluster,
        reviewed_at: "2026-11-24T00:00:00Z".into(),
    };
    let annotations = vec![
        answer(rejected, ReviewVerdict::Reject, None, None),
        answer(
            relabelled,
            ReviewVerdict::Relabel,
            Some("expert_family"),
            Some(3),
        ),
        answer(accepted, ReviewVerdict::Accept, None, None),
    ];
    write_table(
        &AnnotationRow::path_in(dir.path()),
        &annotations,
        "review-1",
    )
    .unwrap();
    // Not forced: the new annotations make the stage run again.
    let report = run(&cfg, &StageContext::for_tests(dir.path())).unwrap();
    assert!(!report.skipped);
    assert_eq!(report.counters["review_reject"], 1);
    let after: Vec<TaskRow> = read_table(&TaskRow::path_in(dir.path())).unwrap();
    assert_eq!(after.len(), tasks.len() - 1);
    assert!(after.iter().all(|t| t.task_id != rejected.module_id));
    let t = after
        .iter()
        .find(|t| t.task_id == relabelled.module_id)
        .unwrap();
    assert_eq!((t.family.as_str(), t.level), ("expert_family", 3));
    let c: Vec<ClusterRow> = read_table(&ClusterRow::path_in(dir.path())).unwrap();
    let r = c
        .iter()
        .find(|r| r.module_id == relabelled.module_id)
        .unwrap();
    assert_eq!(r.family_rule, "expert review");
    let a = after
        .iter()
        .find(|t| t.task_id == accepted.module_id)
        .unwrap();
    assert_eq!(
        (a.family.as_str(), a.level),
        (accepted.family.as_str(), accepted.level)
    );
    assert!(
        run(&cfg, &StageContext::for_tests(dir.path()))
            .unwrap()
            .skipped
    );
}

/// Tasks carry the probe's alternate size sets; modules the probe could not size are left out
/// unless `skip_unsized` is off.
#[test]
fn tasks_carry_alternate_sizes_and_unsized_modules_are_skipped() {
    use ksmith_cluster::kept_units;
    use ksmith_core::tables::SizeStatus;

    let ids = ["a_sized", "b_unsizable", "c_not_sized"];
    let modules: Vec<ModuleRow> = ids
        .iter()
        .map(|id| ModuleRow {
            program: Some("module text".into()),
            ..module_row(id, "r")
        })
        .collect();
    let sized = ProbeRow {
        program: Some("sized text".into()),
        size_status: Some(SizeStatus::Sized),
        sizes: r#"{"dim": 1024}"#.into(),
        alt_sizes: r#"[{"dim": 64}, {"dim": 48}]"#.into(),
        ..ProbeRow::empty("a_sized", "r", "Model", ProbeStatus::Ok)
    };
    let unsizable = ProbeRow {
        program: Some("text".into()),
        size_status: Some(SizeStatus::Unsizable),
        ..ProbeRow::empty("b_unsizable", "r", "Model", ProbeStatus::Ok)
    };
    let plain = ProbeRow {
        program: Some("text".into()),
        ..ProbeRow::empty("c_not_sized", "r", "Model", ProbeStatus::Ok)
    };
    let probes = vec![sized, unsizable, plain];
    let dedup: Vec<DedupRow> = ids
        .iter()
        .map(|id| DedupRow {
            module_id: (*id).into(),
            kept: true,
            method: None,
            duplicate_of: None,
            similarity: None,
            contaminated_via: None,
        })
        .collect();
    let units = kept_units(&dedup, &modules, &probes, true).unwrap();
    let kept: Vec<&str> = units.iter().map(|u| u.id.as_str()).collect();
    assert_eq!(kept, vec!["a_sized", "c_not_sized"]);
    assert_eq!(units[0].program, "sized text");
    assert_eq!(units[0].alt_sizes, r#"[{"dim": 64}, {"dim": 48}]"#);
    assert_eq!(units[1].alt_sizes, "[]");
    assert_eq!(
        kept_units(&dedup, &modules, &probes, false).unwrap().len(),
        3
    );

    let rows: Vec<ClusterRow> = units
        .iter()
        .map(|u| ClusterRow {
            module_id: u.id.clone(),
            cluster: -1,
            is_center: false,
            family: "other".into(),
            family_rule: "test".into(),
            level: 1,
            level_rule: "test".into(),
            trivial: None,
        })
        .collect();
    let cfg = ClusterConfig {
        tasks: "all".into(),
        ..Default::default()
    };
    let tasks = ksmith_cluster::tasks::select(
        &units,
        &rows,
        &cfg,
        &Default::default(),
        &mut ksmith_core::report::StageReport::new("cluster"),
    );
    assert_eq!(tasks[0].alt_sizes, units[0].alt_sizes);
    assert_eq!(tasks[0].program, "sized text");
}

/// Records what a probe row's forward ran (`aten_calls`, with the trace and counts) and the
/// arithmetic intensity of its sizes.
fn ran(p: &mut ProbeRow, calls: &[&str], flops_per_byte: f64) {
    p.aten_calls = calls.iter().map(|c| c.to_string()).collect();
    let mut counts: BTreeMap<String, u64> = BTreeMap::new();
    for c in calls {
        *counts
            .entry(c.split(['(', '@']).next().unwrap().to_string())
            .or_default() += 1;
        p.aten_trace
            .push(c.split(['(', '@']).next().unwrap().to_string());
    }
    p.aten_ops = Some(
        counts
            .into_iter()
            .map(|(op, count)| ksmith_core::tables::OpCount { op, count })
            .collect(),
    );
    p.est_bytes = Some(1e8);
    p.est_flops = Some(1e8 * flops_per_byte);
}

#[test]
fn one_kernel_problem_takes_one_task_unless_its_sizes_make_another() {
    let dir = tempfile::tempdir().unwrap();
    let block = [
        "aten::view",
        "aten::t(w)",
        "aten::addmm(a,w)",
        "aten::gelu",
        "aten::native_layer_norm(KR)",
    ];
    let stacked: Vec<&str> = block.iter().chain(&block).chain(&block).copied().collect();
    let cases: Vec<(&str, Vec<&str>, f64)> = vec![
        // The same block, written three ways, at sizes of one regime.
        ("block_a", block.to_vec(), 40.0),
        ("block_b", block.to_vec(), 45.0),
        ("block_c", block.to_vec(), 35.0),
        // The same block stacked three deep: the same computation.
        ("block_deep", stacked, 50.0),
        // The same block at sizes of another regime (a thin matrix product): another problem.
        ("block_thin", block.to_vec(), 2.0),
        // A channels-first norm: another computation.
        (
            "norm_first",
            vec![
                "aten::view",
                "aten::t(w)",
                "aten::addmm(a,w)",
                "aten::gelu",
                "aten::native_layer_norm(KRKK)",
            ],
            40.0,
        ),
        // Nothing recorded: never limited.
        ("unrecorded", Vec::new(), 40.0),
    ];
    let mut rng = SplitMix::new(5);
    let mut modules = Vec::new();
    let mut probes = Vec::new();
    let mut dedup = Vec::new();
    for (id, calls, intensity) in &cases {
        let program = member(1, &mut rng);
        modules.push(ModuleRow {
            program: Some(program.clone()),
            ..module_row(id, &format!("repo/{id}"))
        });
        let mut p = ProbeRow {
            program: Some(program),
            ..ProbeRow::empty(id, &format!("repo/{id}"), "Model", ProbeStatus::Ok)
        };
        if !calls.is_empty() {
            ran(&mut p, calls, *intensity);
        }
        probes.push(p);
        dedup.push(DedupRow {
            module_id: id.to_string(),
            kept: true,
            method: None,
            duplicate_of: None,
            similarity: None,
            contaminated_via: None,
        });
    }
    write_table(&ModuleRow::path_in(dir.path()), &modules, "fp-m").unwrap();
    write_table(&ProbeRow::path_in(dir.path()), &probes, "fp-p").unwrap();
    write_table(&DedupRow::path_in(dir.path()), &dedup, "fp-d").unwrap();
    for mode in ["balanced", "all"] {
        let cfg = ClusterConfig {
            tasks: mode.into(),
            min_cluster_size: 2,
            min_samples: 1,
            pca_dims: 0,
            ..Default::default()
        };
        let (_, tasks) = run_in(dir.path(), &cfg, 1);
        let ids: Vec<&str> = tasks.iter().map(|t| t.task_id.as_str()).collect();
        let blocks: Vec<&&str> = ids
            .iter()
            .filter(|id| ["block_a", "block_b", "block_c", "block_deep"].contains(id))
            .collect();
        assert_eq!(blocks.len(), 1, "{mode}: {ids:?}");
        for id in ["block_thin", "norm_first", "unrecorded"] {
            assert!(ids.contains(&id), "{mode}: {ids:?}");
        }
        assert_eq!(ids.len(), 4, "{mode}: {ids:?}");
        let report = ksmith_core::report::StageReport::load(dir.path(), "cluster").unwrap();
        assert_eq!(report.counters["problem_repeats"], 3, "{mode}");
        // Without the limit, every module is a task.
        let (_, all) = run_in(
            dir.path(),
            &ClusterConfig {
                tasks_per_problem: 0,
                ..cfg.clone()
            },
            1,
        );
        assert_eq!(all.len(), cases.len(), "{mode}");
    }
}

/// A program whose `get_init_inputs()` returns `[args, kwargs]` is never a task: the evaluator
/// builds `Model(*get_init_inputs())` and could not build it.
#[test]
fn a_program_breaking_the_init_contract_is_not_a_unit() {
    use ksmith_cluster::kept_units;

    let program = |init: &str| {
        format!(
            "import torch\n\n\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x\n\n\ndef get_inputs():\n    return [torch.rand(4)]\n\n\ndef get_init_inputs():\n    return {init}\n"
        )
    };
    let ids = ["a_positional", "b_args_kwargs"];
    let modules: Vec<ModuleRow> = ids.iter().map(|id| module_row(id, "r")).collect();
    let probes = vec![
        ProbeRow {
            program: Some(program("[4, 8]")),
            ..ProbeRow::empty("a_positional", "r", "Model", ProbeStatus::Ok)
        },
        ProbeRow {
            program: Some(program("[[4], {'heads': 8}]")),
            ..ProbeRow::empty("b_args_kwargs", "r", "Model", ProbeStatus::Ok)
        },
    ];
    let dedup: Vec<DedupRow> = ids
        .iter()
        .map(|id| DedupRow {
            module_id: (*id).into(),
            kept: true,
            method: None,
            duplicate_of: None,
            similarity: None,
            contaminated_via: None,
        })
        .collect();
    let units = kept_units(&dedup, &modules, &probes, false).unwrap();
    let kept: Vec<&str> = units.iter().map(|u| u.id.as_str()).collect();
    assert_eq!(kept, vec!["a_positional"]);
}
