//! The train/validation split, decided per cluster.
//!
//! Every task of a cluster lands on the same side, so a task and its near duplicates (which
//! cluster together) never appear on both sides. Noise tasks (cluster -1) are decided one by
//! one by their task id. The side of a group is a pure function of (seed, group key): it does
//! not depend on which other groups exist, so a nightly refresh that adds tasks never moves an
//! existing cluster from validation into training.

use ksmith_core::ids::IdHasher;
use ksmith_core::tables::Split;

/// The key that decides a task's side: its cluster, or the task itself for noise.
pub fn split_group(cluster: i32, task_id: &str) -> String {
    if cluster >= 0 {
        format!("cluster:{cluster}")
    } else {
        format!("task:{task_id}")
    }
}

/// A uniform number in [0, 1) derived from `seed` and `key`.
pub fn unit_hash(seed: &str, key: &str) -> f64 {
    let id = IdHasher::new().part(seed).part(key).finish();
    // The id is 32 hex digits; the first 13 give 52 bits, exact in an f64.
    let bits = u64::from_str_radix(&id[..13], 16).unwrap_or(0);
    bits as f64 / (1u64 << 52) as f64
}

/// The side of a task with `cluster` and `task_id`.
pub fn split_of(seed: &str, fraction: f64, cluster: i32, task_id: &str) -> Split {
    if unit_hash(seed, &split_group(cluster, task_id)) < fraction {
        Split::Validation
    } else {
        Split::Train
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cluster_is_wholly_on_one_side() {
        for cluster in 0..200 {
            let sides: Vec<Split> = (0..5)
                .map(|t| split_of("s", 0.3, cluster, &format!("task-{cluster}-{t}")))
                .collect();
            assert!(sides.iter().all(|s| *s == sides[0]), "cluster {cluster}");
        }
    }

    #[test]
    fn noise_tasks_are_decided_one_by_one_and_the_fraction_holds() {
        let n = 4000;
        let val = (0..n)
            .filter(|i| split_of("s", 0.25, -1, &format!("t{i}")) == Split::Validation)
            .count();
        let share = val as f64 / n as f64;
        assert!((0.22..0.28).contains(&share), "validation share {share}");
    }

    #[test]
    fn deterministic_and_seeded() {
        let a: Vec<Split> = (0..100).map(|c| split_of("a", 0.5, c, "x")).collect();
        let again: Vec<Split> = (0..100).map(|c| split_of("a", 0.5, c, "x")).collect();
        let b: Vec<Split> = (0..100).map(|c| split_of("b", 0.5, c, "x")).collect();
        assert_eq!(a, again);
        assert_ne!(a, b);
    }

    #[test]
    fn zero_fraction_puts_everything_in_train() {
        assert!((0..500).all(|c| split_of("s", 0.0, c, "x") == Split::Train));
    }
}
