//! The two MAP-Elites features of a program, on fixed scales (bins never drift).
//!
//! - Complexity: Triton kernels and `tl.` operations in the editable block,
//!   `8 * kernels + ops`, binned on a log scale up to `complexity_max`.
//! - Score: log2 of the speedup over PyTorch eager, clamped to
//!   `[log2_speedup_min, log2_speedup_max]` and cut into `score_bins` equal bins.

use ksmith_core::evolve_block::split_block;

use crate::config::RolloutConfig;

/// The fixed binning of a rollout configuration.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Binning {
    complexity_bins: u32,
    complexity_max: f64,
    score_bins: u32,
    log2_min: f64,
    log2_max: f64,
}

impl Binning {
    /// The binning of `cfg`.
    pub fn new(cfg: &RolloutConfig) -> Self {
        Binning {
            complexity_bins: cfg.complexity_bins,
            complexity_max: cfg.complexity_max,
            score_bins: cfg.score_bins,
            log2_min: cfg.log2_speedup_min,
            log2_max: cfg.log2_speedup_max,
        }
    }

    /// Number of cells of a grid.
    pub fn cells(&self) -> usize {
        (self.complexity_bins * self.score_bins) as usize
    }

    /// The complexity bin of a complexity value.
    pub fn complexity_bin(&self, complexity: f64) -> u32 {
        let x = (1.0 + complexity.max(0.0)).log2() / (1.0 + self.complexity_max).log2();
        clamp_bin(x, self.complexity_bins)
    }

    /// The score bin of a speedup (non-positive or missing speedups are in bin 0).
    pub fn score_bin(&self, speedup: f64) -> u32 {
        if !(speedup.is_finite() && speedup > 0.0) {
            return 0;
        }
        let x = (speedup.log2() - self.log2_min) / (self.log2_max - self.log2_min);
        clamp_bin(x, self.score_bins)
    }

    /// The flat cell index of `(complexity bin, score bin)`.
    pub fn cell(&self, complexity: f64, speedup: f64) -> usize {
        (self.complexity_bin(complexity) * self.score_bins + self.score_bin(speedup)) as usize
    }

    /// The `(complexity bin, score bin)` of a flat cell index.
    pub fn coords(&self, cell: usize) -> (u32, u32) {
        let c = cell as u32;
        (c / self.score_bins, c % self.score_bins)
    }

    /// The flat index of `(complexity bin, score bin)`, when inside the grid.
    pub fn index(&self, cb: i64, sb: i64) -> Option<usize> {
        let inside = (0..i64::from(self.complexity_bins)).contains(&cb)
            && (0..i64::from(self.score_bins)).contains(&sb);
        inside.then(|| (cb * i64::from(self.score_bins) + sb) as usize)
    }
}

fn clamp_bin(x: f64, bins: u32) -> u32 {
    if !x.is_finite() || x <= 0.0 {
        return 0;
    }
    ((x * f64::from(bins)) as u32).min(bins - 1)
}

/// Complexity of a program: `8 * kernels + tl ops` counted in its editable block (the whole
/// program when it has none).
pub fn complexity(code: &str) -> f64 {
    let text = split_block(code).map(|b| b.body).unwrap_or(code);
    let mut kernels = 0u32;
    let mut ops = 0u32;
    for line in text.lines() {
        let t = line.trim_start();
        if t.starts_with('#') {
            continue;
        }
        if t.starts_with("@triton.jit") || t.starts_with("@triton.autotune") {
            kernels += 1;
        }
        let mut rest = t;
        while let Some(p) = rest.find("tl.") {
            let before = rest[..p].chars().last();
            if !before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '.') {
                ops += 1;
            }
            rest = &rest[p + 3..];
        }
    }
    f64::from(8 * kernels + ops)
}

/// Fitness of an evaluated program: its speedup when correct (1.0 when correct but not timed,
/// as on the CPU interpreter), 0 otherwise.
pub fn fitness(correct: bool, speedup: Option<f64>) -> f64 {
    if !correct {
        return 0.0;
    }
    match speedup {
        Some(s) if s.is_finite() && s > 0.0 => s,
        _ => 1.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn score_bins_are_fixed_log_scale() {
        let b = Binning::new(&RolloutConfig::default());
        // 14 bins over log2 in [-3, 4]: each bin is half an octave.
        assert_eq!(b.score_bin(0.01), 0);
        assert_eq!(b.score_bin(0.0), 0);
        assert_eq!(b.score_bin(f64::NAN), 0);
        assert_eq!(b.score_bin(1.0), 6);
        assert_eq!(b.score_bin(1.5), 7);
        assert_eq!(b.score_bin(2.0), 8);
        assert_eq!(b.score_bin(1000.0), 13);
        // Bins do not depend on what was seen before.
        let again = Binning::new(&RolloutConfig::default());
        assert_eq!(again.score_bin(1.5), b.score_bin(1.5));
    }

    #[test]
    fn complexity_counts_kernels_and_tl_ops_in_the_block() {
        let code = "import triton.language as tl\n# EVOLVE-BLOCK-START\n@triton.jit\ndef k(x_ptr):\n    x = tl.load(x_ptr + tl.arange(0, 4))\n    # tl.store in a comment\n    tl.store(x_ptr, x)\n# EVOLVE-BLOCK-END\n";
        assert_eq!(complexity(code), 8.0 + 3.0);
        let b = Binning::new(&RolloutConfig::default());
        assert_eq!(b.complexity_bin(0.0), 0);
        assert!(b.complexity_bin(11.0) < b.complexity_bin(200.0));
        assert_eq!(b.complexity_bin(1e9), 7);
        let cell = b.cell(11.0, 2.0);
        assert_eq!(b.coords(cell), (b.complexity_bin(11.0), 8));
        assert_eq!(b.index(-1, 0), None);
        assert_eq!(b.index(0, 14), None);
    }

    #[test]
    fn fitness_is_speedup_when_correct() {
        assert_eq!(fitness(true, Some(2.5)), 2.5);
        assert_eq!(fitness(true, None), 1.0);
        assert_eq!(fitness(false, Some(9.0)), 0.0);
    }
}
