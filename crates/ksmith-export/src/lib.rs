//! Export: writes the selected samples as Parquet datasets in the trainers' own schemas.
//!
//! Input: `sft.parquet` (`SftRow`), `grpo.parquet` (`GrpoRow`), `chains.parquet` (`ChainRow`:
//! multi-turn chains), `env.parquet` (`GrpoRow`: starts of agent episodes), `selection.json`
//! (the rules select applied and what they kept) and, when present, `repos.parquet` (`RepoRow`,
//! for pinned commits in the cards). Output: one folder per configured [`Format`] that has rows under
//! `<workdir>/datasets/`, in the Hugging Face layout: `data/train-0000i-of-0000N.parquet`,
//! `data/validation-...` (zstd, one fixed schema across shards and splits, schema version in the
//! metadata) and a `README.md` dataset card whose YAML header (`configs` naming every file, a
//! complete `dataset_info`) lets `datasets.load_dataset(<folder>)` load the splits; plus
//! `datasets/export.json` ([`record::ExportRecord`]). Every sample is measured in tokens
//! ([`lengths`]: a configured `tokenizer.json`, else `chars / 4`), the configured caps drop or cut
//! over-long samples ([`caps`]), and each card states the lengths and the trainer settings that
//! fit them with a command line per trainer ([`commands`]). The reward function trainers call
//! lives in `python/ksmith/reward.py` and reads the [`ground_truth::GroundTruth`] JSON these
//! datasets carry; the multi-turn formats talk to the evaluator as a tool ([`tool`],
//! [`conversation`]) whose trainer adapters live in `python/ksmith/trainers/`.
//!
//! Invariants: a dataset folder is replaced atomically (written under a temporary name, then
//! renamed); a re-run with unchanged inputs and config does nothing; a split without rows is
//! left out of the files and the card, and a format without rows gets no folder at all (an
//! earlier one is removed), a warning saying which selection rule gave nothing and why, and a
//! stage error only when `required_formats` names it. Entry point: [`run`].
#![deny(missing_docs)]

pub mod caps;
pub mod card;
pub mod chain_formats;
pub mod commands;
pub mod config;
pub mod conversation;
pub mod env_formats;
pub mod error;
pub mod features;
pub mod formats;
pub mod ground_truth;
pub mod layout;
pub mod lengths;
pub mod record;
pub mod shards;
pub mod tool;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use ksmith_core::config::section_hash;
use ksmith_core::context::StageContext;
use ksmith_core::evaluation::Backend;
use ksmith_core::ids::content_id;
use ksmith_core::report::StageReport;
use ksmith_core::stage::StagePlan;
use ksmith_core::table::{META_FINGERPRINT, Table, read_table, write_bytes_atomically};
use ksmith_core::tables::{ChainRow, GrpoRow, RepoRow, SftRow, Split, env_path_in};
use rayon::prelude::*;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::caps::{Capped, cap_chains, cap_env, cap_grpo, cap_sft};
use crate::formats::{Measured, Source};
use crate::lengths::{Fit, Lengths, SampleLength, TokenCounter};
use crate::record::{ExportRecord, WrittenDataset};
use crate::tool::Mode;

pub use config::ExportConfig;
pub use error::Error;
pub use formats::{DATASET_SCHEMA_VERSION, Format};

/// The stage's name.
pub const STAGE: &str = "export";
/// Bumped when the output for the same input changes.
pub const CODE_VERSION: u32 = 4;

/// Metadata key of the exported schema version.
pub const META_DATASET_SCHEMA_VERSION: &str = "ksmith.dataset_schema_version";
/// Metadata key of the format.
pub const META_FORMAT: &str = "ksmith.format";

/// What one set of select kept and dropped, as `selection.json` records it.
#[derive(Debug, Clone, Default, serde::Deserialize)]
struct SetOutcome {
    kept: u64,
    dropped: BTreeMap<String, u64>,
}

/// The selection manifest written by select (`selection.json`), as far as export reads it.
#[derive(Debug, Clone, serde::Deserialize)]
struct Manifest {
    config_hash: String,
    rules: Vec<String>,
    /// The `[select]` section; export reads `grpo_rule` to name the rule in its messages.
    #[serde(default)]
    config: serde_json::Value,
    #[serde(default)]
    outcome: BTreeMap<String, SetOutcome>,
    #[serde(default)]
    steps_correct_untimed: u64,
}

/// Where the datasets go in `workdir`.
pub fn datasets_dir(workdir: &Path) -> PathBuf {
    workdir.join("datasets")
}

/// The folder of `format`'s dataset in `workdir`.
pub fn dataset_dir(workdir: &Path, format: Format) -> PathBuf {
    datasets_dir(workdir).join(format.folder())
}

/// The first shard of a dataset folder (by name), if any.
fn first_shard(dir: &Path) -> Option<PathBuf> {
    let data = dir.join("data");
    let mut names: Vec<PathBuf> = std::fs::read_dir(&data)
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "parquet"))
        .collect();
    names.sort();
    names.into_iter().next()
}

/// The indices of `rows` in each split.
fn by_split<T>(rows: &[T], split: impl Fn(&T) -> Split) -> [(Split, Vec<usize>); 2] {
    let mut train = Vec::new();
    let mut validation = Vec::new();
    for (i, r) in rows.iter().enumerate() {
        match split(r) {
            Split::Train => train.push(i),
            Split::Validation => validation.push(i),
        }
    }
    [(Split::Train, train), (Split::Validation, validation)]
}

/// Counts equal values.
fn count<K: Ord>(xs: Vec<K>) -> BTreeMap<K, usize> {
    let mut m = BTreeMap::new();
    for x in xs {
        *m.entry(x).or_insert(0usize) += 1;
    }
    m
}

/// Converts each split's rows with `f(row index, index within the split)`.
fn map_splits<T>(
    splits: &[(Split, Vec<usize>); 2],
    f: impl Fn(usize, usize) -> T,
) -> Vec<(Split, Vec<T>)> {
    splits
        .iter()
        .map(|(split, rows)| {
            (
                *split,
                rows.iter().enumerate().map(|(i, &r)| f(r, i)).collect(),
            )
        })
        .collect()
}

/// What one dataset's splits became.
struct Written {
    /// The splits that have rows, train first.
    splits: Vec<card::SplitFiles>,
    /// Total bytes of the files.
    bytes: u64,
    /// The columns as `datasets` features (YAML).
    features: String,
}

/// Writes the splits of one dataset into `staged`.
fn write_splits<T: Serialize + DeserializeOwned>(
    staged: &Path,
    splits: Vec<(Split, Vec<T>)>,
    opts: &shards::ShardOptions,
) -> Result<Written, Error> {
    let fields = shards::fields_of::<T>(&opts.dataset)?;
    let features = features::yaml(&fields, 2).map_err(|message| Error::Write {
        dataset: opts.dataset.clone(),
        path: staged.join("README.md"),
        message,
    })?;
    let mut out = Written {
        splits: Vec::new(),
        bytes: 0,
        features,
    };
    // The `datasets` library refuses a split without rows ("corresponds to no data"), so an
    // empty split is left out.
    for (split, rows) in splits {
        if rows.is_empty() {
            continue;
        }
        let files = shards::write_split(&staged.join("data"), split.as_str(), &rows, opts)?;
        let mut names = Vec::with_capacity(files.len());
        let mut num_bytes = 0;
        for f in &files {
            out.bytes += std::fs::metadata(&f.path).map(|m| m.len()).unwrap_or(0);
            num_bytes += f.arrow_bytes;
            let name = f.path.file_name().map(|n| n.to_string_lossy().into_owned());
            names.push(format!("data/{}", name.unwrap_or_default()));
        }
        out.splits.push(card::SplitFiles {
            name: split.as_str().to_string(),
            rows: rows.len(),
            files: names,
            num_bytes,
        });
    }
    Ok(out)
}

fn provenance(rows: &[(String, Option<String>)], repos: &[RepoRow]) -> Vec<card::Provenance> {
    let by_repo: BTreeMap<&str, &RepoRow> = repos.iter().map(|r| (r.repo.as_str(), r)).collect();
    let mut counts: BTreeMap<(String, Option<String>), usize> = BTreeMap::new();
    for (repo, license) in rows {
        *counts.entry((repo.clone(), license.clone())).or_default() += 1;
    }
    counts
        .into_iter()
        .map(|((repo, license), samples)| {
            let known = by_repo.get(repo.as_str());
            card::Provenance {
                license: license.or_else(|| known.and_then(|r| r.license.clone())),
                commit: known.and_then(|r| r.commit.clone()),
                url: known.map(|r| r.url.clone()),
                repo,
                samples,
            }
        })
        .collect()
}

/// The samples of one set after the caps, with their statistics and settings.
struct Measure<T> {
    capped: Capped<T>,
    lengths: Lengths,
    fit: Fit,
}

impl<T> Measure<T> {
    fn new(capped: Capped<T>, counter: &TokenCounter, source: Source, cfg: &ExportConfig) -> Self {
        let lengths = Lengths::of(&counter.name(), &capped.lengths);
        let approx = counter.is_approx();
        let fit = match source {
            Source::Sft | Source::Chains(_) => Fit::sft(&lengths, approx),
            Source::Grpo => Fit::rl(&lengths, approx),
            Source::Env(_) => Fit::agent(&lengths, approx, cfg.agent_max_turns),
        };
        Measure {
            capped,
            lengths,
            fit,
        }
    }

    /// Rows kept, rows left out by reason, prompts cut, lengths and settings.
    fn summary(&self) -> Summary<'_> {
        Summary {
            rows: self.capped.rows.len(),
            dropped: &self.capped.dropped,
            truncated: self.capped.truncated,
            lengths: &self.lengths,
            fit: self.fit,
        }
    }
}

/// What the caps and the counter made of one source's samples.
struct Summary<'a> {
    rows: usize,
    dropped: &'a BTreeMap<&'static str, u64>,
    truncated: u64,
    lengths: &'a Lengths,
    fit: Fit,
}

/// Every source's samples after the caps, measured.
struct Measures {
    sft: Measure<SftRow>,
    grpo: Measure<GrpoRow>,
    chains_tools: Measure<ChainRow>,
    chains_text: Measure<ChainRow>,
    env_tools: Measure<GrpoRow>,
    env_text: Measure<GrpoRow>,
}

impl Measures {
    /// Measures the sources the configured formats are made from (the others stay empty).
    fn new(tables: &Tables, counter: &TokenCounter, cfg: &ExportConfig) -> Measures {
        let used = |s: Source| cfg.formats.iter().any(|f| f.source() == s);
        let chains = |mode: Mode| {
            let source = Source::Chains(mode);
            let rows: &[ChainRow] = if used(source) { &tables.chains } else { &[] };
            Measure::new(cap_chains(rows, mode, counter, cfg), counter, source, cfg)
        };
        let envs = |mode: Mode| {
            let source = Source::Env(mode);
            let rows: &[GrpoRow] = if used(source) { &tables.env } else { &[] };
            Measure::new(cap_env(rows, mode, counter, cfg), counter, source, cfg)
        };
        Measures {
            sft: Measure::new(
                cap_sft(&tables.sft, counter, cfg),
                counter,
                Source::Sft,
                cfg,
            ),
            grpo: Measure::new(
                cap_grpo(&tables.grpo, counter, cfg),
                counter,
                Source::Grpo,
                cfg,
            ),
            chains_tools: chains(Mode::Tools),
            chains_text: chains(Mode::Text),
            env_tools: envs(Mode::Tools),
            env_text: envs(Mode::Text),
        }
    }

    fn summary(&self, source: Source) -> Summary<'_> {
        match source {
            Source::Sft => self.sft.summary(),
            Source::Grpo => self.grpo.summary(),
            Source::Chains(Mode::Tools) => self.chains_tools.summary(),
            Source::Chains(Mode::Text) => self.chains_text.summary(),
            Source::Env(Mode::Tools) => self.env_tools.summary(),
            Source::Env(Mode::Text) => self.env_text.summary(),
        }
    }

    /// The prompt rows of `source` (GRPO or an environment's starts).
    fn prompts(&self, source: Source) -> &Measure<GrpoRow> {
        match source {
            Source::Env(Mode::Tools) => &self.env_tools,
            Source::Env(Mode::Text) => &self.env_text,
            _ => &self.grpo,
        }
    }

    /// The chains of `source`.
    fn chains(&self, source: Source) -> &Measure<ChainRow> {
        match source {
            Source::Chains(Mode::Text) => &self.chains_text,
            _ => &self.chains_tools,
        }
    }
}

/// The selected tables export reads.
struct Tables {
    sft: Vec<SftRow>,
    grpo: Vec<GrpoRow>,
    env: Vec<GrpoRow>,
    chains: Vec<ChainRow>,
}

/// What every format's dataset is made from.
struct Inputs<'a> {
    cfg: &'a ExportConfig,
    ctx: &'a StageContext,
    measures: Measures,
    counter: String,
    approx: bool,
    repos: &'a [RepoRow],
    manifest: &'a Manifest,
    export_hash: &'a str,
    fingerprint: String,
    /// `<workdir>/datasets`.
    datasets: PathBuf,
}

/// The content hash of the configured tokenizer file ("" when none), so a changed tokenizer
/// re-runs the export.
fn tokenizer_hash(cfg: &ExportConfig) -> Result<String, Error> {
    if cfg.tokenizer.as_os_str().is_empty() {
        return Ok(String::new());
    }
    let bytes = std::fs::read(&cfg.tokenizer).map_err(|e| Error::Tokenizer {
        path: cfg.tokenizer.clone(),
        message: e.to_string(),
    })?;
    Ok(content_id(bytes))
}

/// Runs the export stage in `ctx.workdir`.
pub fn run(cfg: &ExportConfig, ctx: &StageContext) -> Result<StageReport, Error> {
    cfg.validate()?;
    let sft_path = SftRow::path_in(&ctx.workdir);
    let grpo_path = GrpoRow::path_in(&ctx.workdir);
    let env_path = env_path_in(&ctx.workdir);
    let chains_path = ChainRow::path_in(&ctx.workdir);
    let manifest_path = ctx.workdir.join("selection.json");
    let repos_path = RepoRow::path_in(&ctx.workdir);
    let datasets = datasets_dir(&ctx.workdir);
    let plan = StagePlan::new(ctx, STAGE, CODE_VERSION)
        .require(&sft_path, "select")
        .require(&grpo_path, "select")
        .require(&env_path, "select")
        .require(&chains_path, "select")
        .require(&manifest_path, "select");
    plan.check_inputs()?;
    let manifest_bytes =
        std::fs::read(&manifest_path).map_err(|e| ksmith_core::Error::io(&manifest_path, e))?;
    let manifest: Manifest =
        serde_json::from_slice(&manifest_bytes).map_err(|e| Error::Manifest {
            path: manifest_path.clone(),
            message: e.to_string(),
        })?;
    let export_hash = section_hash(cfg);
    let mut plan = plan
        .config(cfg)
        .optional_input(&sft_path)
        .optional_input(&grpo_path)
        .optional_input(&env_path)
        .optional_input(&chains_path)
        .optional_input(&repos_path)
        .part("selection.json", &content_id(&manifest_bytes))
        .part("tokenizer", &tokenizer_hash(cfg)?);
    // Each dataset is up to date when its first shard carries the fingerprint (a folder without
    // shards carries none); a format the last export left out for lack of rows is up to date
    // when the record of that export carries the fingerprint.
    let fingerprint = plan.fingerprint();
    let last = ExportRecord::load(&datasets).filter(|r| r.fingerprint == fingerprint);
    for format in &cfg.formats {
        let folder = format.folder();
        if last
            .as_ref()
            .is_some_and(|r| r.omitted.contains_key(&folder))
        {
            continue;
        }
        let dir = dataset_dir(&ctx.workdir, *format);
        plan = plan.output(&first_shard(&dir).unwrap_or(dir));
    }
    plan = plan.output_file(&ExportRecord::path_in(&datasets));
    plan.run(|run| {
        let tables = Tables {
            sft: read_table(&sft_path)?,
            grpo: read_table(&grpo_path)?,
            env: read_table(&env_path)?,
            chains: read_table(&chains_path)?,
        };
        let repos: Vec<RepoRow> = if repos_path.exists() {
            read_table(&repos_path)?
        } else {
            ctx.warn(format!(
                "{}: not found; the dataset cards will list repositories without commits",
                repos_path.display()
            ));
            Vec::new()
        };
        run.report.rows_read =
            (tables.sft.len() + tables.grpo.len() + tables.env.len() + tables.chains.len()) as u64;
        std::fs::create_dir_all(&datasets).map_err(|e| ksmith_core::Error::io(&datasets, e))?;
        let counter = TokenCounter::load(&cfg.tokenizer)?;
        let pool = run.pool()?;
        let started = Instant::now();
        let measures = pool.install(|| Measures::new(&tables, &counter, cfg));
        run.report
            .count("token_count_ms", started.elapsed().as_millis() as u64);
        count_measures(&measures, cfg, &mut run.report);
        let inputs = Inputs {
            cfg,
            ctx,
            measures,
            counter: counter.name(),
            approx: counter.is_approx(),
            repos: &repos,
            manifest: &manifest,
            export_hash: &export_hash,
            fingerprint: run.fingerprint().to_string(),
            datasets: datasets.clone(),
        };
        let (to_write, omitted) = plan_formats(&inputs);
        let mut record = ExportRecord {
            fingerprint: run.fingerprint().to_string(),
            token_counter: inputs.counter.clone(),
            ..Default::default()
        };
        let mut required = Vec::new();
        for (format, reason) in &omitted {
            let folder = format.folder();
            ctx.warn(format!(
                "export: {folder} left out: {reason}{}",
                if cfg.required_formats.contains(format) {
                    ""
                } else {
                    " (not in [export] required_formats, so the stage goes on)"
                }
            ));
            run.report.count(&format!("omitted/{folder}"), 1);
            remove_dataset(&inputs, *format)?;
            if cfg.required_formats.contains(format) {
                required.push(Error::RequiredFormatEmpty {
                    dataset: folder.clone(),
                    reason: reason.clone(),
                });
            }
            record.omitted.insert(folder, reason.clone());
        }
        if !required.is_empty() {
            // The written datasets must not look up to date: a rerun fails the same way.
            let incomplete = format!("{}:incomplete", run.fingerprint());
            run.set_fingerprint(incomplete.clone());
            record.fingerprint = incomplete;
        }
        let inputs = Inputs {
            fingerprint: run.fingerprint().to_string(),
            ..inputs
        };
        let tracker = ctx.tracker(STAGE, Some(to_write.len() as u64));
        // Formats are independent: each is written and published by one thread.
        let results: Vec<(Format, Result<Written, Error>)> = pool.install(|| {
            to_write
                .par_iter()
                .map(|&format| {
                    let result = export_format(&inputs, format);
                    tracker.inc(1);
                    (format, result)
                })
                .collect()
        });
        tracker.finish();
        for (format, result) in results {
            let written = result?;
            let folder = format.folder();
            let m = inputs.measures.summary(format.source());
            let mut entry = WrittenDataset {
                splits: BTreeMap::new(),
                files: BTreeMap::new(),
                lengths: m.lengths.clone(),
                fit: m.fit,
            };
            for split in &written.splits {
                run.report
                    .count(&format!("{folder}/{}", split.name), split.rows as u64);
                run.report.rows_written += split.rows as u64;
                entry.splits.insert(split.name.clone(), split.rows as u64);
                entry.files.insert(split.name.clone(), split.files.clone());
            }
            record.written.insert(folder, entry);
        }
        let json = serde_json::to_vec_pretty(&record).unwrap_or_default();
        write_bytes_atomically(&ExportRecord::path_in(&datasets), &json)?;
        for e in required {
            run.fail_after_report(e);
        }
        Ok(())
    })
}

/// The report's counts of the caps and the lengths of every source a configured format is
/// made from: `<source>/<reason>` drops, `<source>_truncated`, and
/// `<source>_<prompt|response|total>_tokens_<median|p99|max>` (sources: `sft`, `grpo`,
/// `chains_tools`, `chains_text`, `env_tools`, `env_text`).
fn count_measures(measures: &Measures, cfg: &ExportConfig, report: &mut StageReport) {
    for source in Source::ALL {
        if !cfg.formats.iter().any(|f| f.source() == source) {
            continue;
        }
        let set = source.key();
        let m = measures.summary(source);
        for (reason, n) in m.dropped {
            *report.dropped.entry(format!("{set}/{reason}")).or_default() += n;
        }
        report.count(&format!("{set}_truncated"), m.truncated);
        for (part, st) in [
            ("prompt", m.lengths.prompt),
            ("response", m.lengths.response),
            ("total", m.lengths.total),
        ] {
            report.count(&format!("{set}_{part}_tokens_median"), st.median);
            report.count(&format!("{set}_{part}_tokens_p99"), st.p99);
            report.count(&format!("{set}_{part}_tokens_max"), st.max);
        }
    }
}

/// The formats to write, and those left out for lack of rows with the reason.
fn plan_formats(inputs: &Inputs<'_>) -> (Vec<Format>, Vec<(Format, String)>) {
    let mut write = Vec::new();
    let mut omitted = Vec::new();
    for &format in &inputs.cfg.formats {
        let source = format.source();
        if inputs.measures.summary(source).rows > 0 {
            write.push(format);
        } else {
            omitted.push((format, why_empty(inputs, source)));
        }
    }
    (write, omitted)
}

/// Which rule gave no rows for `source`, and why.
fn why_empty(inputs: &Inputs<'_>, source: Source) -> String {
    let set = source.set();
    let caps = inputs.measures.summary(source).dropped;
    let capped: u64 = caps.values().sum();
    if capped > 0 {
        let reasons: Vec<String> = caps.iter().map(|(k, v)| format!("{k} {v}")).collect();
        return format!(
            "no rows: the [export] length caps left out all {capped} selected samples ({})",
            reasons.join(", ")
        );
    }
    let m = inputs.manifest;
    let configured = |key: &str| {
        m.config
            .get(key)
            .and_then(|v| v.as_str())
            .unwrap_or("?")
            .to_string()
    };
    let rule = match source {
        Source::Sft => "SFT rules (correctness, performance)".to_string(),
        Source::Grpo => format!("GRPO rule `{}`", configured("grpo_rule")),
        Source::Env(_) => format!("environment rule `{}`", configured("env_rule")),
        Source::Chains(_) => "multi-turn chain rules".to_string(),
    };
    let Some(outcome) = m.outcome.get(set) else {
        return format!("no rows: select's {rule} selected nothing");
    };
    let mut dropped: Vec<(&String, &u64)> = outcome.dropped.iter().collect();
    dropped.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    let reasons: Vec<String> = dropped.iter().map(|(k, v)| format!("{k} {v}")).collect();
    let mut text = format!(
        "no rows: select's {rule} kept {} (steps dropped: {})",
        outcome.kept,
        if reasons.is_empty() {
            "none; the rollout recorded no steps".to_string()
        } else {
            reasons.join(", ")
        }
    );
    let (timing, consequence): (&[&str], &str) = match source {
        Source::Chains(_) => (
            &["chain_not_better"],
            "so a chain shows progress only by repairing a failing first turn",
        ),
        _ => (
            &["not_timed", "parent_not_timed"],
            "so the performance-based rules select nothing",
        ),
    };
    if m.steps_correct_untimed > 0 && outcome.dropped.keys().any(|k| timing.contains(&k.as_str())) {
        text.push_str(&format!(
            "; {} correct steps have no timings (CPU evaluator), {consequence}",
            m.steps_correct_untimed
        ));
    }
    text
}

/// Removes the folder of a format left out, so that no stale dataset of an earlier export stays.
fn remove_dataset(inputs: &Inputs<'_>, format: Format) -> Result<(), Error> {
    let dir = dataset_dir(&inputs.ctx.workdir, format);
    if !dir.exists() {
        return Ok(());
    }
    inputs.ctx.warn(format!(
        "{}: removed the dataset of an earlier export (it has no rows now)",
        dir.display()
    ));
    std::fs::remove_dir_all(&dir).map_err(|e| Error::Write {
        dataset: format.folder(),
        path: dir.clone(),
        message: format!("cannot remove the dataset of an earlier export: {e}"),
    })
}

/// Writes one format's dataset under a staging name, with its card, and publishes it.
fn export_format(inputs: &Inputs<'_>, format: Format) -> Result<Written, Error> {
    let datasets = &inputs.datasets;
    let folder = format.folder();
    let staged = layout::staging_dir(datasets, &folder);
    let leftovers = layout::remove_leftovers(datasets, &folder)
        .map_err(|e| ksmith_core::Error::io(datasets, e))?;
    if leftovers > 0 {
        inputs.ctx.warn(format!(
            "{}: removed {leftovers} folder(s) left by an interrupted export of {folder}",
            datasets.display()
        ));
    }
    let written = match write_format(inputs, format, &staged) {
        Ok(w) => w,
        Err(e) => {
            let _ = std::fs::remove_dir_all(&staged);
            return Err(e);
        }
    };
    let readme = staged.join("README.md");
    let card = card::render(&card_input(inputs, format, &written));
    std::fs::write(&readme, card).map_err(|e| Error::Write {
        dataset: folder.clone(),
        path: readme.clone(),
        message: e.to_string(),
    })?;
    let target = dataset_dir(&inputs.ctx.workdir, format);
    layout::publish(&staged, &target).map_err(|e| Error::Write {
        dataset: folder.clone(),
        path: target.clone(),
        message: format!("cannot move the finished dataset into place: {e}"),
    })?;
    Ok(written)
}

/// Writes the rows of one format's splits into `staged`.
fn write_format(inputs: &Inputs<'_>, format: Format, staged: &Path) -> Result<Written, Error> {
    let cfg = inputs.cfg;
    let opts = shards::ShardOptions {
        dataset: format.folder(),
        shard_rows: cfg.shard_rows,
        row_group_rows: cfg.row_group_rows,
        zstd_level: cfg.zstd_level,
        metadata: vec![
            (
                META_DATASET_SCHEMA_VERSION.to_string(),
                DATASET_SCHEMA_VERSION.to_string(),
            ),
            (META_FORMAT.to_string(), format.key().to_string()),
            (META_FINGERPRINT.to_string(), inputs.fingerprint.clone()),
            (
                "ksmith.writer".to_string(),
                format!("ksmith {}", env!("CARGO_PKG_VERSION")),
            ),
        ],
    };
    let counter = inputs.counter.as_str();
    let measured = |length: &SampleLength| Measured {
        length: *length,
        counter,
    };
    let source = format.source();
    let m = &inputs.measures;
    let (sft, sft_len) = (&m.sft.capped.rows, &m.sft.capped.lengths);
    let prompts = m.prompts(source);
    let (grpo, grpo_len) = (&prompts.capped.rows, &prompts.capped.lengths);
    let chains = m.chains(source);
    let (chain, chain_len) = (&chains.capped.rows, &chains.capped.lengths);
    let sft_info = |r: usize, i: usize| formats::sft_info(&sft[r], i, measured(&sft_len[r]));
    let grpo_info = |r: usize, i: usize| formats::grpo_info(&grpo[r], i, measured(&grpo_len[r]));
    let chain_info =
        |r: usize, i: usize| chain_formats::chain_info(&chain[r], i, measured(&chain_len[r]));
    let sft_splits = by_split(sft, |r| r.split);
    let grpo_splits = by_split(grpo, |r| r.split);
    let chain_splits = by_split(chain, |r| r.split);
    match format {
        Format::VerlRl => write_splits(
            staged,
            map_splits(&grpo_splits, |r, i| {
                formats::verl_rl(&grpo[r], grpo_info(r, i), cfg)
            }),
            &opts,
        ),
        Format::TrlGrpo | Format::TrlEnv => write_splits(
            staged,
            map_splits(&grpo_splits, |r, i| {
                formats::trl_grpo(&grpo[r], grpo_info(r, i), cfg)
            }),
            &opts,
        ),
        Format::OpenrlhfRl | Format::OpenrlhfAgent => write_splits(
            staged,
            map_splits(&grpo_splits, |r, i| {
                formats::openrlhf_rl(&grpo[r], grpo_info(r, i), cfg)
            }),
            &opts,
        ),
        Format::VerlAgent => write_splits(
            staged,
            map_splits(&grpo_splits, |r, i| {
                env_formats::verl_agent(&grpo[r], grpo_info(r, i), cfg)
            }),
            &opts,
        ),
        Format::VerlSft => write_splits(
            staged,
            map_splits(&sft_splits, |r, i| {
                formats::verl_sft(&sft[r], sft_info(r, i))
            }),
            &opts,
        ),
        Format::TrlSft => write_splits(
            staged,
            map_splits(&sft_splits, |r, i| {
                formats::trl_sft(&sft[r], sft_info(r, i))
            }),
            &opts,
        ),
        Format::TrlSftStandard => write_splits(
            staged,
            map_splits(&sft_splits, |r, i| {
                formats::trl_sft_standard(&sft[r], sft_info(r, i))
            }),
            &opts,
        ),
        Format::OpenrlhfSft => write_splits(
            staged,
            map_splits(&sft_splits, |r, i| {
                formats::openrlhf_sft(&sft[r], sft_info(r, i))
            }),
            &opts,
        ),
        Format::VerlSftMultiturn | Format::TrlSftMultiturn => write_splits(
            staged,
            map_splits(&chain_splits, |r, i| {
                chain_formats::tool_sft(&chain[r], chain_info(r, i))
            }),
            &opts,
        ),
        Format::OpenrlhfSftMultiturn => write_splits(
            staged,
            map_splits(&chain_splits, |r, i| {
                chain_formats::openrlhf_sft_multiturn(&chain[r], chain_info(r, i))
            }),
            &opts,
        ),
    }
}

/// What the dataset card of one format says: counts by level, family and kind, provenance,
/// lengths and settings, the selection rules and the hashes that identify the run.
fn card_input(inputs: &Inputs<'_>, format: Format, written: &Written) -> card::CardInput {
    // (level, family, kind, backend, (repo, license)) of every sample the format is made from.
    let fact = |level: u8,
                family: &str,
                kind: &str,
                backend: Backend,
                repo: &str,
                license: &Option<String>| {
        let origin = (repo.to_string(), license.clone());
        (
            i64::from(level),
            family.to_string(),
            kind.to_string(),
            backend.as_str().to_string(),
            origin,
        )
    };
    let m = &inputs.measures;
    let source = format.source();
    let facts: Vec<_> = match source {
        Source::Grpo | Source::Env(_) => m
            .prompts(source)
            .capped
            .rows
            .iter()
            .map(|r| {
                fact(
                    r.level,
                    &r.family,
                    r.selection.as_str(),
                    r.backend,
                    &r.repo,
                    &r.license,
                )
            })
            .collect(),
        Source::Sft => m
            .sft
            .capped
            .rows
            .iter()
            .map(|r| {
                fact(
                    r.level,
                    &r.family,
                    r.kind.as_str(),
                    r.backend,
                    &r.repo,
                    &r.license,
                )
            })
            .collect(),
        Source::Chains(_) => m
            .chains(source)
            .capped
            .rows
            .iter()
            .map(|r| {
                let kind = format!("{} turns", r.turns.len());
                fact(r.level, &r.family, &kind, r.backend, &r.repo, &r.license)
            })
            .collect(),
    };
    let summary = m.summary(source);
    let mut level = Vec::with_capacity(facts.len());
    let mut family = Vec::with_capacity(facts.len());
    let mut kind = Vec::with_capacity(facts.len());
    let mut backend = Vec::with_capacity(facts.len());
    let mut prov_rows = Vec::with_capacity(facts.len());
    for (l, f, k, b, p) in facts {
        level.push(l);
        family.push(f);
        kind.push(k);
        backend.push(b);
        prov_rows.push(p);
    }
    let provenance = provenance(&prov_rows, inputs.repos);
    let cfg = inputs.cfg;
    card::CardInput {
        format,
        pretty_name: cfg.pretty_name.clone(),
        license: card::card_license(&cfg.license, &provenance),
        splits: written.splits.clone(),
        features: written.features.clone(),
        by_level: count(level),
        by_family: count(family),
        by_kind: count(kind),
        by_backend: count(backend),
        provenance,
        rules: inputs.manifest.rules.clone(),
        select_config_hash: inputs.manifest.config_hash.clone(),
        export_config_hash: inputs.export_hash.to_string(),
        fingerprint: inputs.fingerprint.clone(),
        data_source: cfg.data_source.clone(),
        download_size: written.bytes,
        lengths: summary.lengths.clone(),
        fit: summary.fit,
        approx: inputs.approx,
        agent_max_turns: cfg.agent_max_turns,
        caps: card::CapsApplied {
            max_prompt_tokens: cfg.max_prompt_tokens,
            max_response_tokens: cfg.max_response_tokens,
            max_conversation_tokens: cfg.max_conversation_tokens,
            dropped: summary
                .dropped
                .iter()
                .map(|(k, v)| (k.to_string(), *v))
                .collect(),
            truncated: summary.truncated,
        },
    }
}
