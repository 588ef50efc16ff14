//! The stages, their typed configuration sections and how each one is run.

use ksmith_core::config::Config;
use ksmith_core::report::StageReport;

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
#[derive(Debug, Clone)]
pub struct StageConfigs {}

impl StageConfigs {
    /// Parses and validates every stage's section of `config`.
    pub fn from_config(_config: &Config) -> anyhow::Result<StageConfigs> {
        Ok(StageConfigs {})
    }
}

/// Runs one stage of `session`.
pub fn run_stage(stage: Stage, _session: &Session) -> anyhow::Result<StageReport> {
    anyhow::bail!("stage {} is not available in this build", stage.name())
}
