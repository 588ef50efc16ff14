//! Which unique modules become tasks.

use std::collections::BTreeMap;

use ksmith_core::tables::{ClusterRow, TaskRow};
use ksmith_embed::hashing::{hash_str, mix};

use crate::Unit;
use crate::config::ClusterConfig;
use crate::review::Review;

/// (not a center, seeded hash of the id, index): the order of members within a balanced cell.
type CellMember = (bool, u64, usize);

/// Selects tasks from clustered units (`rows` aligned with `units`), sorted by id. A module the
/// `review` rejects is never one; trivial modules (`ClusterRow::trivial`) are left out unless
/// `trivial_tasks`.
///
/// - `balanced`: up to `balanced_per_cell` modules per (family, level), centers first, then by
///   a seeded hash of the id (`selected_as = "balanced"`; `clusters.parquet` says which are
///   centers);
/// - `all`: every module (`"all"`);
/// - `centers`: the medoid of every cluster (`"center"`), plus every noise module when
///   `noise_tasks` (`"noise"`).
pub fn select(
    units: &[Unit],
    rows: &[ClusterRow],
    cfg: &ClusterConfig,
    review: &Review,
) -> Vec<TaskRow> {
    let task = |i: usize, how: &str| TaskRow {
        task_id: units[i].id.clone(),
        repo: units[i].repo.clone(),
        class_name: units[i].class_name.clone(),
        program: units[i].program.clone(),
        family: rows[i].family.clone(),
        level: rows[i].level,
        cluster: rows[i].cluster,
        license: units[i].license.clone(),
        selected_as: how.to_string(),
        alt_sizes: units[i].alt_sizes.clone(),
    };
    let candidate = |i: usize| {
        (cfg.trivial_tasks || rows[i].trivial.is_none()) && !review.rejects(&units[i].id)
    };
    let mut out: Vec<TaskRow> = match cfg.tasks.as_str() {
        "all" => (0..units.len())
            .filter(|&i| candidate(i))
            .map(|i| task(i, "all"))
            .collect(),
        "balanced" => {
            let mut cells: BTreeMap<(&str, u8), Vec<CellMember>> = BTreeMap::new();
            for (i, r) in rows.iter().enumerate().filter(|(i, _)| candidate(*i)) {
                cells
                    .entry((r.family.as_str(), r.level))
                    .or_default()
                    .push((!r.is_center, mix(cfg.seed, hash_str(&units[i].id)), i));
            }
            cells
                .into_values()
                .flat_map(|mut members| {
                    members.sort_unstable();
                    members
                        .into_iter()
                        .take(cfg.balanced_per_cell)
                        .map(|(_, _, i)| i)
                        .collect::<Vec<_>>()
                })
                .map(|i| task(i, "balanced"))
                .collect()
        }
        _ => (0..units.len())
            .filter(|&i| candidate(i))
            .filter_map(|i| {
                if rows[i].is_center {
                    Some(task(i, "center"))
                } else if cfg.noise_tasks && rows[i].cluster < 0 {
                    Some(task(i, "noise"))
                } else {
                    None
                }
            })
            .collect(),
    };
    out.sort_by(|a, b| a.task_id.cmp(&b.task_id));
    out
}
