//! Balancing a selected set across difficulty levels and functional families.
//!
//! Two rules, applied in this order to one set (correctness SFT, performance SFT or GRPO):
//!
//! 1. **Family cap**, within each level: no family holds more than `s` of the level's kept
//!    samples, where `s = max(max_family_share, 1 / families in the level)` (so a level with
//!    few families can always keep an equal share of each). The cap `c` per family is the
//!    largest integer with `c <= s * sum_f min(count_f, c)`; the largest families are trimmed
//!    to `c`, smaller ones keep everything.
//! 2. **Level proportions**, when configured: the largest subset whose level mix matches the
//!    proportions (normalized over the levels present). Levels given share 0 are dropped. Each
//!    level's kept samples are taken from a round-robin order over its families, so the cut
//!    keeps the family balance.
//!
//! Which samples of a family are kept is decided by a seeded hash of the sample id (`rank`):
//! deterministic, and unrelated to the samples' order in the input.

use std::collections::BTreeMap;

use crate::drops::DropReason;

/// What balancing needs to know of a sample.
#[derive(Debug, Clone)]
pub struct Member {
    /// Difficulty level.
    pub level: u8,
    /// Functional family.
    pub family: String,
    /// Seeded hash in [0, 1): lower ranks are kept first.
    pub rank: f64,
}

/// The verdict on one member.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Kept.
    Keep,
    /// Dropped because its family exceeds the family cap in its level.
    FamilyCap,
    /// Dropped to meet the level proportions.
    LevelProportion,
}

impl Verdict {
    /// The drop reason, for reports.
    pub fn reason(self) -> Option<DropReason> {
        match self {
            Verdict::Keep => None,
            Verdict::FamilyCap => Some(DropReason::BalanceFamilyCap),
            Verdict::LevelProportion => Some(DropReason::BalanceLevelProportion),
        }
    }
}

/// The per-family cap for family sizes `counts` and share `share`.
pub fn family_cap(counts: &[usize], share: f64) -> usize {
    let families = counts.len().max(1);
    let s = share.max(1.0 / families as f64);
    let mut cap = counts.iter().copied().max().unwrap_or(0);
    loop {
        let kept: usize = counts.iter().map(|&n| n.min(cap)).sum();
        // The small epsilon keeps exact shares (e.g. 0.5 * 4) from rounding down.
        let allowed = (s * kept as f64 + 1e-9).floor() as usize;
        if allowed >= cap {
            return cap;
        }
        cap = allowed;
    }
}

/// Balances `members`; `level_share(level)` gives the configured proportion of a level, or
/// `None` when no proportions are configured.
pub fn balance(
    members: &[Member],
    max_family_share: f64,
    level_share: impl Fn(u8) -> Option<f64>,
) -> Vec<Verdict> {
    let mut verdicts = vec![Verdict::Keep; members.len()];
    // level -> family -> member indices, each family sorted by rank.
    let mut levels: BTreeMap<u8, BTreeMap<&str, Vec<usize>>> = BTreeMap::new();
    for (i, m) in members.iter().enumerate() {
        levels
            .entry(m.level)
            .or_default()
            .entry(m.family.as_str())
            .or_default()
            .push(i);
    }
    let mut ordered: BTreeMap<u8, Vec<usize>> = BTreeMap::new();
    for (&level, families) in levels.iter_mut() {
        for list in families.values_mut() {
            list.sort_by(|&a, &b| members[a].rank.total_cmp(&members[b].rank).then(a.cmp(&b)));
        }
        let counts: Vec<usize> = families.values().map(Vec::len).collect();
        let cap = family_cap(&counts, max_family_share);
        for list in families.values_mut() {
            for &i in list.iter().skip(cap) {
                verdicts[i] = Verdict::FamilyCap;
            }
            list.truncate(cap);
        }
        // Round-robin over families (by name), each in rank order.
        let mut order = Vec::new();
        let longest = families.values().map(Vec::len).max().unwrap_or(0);
        for round in 0..longest {
            for list in families.values() {
                if let Some(&i) = list.get(round) {
                    order.push(i);
                }
            }
        }
        ordered.insert(level, order);
    }
    let shares: BTreeMap<u8, f64> = ordered
        .keys()
        .filter_map(|&l| level_share(l).map(|s| (l, s)))
        .collect();
    if shares.is_empty() {
        return verdicts;
    }
    let total: f64 = shares.values().filter(|s| **s > 0.0).sum();
    // Largest N with N * p_l <= n_l for every level with a positive share.
    let n = ordered
        .iter()
        .filter_map(|(l, order)| {
            let p = shares.get(l).copied().unwrap_or(0.0) / total.max(f64::MIN_POSITIVE);
            (p > 0.0).then(|| order.len() as f64 / p)
        })
        .fold(f64::INFINITY, f64::min);
    for (l, order) in &ordered {
        let p = shares.get(l).copied().unwrap_or(0.0) / total.max(f64::MIN_POSITIVE);
        let keep = if p > 0.0 && n.is_finite() {
            ((n * p) + 1e-9).floor() as usize
        } else {
            0
        };
        for &i in order.iter().skip(keep) {
            verdicts[i] = Verdict::LevelProportion;
        }
    }
    verdicts
}

#[cfg(test)]
mod tests {
    use super::*;

    fn members(spec: &[(u8, &str, usize)]) -> Vec<Member> {
        let mut out = Vec::new();
        for &(level, family, n) in spec {
            for k in 0..n {
                out.push(Member {
                    level,
                    family: family.to_string(),
                    rank: crate::split::unit_hash("t", &format!("{level}{family}{k}")),
                });
            }
        }
        out
    }

    fn kept(ms: &[Member], v: &[Verdict], level: u8, family: &str) -> usize {
        ms.iter()
            .zip(v)
            .filter(|(m, v)| m.level == level && m.family == family && **v == Verdict::Keep)
            .count()
    }

    #[test]
    fn family_cap_solves_the_fixed_point() {
        // One family of 10 and two of 1 at share 0.35: each family may hold one sample.
        assert_eq!(family_cap(&[10, 1, 1], 0.35), 1);
        // Balanced families are untouched.
        assert_eq!(family_cap(&[3, 3, 3], 0.35), 3);
        // A lone family keeps everything, whatever the share.
        assert_eq!(family_cap(&[7], 0.1), 7);
        // Two families: the equal share 1/2 overrides a smaller configured share.
        assert_eq!(family_cap(&[9, 4], 0.2), 4);
        // [20, 10, 10, 10] at 0.4: cap 20 -> 20, allowed 0.4 * 50 = 20: kept.
        assert_eq!(family_cap(&[20, 10, 10, 10], 0.4), 20);
        // At 0.3: cap c with c <= 0.3 * (c + 30) -> c <= 12.86 -> 12.
        assert_eq!(family_cap(&[20, 10, 10, 10], 0.3), 12);
        assert_eq!(family_cap(&[], 0.3), 0);
    }

    #[test]
    fn the_cap_holds_in_the_result() {
        let ms = members(&[
            (1, "act", 50),
            (1, "norm", 10),
            (1, "conv", 10),
            (1, "loss", 5),
        ]);
        let v = balance(&ms, 0.3, |_| None);
        let total: usize = v.iter().filter(|v| **v == Verdict::Keep).count();
        let act = kept(&ms, &v, 1, "act");
        assert!(act as f64 <= 0.3 * total as f64 + 1e-9, "{act} of {total}");
        assert_eq!(
            kept(&ms, &v, 1, "loss"),
            5,
            "small families keep everything"
        );
        assert_eq!(
            v.iter().filter(|v| **v == Verdict::FamilyCap).count(),
            75 - total
        );
    }

    #[test]
    fn level_proportions_are_met_and_keep_family_balance() {
        let ms = members(&[
            (1, "act", 40),
            (1, "norm", 40),
            (2, "fused", 30),
            (3, "block", 10),
        ]);
        let shares = |l: u8| Some([0.0, 0.5, 0.3, 0.2][l as usize]);
        let v = balance(&ms, 1.0, shares);
        let l1 = kept(&ms, &v, 1, "act") + kept(&ms, &v, 1, "norm");
        let l2 = kept(&ms, &v, 2, "fused");
        let l3 = kept(&ms, &v, 3, "block");
        // Level 3 limits: N = 10 / 0.2 = 50 -> 25, 15, 10.
        assert_eq!((l1, l2, l3), (25, 15, 10));
        let act = kept(&ms, &v, 1, "act");
        assert!(
            (12..=13).contains(&act),
            "round robin keeps families even: {act}"
        );
    }

    #[test]
    fn a_zero_share_level_is_dropped_and_an_absent_one_ignored() {
        let ms = members(&[(1, "a", 10), (2, "b", 10)]);
        // Level 3 has a share but no samples: proportions are normalized over levels present.
        let v = balance(&ms, 1.0, |l| Some([0.0, 1.0, 0.0, 1.0][l as usize]));
        assert_eq!(kept(&ms, &v, 1, "a"), 10);
        assert_eq!(kept(&ms, &v, 2, "b"), 0);
        assert!(
            v.iter()
                .zip(&ms)
                .all(|(v, m)| m.level == 1 || *v == Verdict::LevelProportion)
        );
    }

    #[test]
    fn which_samples_are_kept_depends_on_rank_not_input_order() {
        let ms = members(&[(1, "a", 20), (1, "b", 4)]);
        let v = balance(&ms, 0.5, |_| None);
        let mut rev = ms.clone();
        rev.reverse();
        let mut vr = balance(&rev, 0.5, |_| None);
        vr.reverse();
        assert_eq!(v, vr);
    }
}
