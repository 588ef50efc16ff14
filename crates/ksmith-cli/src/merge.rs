//! `ksmith merge`: unions the tables of shard work directories into one.
//!
//! Shards (`--shard INDEX/COUNT`) crawl, extract and probe disjoint sets of repositories in
//! their own work directories, on any machine. Merging concatenates their `repos`, `modules` and
//! `probes` tables into the target work directory, where the global stages (dedup onwards) run.
//! Module ids are re-assigned over the merged rows by extract's own rule, in extract's own
//! order, so the merged tables equal those of an unsharded run (probe rows follow their module's
//! new id). Shards that were not probed (the probe then runs once on the merged modules, for
//! example on a Ray cluster) merge their `repos` and `modules` only; a mix of probed and
//! unprobed shards is an error.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail};
use ksmith_core::fingerprint::Fingerprint;
use ksmith_core::report::StageReport;
use ksmith_core::table::{Table, read_fingerprint, read_table, write_table};
use ksmith_core::tables::{ModuleRow, ProbeRow, RepoRow};

/// The name the merge's report is saved under.
pub const STAGE: &str = "merge";

/// Merges the tables of `shards` into `workdir`.
pub fn merge(shards: &[PathBuf], workdir: &Path) -> anyhow::Result<StageReport> {
    if shards.is_empty() {
        bail!("merge needs at least one --from work directory");
    }
    let mut report = StageReport::new(STAGE);
    let mut repos: Vec<RepoRow> = Vec::new();
    // (shard index, row): the shard tells old ids apart when two shards share one.
    let mut modules: Vec<(usize, ModuleRow)> = Vec::new();
    let mut probes: Vec<(usize, ProbeRow)> = Vec::new();
    let mut fingerprint = Fingerprint::new(STAGE, 1);
    let probed: Vec<&PathBuf> = shards
        .iter()
        .filter(|dir| ProbeRow::path_in(dir).exists())
        .collect();
    let with_probes = probed.len() == shards.len();
    if !probed.is_empty() && !with_probes {
        bail!(
            "shard {} has probes.parquet but shard {} has none: probe every shard, or none and \
             probe the merged work directory",
            probed[0].display(),
            shards
                .iter()
                .find(|dir| !ProbeRow::path_in(dir).exists())
                .map(|dir| dir.display().to_string())
                .unwrap_or_default()
        );
    }
    for (i, dir) in shards.iter().enumerate() {
        let mut tables = vec![RepoRow::path_in(dir), ModuleRow::path_in(dir)];
        if with_probes {
            tables.push(ProbeRow::path_in(dir));
        }
        for path in tables {
            let fp = read_fingerprint(&path).with_context(|| {
                format!(
                    "shard {}: {} is missing or unreadable; run crawl and extract (and probe) \
                     there first",
                    dir.display(),
                    path.display()
                )
            })?;
            fingerprint = fingerprint.with(&path.display().to_string(), &fp);
        }
        repos.extend(read_table::<RepoRow>(&RepoRow::path_in(dir))?);
        modules.extend(
            read_table::<ModuleRow>(&ModuleRow::path_in(dir))?
                .into_iter()
                .map(|m| (i, m)),
        );
        if with_probes {
            probes.extend(
                read_table::<ProbeRow>(&ProbeRow::path_in(dir))?
                    .into_iter()
                    .map(|p| (i, p)),
            );
        }
    }
    report.rows_read = (repos.len() + modules.len() + probes.len()) as u64;

    repos.sort_by(|a, b| a.repo.cmp(&b.repo));
    for pair in repos.windows(2) {
        if pair[0].repo == pair[1].repo {
            bail!(
                "repository `{}` is in two shards; shards must come from one --shard count",
                pair[0].repo
            );
        }
    }

    // Extract's order and id rule over the union.
    modules.sort_by(|(_, a), (_, b)| ksmith_extract::module_order(a, b));
    let old: Vec<(usize, String)> = modules.iter().map(|(s, m)| (*s, m.id.clone())).collect();
    let mut rows: Vec<ModuleRow> = modules.into_iter().map(|(_, m)| m).collect();
    ksmith_extract::assign_ids(&mut rows);
    let new_id: HashMap<(usize, String), (usize, String)> = old
        .into_iter()
        .zip(rows.iter().enumerate())
        .map(|(key, (pos, m))| (key, (pos, m.id.clone())))
        .collect();
    let mut merged_probes: Vec<(usize, ProbeRow)> = Vec::with_capacity(probes.len());
    for (shard, mut p) in probes {
        let (pos, id) = new_id
            .get(&(shard, p.module_id.clone()))
            .cloned()
            .with_context(|| {
                format!(
                    "shard {}: probe row for module {} has no module row",
                    shards[shard].display(),
                    p.module_id
                )
            })?;
        p.module_id = id;
        merged_probes.push((pos, p));
    }
    merged_probes.sort_by_key(|(pos, _)| *pos);
    let probes: Vec<ProbeRow> = merged_probes.into_iter().map(|(_, p)| p).collect();

    let fp = fingerprint.finish();
    std::fs::create_dir_all(workdir)
        .with_context(|| format!("cannot create {}", workdir.display()))?;
    write_table(&RepoRow::path_in(workdir), &repos, &fp)?;
    write_table(&ModuleRow::path_in(workdir), &rows, &fp)?;
    if with_probes {
        write_table(&ProbeRow::path_in(workdir), &probes, &fp)?;
    }
    report.rows_written = (repos.len() + rows.len() + probes.len()) as u64;
    report.count("shards", shards.len() as u64);
    report.fingerprint = fp;
    Ok(report)
}
