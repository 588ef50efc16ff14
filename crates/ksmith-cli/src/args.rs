//! Command-line arguments.
//!
//! The contract, kept stable: `ksmith <stage> --config FILE --workdir DIR` for each stage and
//! `ksmith run` for all stages in order.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::stages::Stage;

/// ksmith: synthesizes training data for LLMs that write and optimize GPU kernels.
#[derive(Debug, Parser)]
#[command(name = "ksmith", version, about)]
pub struct Cli {
    /// What to run.
    #[command(subcommand)]
    pub command: Command,
}

/// Options every subcommand takes.
#[derive(Debug, Clone, Args)]
pub struct Common {
    /// Configuration file (TOML); the embedded default (configs/default.toml) when absent.
    #[arg(long, short = 'c', global = true)]
    pub config: Option<PathBuf>,
    /// Work directory for tables, mirrors and reports (overrides `[run] workdir`).
    #[arg(long, short = 'w', global = true)]
    pub workdir: Option<PathBuf>,
    /// Worker threads for CPU stages (overrides `[run] threads`; 0 means one per core).
    #[arg(long, global = true)]
    pub threads: Option<usize>,
    /// No progress bars or informational lines; warnings and errors only.
    #[arg(long, short = 'q', global = true)]
    pub quiet: bool,
    /// Re-run stages even when their outputs are up to date.
    #[arg(long, global = true)]
    pub force: bool,
    /// Only the repositories of shard INDEX/COUNT (by a hash of the repository name): crawl,
    /// extract and probe one shard per work directory, then `ksmith merge` them.
    #[arg(long, global = true, value_name = "INDEX/COUNT")]
    pub shard: Option<ksmith_core::shard::Shard>,
    /// Override one configuration key: `--set probe.ray_address=auto` (repeatable; the value is
    /// TOML, or a string when it does not parse as TOML).
    #[arg(long = "set", global = true, value_name = "SECTION.KEY=VALUE")]
    pub set: Vec<String>,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Search GitHub for repositories to crawl ([discover]): manifest.jsonl.
    Discover(#[command(flatten)] Common),
    /// Clone or fetch the configured sources and pin their commits: repos.parquet.
    Crawl(#[command(flatten)] Common),
    /// Find nn.Module classes and emit self-contained programs: modules.parquet.
    Extract(#[command(flatten)] Common),
    /// Run every program, repair its arguments, keep what runs: probes.parquet.
    Probe(#[command(flatten)] Common),
    /// Drop duplicates and benchmark contamination: dedup.parquet.
    Dedup(#[command(flatten)] Common),
    /// Embed, cluster and pick tasks: clusters.parquet, tasks.parquet.
    Cluster(#[command(flatten)] Common),
    /// Evolve kernels with a teacher LLM and GPU evaluators: steps.parquet.
    Rollout(#[command(flatten)] Common),
    /// Pick SFT and GRPO samples, agent-environment starts and multi-turn chains from the steps:
    /// sft.parquet, grpo.parquet, env.parquet, chains.parquet.
    Select(#[command(flatten)] Common),
    /// Write the datasets for trainers (verl, TRL, OpenRLHF): datasets/<name>/.
    Export(#[command(flatten)] Common),
    /// Run every stage in order.
    Run(#[command(flatten)] Common),
    /// Check the configuration (every stage's section) and print the resolved settings.
    Check(#[command(flatten)] Common),
    /// Write tasks.parquet from a folder of KernelBench-format programs (instead of cluster).
    ImportTasks {
        /// Options shared by every subcommand.
        #[command(flatten)]
        common: Common,
        /// The folder of programs (searched recursively for *.py).
        #[arg(long = "from", value_name = "DIR")]
        from: PathBuf,
    },
    /// Union the repos, modules and probes tables of shard work directories into --workdir.
    Merge {
        /// Options shared by every subcommand.
        #[command(flatten)]
        common: Common,
        /// A shard's work directory (repeat for each shard).
        #[arg(long = "from", required = true, value_name = "DIR")]
        from: Vec<PathBuf>,
    },
    /// Serve the review page of the cluster centers on 127.0.0.1 (accept, reject or relabel
    /// each, with a note): annotations.parquet, which cluster uses for the task selection.
    Review {
        /// Options shared by every subcommand.
        #[command(flatten)]
        common: Common,
        /// The port to listen on (127.0.0.1 only; 0 picks a free one).
        #[arg(long, default_value_t = 8765)]
        port: u16,
    },
    /// Write a self-contained HTML report of the work directory (default: DIR/report.html).
    Report {
        /// Options shared by every subcommand.
        #[command(flatten)]
        common: Common,
        /// Where to write the HTML file.
        #[arg(long, short = 'o')]
        out: Option<PathBuf>,
    },
}

impl Command {
    /// The options of the subcommand.
    pub fn common(&self) -> &Common {
        match self {
            Command::Discover(c)
            | Command::Crawl(c)
            | Command::Extract(c)
            | Command::Probe(c)
            | Command::Dedup(c)
            | Command::Cluster(c)
            | Command::Rollout(c)
            | Command::Select(c)
            | Command::Export(c)
            | Command::Run(c)
            | Command::Check(c)
            | Command::Report { common: c, .. }
            | Command::Review { common: c, .. }
            | Command::Merge { common: c, .. }
            | Command::ImportTasks { common: c, .. } => c,
        }
    }

    /// The single stage the subcommand runs, if it is a stage subcommand.
    pub fn stage(&self) -> Option<Stage> {
        match self {
            Command::Crawl(_) => Some(Stage::Crawl),
            Command::Extract(_) => Some(Stage::Extract),
            Command::Probe(_) => Some(Stage::Probe),
            Command::Dedup(_) => Some(Stage::Dedup),
            Command::Cluster(_) => Some(Stage::Cluster),
            Command::Rollout(_) => Some(Stage::Rollout),
            Command::Select(_) => Some(Stage::Select),
            Command::Export(_) => Some(Stage::Export),
            Command::Discover(_)
            | Command::Run(_)
            | Command::Check(_)
            | Command::Report { .. }
            | Command::Review { .. }
            | Command::Merge { .. }
            | Command::ImportTasks { .. } => None,
        }
    }
}
