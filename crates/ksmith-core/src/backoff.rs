//! Exponential backoff with jitter, for clients that retry a remote service (the teacher's
//! chat client, discover's GitHub client).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The delay before retry number `retry` (0 for the first retry): `initial * 2^retry`, capped at
/// `max`, scaled by a jitter factor in `[0.5, 1.0)` from `jitter_seed`; a server's `Retry-After`
/// raises it (still capped at `max`).
pub fn delay(
    retry: u32,
    initial_ms: u64,
    max_ms: u64,
    retry_after: Option<Duration>,
    jitter_seed: u64,
) -> Duration {
    let exp = initial_ms.saturating_mul(1u64 << retry.min(30)).min(max_ms);
    let jitter = 0.5 + 0.5 * unit(jitter_seed);
    let mut ms = (exp as f64 * jitter) as u64;
    if let Some(ra) = retry_after {
        ms = ms.max(ra.as_millis().min(u128::from(max_ms)) as u64);
    }
    Duration::from_millis(ms.min(max_ms))
}

/// A jitter seed that differs between retries, processes and moments, so that clients retrying
/// together spread out.
pub fn jitter_seed(retry: u32) -> u64 {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    nanos ^ u64::from(retry).rotate_left(32) ^ u64::from(std::process::id())
}

/// A number in `[0, 1)` from a seed (splitmix64).
fn unit(seed: u64) -> f64 {
    let mut z = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    (z >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_is_capped_and_jittered() {
        let d0 = delay(0, 100, 1000, None, 1);
        let d3 = delay(3, 100, 1000, None, 1);
        assert!(d0 >= Duration::from_millis(50) && d0 < Duration::from_millis(100));
        assert!(d3 >= Duration::from_millis(400) && d3 < Duration::from_millis(800));
        assert!(delay(20, 100, 1000, None, 9) <= Duration::from_millis(1000));
        let spread: std::collections::BTreeSet<_> =
            (0..20).map(|s| delay(2, 100, 1000, None, s)).collect();
        assert!(spread.len() > 10, "jitter must spread retries");
        let ra = delay(0, 100, 1000, Some(Duration::from_millis(700)), 1);
        assert_eq!(ra, Duration::from_millis(700));
        let ra = delay(0, 100, 1000, Some(Duration::from_secs(3600)), 1);
        assert_eq!(ra, Duration::from_millis(1000));
    }
}
