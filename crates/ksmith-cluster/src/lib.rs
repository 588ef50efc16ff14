//! Cluster: groups the unique modules, labels every module with a functional family and a
//! difficulty level, and selects the tasks. Input: `dedup.parquet` (DedupRow, kept modules
//! only) with programs and recorded ATen operators from `probes.parquet` (the repaired program)
//! or `modules.parquet`. Output: `clusters.parquet` (ClusterRow, one per kept module) and
//! `tasks.parquet` (TaskRow), both sorted by module id.
//!
//! Steps: embed what each program computes (its entry class and the code it reaches,
//! [`ksmith_embed::slice_text`]; [`ksmith_embed::EmbedderConfig`]); PCA to `pca_dims`
//! (deterministic, [`pca`]); L2-normalize; HDBSCAN (the `hdbscan` crate, Euclidean on unit
//! vectors, so cosine order) on at most `max_cluster_points` points, the others joining their
//! nearest sampled point's cluster ([`clustering`]); the center of each cluster is its medoid in
//! the ORIGINAL embedding space, among the members that are real tasks. Noise keeps cluster -1
//! and is never a center. Family, level and triviality come from the ATen operators the module
//! ran ([`family`], [`ksmith_embed::aten`]).
//!
//! Tasks ([`tasks`]), following the paper: every unique module is a candidate for the
//! cold-start rollouts, balanced across (family, level) (`tasks = "balanced"`, the default),
//! noise included; cluster centers are the smaller expert-seeded set (`"centers"`). One kernel
//! problem (the computation a sized program ran, at any depth, at sizes of one regime of
//! arithmetic intensity, [`ksmith_embed::calls::regimes`]) takes at most `tasks_per_problem`
//! tasks. Modules
//! that compute nothing (views, reshapes, identities) or mostly call a module given to their
//! constructor are not tasks unless `trivial_tasks = true`. An expert's review
//! (`annotations.parquet`, from `ksmith review`), when present, is applied before tasks are
//! chosen ([`review`]): rejected modules are no tasks and relabels replace the rules' family
//! and level.
//!
//! Invariants: same input and config, same output, whatever the thread count. Entry point:
//! [`run`].
#![deny(missing_docs)]

pub mod clustering;
pub mod config;
pub mod error;
pub mod family;
pub mod pca;
pub mod review;
pub mod tasks;

use std::collections::HashMap;

use ksmith_core::context::StageContext;
use ksmith_core::report::StageReport;
use ksmith_core::stage::StagePlan;
use ksmith_core::table::{Table, read_table, write_table};
use ksmith_core::tables::{
    AnnotationRow, ClusterRow, DedupRow, ModuleRow, OpCount, ProbeRow, SizeStatus, TaskRow,
};
use ksmith_embed::Embedder;
use rayon::prelude::*;

pub use config::ClusterConfig;
pub use error::ClusterError;
/// The init contract tasks keep (`get_init_inputs()` returns Model's positional arguments), also
/// checked by `ksmith import-tasks`.
pub use ksmith_embed::contract::init_inputs_violation;

/// The stage's name.
pub const STAGE: &str = "cluster";
/// Bumped whenever the output for the same input and config changes.
pub const CODE_VERSION: u32 = 4;

/// One unique module to cluster.
#[derive(Debug, Clone, PartialEq)]
pub struct Unit {
    /// Module id.
    pub id: String,
    /// Its program.
    pub program: String,
    /// Its repository.
    pub repo: String,
    /// Its class name in the repository.
    pub class_name: String,
    /// Its license.
    pub license: Option<String>,
    /// The ATen operators its forward dispatched (from probe; none when not recorded).
    pub aten_ops: Option<Vec<OpCount>>,
    /// The probe's alternate size sets (a JSON list, `[]` when none), passed on to its task.
    pub alt_sizes: String,
    /// The computation its sized program ran ([`ksmith_embed::calls::Run::computation`]: the
    /// distinct calls and consecutive pairs, the same at any depth); none when its calls were
    /// not recorded or nothing in them computes.
    pub computation: Option<u128>,
    /// The arithmetic intensity of its sized program's work ([`ksmith_embed::calls::intensity`]).
    pub intensity: Option<f64>,
}

/// The result of clustering, aligned with the input units.
#[derive(Debug, Clone, PartialEq)]
pub struct Clustering {
    /// Cluster label of each unit (-1 = noise).
    pub labels: Vec<i32>,
    /// Whether each unit is the medoid of its cluster.
    pub is_center: Vec<bool>,
    /// Family and level of each unit.
    pub families: Vec<family::Label>,
}

/// Clusters units (call inside the rayon pool that should do the work).
pub fn cluster_units(
    units: &[Unit],
    embedder: &dyn Embedder,
    cfg: &ClusterConfig,
) -> Result<Clustering, ClusterError> {
    let texts: Vec<String> = units
        .par_iter()
        .map(|u| ksmith_embed::slice_text(&u.program))
        .collect();
    let programs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let ids: Vec<String> = units.iter().map(|u| u.id.clone()).collect();
    let families: Vec<family::Label> = units
        .par_iter()
        .map(|u| family::label_with_ops(&u.program, &u.class_name, u.aten_ops.as_deref()))
        .collect();
    if units.is_empty() {
        return Ok(Clustering {
            labels: vec![],
            is_center: vec![],
            families,
        });
    }
    let mut original = embedder.embed(&programs)?;
    clustering::l2_normalize(&mut original);
    let mut reduced = if cfg.pca_dims > 0 && cfg.pca_dims < original.ncols() {
        let fit_rows =
            clustering::sample_indices(&ids, cfg.max_cluster_points.max(20_000), cfg.seed);
        let sample = original.select(ndarray::Axis(0), &fit_rows);
        pca::Pca::fit(&sample, cfg.pca_dims, cfg.seed).transform(&original)
    } else {
        original.clone()
    };
    clustering::l2_normalize(&mut reduced);
    let labels = clustering::cluster_labels(&reduced, &ids, cfg)?;
    let mut is_center = vec![false; units.len()];
    // Trivial modules are no centers; single-operator ones are where they may be tasks.
    let eligible: Vec<bool> = families
        .iter()
        .map(|f| {
            f.trivial.is_none()
                || f.trivial
                    .as_deref()
                    .is_some_and(|t| t.starts_with(family::SINGLE_OP))
                    && cfg.single_op_tasks
        })
        .collect();
    for (_, idx) in clustering::medoids(original.view(), &labels, &eligible, cfg.medoid_sample) {
        is_center[idx] = true;
    }
    Ok(Clustering {
        labels,
        is_center,
        families,
    })
}

/// The kept modules of the input tables, sorted by id; with `skip_unsized`, those the probe
/// could not size for the GPU (`size_status = unsizable`) are left out, and always those whose
/// program breaks the init contract (`ksmith_embed::contract`: the evaluator could not build
/// them).
pub fn kept_units(
    dedup: &[DedupRow],
    modules: &[ModuleRow],
    probes: &[ProbeRow],
    skip_unsized: bool,
) -> Result<Vec<Unit>, ClusterError> {
    let mods: HashMap<&str, &ModuleRow> = modules.iter().map(|m| (m.id.as_str(), m)).collect();
    let probed: HashMap<&str, &ProbeRow> =
        probes.iter().map(|p| (p.module_id.as_str(), p)).collect();
    let mut units = Vec::new();
    for r in dedup.iter().filter(|r| r.kept) {
        let m = mods.get(r.module_id.as_str());
        let probe = probed.get(r.module_id.as_str());
        if skip_unsized && probe.is_some_and(|p| p.size_status == Some(SizeStatus::Unsizable)) {
            continue;
        }
        let program = probe
            .and_then(|p| p.program.clone())
            .or_else(|| m.and_then(|m| m.program.clone()))
            .ok_or_else(|| ClusterError::MissingProgram {
                module_id: r.module_id.clone(),
            })?;
        if ksmith_embed::contract::init_inputs_violation(&program).is_some() {
            continue;
        }
        units.push(Unit {
            id: r.module_id.clone(),
            program,
            repo: m.map(|m| m.repo.clone()).unwrap_or_default(),
            class_name: m.map(|m| m.class_name.clone()).unwrap_or_default(),
            license: m.and_then(|m| m.license.clone()),
            aten_ops: probe.and_then(|p| p.aten_ops.clone()),
            alt_sizes: probe.map_or_else(|| "[]".to_string(), |p| p.alt_sizes.clone()),
            computation: probe.and_then(|p| {
                let ops = p.aten_ops.as_ref()?;
                ksmith_embed::calls::Run::of(
                    &p.aten_calls,
                    ops.iter().map(|o| (o.op.as_str(), o.count)),
                )
                .computation
            }),
            intensity: probe.and_then(|p| ksmith_embed::calls::intensity(p.est_flops, p.est_bytes)),
        });
    }
    units.sort_by(|a, b| a.id.cmp(&b.id));
    units.dedup_by(|a, b| a.id == b.id);
    Ok(units)
}

/// Runs the cluster stage in `ctx.workdir`.
pub fn run(cfg: &ClusterConfig, ctx: &StageContext) -> Result<StageReport, ClusterError> {
    cfg.validate()?;
    let dedup_path = DedupRow::path_in(&ctx.workdir);
    let modules_path = ModuleRow::path_in(&ctx.workdir);
    let probes_path = ProbeRow::path_in(&ctx.workdir);
    let clusters_path = ClusterRow::path_in(&ctx.workdir);
    let tasks_path = TaskRow::path_in(&ctx.workdir);
    let annotations_path = AnnotationRow::path_in(&ctx.workdir);
    StagePlan::new(ctx, STAGE, CODE_VERSION)
        .config(cfg)
        .input(&dedup_path, "dedup")
        .input(&modules_path, "extract")
        .input(&probes_path, "probe")
        .optional_input(&annotations_path)
        .output(&clusters_path)
        .output(&tasks_path)
        .run(|run| {
            let dedup: Vec<DedupRow> = read_table(&dedup_path)?;
            let modules: Vec<ModuleRow> = read_table(&modules_path)?;
            let probes: Vec<ProbeRow> = read_table(&probes_path)?;
            run.report.rows_read = (dedup.len() + modules.len() + probes.len()) as u64;
            let units = kept_units(&dedup, &modules, &probes, cfg.skip_unsized)?;
            if cfg.skip_unsized {
                let unsized_ids: std::collections::HashSet<&str> = probes
                    .iter()
                    .filter(|p| p.size_status == Some(SizeStatus::Unsizable))
                    .map(|p| p.module_id.as_str())
                    .collect();
                let skipped = dedup
                    .iter()
                    .filter(|r| r.kept && unsized_ids.contains(r.module_id.as_str()))
                    .count();
                run.report.count("unsized_skipped", skipped as u64);
            }
            let programs: HashMap<&str, &str> = probes
                .iter()
                .filter_map(|p| Some((p.module_id.as_str(), p.program.as_deref()?)))
                .collect();
            let contract_skipped = dedup
                .iter()
                .filter(|r| r.kept)
                .filter_map(|r| programs.get(r.module_id.as_str()))
                .filter(|p| ksmith_embed::contract::init_inputs_violation(p).is_some())
                .count();
            run.report
                .count("init_contract_skipped", contract_skipped as u64);
            ctx.info(format!("cluster: {} unique modules", units.len()));
            let embedder = cfg.embedder.build()?;
            let tracker = ctx.tracker(STAGE, Some(units.len() as u64));
            let result = run
                .pool()?
                .install(|| cluster_units(&units, embedder.as_ref(), cfg))?;
            tracker.inc(units.len() as u64);
            tracker.finish();
            let mut rows = cluster_rows(&units, &result);
            let review = match annotations_path.exists() {
                true => review::Review::new(read_table(&annotations_path)?),
                false => review::Review::default(),
            };
            review.apply(&mut rows, &mut run.report);
            let task_rows = tasks::select(&units, &rows, cfg, &review, &mut run.report);
            count_clusters(&result, &rows, &task_rows, &mut run.report);
            write_table(&clusters_path, &rows, run.fingerprint())?;
            write_table(&tasks_path, &task_rows, run.fingerprint())?;
            run.report.rows_written = (rows.len() + task_rows.len()) as u64;
            Ok(())
        })
}

/// One `clusters.parquet` row per unit.
fn cluster_rows(units: &[Unit], result: &Clustering) -> Vec<ClusterRow> {
    units
        .iter()
        .enumerate()
        .map(|(i, u)| ClusterRow {
            module_id: u.id.clone(),
            cluster: result.labels[i],
            is_center: result.is_center[i],
            family: result.families[i].family.to_string(),
            family_rule: result.families[i].family_rule.clone(),
            level: result.families[i].level,
            level_rule: result.families[i].level_rule.clone(),
            trivial: result.families[i].trivial.clone(),
        })
        .collect()
}

/// Clusters, noise, centers, tasks, families and levels, for the report.
fn count_clusters(
    result: &Clustering,
    rows: &[ClusterRow],
    tasks: &[TaskRow],
    report: &mut StageReport,
) {
    let n_clusters = result
        .labels
        .iter()
        .filter(|&&l| l >= 0)
        .map(|&l| l as i64)
        .max()
        .map_or(0, |m| m + 1);
    report.count("clusters", n_clusters as u64);
    report.count(
        "noise",
        result.labels.iter().filter(|&&l| l < 0).count() as u64,
    );
    report.count(
        "centers",
        result.is_center.iter().filter(|&&c| c).count() as u64,
    );
    report.count("tasks", tasks.len() as u64);
    report.count(
        "trivial",
        rows.iter().filter(|r| r.trivial.is_some()).count() as u64,
    );
    for t in tasks {
        report.count(&format!("tasks_{}", t.selected_as), 1);
    }
    for r in rows {
        report.count(&format!("family_{}", r.family), 1);
        report.count(&format!("level_{}", r.level), 1);
    }
}
