//! Dedup: keeps one module of each group of duplicates and drops modules that copy an
//! evaluation benchmark. Input: `modules.parquet` (ModuleRow) and `probes.parquet` (ProbeRow;
//! only modules whose probe status is `ok` are runnable and considered, with the probe's
//! repaired program when there is one). Output: `dedup.parquet` (DedupRow), one row per runnable
//! module, sorted by module id, and `dedup_pairs.parquet` (DedupPairRow), the matched pairs
//! behind the decisions.
//!
//! Every method compares what a module computes ([`features`]): its entry class and the code
//! that class reaches, never its imports, generated inputs or their constants, and, for the
//! similarity methods, without the lines every module shares. Methods, each on or off in
//! `[dedup]`: exact (same normalized code), near (MinHash LSH over token shingles, Jaccard of
//! the class alone and of the class with its helpers), semantic (embedding cosine of both,
//! among random-hyperplane hash candidates), structural (Weisfeiler-Lehman hash with names and
//! literals forgotten), and decontamination against evaluation benchmarks ([`benchmark`],
//! [`contamination`]: KernelBench at a pinned commit by default). What the sized programs ran
//! (probe's `aten_calls`, [`ksmith_embed::calls`]) makes matches and vetoes them: the kernel
//! method matches modules that ran alike (the same kernel-deciding calls, calls that agree in
//! their order at `aten_threshold` or above) at sizes of one regime, however their code is
//! written; near and semantic pairs, and exact and structural classes, need the same
//! kernel-deciding calls, and near and semantic pairs calls that agree.
//!
//! Invariants: every runnable module gets a row; groups are stars ([`groups`]): a dropped row
//! names its survivor (kept), the method of their direct match and its similarity, so no
//! group chains through intermediate modules. The survivor is the best by (permissive license,
//! stars, runs, fewer lines, smallest id). Copies of a benchmark problem and every module of
//! their group that shares their code (not those matched only by the kernel method) are
//! dropped as `contamination`. The output depends only on the input, the
//! config and the benchmarks, never on the thread count. Entry points: [`run`] and
//! [`run_with_fetcher`].
#![deny(missing_docs)]

pub mod benchmark;
pub mod buckets;
pub mod config;
pub mod contamination;
pub mod engine;
pub mod error;
pub mod features;
pub mod groups;
pub mod minhash;
pub mod pairs;

use std::collections::HashMap;

use ksmith_core::context::StageContext;
use ksmith_core::ids::IdHasher;
use ksmith_core::report::StageReport;
use ksmith_core::stage::StagePlan;
use ksmith_core::table::{Table, read_table, write_table};
use ksmith_core::tables::{DedupPairRow, DedupRow, ModuleRow, ModuleStatus, ProbeRow, ProbeStatus};

pub use benchmark::Fetcher;
pub use config::DedupConfig;
pub use engine::{Candidate, Decision, deduplicate};
pub use error::DedupError;

/// The stage's name.
pub const STAGE: &str = "dedup";
/// Bumped whenever the output for the same input and config changes.
pub const CODE_VERSION: u32 = 3;

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
            run: p.aten_ops.as_ref().map(|ops| {
                ksmith_embed::calls::Run::of(
                    &p.aten_calls,
                    ops.iter().map(|o| (o.op.as_str(), o.count)),
                )
            }),
            intensity: ksmith_embed::calls::intensity(p.est_flops, p.est_bytes),
        });
    }
    out.sort_by(|a, b| a.id.cmp(&b.id));
    out
}

/// Runs the dedup stage in `ctx.workdir`, with benchmarks from local folders or the committed
/// signatures only (see [`run_with_fetcher`]).
pub fn run(cfg: &DedupConfig, ctx: &StageContext) -> Result<StageReport, DedupError> {
    run_with_fetcher(cfg, ctx, None)
}

/// Runs the dedup stage in `ctx.workdir`; `fetcher` brings benchmarks that are neither local
/// nor in the committed signatures into the cache.
pub fn run_with_fetcher(
    cfg: &DedupConfig,
    ctx: &StageContext,
    fetcher: Option<&dyn Fetcher>,
) -> Result<StageReport, DedupError> {
    cfg.validate()?;
    let modules_path = ModuleRow::path_in(&ctx.workdir);
    let probes_path = ProbeRow::path_in(&ctx.workdir);
    let plan = StagePlan::new(ctx, STAGE, CODE_VERSION)
        .require(&modules_path, "extract")
        .require(&probes_path, "probe");
    plan.check_inputs()?;
    let benchmarks = benchmark::load_all(cfg, fetcher)?;
    let mut bench_hash = IdHasher::new();
    let mut problems = Vec::new();
    for b in &benchmarks {
        bench_hash.part(&b.name).part(b.source.name());
        for p in &b.problems {
            let f = &p.features;
            bench_hash
                .part(&p.path)
                .part(f.exact)
                .part(f.structural.to_le_bytes())
                .part(
                    f.text
                        .iter()
                        .flat_map(|v| v.to_le_bytes())
                        .collect::<Vec<u8>>(),
                )
                .part(
                    f.canonical
                        .iter()
                        .flat_map(|v| v.to_le_bytes())
                        .collect::<Vec<u8>>(),
                );
        }
        problems.extend(b.problems.iter().cloned());
    }
    let out = DedupRow::path_in(&ctx.workdir);
    let pairs_out = DedupPairRow::path_in(&ctx.workdir);
    // The fingerprint's parts in their historic order: config, benchmark, then the inputs.
    plan.config(cfg)
        .part("benchmark", &bench_hash.finish())
        .optional_input(&modules_path)
        .optional_input(&probes_path)
        .output(&out)
        .output(&pairs_out)
        .run(|run| {
            let report = &mut run.report;
            for b in &benchmarks {
                for path in &b.unreadable {
                    ctx.warn(format!(
                        "dedup: evaluation problem {} is not UTF-8; skipped",
                        path.display()
                    ));
                }
                report.count(
                    &format!("benchmark:{}:{}", b.name, b.source.name()),
                    b.problems.len() as u64,
                );
                report.count("benchmark_unreadable", b.unreadable.len() as u64);
                ctx.info(format!(
                    "dedup: decontaminating against {} ({} problems, from {})",
                    b.name,
                    b.problems.len(),
                    b.source.name()
                ));
            }
            report.count("benchmark_problems", problems.len() as u64);
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
            let decision = run
                .pool()?
                .install(|| deduplicate(&items, &problems, embedder.as_deref(), cfg))?;
            tracker.inc(items.len() as u64);
            tracker.finish();
            let report = &mut run.report;
            for (method, n) in &decision.stats.pairs {
                report.count(&format!("pairs_{method}"), *n);
            }
            for r in &decision.rows {
                if let Some(m) = r.method {
                    report.drop_row(m.as_str());
                }
            }
            report.count(
                "contaminated_via_group",
                decision
                    .rows
                    .iter()
                    .filter(|r| r.contaminated_via.is_some())
                    .count() as u64,
            );
            report.count(
                "kept",
                decision.rows.iter().filter(|r| r.kept).count() as u64,
            );
            write_table(&out, &decision.rows, run.fingerprint())?;
            write_table(&pairs_out, &decision.pairs, run.fingerprint())?;
            run.report.rows_written = decision.rows.len() as u64;
            run.report
                .count("pairs_written", decision.pairs.len() as u64);
            Ok(())
        })
}
