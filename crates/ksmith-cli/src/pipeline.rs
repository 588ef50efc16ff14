//! Loading the configuration, building the stage context and running stages in order.

use std::path::PathBuf;

use anyhow::Context as _;
use ksmith_core::config::Config;
use ksmith_core::context::StageContext;
use ksmith_core::progress::ProgressMode;
use ksmith_core::report::StageReport;
use ksmith_core::stage::{StagePlan, StageRun};
use ksmith_core::table::Table;
use ksmith_core::tables::AnnotationRow;

use crate::args::{Cli, Command, Common};
use crate::stages::{Stage, StageConfigs};

/// The embedded default configuration (`configs/default.toml`).
pub const DEFAULT_CONFIG: &str = include_str!("../../../configs/default.toml");

/// Why the command failed, which decides the exit code.
#[derive(Debug)]
pub enum Failure {
    /// The command line or the configuration is wrong (exit code 2).
    Usage(anyhow::Error),
    /// A stage failed (exit code 1).
    Stage(anyhow::Error),
}

/// A configuration with every stage's section parsed and validated, and the run's context.
pub struct Session {
    /// The configuration file.
    pub config: Config,
    /// Every stage's typed section.
    pub stages: StageConfigs,
    /// The context stages run in.
    pub ctx: StageContext,
}

impl Session {
    /// Loads the configuration named by `common` (or the embedded default), validates every
    /// stage's section and builds the context. Does no other I/O.
    pub fn open(common: &Common) -> anyhow::Result<Session> {
        let mut config = match &common.config {
            Some(path) => Config::load(path)?,
            None => Config::parse(DEFAULT_CONFIG, "embedded default (configs/default.toml)")?,
        };
        for assignment in &common.set {
            config.set(assignment)?;
        }
        let stages = StageConfigs::from_config(&config)
            .with_context(|| format!("invalid configuration {}", config.origin))?;
        let workdir: PathBuf = common
            .workdir
            .clone()
            .unwrap_or_else(|| config.run.workdir.clone());
        let threads = common.threads.unwrap_or(config.run.threads);
        let mut ctx = StageContext::new(workdir, threads, ProgressMode::detect(common.quiet));
        ctx.force = common.force;
        ctx.shard = common.shard;
        Ok(Session {
            config,
            stages,
            ctx,
        })
    }

    /// Runs a command that is not a stage (merge, import-tasks) under the stage contract, which
    /// times it and saves its report as `reports/<name>.json`, and prints the summary.
    fn finish(
        &self,
        name: &'static str,
        work: impl FnOnce() -> anyhow::Result<StageReport>,
    ) -> Result<(), Failure> {
        let report = StagePlan::new(&self.ctx, name, 1)
            .run(|run: &mut StageRun<'_, anyhow::Error>| {
                let report = work()?;
                run.set_fingerprint(report.fingerprint.clone());
                run.report = report;
                Ok(())
            })
            .map_err(Failure::Stage)?;
        self.ctx.info(report.summary());
        Ok(())
    }

    /// Runs `stages` in order, printing each stage's summary; stops at the first failure.
    pub fn run(&self, stages: &[Stage]) -> anyhow::Result<()> {
        std::fs::create_dir_all(&self.ctx.workdir).with_context(|| {
            format!(
                "cannot create work directory {}",
                self.ctx.workdir.display()
            )
        })?;
        for (i, stage) in stages.iter().enumerate() {
            // The stage saved its report (skipped ones included), so reports/ always describes
            // the latest run.
            let report = crate::stages::run_stage(*stage, self)
                .with_context(|| format!("stage {} failed", stage.name()))?;
            if report.skip_reason.as_deref() == Some(crate::stages::NO_TEACHER) {
                let downstream: Vec<&str> = stages[i + 1..].iter().map(|s| s.name()).collect();
                if !downstream.is_empty() {
                    self.ctx.warn(format!(
                        "{} skipped: they need the rollout's steps",
                        downstream.join(", ")
                    ));
                }
                break;
            }
            self.ctx.info(report.summary());
        }
        Ok(())
    }
}

/// Executes a parsed command line.
pub fn execute(cli: &Cli) -> Result<(), Failure> {
    let session = Session::open(cli.command.common()).map_err(Failure::Usage)?;
    match &cli.command {
        Command::Check(_) => {
            print_out(&format!(
                "configuration: {}\nwork directory: {}\nthreads: {}\nsources: {}\nstages: {}\n",
                session.config.origin,
                session.ctx.workdir.display(),
                session.ctx.threads,
                session.config.sources.len(),
                Stage::ALL.map(|s| s.name()).join(", ")
            ));
            Ok(())
        }
        Command::Run(_) => session.run(&Stage::ALL).map_err(Failure::Stage),
        Command::Discover(c) if c.shard.is_some() => Err(Failure::Usage(anyhow::anyhow!(
            "discover writes one manifest for every shard: run it without --shard"
        ))),
        Command::Discover(_) => {
            let report = crate::stages::run_discover(&session).map_err(Failure::Stage)?;
            session.ctx.info(report.summary());
            Ok(())
        }
        Command::Merge { from, .. } => session.finish(crate::merge::STAGE, || {
            crate::merge::merge(from, &session.ctx.workdir)
        }),
        Command::ImportTasks { from, .. } => session.finish(crate::import_tasks::STAGE, || {
            crate::import_tasks::import_tasks(from, &session.ctx.workdir)
        }),
        Command::Review { port, .. } => {
            let server = ksmith_review::Server::bind(&session.ctx.workdir, *port)
                .map_err(|e| Failure::Stage(e.into()))?;
            print_out(&format!(
                "review page: {} (answers go to {}; Ctrl-C stops)\n",
                server.url(),
                AnnotationRow::path_in(&session.ctx.workdir).display()
            ));
            server.serve(&|line| session.ctx.info(line));
            Ok(())
        }
        Command::Report { out, .. } => {
            let path = ksmith_report::write_report(&session.ctx.workdir, out.as_deref())
                .map_err(|e| Failure::Stage(e.into()))?;
            print_out(&format!("{}\n", path.display()));
            Ok(())
        }
        other => {
            let stage = other
                .stage()
                .ok_or_else(|| Failure::Usage(anyhow::anyhow!("not a stage command")))?;
            session.run(&[stage]).map_err(Failure::Stage)
        }
    }
}

/// Writes to stdout; a closed pipe (`ksmith check | head -1`) is not an error.
fn print_out(text: &str) {
    use std::io::Write as _;
    let _ = std::io::stdout().lock().write_all(text.as_bytes());
}
