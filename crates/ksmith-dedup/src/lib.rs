//! Dedup: keeps one module of each group of duplicates and drops modules that copy an
//! evaluation benchmark. Input: `modules.parquet` (ModuleRow) and `probes.parquet` (ProbeRow;
//! only modules whose probe status is `ok` are runnable and considered, with the probe's
//! repaired program when there is one). Output: `dedup.parquet` (DedupRow), one row per runnable
//! module, sorted by module id.
//!
//! Methods, each on or off in `[dedup]`: exact (hash of the program without whitespace,
//! comments and docstrings), near (MinHash LSH over token shingles, Jaccard estimated from the
//! signatures), semantic (embedding cosine among random-hyperplane hash candidates), structural
//! (Weisfeiler-Lehman hash of the syntax tree with names and literals forgotten), and
//! decontamination against a folder of evaluation problems (near or structural match).
//!
//! Invariants: every runnable module gets a row; a dropped row names the method that matched,
//! what it duplicates (the surviving module's id, or the problem's path) and the similarity when
//! the method has one. Matched pairs are merged by union-find; the survivor of a group is the
//! best by (permissive license, stars, runs, fewer lines, smallest id). The output depends only on
//! the input and the config, never on the thread count. Entry point: [`run`].
#![deny(missing_docs)]

pub mod benchmark;
pub mod buckets;
pub mod config;
pub mod engine;
pub mod error;
pub mod groups;
pub mod minhash;

use std::collections::HashMap;

use ksmith_core::context::StageContext;
use ksmith_core::ids::IdHasher;
use ksmith_core::report::StageReport;
use ksmith_core::stage::StagePlan;
use ksmith_core::table::{Table, read_table, write_table};
use ksmith_core::tables::{DedupRow, ModuleRow, ModuleStatus, ProbeRow, ProbeStatus};

pub use config::DedupConfig;
pub use engine::{Candidate, Problem, deduplicate};
pub use error::DedupError;

/// The stage's name.
pub const STAGE: &str = "dedup";
/// Bumped whenever the output for the same input and config changes.
pub const CODE_VERSION: u32 = 1;

ksmith_core::vocabulary! {
    /// Why a probe row is not a dedup candidate (counted in the report under its name).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
    pub enum LeftOut {
        /// The module did not run in the probe.
        NotRunnable = "not_runnable",
        /// The probe row names a module that `modules.parquet` lacks.
        ProbeWithoutModule = "probe_without_module",
        /// The module row is not `ok`.
        ModuleNotOk = "module_not_ok",
        /// Neither the probe nor the module has a program.
        NoProgram = "no_program",
        /// A second probe row of the same module.
        RepeatedProbe = "repeated_probe",
    }
}

/// The runnable modules of the input tables, sorted by id, and counts of what was left out.
pub fn runnable_candidates(
    modules: &[ModuleRow],
    probes: &[ProbeRow],
    report: &mut StageReport,
) -> Vec<Candidate> {
    let by_id: HashMap<&str, &ModuleRow> = modules.iter().map(|m| (m.id.as_str(), m)).collect();
    let mut out: Vec<Candidate> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let mut leave = |why: LeftOut| report.count(why.as_str(), 1);
    for p in probes {
        if p.status != ProbeStatus::Ok {
            leave(LeftOut::NotRunnable);
            continue;
        }
        let Some(m) = by_id.get(p.module_id.as_str()) else {
            leave(LeftOut::ProbeWithoutModule);
            continue;
        };
        if m.status != ModuleStatus::Ok {
            leave(LeftOut::ModuleNotOk);
            continue;
        }
        let Some(program) = p.program.clone().or_else(|| m.program.clone()) else {
            leave(LeftOut::NoProgram);
            continue;
        };
        if !seen.insert(m.id.clone()) {
            leave(LeftOut::RepeatedProbe);
            continue;
        }
        let lines = program.lines().count() as u32;
        out.push(Candidate {
            id: m.id.clone(),
            program,
            license: m.license.clone(),
            stars: m.stars,
            lines,
        });
    }
    out.sort_by(|a, b| a.id.cmp(&b.id));
    out
}

/// Runs the dedup stage in `ctx.workdir`.
pub fn run(cfg: &DedupConfig, ctx: &StageContext) -> Result<StageReport, DedupError> {
    cfg.validate()?;
    let modules_path = ModuleRow::path_in(&ctx.workdir);
    let probes_path = ProbeRow::path_in(&ctx.workdir);
    let plan = StagePlan::new(ctx, STAGE, CODE_VERSION)
        .require(&modules_path, "extract")
        .require(&probes_path, "probe");
    plan.check_inputs()?;
    let (problems, unreadable) = match &cfg.contamination_dir {
        Some(dir) => benchmark::load_problems(dir)?,
        None => (Vec::new(), Vec::new()),
    };
    let mut bench_hash = IdHasher::new();
    for p in &problems {
        bench_hash.part(&p.path).part(&p.source);
    }
    let out = DedupRow::path_in(&ctx.workdir);
    // The fingerprint's parts in their historic order: config, benchmark, then the inputs.
    plan.config(cfg)
        .part("benchmark", &bench_hash.finish())
        .optional_input(&modules_path)
        .optional_input(&probes_path)
        .output(&out)
        .run(|run| {
            for path in &unreadable {
                ctx.warn(format!(
                    "dedup: evaluation problem {} is not UTF-8; skipped",
                    path.display()
                ));
            }
            let report = &mut run.report;
            report.count("benchmark_problems", problems.len() as u64);
            report.count("benchmark_unreadable", unreadable.len() as u64);
            let modules: Vec<ModuleRow> = read_table(&modules_path)?;
            let probes: Vec<ProbeRow> = read_table(&probes_path)?;
            report.rows_read = (modules.len() + probes.len()) as u64;
            let items = runnable_candidates(&modules, &probes, report);
            ctx.info(format!(
                "dedup: {} runnable modules, {} evaluation problems",
                items.len(),
                problems.len()
            ));
            let embedder = if cfg.semantic {
                Some(cfg.embedder.build()?)
            } else {
                None
            };
            let tracker = ctx.tracker(STAGE, Some(items.len() as u64));
            let (rows, stats) = run
                .pool()?
                .install(|| deduplicate(&items, &problems, embedder.as_deref(), cfg))?;
            tracker.inc(items.len() as u64);
            tracker.finish();
            let report = &mut run.report;
            for (method, n) in &stats.pairs {
                report.count(&format!("pairs_{method}"), *n);
            }
            for r in &rows {
                if let Some(m) = r.method {
                    report.drop_row(m.as_str());
                }
            }
            report.count("kept", rows.iter().filter(|r| r.kept).count() as u64);
            write_table(&out, &rows, run.fingerprint())?;
            run.report.rows_written = rows.len() as u64;
            Ok(())
        })
}
