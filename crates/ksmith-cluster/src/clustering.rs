//! HDBSCAN on the reduced embeddings (on a deterministic sample when there are many points,
//! the rest assigned to the cluster of their nearest sampled point), and medoids in the
//! original embedding space.

use hdbscan::{Hdbscan, HdbscanHyperParams};
use ksmith_embed::hashing::mix;
use ndarray::{Array2, ArrayView2, Axis};
use rayon::prelude::*;

use crate::config::ClusterConfig;
use crate::error::ClusterError;

/// Scales every row to unit length (zero rows stay zero).
pub fn l2_normalize(x: &mut Array2<f32>) {
    for mut row in x.outer_iter_mut() {
        let norm = row.dot(&row).sqrt();
        if norm > 0.0 {
            row.mapv_inplace(|v| v / norm);
        }
    }
}

/// The points HDBSCAN runs on: all when `n <= max`, else the `max` points with the smallest
/// `hash(seed, id)` (a sample that does not depend on input order), as sorted indices.
pub fn sample_indices(ids: &[String], max: usize, seed: u64) -> Vec<usize> {
    if ids.len() <= max {
        return (0..ids.len()).collect();
    }
    let mut keyed: Vec<(u64, usize)> = ids
        .iter()
        .enumerate()
        .map(|(i, id)| (mix(seed, ksmith_embed::hashing::hash_str(id)), i))
        .collect();
    keyed.sort_unstable();
    let mut out: Vec<usize> = keyed.into_iter().take(max).map(|(_, i)| i).collect();
    out.sort_unstable();
    out
}

/// Cluster labels (-1 = noise) of every row of `reduced` (unit rows).
///
/// HDBSCAN (the `hdbscan` crate, Euclidean on unit vectors, i.e. cosine order) runs on
/// [`sample_indices`]; every other point takes the label of its nearest sampled point, so a
/// point whose nearest sampled neighbour is noise is noise too.
pub fn cluster_labels(
    reduced: &Array2<f32>,
    ids: &[String],
    cfg: &ClusterConfig,
) -> Result<Vec<i32>, ClusterError> {
    let n = reduced.nrows();
    if n < cfg.min_cluster_size.max(2) {
        return Ok(vec![-1; n]);
    }
    let sample = sample_indices(ids, cfg.max_cluster_points, cfg.seed);
    let data: Vec<Vec<f32>> = sample.iter().map(|&i| reduced.row(i).to_vec()).collect();
    let params = HdbscanHyperParams::builder()
        .min_cluster_size(cfg.min_cluster_size)
        // The crate indexes the k-th neighbour without a bound check: keep k within the data.
        .min_samples(cfg.min_samples.min(data.len()))
        .epsilon(cfg.epsilon)
        .allow_single_cluster(cfg.allow_single_cluster)
        .build();
    let sample_labels = Hdbscan::new(&data, params)
        .cluster_par()
        .map_err(|e| ClusterError::Hdbscan(e.to_string()))?;
    let mut labels = vec![-1i32; n];
    for (&i, &l) in sample.iter().zip(&sample_labels) {
        labels[i] = l;
    }
    if sample.len() == n {
        return Ok(labels);
    }
    let in_sample: Vec<bool> = {
        let mut v = vec![false; n];
        for &i in &sample {
            v[i] = true;
        }
        v
    };
    let rest: Vec<usize> = (0..n).filter(|&i| !in_sample[i]).collect();
    let sample_matrix = Array2::from_shape_fn((sample.len(), reduced.ncols()), |(r, c)| {
        reduced[[sample[r], c]]
    });
    let assigned: Vec<i32> = rest
        .par_chunks(1024)
        .flat_map_iter(|chunk| {
            let block = Array2::from_shape_fn((chunk.len(), reduced.ncols()), |(r, c)| {
                reduced[[chunk[r], c]]
            });
            let sims = block.dot(&sample_matrix.t());
            sims.outer_iter()
                .map(|row| {
                    // Largest dot product = nearest on unit vectors; first index wins ties.
                    let mut best = 0usize;
                    for (j, &v) in row.iter().enumerate() {
                        if v > row[best] {
                            best = j;
                        }
                    }
                    sample_labels[best]
                })
                .collect::<Vec<_>>()
        })
        .collect();
    for (&i, l) in rest.iter().zip(assigned) {
        labels[i] = l;
    }
    Ok(labels)
}

/// The medoid of each cluster in `original` (unit rows): the member with the smallest sum of
/// Euclidean distances to the other members, chosen among the `eligible` members (all of them
/// when none is). For a cluster larger than `sample`, the sum runs over `sample` evenly spaced
/// members. Ties go to the smallest index. Returns `(label, index)` sorted by label; noise has
/// no medoid.
pub fn medoids(
    original: ArrayView2<'_, f32>,
    labels: &[i32],
    eligible: &[bool],
    sample: usize,
) -> Vec<(i32, usize)> {
    let mut members: std::collections::BTreeMap<i32, Vec<usize>> = Default::default();
    for (i, &l) in labels.iter().enumerate() {
        if l >= 0 {
            members.entry(l).or_default().push(i);
        }
    }
    members
        .into_par_iter()
        .map(|(label, idx)| {
            let candidates: Vec<usize> = idx
                .iter()
                .copied()
                .filter(|&i| eligible.get(i).copied().unwrap_or(true))
                .collect();
            let candidates = if candidates.is_empty() {
                idx.clone()
            } else {
                candidates
            };
            let refs: Vec<usize> = if idx.len() > sample.max(1) {
                let step = idx.len() as f64 / sample as f64;
                (0..sample)
                    .map(|k| idx[(k as f64 * step) as usize])
                    .collect()
            } else {
                idx.clone()
            };
            let r = original.select(Axis(0), &refs);
            let mut best = (f64::INFINITY, usize::MAX);
            for chunk in candidates.chunks(512) {
                let c = original.select(Axis(0), chunk);
                let dots = c.dot(&r.t());
                for (row, &i) in dots.outer_iter().zip(chunk) {
                    let total: f64 = row
                        .iter()
                        .map(|&d| f64::from((2.0 - 2.0 * d).max(0.0)).sqrt())
                        .sum();
                    if total < best.0 - 1e-9 || ((total - best.0).abs() <= 1e-9 && i < best.1) {
                        best = (total, i);
                    }
                }
            }
            (label, best.1)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use ksmith_embed::hashing::SplitMix;

    fn blobs(n_per: usize, centers: &[[f32; 3]], seed: u64) -> Array2<f32> {
        let mut rng = SplitMix::new(seed);
        let mut x = Array2::<f32>::zeros((n_per * centers.len(), 3));
        for (i, mut row) in x.outer_iter_mut().enumerate() {
            let c = centers[i / n_per];
            for d in 0..3 {
                row[d] = c[d] + 0.03 * rng.normal() as f32;
            }
        }
        l2_normalize(&mut x);
        x
    }

    #[test]
    fn medoid_is_the_member_with_smallest_distance_sum() {
        let x = blobs(30, &[[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]], 2);
        let labels: Vec<i32> = (0..60).map(|i| if i < 30 { 0 } else { 1 }).collect();
        let m = medoids(x.view(), &labels, &[], 1000);
        for (label, idx) in m {
            let members: Vec<usize> = (0..60).filter(|&i| labels[i] == label).collect();
            let sum = |i: usize| -> f32 {
                members
                    .iter()
                    .map(|&j| {
                        let d = &x.row(i) - &x.row(j);
                        d.dot(&d).sqrt()
                    })
                    .sum()
            };
            let brute = members
                .iter()
                .copied()
                .min_by(|&a, &b| sum(a).total_cmp(&sum(b)))
                .unwrap();
            assert_eq!(idx, brute, "cluster {label}");
        }
    }

    #[test]
    fn medoids_are_chosen_among_eligible_members() {
        let x = blobs(30, &[[1.0, 0.0, 0.0]], 3);
        let labels = vec![0; 30];
        let all = medoids(x.view(), &labels, &[], 1000)[0].1;
        let mut eligible = vec![true; 30];
        eligible[all] = false;
        let next = medoids(x.view(), &labels, &eligible, 1000)[0].1;
        assert_ne!(next, all);
        assert!(eligible[next]);
        // A cluster with no eligible member still gets its medoid.
        assert_eq!(medoids(x.view(), &labels, &[false; 30], 1000)[0].1, all);
    }

    #[test]
    fn sampled_clustering_assigns_the_rest_to_the_nearest_sample() {
        let x = blobs(200, &[[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]], 4);
        let ids: Vec<String> = (0..600).map(|i| format!("id{i}")).collect();
        let cfg = ClusterConfig {
            max_cluster_points: 150,
            min_cluster_size: 10,
            min_samples: 5,
            ..Default::default()
        };
        let labels = cluster_labels(&x, &ids, &cfg).unwrap();
        // Every blob is one cluster, blobs differ.
        for b in 0..3 {
            let l = labels[b * 200];
            assert!(l >= 0);
            assert!(
                labels[b * 200..(b + 1) * 200].iter().all(|&v| v == l),
                "blob {b}"
            );
        }
        assert_ne!(labels[0], labels[200]);
        assert_ne!(labels[200], labels[400]);
        assert_eq!(sample_indices(&ids, 150, cfg.seed).len(), 150);
    }
}
