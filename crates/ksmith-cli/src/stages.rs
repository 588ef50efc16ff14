//! The stages, their typed configuration sections and how each one is run.
//!
//! This is the one place where concrete implementations meet: the rollout stage gets the
//! OpenAI-compatible teacher (`ksmith-teacher`) and the evaluator (`ksmith-eval`: a local worker
//! pool or a remote endpoint) here, through the contracts of `ksmith-core`.

use std::sync::OnceLock;

use ksmith_core::config::Config;
use ksmith_core::evaluation::{EvalError, EvalRequest, EvalResult, Evaluator, Preflight};
use ksmith_core::report::StageReport;
use ksmith_core::stage::record_skip;
use serde::Serialize;

use crate::pipeline::Session;

/// A pipeline stage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// Sources to `repos.parquet`.
    Crawl,
    /// `repos.parquet` to `modules.parquet`.
    Extract,
    /// `modules.parquet` to `probes.parquet`.
    Probe,
    /// Runnable modules to `dedup.parquet`.
    Dedup,
    /// Unique modules to `clusters.parquet` and `tasks.parquet`.
    Cluster,
    /// Tasks to `steps.parquet`.
    Rollout,
    /// Steps to `sft.parquet`, `grpo.parquet`, `env.parquet` and `chains.parquet`.
    Select,
    /// Samples to `datasets/<name>/`.
    Export,
}

impl Stage {
    /// Every stage, in the order `ksmith run` runs them.
    pub const ALL: [Stage; 8] = [
        Stage::Crawl,
        Stage::Extract,
        Stage::Probe,
        Stage::Dedup,
        Stage::Cluster,
        Stage::Rollout,
        Stage::Select,
        Stage::Export,
    ];

    /// The stage's name, as in the subcommand and the config table.
    pub fn name(self) -> &'static str {
        match self {
            Stage::Crawl => "crawl",
            Stage::Extract => "extract",
            Stage::Probe => "probe",
            Stage::Dedup => "dedup",
            Stage::Cluster => "cluster",
            Stage::Rollout => "rollout",
            Stage::Select => "select",
            Stage::Export => "export",
        }
    }
}

/// Every stage's typed configuration section, parsed and validated before any work starts.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct StageConfigs {
    /// `[discover]`: GitHub search to the manifest crawl reads (not a stage of `ksmith run`).
    pub discover: ksmith_discover::DiscoverConfig,
    /// `[crawl]`.
    pub crawl: ksmith_crawl::CrawlConfig,
    /// `[extract]`.
    pub extract: ksmith_extract::ExtractConfig,
    /// `[probe]`.
    pub probe: ksmith_probe::ProbeConfig,
    /// `[dedup]`.
    pub dedup: ksmith_dedup::DedupConfig,
    /// `[cluster]`.
    pub cluster: ksmith_cluster::ClusterConfig,
    /// `[eval]`: the evaluator the rollout stage uses.
    pub eval: ksmith_eval::EvalConfig,
    /// `[rollout]`.
    pub rollout: ksmith_evolve::RolloutConfig,
    /// `[teacher]`: the teacher LLM endpoints.
    pub teacher: ksmith_teacher::TeacherConfig,
    /// `[select]`.
    pub select: ksmith_select::SelectConfig,
    /// `[export]`.
    pub export: ksmith_export::ExportConfig,
    /// `[sandbox]`: how the probe and the evaluator confine untrusted code (also copied into
    /// `probe` and `eval`).
    pub sandbox: ksmith_sandbox::SandboxConfig,
}

impl StageConfigs {
    /// Parses and validates every stage's section of `config`.
    pub fn from_config(config: &Config) -> anyhow::Result<StageConfigs> {
        let mut stages = StageConfigs {
            discover: config.section("discover")?,
            crawl: config.section("crawl")?,
            extract: config.section("extract")?,
            probe: config.section("probe")?,
            dedup: config.section("dedup")?,
            cluster: config.section("cluster")?,
            eval: config.section("eval")?,
            rollout: config.section("rollout")?,
            teacher: config.section("teacher")?,
            select: config.section("select")?,
            export: config.section("export")?,
            sandbox: config.section("sandbox")?,
        };
        stages.discover.validate()?;
        stages.sandbox.validate()?;
        stages.probe.sandbox = stages.sandbox.clone();
        stages.eval.sandbox = stages.sandbox.clone();
        stages.crawl.validate()?;
        stages.extract.validate()?;
        stages.probe.validate()?;
        stages.dedup.validate()?;
        stages.cluster.validate()?;
        stages.eval.validate()?;
        stages.rollout.validate()?;
        stages.teacher.validate()?;
        stages.select.validate()?;
        stages.export.validate()?;
        Ok(stages)
    }
}

/// Runs one stage of `session`.
pub fn run_stage(stage: Stage, session: &Session) -> anyhow::Result<StageReport> {
    let cfg = &session.stages;
    let ctx = &session.ctx;
    Ok(match stage {
        Stage::Crawl => ksmith_crawl::run(&session.config.sources, &cfg.crawl, ctx)?,
        Stage::Extract => ksmith_extract::run(&cfg.extract, ctx)?,
        Stage::Probe => run_probe(session)?,
        Stage::Dedup => ksmith_dedup::run_with_fetcher(
            &cfg.dedup,
            ctx,
            Some(&crate::benchmarks::CrawlFetcher::new(ctx.progress)),
        )?,
        Stage::Cluster => ksmith_cluster::run(&cfg.cluster, ctx)?,
        Stage::Rollout => return run_rollout(session),
        Stage::Select => ksmith_select::run(&cfg.select, ctx)?,
        Stage::Export => ksmith_export::run(&cfg.export, ctx)?,
    })
}

/// Runs `ksmith discover`: GitHub's search to the manifest, keeping the licenses of
/// `[crawl] allowed_licenses` unless `[discover]` lists its own, with the token from the
/// variable `[discover] token_env` names.
pub fn run_discover(session: &Session) -> anyhow::Result<StageReport> {
    let cfg = &session.stages;
    let licenses = cfg
        .discover
        .license_policy(&cfg.crawl.allowed_licenses, cfg.crawl.accept_unlicensed);
    let env = ksmith_discover::Env {
        token: ksmith_discover::Token::from_env(&cfg.discover.token_env),
        clock: &ksmith_discover::SystemClock,
    };
    Ok(ksmith_discover::run(
        &cfg.discover,
        &licenses,
        &session.ctx,
        env,
    )?)
}

/// The skip reason of a rollout skipped for want of a teacher (the stages after it are skipped
/// too).
pub const NO_TEACHER: &str = "no teacher configured";

/// True when a teacher is configured: `[[teacher.endpoints]]` in the file or
/// `KSMITH_TEACHER_URL` in the environment. (A `[teacher]` table without endpoints only tunes the
/// client, as in configs/default.toml.)
pub fn teacher_configured(config: &Config) -> bool {
    config.section_has_key("teacher", "endpoints") || ksmith_teacher::url_override().is_some()
}

fn run_probe(session: &Session) -> anyhow::Result<StageReport> {
    let cfg = &session.stages;
    let ctx = &session.ctx;
    if !cfg.probe.llm_repair {
        return Ok(ksmith_probe::run(&cfg.probe, ctx)?);
    }
    if !teacher_configured(&session.config) {
        anyhow::bail!(
            "[probe] llm_repair is on but no teacher is configured: set {} or add [[teacher.endpoints]]",
            ksmith_teacher::TEACHER_URL_ENV
        );
    }
    let teacher = ksmith_teacher::Teacher::new(&cfg.teacher, &ctx.workdir)?;
    Ok(ksmith_probe::run_with_chat(
        &cfg.probe,
        ctx,
        Some(&teacher),
    )?)
}

fn run_rollout(session: &Session) -> anyhow::Result<StageReport> {
    let cfg = &session.stages;
    let ctx = &session.ctx;
    if !teacher_configured(&session.config) {
        if cfg.rollout.required {
            anyhow::bail!(
                "rollout is required by {} but no teacher is configured: set {} to an \
                 OpenAI-compatible endpoint (e.g. http://host:8000/v1) or add [[teacher.endpoints]]",
                session.config.origin,
                ksmith_teacher::TEACHER_URL_ENV
            );
        }
        ctx.warn(format!(
            "rollout skipped: no teacher configured; set {} to an OpenAI-compatible endpoint \
             (e.g. http://host:8000/v1) or add [[teacher.endpoints]] to run it",
            ksmith_teacher::TEACHER_URL_ENV
        ));
        return Ok(record_skip(ctx, ksmith_evolve::STAGE, "", NO_TEACHER)?);
    }
    let teacher = ksmith_teacher::Teacher::new(&cfg.teacher, &ctx.workdir)?;
    let evaluator = LazyEvaluator::new(cfg.eval.clone());
    // Which teachers answer and how candidates are judged decide the steps, so they are part
    // of the rollout's fingerprint (API keys are not: they are read from the environment).
    let url_override = ksmith_teacher::url_override();
    let identity = ksmith_core::ids::content_id(
        serde_json::to_vec(&(
            cfg.teacher.resolved_endpoints(url_override.as_deref()),
            &cfg.eval,
        ))
        .unwrap_or_default(),
    );
    Ok(ksmith_evolve::run_with_identity(
        &cfg.rollout,
        ctx,
        &teacher,
        &evaluator,
        &identity,
    )?)
}

/// Starts the evaluator on first use, so a rollout that finds its output up to date never
/// starts Python workers.
struct LazyEvaluator {
    cfg: ksmith_eval::EvalConfig,
    inner: OnceLock<Result<Box<dyn Evaluator>, String>>,
}

impl LazyEvaluator {
    fn new(cfg: ksmith_eval::EvalConfig) -> Self {
        LazyEvaluator {
            cfg,
            inner: OnceLock::new(),
        }
    }
}

impl LazyEvaluator {
    fn started(&self) -> &Result<Box<dyn Evaluator>, String> {
        self.inner
            .get_or_init(|| ksmith_eval::build(&self.cfg).map_err(|e| e.to_string()))
    }
}

impl Evaluator for LazyEvaluator {
    fn evaluate(&self, request: &EvalRequest) -> Result<EvalResult, EvalError> {
        match self.started() {
            Ok(evaluator) => evaluator.evaluate(request),
            Err(message) => Err(EvalError::Unavailable(message.clone())),
        }
    }

    fn preflight(&self, request: &EvalRequest) -> Result<Preflight, EvalError> {
        match self.started() {
            Ok(evaluator) => evaluator.preflight(request),
            Err(message) => Err(EvalError::Unavailable(message.clone())),
        }
    }

    /// Starts the evaluator (the rollout asks once it knows it has work).
    fn capacity(&self) -> usize {
        self.started().as_ref().map_or(1, |e| e.capacity())
    }

    fn describe(&self) -> String {
        match self.started() {
            Ok(e) => e.describe(),
            Err(message) => format!("did not start: {message}"),
        }
    }

    fn report_counters(&self) -> Vec<(String, u64)> {
        match self.inner.get() {
            Some(Ok(e)) => e.report_counters(),
            _ => Vec::new(),
        }
    }
}
