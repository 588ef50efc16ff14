//! Export: writes the selected samples as Parquet datasets in the trainers' own schemas.
//!
//! Input: `sft.parquet` (`SftRow`), `grpo.parquet` (`GrpoRow`), `selection.json` (the rules
//! select applied) and, when present, `repos.parquet` (`RepoRow`, for pinned commits in the
//! cards). Output: one folder per configured [`Format`] under `<workdir>/datasets/`, in the
//! Hugging Face layout: `data/train-0000i-of-0000N.parquet`, `data/validation-...` (zstd, one
//! fixed schema across shards and splits, schema version in the metadata) and a `README.md`
//! dataset card whose YAML `configs` header lets `datasets.load_dataset(<folder>)` find the
//! splits. The reward function trainers call lives in `python/ksmith/reward.py` and reads the
//! [`ground_truth::GroundTruth`] JSON these datasets carry.
//!
//! Invariants: a dataset folder is replaced atomically (written under a temporary name, then
//! renamed); a re-run with unchanged inputs and config does nothing; a split without rows is
//! left out of the files and the card (the `datasets` library cannot load an empty split),
//! except that a dataset with no rows at all keeps one empty train shard for its schema.
//! Entry point: [`run`].
#![deny(missing_docs)]

pub mod card;
pub mod config;
pub mod error;
pub mod formats;
pub mod ground_truth;
pub mod layout;
pub mod shards;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use ksmith_core::config::section_hash;
use ksmith_core::context::StageContext;
use ksmith_core::ids::content_id;
use ksmith_core::report::StageReport;
use ksmith_core::stage::StagePlan;
use ksmith_core::table::{META_FINGERPRINT, Table, read_table};
use ksmith_core::tables::{GrpoRow, RepoRow, SftRow, Split};
use rayon::prelude::*;
use serde::Serialize;
use serde::de::DeserializeOwned;

pub use config::ExportConfig;
pub use error::Error;
pub use formats::{DATASET_SCHEMA_VERSION, Format};

/// The stage's name.
pub const STAGE: &str = "export";
/// Bumped when the output for the same input changes.
pub const CODE_VERSION: u32 = 1;

/// Metadata key of the exported schema version.
pub const META_DATASET_SCHEMA_VERSION: &str = "ksmith.dataset_schema_version";
/// Metadata key of the format.
pub const META_FORMAT: &str = "ksmith.format";

/// The selection manifest written by select (`selection.json`), as far as export reads it.
#[derive(Debug, Clone, serde::Deserialize)]
struct Manifest {
    config_hash: String,
    rules: Vec<String>,
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

fn by_split<T>(rows: &[T], split: impl Fn(&T) -> Split) -> [(Split, Vec<&T>); 2] {
    let mut train = Vec::new();
    let mut validation = Vec::new();
    for r in rows {
        match split(r) {
            Split::Train => train.push(r),
            Split::Validation => validation.push(r),
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

/// Converts each split's rows with `f(row, index within the split)`.
fn map_splits<S, T>(
    splits: &[(Split, Vec<&S>); 2],
    f: impl Fn(&S, usize) -> T,
) -> Vec<(Split, Vec<T>)> {
    splits
        .iter()
        .map(|(split, rows)| {
            (
                *split,
                rows.iter().enumerate().map(|(i, r)| f(r, i)).collect(),
            )
        })
        .collect()
}

/// What one dataset's splits became.
struct Written {
    /// `(split, rows, shards)`.
    splits: Vec<(String, usize, usize)>,
    /// Total bytes of the files.
    bytes: u64,
}

/// Writes the splits of one dataset into `staged`.
fn write_splits<T: Serialize + DeserializeOwned>(
    staged: &Path,
    splits: Vec<(Split, Vec<T>)>,
    opts: &shards::ShardOptions,
) -> Result<Written, Error> {
    let mut out = Written {
        splits: Vec::new(),
        bytes: 0,
    };
    // The `datasets` library refuses a split without rows ("corresponds to no data"), so an
    // empty split is left out; when every split is empty, an empty train shard keeps the
    // schema readable.
    let all_empty = splits.iter().all(|(_, rows)| rows.is_empty());
    for (split, rows) in splits {
        if rows.is_empty() && !(all_empty && split == Split::Train) {
            continue;
        }
        let files = shards::write_split(&staged.join("data"), split.as_str(), &rows, opts)?;
        for (path, _) in &files {
            out.bytes += std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
        }
        out.splits
            .push((split.as_str().to_string(), rows.len(), files.len()));
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

/// What every format's dataset is made from.
struct Inputs<'a> {
    cfg: &'a ExportConfig,
    ctx: &'a StageContext,
    sft: &'a [SftRow],
    grpo: &'a [GrpoRow],
    repos: &'a [RepoRow],
    manifest: &'a Manifest,
    export_hash: &'a str,
    fingerprint: &'a str,
    /// `<workdir>/datasets`.
    datasets: PathBuf,
}

/// Runs the export stage in `ctx.workdir`.
pub fn run(cfg: &ExportConfig, ctx: &StageContext) -> Result<StageReport, Error> {
    cfg.validate()?;
    let sft_path = SftRow::path_in(&ctx.workdir);
    let grpo_path = GrpoRow::path_in(&ctx.workdir);
    let manifest_path = ctx.workdir.join("selection.json");
    let repos_path = RepoRow::path_in(&ctx.workdir);
    let plan = StagePlan::new(ctx, STAGE, CODE_VERSION)
        .require(&sft_path, "select")
        .require(&grpo_path, "select")
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
        .optional_input(&repos_path)
        .part("selection.json", &content_id(&manifest_bytes));
    // Each dataset is up to date when its first shard carries the fingerprint; a dataset
    // without shards is checked through its folder, which carries none.
    for format in &cfg.formats {
        let dir = dataset_dir(&ctx.workdir, *format);
        plan = plan.output(&first_shard(&dir).unwrap_or(dir));
    }
    plan.run(|run| {
        let sft: Vec<SftRow> = read_table(&sft_path)?;
        let grpo: Vec<GrpoRow> = read_table(&grpo_path)?;
        let repos: Vec<RepoRow> = if repos_path.exists() {
            read_table(&repos_path)?
        } else {
            ctx.warn(format!(
                "{}: not found; the dataset cards will list repositories without commits",
                repos_path.display()
            ));
            Vec::new()
        };
        run.report.rows_read = (sft.len() + grpo.len()) as u64;
        let datasets = datasets_dir(&ctx.workdir);
        std::fs::create_dir_all(&datasets).map_err(|e| ksmith_core::Error::io(&datasets, e))?;
        let inputs = Inputs {
            cfg,
            ctx,
            sft: &sft,
            grpo: &grpo,
            repos: &repos,
            manifest: &manifest,
            export_hash: &export_hash,
            fingerprint: run.fingerprint(),
            datasets,
        };
        let tracker = ctx.tracker(STAGE, Some(cfg.formats.len() as u64));
        // Formats are independent: each is written and published by one thread.
        let results: Vec<(Format, Result<Written, Error>)> = run.pool()?.install(|| {
            cfg.formats
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
            for (split, rows, _) in &written.splits {
                run.report
                    .count(&format!("{}/{split}", format.folder()), *rows as u64);
                run.report.rows_written += *rows as u64;
            }
        }
        Ok(())
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
            (META_FINGERPRINT.to_string(), inputs.fingerprint.to_string()),
            (
                "ksmith.writer".to_string(),
                format!("ksmith {}", env!("CARGO_PKG_VERSION")),
            ),
        ],
    };
    let sft = by_split(inputs.sft, |r| r.split);
    let grpo = by_split(inputs.grpo, |r| r.split);
    match format {
        Format::VerlRl => write_splits(
            staged,
            map_splits(&grpo, |r, i| formats::verl_rl(r, i, cfg)),
            &opts,
        ),
        Format::TrlGrpo => write_splits(
            staged,
            map_splits(&grpo, |r, i| formats::trl_grpo(r, i, cfg)),
            &opts,
        ),
        Format::OpenrlhfRl => write_splits(
            staged,
            map_splits(&grpo, |r, i| formats::openrlhf_rl(r, i, cfg)),
            &opts,
        ),
        Format::VerlSft => write_splits(staged, map_splits(&sft, formats::verl_sft), &opts),
        Format::TrlSft => write_splits(staged, map_splits(&sft, formats::trl_sft), &opts),
        Format::TrlSftStandard => {
            write_splits(staged, map_splits(&sft, formats::trl_sft_standard), &opts)
        }
        Format::OpenrlhfSft => write_splits(staged, map_splits(&sft, formats::openrlhf_sft), &opts),
    }
}

/// What the dataset card of one format says: counts by level, family and kind, provenance,
/// the selection rules and the hashes that identify the run.
fn card_input(inputs: &Inputs<'_>, format: Format, written: &Written) -> card::CardInput {
    // (level, family, kind, (repo, license)) of every sample the format is made from.
    let fact = |level: u8, family: &str, kind: &str, repo: &str, license: &Option<String>| {
        let origin = (repo.to_string(), license.clone());
        (
            i64::from(level),
            family.to_string(),
            kind.to_string(),
            origin,
        )
    };
    let facts: Vec<_> = match format.source() {
        formats::Source::Grpo => inputs
            .grpo
            .iter()
            .map(|r| {
                fact(
                    r.level,
                    &r.family,
                    r.selection.as_str(),
                    &r.repo,
                    &r.license,
                )
            })
            .collect(),
        formats::Source::Sft => inputs
            .sft
            .iter()
            .map(|r| fact(r.level, &r.family, r.kind.as_str(), &r.repo, &r.license))
            .collect(),
    };
    let mut level = Vec::with_capacity(facts.len());
    let mut family = Vec::with_capacity(facts.len());
    let mut kind = Vec::with_capacity(facts.len());
    let mut prov_rows = Vec::with_capacity(facts.len());
    for (l, f, k, p) in facts {
        level.push(l);
        family.push(f);
        kind.push(k);
        prov_rows.push(p);
    }
    let provenance = provenance(&prov_rows, inputs.repos);
    let cfg = inputs.cfg;
    card::CardInput {
        format,
        pretty_name: cfg.pretty_name.clone(),
        license: card::card_license(&cfg.license, &provenance),
        splits: written.splits.clone(),
        by_level: count(level),
        by_family: count(family),
        by_kind: count(kind),
        provenance,
        rules: inputs.manifest.rules.clone(),
        select_config_hash: inputs.manifest.config_hash.clone(),
        export_config_hash: inputs.export_hash.to_string(),
        fingerprint: inputs.fingerprint.to_string(),
        data_source: cfg.data_source.clone(),
        download_size: written.bytes,
    }
}
