//! The `[cluster]` section of the configuration.

use ksmith_embed::EmbedderConfig;
use serde::{Deserialize, Serialize};

use crate::error::ClusterError;

/// Settings of the cluster stage.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ClusterConfig {
    /// Dimensions kept by PCA before clustering; 0 keeps the embedding as it is.
    pub pca_dims: usize,
    /// HDBSCAN: the smallest group that counts as a cluster.
    pub min_cluster_size: usize,
    /// HDBSCAN: neighbours defining a point's core distance (density smoothing).
    pub min_samples: usize,
    /// HDBSCAN: clusters closer than this (Euclidean on unit vectors) are merged.
    pub epsilon: f64,
    /// HDBSCAN: allow a single cluster covering everything.
    pub allow_single_cluster: bool,
    /// HDBSCAN runs on at most this many points (a sample by id hash); the others join the
    /// cluster of their nearest sampled point. HDBSCAN's cost grows with the square of it.
    pub max_cluster_points: usize,
    /// Medoids of clusters larger than this are computed against this many members.
    pub medoid_sample: usize,
    /// Which modules become tasks: `balanced` (every unique module is a cold-start candidate;
    /// up to `balanced_per_cell` per family x level, centers first, noise included), `all`, or
    /// `centers` (the cluster medoids: the smaller expert-seeded set).
    pub tasks: String,
    /// Also make a task of every noise module (`selected_as = "noise"`) with `tasks = "centers"`.
    pub noise_tasks: bool,
    /// Tasks per (family, level) cell with `tasks = "balanced"`.
    pub balanced_per_cell: usize,
    /// With `tasks = "balanced"` or `"all"`: tasks per kernel problem. Modules whose sized
    /// programs ran the same computation (the same calls and consecutive pairs, at any depth)
    /// at sizes of one regime (arithmetic intensities chained within a factor of 4) are one
    /// problem: one computation takes more slots only where its sizes make another problem.
    /// 0 turns this off.
    pub tasks_per_problem: usize,
    /// Also make tasks of trivial modules: those that compute nothing (a view, a reshape, an
    /// identity) or mostly call a module given to their constructor (a residual wrapper).
    pub trivial_tasks: bool,
    /// Also make tasks of modules whose forward runs a single compute operator (views,
    /// permutes, dtype casts and copies aside: one strided convolution, one GEMM): a candidate
    /// has nothing to fuse and at best calls the same library.
    pub single_op_tasks: bool,
    /// Seed of the PCA start, the sample and the balanced order.
    pub seed: u64,
    /// Leave out the modules the probe could not size for the GPU (`size_status = unsizable`):
    /// their timings would be launch overhead.
    pub skip_unsized: bool,
    /// The embedder.
    pub embedder: EmbedderConfig,
}

impl Default for ClusterConfig {
    fn default() -> Self {
        ClusterConfig {
            pca_dims: 32,
            min_cluster_size: 10,
            min_samples: 5,
            epsilon: 0.0,
            allow_single_cluster: false,
            max_cluster_points: 20_000,
            medoid_sample: 2_000,
            tasks: "balanced".into(),
            noise_tasks: false,
            balanced_per_cell: 100,
            tasks_per_problem: 1,
            trivial_tasks: false,
            single_op_tasks: false,
            seed: 42,
            skip_unsized: true,
            embedder: EmbedderConfig::default(),
        }
    }
}

impl ClusterConfig {
    /// Whether a module whose `trivial` reason is `trivial` may become a task (and a cluster's
    /// center): a real one always, a single-operator one with `single_op_tasks`, any other
    /// trivial one with `trivial_tasks`.
    pub fn may_be_task(&self, trivial: Option<&str>) -> bool {
        match trivial {
            None => true,
            Some(t) if t.starts_with(crate::family::SINGLE_OP) => self.single_op_tasks,
            Some(_) => self.trivial_tasks,
        }
    }

    /// Checks the values (no I/O).
    pub fn validate(&self) -> Result<(), ClusterError> {
        let bad = |m: String| Err(ClusterError::Config(m));
        if self.min_cluster_size < 2 {
            return bad(format!(
                "[cluster] min_cluster_size must be at least 2 (got {})",
                self.min_cluster_size
            ));
        }
        if self.min_samples < 1 {
            return bad("[cluster] min_samples must be at least 1".into());
        }
        if !(self.epsilon >= 0.0 && self.epsilon.is_finite()) {
            return bad(format!(
                "[cluster] epsilon must be finite and >= 0 (got {})",
                self.epsilon
            ));
        }
        if self.max_cluster_points < self.min_cluster_size {
            return bad("[cluster] max_cluster_points must be at least min_cluster_size".into());
        }
        if self.medoid_sample == 0 {
            return bad("[cluster] medoid_sample must be at least 1".into());
        }
        if !matches!(self.tasks.as_str(), "centers" | "all" | "balanced") {
            return bad(format!(
                "[cluster] tasks must be \"centers\", \"all\" or \"balanced\" (got {:?})",
                self.tasks
            ));
        }
        if self.tasks == "balanced" && self.balanced_per_cell == 0 {
            return bad("[cluster] balanced_per_cell must be at least 1".into());
        }
        self.embedder
            .validate()
            .map_err(|e| ClusterError::Config(format!("[cluster.embedder] {e}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn single_op_modules_are_tasks_only_with_single_op_tasks() {
        let cfg = ClusterConfig::default();
        assert!(cfg.may_be_task(None));
        assert!(!cfg.may_be_task(Some("single_op:aten::convolution")));
        assert!(!cfg.may_be_task(Some("no_compute")));
        let single = ClusterConfig {
            single_op_tasks: true,
            ..Default::default()
        };
        assert!(single.may_be_task(Some("single_op:aten::addmm")));
        assert!(!single.may_be_task(Some("wrapper_of_argument")));
        let trivial = ClusterConfig {
            trivial_tasks: true,
            ..Default::default()
        };
        assert!(trivial.may_be_task(Some("no_compute")));
        assert!(!trivial.may_be_task(Some("single_op:aten::addmm")));
    }
}
