//! The stages, their typed configuration sections and how each one is run.

use ksmith_core::config::Config;
use ksmith_core::report::StageReport;
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
}

impl Stage {
    /// Every stage, in the order `ksmith run` runs them.
    pub const ALL: [Stage; 6] = [
        Stage::Crawl,
        Stage::Extract,
        Stage::Probe,
        Stage::Dedup,
        Stage::Cluster,
        Stage::Rollout,
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
        }
    }
}

/// Every stage's typed configuration section, parsed and validated before any work starts.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct StageConfigs {
    /// `[crawl]`.
    pub crawl: ksmith_crawl::CrawlConfig,
    /// `[extract]`.
    pub extract: ksmith_extract::ExtractConfig,
    /// `[probe]`.
    pub probe: ksmith_probe::ProbeConfig,
}

impl StageConfigs {
    /// Parses and validates every stage's section of `config`.
    pub fn from_config(config: &Config) -> anyhow::Result<StageConfigs> {
        let stages = StageConfigs {
            crawl: config.section("crawl")?,
            extract: config.section("extract")?,
            probe: config.section("probe")?,
        };
        stages.crawl.validate()?;
        stages.extract.validate()?;
        stages.probe.validate()?;
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
        Stage::Probe => ksmith_probe::run(&cfg.probe, ctx)?,
        other => anyhow::bail!("stage {} is not available in this build", other.name()),
    })
}
