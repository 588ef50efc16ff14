//! MinHash signatures over token shingles and LSH banding.
//!
//! Shingles are k-grams of hashed tokens (text tokens or canonical labels, see
//! [`crate::features`]), each hashed to 64 bits; the signature keeps, for each of `num_perm`
//! hash functions `h_j(x) = (a_j * x + b_j) >> 32` (multiply-shift, `a_j` odd), the minimum over
//! the shingles. Two signatures agree in a position with probability equal to the Jaccard
//! similarity of the shingle sets. LSH cuts the signature into `b` bands of `r` rows; programs
//! that share a band are candidates ([`optimal_bands`] chooses `b` and `r` as datasketch's
//! `optimal_param` does).

use ksmith_embed::hashing::{SplitMix, mix};

/// The hashes of the k-grams of a hashed token sequence, sorted and without repeats.
///
/// A sequence shorter than `k` has one shingle made of all its tokens; an empty one has none.
pub fn shingles_of_token_hashes(toks: &[u64], k: usize) -> Vec<u64> {
    let k = k.max(1);
    if toks.is_empty() {
        return Vec::new();
    }
    let windows = if toks.len() < k {
        vec![toks]
    } else {
        toks.windows(k).collect()
    };
    let mut out: Vec<u64> = windows
        .into_iter()
        .map(|w| w.iter().fold(k as u64, |acc, &t| mix(acc, t)))
        .collect();
    out.sort_unstable();
    out.dedup();
    out
}

/// A family of `num_perm` hash functions.
#[derive(Debug, Clone)]
pub struct MinHasher {
    a: Vec<u64>,
    b: Vec<u64>,
}

impl MinHasher {
    /// `num_perm` functions drawn from `seed`.
    pub fn new(num_perm: usize, seed: u64) -> Self {
        let mut rng = SplitMix::new(seed ^ 0x6d69_6e68_6173_6821);
        let a = (0..num_perm).map(|_| rng.next_u64() | 1).collect();
        let b = (0..num_perm).map(|_| rng.next_u64()).collect();
        MinHasher { a, b }
    }

    /// Number of hash functions.
    pub fn num_perm(&self) -> usize {
        self.a.len()
    }

    /// The signature of a shingle set; all `u32::MAX` for an empty set.
    pub fn signature(&self, shingles: &[u64]) -> Vec<u32> {
        let mut sig = vec![u32::MAX; self.a.len()];
        self.fold_into(shingles, &mut sig);
        sig
    }

    /// Adds shingles to a signature: afterwards `sig` is the signature of the union of the
    /// set it described and `shingles` (MinHash of a union is the element-wise minimum).
    pub fn fold_into(&self, shingles: &[u64], sig: &mut [u32]) {
        for &x in shingles {
            for ((s, &a), &b) in sig.iter_mut().zip(&self.a).zip(&self.b) {
                let v = (a.wrapping_mul(x).wrapping_add(b) >> 32) as u32;
                if v < *s {
                    *s = v;
                }
            }
        }
    }
}

/// The low 16 bits of each value of a signature (b-bit MinHash, b = 16).
///
/// Two different minima agree in their low 16 bits with probability 2^-16, so the Jaccard
/// estimate from truncated signatures is biased by at most (1 - J) / 65536, while the
/// signature takes half the memory.
pub fn truncate(sig: &[u32]) -> Vec<u16> {
    sig.iter().map(|&v| v as u16).collect()
}

/// The fraction of positions where two signatures agree: an estimate of the Jaccard similarity.
pub fn estimated_jaccard<T: PartialEq>(a: &[T], b: &[T]) -> f64 {
    if a.is_empty() {
        return 0.0;
    }
    let same = a.iter().zip(b).filter(|(x, y)| x == y).count();
    same as f64 / a.len() as f64
}

/// The LSH key of band `band` (rows `band*r .. band*r + r`) of a signature.
pub fn band_key<T: Copy + Into<u64>>(sig: &[T], band: usize, rows: usize) -> u64 {
    sig[band * rows..band * rows + rows]
        .iter()
        .fold(mix(0x6261_6e64, band as u64), |acc, &v| mix(acc, v.into()))
}

/// Bands and rows minimizing the equally weighted false positive and false negative areas of
/// the LSH S-curve around `threshold`, with `b * r <= num_perm` (datasketch's
/// `optimal_param`).
pub fn optimal_bands(threshold: f64, num_perm: usize) -> (usize, usize) {
    let mut best = (1, 1);
    let mut best_err = f64::INFINITY;
    for b in 1..=num_perm {
        for r in 1..=num_perm / b {
            let fp = integrate(
                |s| 1.0 - (1.0 - s.powi(r as i32)).powi(b as i32),
                0.0,
                threshold,
            );
            let fnn = integrate(|s| (1.0 - s.powi(r as i32)).powi(b as i32), threshold, 1.0);
            let err = 0.5 * fp + 0.5 * fnn;
            if err < best_err {
                best_err = err;
                best = (b, r);
            }
        }
    }
    best
}

/// Simpson's rule with 200 intervals.
fn integrate(f: impl Fn(f64) -> f64, lo: f64, hi: f64) -> f64 {
    const N: usize = 200;
    let h = (hi - lo) / N as f64;
    let mut sum = f(lo) + f(hi);
    for i in 1..N {
        let x = lo + i as f64 * h;
        sum += if i % 2 == 1 { 4.0 } else { 2.0 } * f(x);
    }
    sum * h / 3.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use ksmith_embed::Program;
    use ksmith_embed::hashing::hash_str;

    #[test]
    fn optimal_bands_match_datasketch() {
        assert_eq!(optimal_bands(0.7, 256), (25, 10));
        assert_eq!(optimal_bands(0.7, 128), (14, 9));
        assert_eq!(optimal_bands(0.8, 256), (17, 15));
    }

    #[test]
    fn estimate_tracks_true_jaccard() {
        let h = MinHasher::new(256, 1);
        let a: Vec<u64> = (0..1000u64)
            .map(ksmith_embed::hashing::splitmix64)
            .collect();
        // 600 shared of 1400 distinct: J = 600/1400 = 0.4286
        let b: Vec<u64> = (400..1400u64)
            .map(ksmith_embed::hashing::splitmix64)
            .collect();
        let est = estimated_jaccard(&h.signature(&a), &h.signature(&b));
        assert!((est - 600.0 / 1400.0).abs() < 0.08, "{est}");
        assert_eq!(estimated_jaccard(&h.signature(&a), &h.signature(&a)), 1.0);
    }

    #[test]
    fn shingles_are_kgrams_of_code_tokens() {
        let p = Program::parse("x = 1  # c\ny = x\n");
        let shingles = |p: &Program<'_>, k: usize| {
            let toks: Vec<u64> = p.text_tokens().map(|t| hash_str(t.text)).collect();
            shingles_of_token_hashes(&toks, k)
        };
        // tokens: x = 1 y = x -> 6 tokens, 2 distinct 5-grams
        assert_eq!(shingles(&p, 5).len(), 2);
        assert_eq!(shingles(&p, 10).len(), 1);
        assert!(shingles(&Program::parse(""), 5).is_empty());
    }
}
