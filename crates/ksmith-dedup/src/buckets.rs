//! Candidate pairs from hash buckets (LSH bands, hyperplane hashes).

/// Pairs `(i, j)` with `i < j` of items sharing a bucket key.
///
/// `entries` holds `(key, item)`; it is sorted here. In a bucket of more than
/// `max_pairs + 1` members each member is paired with the next `max_pairs` members only, so a
/// huge bucket costs `O(size * max_pairs)` instead of `O(size^2)`. The result is sorted and has
/// no repeats, whatever the order of `entries`.
pub fn bucket_pairs(mut entries: Vec<(u64, u32)>, max_pairs: usize) -> Vec<(u32, u32)> {
    entries.sort_unstable();
    entries.dedup();
    let mut pairs = Vec::new();
    let mut start = 0;
    while start < entries.len() {
        let key = entries[start].0;
        let mut end = start + 1;
        while end < entries.len() && entries[end].0 == key {
            end += 1;
        }
        let members = &entries[start..end];
        for (a, &(_, i)) in members.iter().enumerate() {
            for &(_, j) in members.iter().skip(a + 1).take(max_pairs) {
                pairs.push((i.min(j), i.max(j)));
            }
        }
        start = end;
    }
    pairs.sort_unstable();
    pairs.dedup();
    pairs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_within_buckets_only_and_capped() {
        let e = vec![(1, 3), (1, 0), (2, 5), (1, 2), (2, 4), (3, 9)];
        assert_eq!(
            bucket_pairs(e.clone(), 10),
            vec![(0, 2), (0, 3), (2, 3), (4, 5)]
        );
        // cap 1: each member with the next one only
        assert_eq!(bucket_pairs(e, 1), vec![(0, 2), (2, 3), (4, 5)]);
    }
}
