//! The stage contract: what every stage does around its own work, written once.
//!
//! A stage declares a [`StagePlan`] (its name and code version, its config section, the tables
//! it reads and the outputs that carry its fingerprint) and hands its own work to
//! [`StagePlan::run`]. The contract then, in this order:
//!
//! 1. checks that every required input exists; a missing one is [`Error::MissingInput`], which
//!    names the file and the stage that writes it;
//! 2. computes the fingerprint from the declared parts, in the order they were declared;
//! 3. skips when every declared output already carries that fingerprint (unless `ctx.force`):
//!    the last real report stays on disk with `skipped: true` added, so a re-run never
//!    overwrites real counts with zeros;
//! 4. otherwise runs the work with a [`StageRun`]: the report to fill, the fingerprint to stamp
//!    on the outputs and, on demand, the stage's thread pool ([`StageRun::pool`]);
//! 5. times the run and writes `reports/<stage>.json` once, when the work succeeded or when it
//!    asked for its report to be kept before an error ([`StageRun::fail_after_report`]).
//!
//! This module is the only writer of reports ([`StageReport::save`] is private to this crate),
//! so the CLI and stage crates cannot write a report a second time.
//!
//! A plan without declared outputs never skips (crawl, `ksmith merge`, `import-tasks`): such a
//! stage sets its fingerprint from what it produced ([`StageRun::set_fingerprint`]).

use std::path::{Path, PathBuf};
use std::time::Instant;

use serde::Serialize;

use crate::config::section_hash;
use crate::context::StageContext;
use crate::error::Error;
use crate::fingerprint::Fingerprint;
use crate::report::StageReport;
use crate::table::read_fingerprint;

/// Why a stage that found its outputs up to date did not run.
pub const UP_TO_DATE: &str = "up to date";

/// One output a stage's skip depends on.
#[derive(Debug, Clone)]
enum Output {
    /// A table that must carry the fingerprint.
    Table(PathBuf),
    /// A side file that must exist.
    File(PathBuf),
}

impl Output {
    fn is_current(&self, fingerprint: &str) -> bool {
        match self {
            Output::Table(path) => read_fingerprint(path).as_deref() == Some(fingerprint),
            Output::File(path) => path.exists(),
        }
    }
}

/// What a stage declares before it runs: its identity, fingerprint parts, inputs and outputs.
pub struct StagePlan<'a> {
    ctx: &'a StageContext,
    stage: &'static str,
    fingerprint: Fingerprint,
    missing: Option<(PathBuf, &'static str)>,
    outputs: Vec<Output>,
    stack_size: Option<usize>,
}

impl<'a> StagePlan<'a> {
    /// A plan for `stage` at `code_version`, run in `ctx`.
    pub fn new(ctx: &'a StageContext, stage: &'static str, code_version: u32) -> Self {
        StagePlan {
            ctx,
            stage,
            fingerprint: Fingerprint::new(stage, code_version),
            missing: None,
            outputs: Vec::new(),
            stack_size: None,
        }
    }

    /// Adds the stage's config section (after defaults) to the fingerprint, as `config`.
    pub fn config<T: Serialize>(self, section: &T) -> Self {
        self.part("config", &section_hash(section))
    }

    /// Adds a named part (a key, a hash of side inputs, an identity) to the fingerprint.
    pub fn part(mut self, name: &str, value: &str) -> Self {
        self.fingerprint = self.fingerprint.with(name, value);
        self
    }

    /// A table the stage reads, written by the stage `writer`: it must exist, and its
    /// fingerprint is part of this stage's.
    pub fn input(self, path: &Path, writer: &'static str) -> Self {
        self.require(path, writer).optional_input(path)
    }

    /// A table the stage reads when it exists; its fingerprint (or its absence) is part of this
    /// stage's.
    pub fn optional_input(mut self, path: &Path) -> Self {
        self.fingerprint = self.fingerprint.with_input(path);
        self
    }

    /// A file the stage reads that must exist (written by the stage `writer`), without adding it
    /// to the fingerprint (add its content with [`StagePlan::part`] when it matters).
    pub fn require(mut self, path: &Path, writer: &'static str) -> Self {
        if self.missing.is_none() && !path.exists() {
            self.missing = Some((path.to_path_buf(), writer));
        }
        self
    }

    /// A table the stage writes: the stage is up to date when every such table carries the
    /// fingerprint (and every [`StagePlan::output_file`] exists).
    pub fn output(mut self, path: &Path) -> Self {
        self.outputs.push(Output::Table(path.to_path_buf()));
        self
    }

    /// A side file the stage writes (a manifest): it must exist for the stage to be up to date.
    pub fn output_file(mut self, path: &Path) -> Self {
        self.outputs.push(Output::File(path.to_path_buf()));
        self
    }

    /// The stack size of the stage's worker threads (deeply recursive work).
    pub fn stack_size(mut self, bytes: usize) -> Self {
        self.stack_size = Some(bytes);
        self
    }

    /// The first missing required input, as the error the stage returns.
    pub fn check_inputs(&self) -> Result<(), Error> {
        match &self.missing {
            Some((path, writer)) => Err(Error::MissingInput {
                path: path.clone(),
                writer,
            }),
            None => Ok(()),
        }
    }

    /// The fingerprint of the declared parts.
    pub fn fingerprint(&self) -> String {
        self.fingerprint.finish()
    }

    /// True when the stage has outputs and every one is current for `fingerprint`.
    fn is_up_to_date(&self, fingerprint: &str) -> bool {
        !self.outputs.is_empty() && self.outputs.iter().all(|o| o.is_current(fingerprint))
    }

    /// Runs the stage: input check, fingerprint, skip, `work`, timing and the one report write.
    /// Returns the report that was saved.
    pub fn run<E, W>(self, work: W) -> Result<StageReport, E>
    where
        E: From<Error>,
        W: FnOnce(&mut StageRun<'a, E>) -> Result<(), E>,
    {
        let started = Instant::now();
        self.check_inputs()?;
        let fingerprint = self.fingerprint();
        if !self.ctx.force && self.is_up_to_date(&fingerprint) {
            return Ok(record_skip(self.ctx, self.stage, &fingerprint, UP_TO_DATE)?);
        }
        let mut run = StageRun {
            ctx: self.ctx,
            report: StageReport::new(self.stage),
            fingerprint,
            stack_size: self.stack_size,
            deferred: None,
        };
        run.report.fingerprint = run.fingerprint.clone();
        work(&mut run)?;
        let StageRun {
            mut report,
            fingerprint,
            deferred,
            ..
        } = run;
        report.fingerprint = fingerprint;
        report.elapsed_ms = started.elapsed().as_millis() as u64;
        report.save(&self.ctx.workdir)?;
        match deferred {
            Some(e) => Err(e),
            None => Ok(report),
        }
    }
}

/// What the work of a stage is given: the context, the report to fill, the fingerprint and the
/// thread pool.
pub struct StageRun<'a, E> {
    /// The stage's context.
    pub ctx: &'a StageContext,
    /// The report the work fills (rows read and written, drops by reason, counters); the
    /// contract sets the fingerprint and the time.
    pub report: StageReport,
    fingerprint: String,
    stack_size: Option<usize>,
    deferred: Option<E>,
}

impl<E> StageRun<'_, E> {
    /// The fingerprint to stamp on the outputs.
    pub fn fingerprint(&self) -> &str {
        &self.fingerprint
    }

    /// Replaces the fingerprint: a stage that never skips computes it from its output (crawl),
    /// and a stage whose output is incomplete marks it so that the next run does not skip.
    pub fn set_fingerprint(&mut self, fingerprint: String) {
        self.fingerprint = fingerprint;
    }

    /// Makes the run end with `error` after the outputs and the report are written (a rollout
    /// that stopped early keeps what it did and says so). The first such error is kept.
    pub fn fail_after_report(&mut self, error: E) {
        self.deferred.get_or_insert(error);
    }

    /// The stage's worker threads: `ctx.threads` of them, named `<stage>-<i>`.
    pub fn pool(&self) -> Result<rayon::ThreadPool, Error> {
        let stage = self.report.stage.clone();
        let mut builder = rayon::ThreadPoolBuilder::new()
            .num_threads(self.ctx.threads.max(1))
            .thread_name(move |i| format!("{stage}-{i}"));
        if let Some(bytes) = self.stack_size {
            builder = builder.stack_size(bytes);
        }
        builder.build().map_err(|e| Error::ThreadPool {
            stage: self.report.stage.clone(),
            threads: self.ctx.threads,
            message: e.to_string(),
        })
    }
}

/// Records that `stage` did not run, for `reason`: its last real report stays on disk with
/// `skipped: true`, the reason and `fingerprint` (when not empty) added; without a last report a
/// report with nothing but those is written. Returns the report written.
pub fn record_skip(
    ctx: &StageContext,
    stage: &str,
    fingerprint: &str,
    reason: &str,
) -> Result<StageReport, Error> {
    let mut report = StageReport::load(&ctx.workdir, stage)
        .filter(|r| r.stage == stage)
        .unwrap_or_else(|| StageReport::new(stage));
    report.skipped = true;
    report.skip_reason = Some(reason.to_string());
    if !fingerprint.is_empty() {
        report.fingerprint = fingerprint.to_string();
    }
    report.save(&ctx.workdir)?;
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::write_table;
    use crate::tables::RepoRow;

    fn demo_row() -> RepoRow {
        RepoRow::failed("demo", "file:///nowhere", "no such repository")
    }

    fn plan<'a>(ctx: &'a StageContext, input: &Path, out: &Path) -> StagePlan<'a> {
        StagePlan::new(ctx, "demo", 1)
            .config(&("threshold", 3))
            .input(input, "crawl")
            .output(out)
    }

    #[test]
    fn a_missing_input_names_the_file_and_its_writer() {
        let dir = tempfile::tempdir().expect("tempdir");
        let ctx = StageContext::for_tests(dir.path());
        let input = dir.path().join("repos.parquet");
        let out = dir.path().join("out.parquet");
        let err = plan(&ctx, &input, &out)
            .run(|_: &mut StageRun<'_, Error>| -> Result<(), Error> { unreachable!() })
            .expect_err("missing input");
        let text = err.to_string();
        assert!(
            text.contains("repos.parquet") && text.contains("run `ksmith crawl`"),
            "{text}"
        );
        assert!(!StageReport::path_in(dir.path(), "demo").exists());
    }

    #[test]
    fn runs_once_then_skips_keeping_the_last_report() {
        let dir = tempfile::tempdir().expect("tempdir");
        let ctx = StageContext::for_tests(dir.path());
        let input = dir.path().join("repos.parquet");
        let out = dir.path().join("out.parquet");
        write_table(&input, &[demo_row()], "in-1").expect("input");
        let first = plan(&ctx, &input, &out)
            .run(|run: &mut StageRun<'_, Error>| {
                run.report.rows_read = 1;
                run.report.rows_written = 1;
                run.report.count("made", 7);
                write_table(&out, &[demo_row()], run.fingerprint())
            })
            .expect("first run");
        assert!(!first.skipped);
        assert_eq!(
            read_fingerprint(&out).as_deref(),
            Some(first.fingerprint.as_str())
        );
        assert_eq!(StageReport::load(dir.path(), "demo").as_ref(), Some(&first));

        let second = plan(&ctx, &input, &out)
            .run(|_: &mut StageRun<'_, Error>| -> Result<(), Error> { panic!("re-ran") })
            .expect("second run");
        let expected = StageReport {
            skipped: true,
            skip_reason: Some(UP_TO_DATE.to_string()),
            ..first.clone()
        };
        assert_eq!(second, expected);
        assert_eq!(StageReport::load(dir.path(), "demo"), Some(expected));

        // A changed input runs again and replaces the report.
        write_table(&input, &[demo_row()], "in-2").expect("input");
        let third = plan(&ctx, &input, &out)
            .run(|run: &mut StageRun<'_, Error>| {
                write_table::<RepoRow>(&out, &[], run.fingerprint())
            })
            .expect("third run");
        assert!(!third.skipped && third.skip_reason.is_none());
        assert_ne!(third.fingerprint, first.fingerprint);
        assert_eq!(StageReport::load(dir.path(), "demo"), Some(third));
    }

    #[test]
    fn a_failed_run_writes_no_report_unless_it_asks() {
        let dir = tempfile::tempdir().expect("tempdir");
        let ctx = StageContext::for_tests(dir.path());
        let input = dir.path().join("repos.parquet");
        let out = dir.path().join("out.parquet");
        write_table(&input, &[demo_row()], "in-1").expect("input");
        let err = plan(&ctx, &input, &out)
            .run(|_: &mut StageRun<'_, Error>| Err(Error::table(&out, "disk full")))
            .expect_err("fails");
        assert!(err.to_string().contains("disk full"));
        assert!(StageReport::load(dir.path(), "demo").is_none());

        let err = plan(&ctx, &input, &out)
            .run(|run: &mut StageRun<'_, Error>| {
                write_table::<RepoRow>(&out, &[], &format!("{}:incomplete", run.fingerprint()))?;
                let fp = format!("{}:incomplete", run.fingerprint());
                run.set_fingerprint(fp);
                run.report.count("kept", 2);
                run.fail_after_report(Error::table(&out, "stopped early"));
                Ok(())
            })
            .expect_err("deferred error");
        assert!(err.to_string().contains("stopped early"));
        let saved = StageReport::load(dir.path(), "demo").expect("report kept");
        assert_eq!(saved.counters.get("kept"), Some(&2));
        assert!(saved.fingerprint.ends_with(":incomplete"));
        // The incomplete output does not carry the plan's fingerprint: the next run works.
        let again = plan(&ctx, &input, &out)
            .run(|run: &mut StageRun<'_, Error>| {
                write_table::<RepoRow>(&out, &[], run.fingerprint())
            })
            .expect("resumes");
        assert!(!again.skipped);
    }

    #[test]
    fn force_runs_and_a_plan_without_outputs_never_skips() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut ctx = StageContext::for_tests(dir.path());
        let input = dir.path().join("repos.parquet");
        let out = dir.path().join("out.parquet");
        write_table(&input, &[demo_row()], "in-1").expect("input");
        let write =
            |run: &mut StageRun<'_, Error>| write_table::<RepoRow>(&out, &[], run.fingerprint());
        plan(&ctx, &input, &out).run(write).expect("first");
        ctx.force = true;
        assert!(!plan(&ctx, &input, &out).run(write).expect("forced").skipped);
        ctx.force = false;
        for _ in 0..2 {
            let report = StagePlan::new(&ctx, "always", 1)
                .run(|run: &mut StageRun<'_, Error>| {
                    run.set_fingerprint("from-output".into());
                    Ok(())
                })
                .expect("runs");
            assert!(!report.skipped);
            assert_eq!(report.fingerprint, "from-output");
        }
    }

    #[test]
    fn the_pool_has_the_context_threads_and_stage_names() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut ctx = StageContext::for_tests(dir.path());
        ctx.threads = 3;
        StagePlan::new(&ctx, "pooled", 1)
            .stack_size(4 * 1024 * 1024)
            .run(|run: &mut StageRun<'_, Error>| {
                let pool = run.pool()?;
                assert_eq!(pool.current_num_threads(), 3);
                let name = pool.install(|| std::thread::current().name().map(str::to_string));
                assert_eq!(
                    name.as_deref().map(|n| n.starts_with("pooled-")),
                    Some(true)
                );
                Ok(())
            })
            .expect("runs");
    }

    #[test]
    fn a_skip_without_a_last_report_writes_the_reason() {
        let dir = tempfile::tempdir().expect("tempdir");
        let ctx = StageContext::for_tests(dir.path());
        let report = record_skip(&ctx, "rollout", "", "no teacher").expect("skip");
        assert!(report.skipped);
        assert_eq!(report.skip_reason.as_deref(), Some("no teacher"));
        assert_eq!(StageReport::load(dir.path(), "rollout"), Some(report));
    }
}
