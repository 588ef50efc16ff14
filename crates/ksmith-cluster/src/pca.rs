//! Principal component analysis with ndarray: the covariance matrix, then its top
//! eigenvectors by orthogonal (subspace) iteration from a seeded start. Deterministic: the same
//! data, `k` and seed give the same components on any thread count (chunk sums are added in a
//! fixed order), and each component's sign is fixed so its largest entry is positive.

use ksmith_embed::hashing::SplitMix;
use ndarray::{Array1, Array2, Axis, s};
use rayon::prelude::*;

/// A fitted projection.
#[derive(Debug, Clone)]
pub struct Pca {
    /// Mean of the data (subtracted before projecting).
    pub mean: Array1<f32>,
    /// Components as columns (`dim x k`), by decreasing variance.
    pub components: Array2<f32>,
    /// Variance along each component.
    pub variances: Vec<f32>,
}

const ROWS_PER_CHUNK: usize = 4096;
/// Subspace iterations at most, and the change of the basis that ends them early.
const MAX_ITERATIONS: usize = 150;
const TOLERANCE: f64 = 1e-7;

impl Pca {
    /// Fits `k` components (at most the data's dimension) to the rows of `x`.
    pub fn fit(x: &Array2<f32>, k: usize, seed: u64) -> Pca {
        let (n, d) = x.dim();
        let k = k.min(d).max(1);
        let mean = if n > 0 {
            x.mean_axis(Axis(0)).unwrap_or_else(|| Array1::zeros(d))
        } else {
            Array1::zeros(d)
        };
        // Covariance in f64, summed chunk by chunk in a fixed order.
        let starts: Vec<usize> = (0..n).step_by(ROWS_PER_CHUNK).collect();
        let partials: Vec<Array2<f64>> = starts
            .par_iter()
            .map(|&s0| {
                let e = (s0 + ROWS_PER_CHUNK).min(n);
                let block = (&x.slice(s![s0..e, ..]) - &mean).mapv(f64::from);
                block.t().dot(&block)
            })
            .collect();
        let mut cov = Array2::<f64>::zeros((d, d));
        for p in partials {
            cov += &p;
        }
        if n > 1 {
            cov /= (n - 1) as f64;
        }
        let (vectors, values) = top_eigen(&cov, k, seed);
        Pca {
            mean,
            components: vectors.mapv(|v| v as f32),
            variances: values.into_iter().map(|v| v as f32).collect(),
        }
    }

    /// Projects rows of `x` onto the components (`n x k`).
    pub fn transform(&self, x: &Array2<f32>) -> Array2<f32> {
        (x - &self.mean).dot(&self.components)
    }
}

/// Top `k` eigenvectors (columns) and eigenvalues of a symmetric matrix.
fn top_eigen(c: &Array2<f64>, k: usize, seed: u64) -> (Array2<f64>, Vec<f64>) {
    let d = c.nrows();
    let mut rng = SplitMix::new(seed ^ 0x7063_615f_7365_6564);
    let mut q = Array2::from_shape_fn((d, k), |_| rng.normal());
    orthonormalize(&mut q);
    for _ in 0..MAX_ITERATIONS {
        let mut z = c.dot(&q);
        orthonormalize(&mut z);
        let delta = (&z - &q).mapv(f64::abs).fold(0.0f64, |a, &b| a.max(b));
        q = z;
        if delta < TOLERANCE {
            break;
        }
    }
    // Rayleigh quotients, sort by value, fix signs.
    let cq = c.dot(&q);
    let mut order: Vec<(f64, usize)> = (0..k)
        .map(|j| (q.column(j).dot(&cq.column(j)), j))
        .collect();
    order.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    let mut out = Array2::<f64>::zeros((d, k));
    let mut values = Vec::with_capacity(k);
    for (dst, (value, j)) in order.into_iter().enumerate() {
        let mut col = q.column(j).to_owned();
        let (imax, _) = col.iter().enumerate().fold((0, 0.0f64), |acc, (i, &v)| {
            if v.abs() > acc.1 { (i, v.abs()) } else { acc }
        });
        if col[imax] < 0.0 {
            col.mapv_inplace(|v| -v);
        }
        out.column_mut(dst).assign(&col);
        values.push(value.max(0.0));
    }
    (out, values)
}

/// Modified Gram-Schmidt on the columns; a column that vanishes is replaced by a unit vector.
fn orthonormalize(q: &mut Array2<f64>) {
    let k = q.ncols();
    for j in 0..k {
        for i in 0..j {
            let proj = q.column(i).dot(&q.column(j));
            let ci = q.column(i).to_owned();
            q.column_mut(j).scaled_add(-proj, &ci);
        }
        let norm = q.column(j).dot(&q.column(j)).sqrt();
        if norm > 1e-12 {
            q.column_mut(j).mapv_inplace(|v| v / norm);
        } else {
            let mut col = q.column_mut(j);
            col.fill(0.0);
            let d = col.len();
            col[j % d] = 1.0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_directions_of_largest_variance() {
        // Points spread along (1, 1, 0) a lot, along (1, -1, 0) a little, nothing along z.
        let mut rng = SplitMix::new(3);
        let n = 2000;
        let x = Array2::from_shape_fn((n, 3), |_| 0.0f32);
        let mut x = x;
        for mut row in x.outer_iter_mut() {
            let a = rng.normal() as f32 * 10.0;
            let b = rng.normal() as f32;
            row[0] = a + b + 5.0;
            row[1] = a - b - 2.0;
            row[2] = 1.0;
        }
        let p = Pca::fit(&x, 2, 1);
        let c0 = p.components.column(0);
        let inv = std::f32::consts::FRAC_1_SQRT_2;
        assert!(
            (c0[0] - inv).abs() < 0.01 && (c0[1] - inv).abs() < 0.01,
            "{c0}"
        );
        let c1 = p.components.column(1);
        assert!(
            (c1[0].abs() - inv).abs() < 0.02 && (c1[0] + c1[1]).abs() < 0.02,
            "{c1}"
        );
        assert!(
            p.variances[0] > 150.0 && p.variances[1] > 1.0 && p.variances[1] < 3.0,
            "{:?}",
            p.variances
        );
        let y = p.transform(&x);
        assert_eq!(y.dim(), (n, 2));
        // Same result again (determinism).
        let q = Pca::fit(&x, 2, 1);
        assert_eq!(p.components, q.components);
    }
}
