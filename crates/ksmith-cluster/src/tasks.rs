//! Which unique modules become tasks.

use std::collections::BTreeMap;

use ksmith_core::report::StageReport;
use ksmith_core::tables::{ClusterRow, TaskRow};
use ksmith_embed::hashing::{hash_str, mix};

use crate::Unit;
use crate::config::ClusterConfig;
use crate::review::Review;

/// (not a center, seeded hash of the id, index): the order of members within a balanced cell.
type CellMember = (bool, u64, usize);

/// Selects tasks from clustered units (`rows` aligned with `units`), sorted by id. A module the
/// `review` rejects is never one; trivial modules (`ClusterRow::trivial`) are left out unless
/// `trivial_tasks` (`single_op_tasks` for single-operator ones, [`ClusterConfig::may_be_task`]).
///
/// - `balanced`: up to `balanced_per_cell` modules per (family, level), centers first, then by
///   a seeded hash of the id (`selected_as = "balanced"`; `clusters.parquet` says which are
///   centers);
/// - `all`: every module (`"all"`);
/// - `centers`: the medoid of every cluster (`"center"`), plus every noise module when
///   `noise_tasks` (`"noise"`).
///
/// With `balanced` and `all`, a kernel problem (one computation, [`Unit::computation`], at
/// sizes of one regime of arithmetic intensity, [`ksmith_embed::calls::regimes`]) takes at most
/// `tasks_per_problem` tasks, chosen in the same order (centers first, then the seeded hash);
/// the modules left out are counted in `report` (`problem_repeats`).
pub fn select(
    units: &[Unit],
    rows: &[ClusterRow],
    cfg: &ClusterConfig,
    review: &Review,
    report: &mut StageReport,
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
    let candidate =
        |i: usize| cfg.may_be_task(rows[i].trivial.as_deref()) && !review.rejects(&units[i].id);
    let order =
        |i: usize| -> CellMember { (!rows[i].is_center, mix(cfg.seed, hash_str(&units[i].id)), i) };
    let mut limited = || {
        let candidates: Vec<usize> = (0..units.len()).filter(|&i| candidate(i)).collect();
        let (kept, repeats) = per_problem(candidates, units, cfg.tasks_per_problem, order);
        report.count("problem_repeats", repeats);
        kept
    };
    let mut out: Vec<TaskRow> = match cfg.tasks.as_str() {
        "all" => limited().into_iter().map(|i| task(i, "all")).collect(),
        "balanced" => {
            let mut cells: BTreeMap<(&str, u8), Vec<CellMember>> = BTreeMap::new();
            for i in limited() {
                let r = &rows[i];
                cells
                    .entry((r.family.as_str(), r.level))
                    .or_default()
                    .push(order(i));
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

/// The candidates kept when each kernel problem takes at most `limit` of them (0: no limit),
/// in `order`; and how many were left out. Candidates without a problem are all kept.
fn per_problem(
    mut candidates: Vec<usize>,
    units: &[Unit],
    limit: usize,
    order: impl Fn(usize) -> CellMember,
) -> (Vec<usize>, u64) {
    if limit == 0 {
        return (candidates, 0);
    }
    candidates.sort_by_key(|&i| order(i));
    let keyed: Vec<Option<(u128, Option<f64>)>> = candidates
        .iter()
        .map(|&i| Some((units[i].computation?, units[i].intensity)))
        .collect();
    let problems = ksmith_embed::calls::regimes(&keyed);
    let mut taken: BTreeMap<(u128, u32), usize> = BTreeMap::new();
    let before = candidates.len();
    let mut at = 0;
    candidates.retain(|_| {
        let problem = problems[at];
        at += 1;
        match problem {
            None => true,
            Some(p) => {
                let n = taken.entry(p).or_default();
                *n += 1;
                *n <= limit
            }
        }
    });
    let left_out = (before - candidates.len()) as u64;
    candidates.sort_unstable();
    (candidates, left_out)
}
