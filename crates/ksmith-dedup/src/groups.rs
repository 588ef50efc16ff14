//! Duplicate groups: stars around survivors chosen best first, so that every dropped module is
//! a direct match of its survivor (no chains through intermediate modules), and what each
//! dropped member is recorded as duplicating.

use std::cmp::Ordering;

use ksmith_core::tables::DedupMethod;

/// Licenses treated as permissive (SPDX ids, compared case-insensitively).
const PERMISSIVE: &[&str] = &[
    "mit",
    "mit-0",
    "apache-2.0",
    "bsd-2-clause",
    "bsd-3-clause",
    "bsd-3-clause-clear",
    "isc",
    "unlicense",
    "0bsd",
    "zlib",
    "python-2.0",
    "psf-2.0",
    "cc0-1.0",
    "bsl-1.0",
    "wtfpl",
    "cc-by-4.0",
    "upl-1.0",
    "ncsa",
    "x11",
];

/// 0 for a permissive license, 1 for none or unknown (`NOASSERTION`), 2 for anything else
/// (copyleft, non-commercial): the first survivor criterion, as in BigCode's `--rank`.
pub fn license_rank(license: Option<&str>) -> u8 {
    match license.map(|l| l.trim().to_ascii_lowercase()) {
        None => 1,
        Some(l) if l.is_empty() || l == "noassertion" || l == "other" || l == "unknown" => 1,
        Some(l) if PERMISSIVE.contains(&l.as_str()) => 0,
        Some(_) => 2,
    }
}

/// What decides which member of a duplicate group survives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SurvivorKey {
    /// [`license_rank`].
    pub license_rank: u8,
    /// Stars of the repository (more is better).
    pub stars: i64,
    /// Whether it runs (true is better; every module here ran in probe).
    pub runs: bool,
    /// Lines of the program (fewer is better).
    pub lines: u32,
    /// The module id (smallest wins the final tie).
    pub id: String,
}

impl SurvivorKey {
    /// Orders keys best first.
    pub fn better(&self, other: &Self) -> Ordering {
        self.license_rank
            .cmp(&other.license_rank)
            .then(other.stars.cmp(&self.stars))
            .then(other.runs.cmp(&self.runs))
            .then(self.lines.cmp(&other.lines))
            .then(self.id.cmp(&other.id))
    }
}

/// A matched pair.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Edge {
    /// One item.
    pub a: u32,
    /// The other item.
    pub b: u32,
    /// The method that matched them.
    pub method: DedupMethod,
    /// Their similarity, when the method has one.
    pub similarity: Option<f64>,
}

/// Priority of a method when several connect the same items (lower first).
pub fn method_priority(m: DedupMethod) -> u8 {
    match m {
        DedupMethod::Exact => 0,
        DedupMethod::Structural => 1,
        DedupMethod::Near => 2,
        DedupMethod::Semantic => 3,
        DedupMethod::Kernel => 4,
        DedupMethod::Contamination => 5,
    }
}

/// Items that are all duplicates of each other by one method (equal exact keys, equal
/// structural hashes): every member matches every other directly.
#[derive(Debug, Clone, PartialEq)]
pub struct Classes {
    /// The method.
    pub method: DedupMethod,
    /// The class of each item (`u32::MAX`: in no class).
    pub class_of: Vec<u32>,
    /// The members of each class, sorted.
    pub members: Vec<Vec<u32>>,
}

impl Classes {
    /// Classes of items with equal keys (items without a key and classes of one item are left
    /// out).
    pub fn from_keys<K: Ord + Copy>(method: DedupMethod, keys: &[Option<K>]) -> Self {
        let mut sorted: Vec<(K, u32)> = keys
            .iter()
            .enumerate()
            .filter_map(|(i, k)| k.map(|k| (k, i as u32)))
            .collect();
        sorted.sort_unstable();
        let mut class_of = vec![u32::MAX; keys.len()];
        let mut members = Vec::new();
        let mut start = 0;
        while start < sorted.len() {
            let mut end = start + 1;
            while end < sorted.len() && sorted[end].0 == sorted[start].0 {
                end += 1;
            }
            if end - start > 1 {
                let id = members.len() as u32;
                let group: Vec<u32> = sorted[start..end].iter().map(|&(_, i)| i).collect();
                for &i in &group {
                    class_of[i as usize] = id;
                }
                members.push(group);
            }
            start = end;
        }
        Classes {
            method,
            class_of,
            members,
        }
    }

    /// The other members of `item`'s class.
    pub fn others(&self, item: u32) -> impl Iterator<Item = u32> + '_ {
        let class = self
            .class_of
            .get(item as usize)
            .copied()
            .unwrap_or(u32::MAX);
        self.members
            .get(class as usize)
            .map_or(&[][..], Vec::as_slice)
            .iter()
            .copied()
            .filter(move |&m| m != item)
    }
}

/// The outcome for one item.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// The surviving item of its group (itself when kept).
    pub survivor: u32,
    /// The method that matched it directly with the survivor.
    pub method: Option<DedupMethod>,
    /// The similarity of that direct match.
    pub similarity: Option<f64>,
}

/// Resolves groups as stars: one outcome per item.
///
/// Items are visited best first by [`SurvivorKey::better`]. An item not yet taken survives and
/// takes every item not yet taken that matches it directly: the other members of its classes
/// (`classes`, in the order given: exact before structural), then its matched pairs (`edges`,
/// the strongest method first, then the highest similarity), then the other members of its
/// `late` classes (the kernel method: a module that matches by its code is recorded so, since
/// contamination spreads through code matches only). A dropped item is therefore always
/// a direct match of its survivor, recorded with that match's method and similarity, and groups
/// never chain (`A ~ B ~ C` never puts `A` and `C` together unless `A ~ C`); a group is at most
/// the survivor and its direct matches. The result depends only on the keys, the classes and
/// the set of edges, not on their order.
pub fn resolve(
    keys: &[SurvivorKey],
    classes: &[Classes],
    edges: &[Edge],
    late: &[Classes],
) -> Vec<Outcome> {
    let n = keys.len();
    let mut adj: Vec<Vec<(u8, u32, usize)>> = vec![Vec::new(); n];
    for (k, e) in edges.iter().enumerate() {
        if e.a == e.b || e.a as usize >= n || e.b as usize >= n {
            continue;
        }
        let p = method_priority(e.method);
        adj[e.a as usize].push((p, e.b, k));
        adj[e.b as usize].push((p, e.a, k));
    }
    for list in &mut adj {
        // Strongest method, then highest similarity, then neighbour: the edge's content, not
        // its position in the input.
        list.sort_by(|x, y| {
            let (ex, ey) = (&edges[x.2], &edges[y.2]);
            x.0.cmp(&y.0)
                .then_with(|| {
                    ey.similarity
                        .unwrap_or(1.0)
                        .partial_cmp(&ex.similarity.unwrap_or(1.0))
                        .unwrap_or(Ordering::Equal)
                })
                .then(x.1.cmp(&y.1))
        });
        list.dedup_by_key(|x| x.1);
    }
    let mut order: Vec<u32> = (0..n as u32).collect();
    order.sort_by(|&a, &b| keys[a as usize].better(&keys[b as usize]));
    let mut out: Vec<Option<Outcome>> = vec![None; n];
    for &c in &order {
        if out[c as usize].is_some() {
            continue;
        }
        out[c as usize] = Some(Outcome {
            survivor: c,
            method: None,
            similarity: None,
        });
        let take = |out: &mut Vec<Option<Outcome>>, class: &Classes| {
            let similarity =
                matches!(class.method, DedupMethod::Exact | DedupMethod::Kernel).then_some(1.0);
            for m in class.others(c) {
                if out[m as usize].is_none() {
                    out[m as usize] = Some(Outcome {
                        survivor: c,
                        method: Some(class.method),
                        similarity,
                    });
                }
            }
        };
        for class in classes {
            take(&mut out, class);
        }
        for &(_, w, k) in &adj[c as usize] {
            if out[w as usize].is_none() {
                out[w as usize] = Some(Outcome {
                    survivor: c,
                    method: Some(edges[k].method),
                    similarity: edges[k].similarity,
                });
            }
        }
        for class in late {
            take(&mut out, class);
        }
    }
    out.into_iter()
        .enumerate()
        .map(|(i, o)| {
            o.unwrap_or(Outcome {
                survivor: i as u32,
                method: None,
                similarity: None,
            })
        })
        .collect()
}

/// Contamination within groups: a copy of a benchmark problem (`copies[i]`) takes with it every
/// module of its group that shares its code (the survivor and the members matched by exact,
/// structural, near or semantic), never one matched only by the kernel method (the same
/// computation is no copy of the text). The kernel members of a group whose survivor goes are
/// regrouped in `outcomes`: those of one kernel class (`kernel`, whose members all match each
/// other) around the best of them, the others alone. Returns, for each module that is not
/// itself a copy but goes with one, that copy.
pub fn contain(
    keys: &[SurvivorKey],
    outcomes: &mut [Outcome],
    copies: &[bool],
    kernel: &[Classes],
) -> Vec<Option<usize>> {
    let n = outcomes.len();
    let by_code = |o: &Outcome| o.method != Some(DedupMethod::Kernel);
    let mut first_copy: Vec<Option<usize>> = vec![None; n];
    for i in 0..n {
        let s = outcomes[i].survivor as usize;
        if copies[i] && by_code(&outcomes[i]) && first_copy[s].is_none() {
            first_copy[s] = Some(i);
        }
    }
    let mut via = vec![None; n];
    // Orphans by (their survivor, their kernel class; each alone when in none).
    let mut orphans: std::collections::BTreeMap<(usize, usize, usize), Vec<usize>> =
        Default::default();
    for i in 0..n {
        let s = outcomes[i].survivor as usize;
        if copies[i] {
            continue;
        }
        if let Some(c) = first_copy[s] {
            if by_code(&outcomes[i]) {
                via[i] = Some(c);
            } else {
                let class = kernel.iter().enumerate().find_map(|(k, c)| {
                    let id = *c.class_of.get(i)?;
                    (id != u32::MAX).then_some((k, id as usize))
                });
                let (k, id) = class.unwrap_or((usize::MAX, i));
                orphans.entry((s, k, id)).or_default().push(i);
            }
        }
    }
    for mut members in orphans.into_values() {
        members.sort_by(|&a, &b| keys[a].better(&keys[b]));
        let head = members[0];
        outcomes[head] = Outcome {
            survivor: head as u32,
            method: None,
            similarity: None,
        };
        for &m in &members[1..] {
            outcomes[m] = Outcome {
                survivor: head as u32,
                method: Some(DedupMethod::Kernel),
                similarity: Some(1.0),
            };
        }
    }
    via
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(license: Option<&str>, stars: i64, lines: u32, id: &str) -> SurvivorKey {
        SurvivorKey {
            license_rank: license_rank(license),
            stars,
            runs: true,
            lines,
            id: id.into(),
        }
    }

    fn edge(a: u32, b: u32, method: DedupMethod) -> Edge {
        Edge {
            a,
            b,
            method,
            similarity: Some(0.9),
        }
    }

    #[test]
    fn survivor_prefers_permissive_then_stars_then_shorter_then_id() {
        let keys = vec![
            key(Some("GPL-3.0"), 1000, 10, "a"),
            key(None, 500, 10, "b"),
            key(Some("MIT"), 5, 50, "c"),
            key(Some("Apache-2.0"), 5, 40, "d"),
            key(Some("apache-2.0"), 5, 40, "e"),
        ];
        // Every item matches d directly; 1 and 2 also match each other exactly.
        let edges = vec![
            edge(0, 3, DedupMethod::Near),
            edge(1, 3, DedupMethod::Semantic),
            edge(2, 3, DedupMethod::Near),
            edge(3, 4, DedupMethod::Structural),
            edge(1, 2, DedupMethod::Exact),
        ];
        let out = resolve(&keys, &[], &edges, &[]);
        assert!(out.iter().all(|o| o.survivor == 3), "{out:?}");
        assert_eq!(out[3].method, None);
        assert_eq!(out[4].method, Some(DedupMethod::Structural));
        // Each member records its own direct match with the survivor, not a path through
        // another member (1 is tied to 2 exactly, but to the survivor only semantically).
        assert_eq!(out[2].method, Some(DedupMethod::Near));
        assert_eq!(out[1].method, Some(DedupMethod::Semantic));
        let mut shuffled = edges.clone();
        shuffled.reverse();
        assert_eq!(resolve(&keys, &[], &shuffled, &[]), out);
    }

    #[test]
    fn groups_never_chain() {
        // A chain 0 ~ 1 ~ 2 ~ 3 (best first): 0 takes 1; 2 is no direct match of 0, so it
        // survives and takes 3.
        let keys: Vec<SurvivorKey> = ["a", "b", "c", "d"]
            .iter()
            .map(|id| key(Some("MIT"), 0, 10, id))
            .collect();
        let edges = vec![
            edge(0, 1, DedupMethod::Near),
            edge(1, 2, DedupMethod::Near),
            edge(2, 3, DedupMethod::Near),
        ];
        let out = resolve(&keys, &[], &edges, &[]);
        let survivors: Vec<u32> = out.iter().map(|o| o.survivor).collect();
        assert_eq!(survivors, vec![0, 0, 2, 2]);
        // Every dropped item is a direct match of its survivor.
        for (i, o) in out.iter().enumerate() {
            if o.survivor as usize != i {
                assert!(edges.iter().any(|e| (e.a, e.b) == (o.survivor.min(i as u32), o.survivor.max(i as u32))));
            }
        }
    }

    #[test]
    fn classes_take_their_members_before_pairs() {
        let keys: Vec<SurvivorKey> = ["a", "b", "c", "d"]
            .iter()
            .map(|id| key(Some("MIT"), 0, 10, id))
            .collect();
        let exact = Classes::from_keys(DedupMethod::Exact, &[Some(7u8), Some(1), Some(7), None]);
        assert_eq!(exact.members, vec![vec![0, 2]]);
        let structural = Classes::from_keys(
            DedupMethod::Structural,
            &[Some(5u8), Some(5), Some(5), Some(9)],
        );
        let edges = vec![
            edge(0, 2, DedupMethod::Near),
            edge(0, 3, DedupMethod::Semantic),
        ];
        let out = resolve(&keys, &[exact, structural], &edges, &[]);
        assert!(out.iter().all(|o| o.survivor == 0));
        assert_eq!(out[2].method, Some(DedupMethod::Exact));
        assert_eq!(out[2].similarity, Some(1.0));
        assert_eq!(out[1].method, Some(DedupMethod::Structural));
        assert_eq!(out[1].similarity, None);
        assert_eq!(out[3].method, Some(DedupMethod::Semantic));
    }

    #[test]
    fn code_matches_come_before_kernel_matches() {
        let keys: Vec<SurvivorKey> = ["a", "b", "c"]
            .iter()
            .map(|id| key(Some("MIT"), 0, 10, id))
            .collect();
        let kernel = Classes::from_keys(DedupMethod::Kernel, &[Some(1u8), Some(1), Some(1)]);
        let edges = vec![edge(0, 1, DedupMethod::Semantic)];
        let out = resolve(&keys, &[], &edges, &[kernel]);
        assert!(out.iter().all(|o| o.survivor == 0));
        assert_eq!(out[1].method, Some(DedupMethod::Semantic));
        assert_eq!(out[2].method, Some(DedupMethod::Kernel));
    }

    #[test]
    fn contamination_spreads_through_code_matches_only() {
        let keys: Vec<SurvivorKey> = ["a", "b", "c", "d", "e"]
            .iter()
            .map(|id| key(Some("MIT"), 0, 10, id))
            .collect();
        let kernel = Classes::from_keys(
            DedupMethod::Kernel,
            &[Some(1u8), Some(1), Some(1), Some(1), None],
        );
        // 0 survives; 1 is its near duplicate, 2 and 3 only compute the same; 4 is apart.
        let edges = vec![edge(0, 1, DedupMethod::Near)];
        let mut out = resolve(&keys, &[], &edges, std::slice::from_ref(&kernel));
        // A copy in the code part (the survivor) takes the code part, not the kernel part.
        let via = contain(
            &keys,
            &mut out,
            &[true, false, false, false, false],
            &[kernel],
        );
        assert_eq!(via, vec![None, Some(0), None, None, None]);
        // The kernel part regroups around its best member.
        assert_eq!((out[2].survivor, out[2].method), (2, None));
        assert_eq!(
            (out[3].survivor, out[3].method),
            (2, Some(DedupMethod::Kernel))
        );
        assert_eq!(out[4].survivor, 4);
        // A copy that is only a kernel match of the survivor goes alone.
        let kernel = Classes::from_keys(
            DedupMethod::Kernel,
            &[Some(1u8), Some(1), Some(1), Some(1), None],
        );
        let mut out = resolve(&keys, &[], &edges, std::slice::from_ref(&kernel));
        let via = contain(
            &keys,
            &mut out,
            &[false, false, false, true, false],
            &[kernel],
        );
        assert!(via.iter().all(Option::is_none));
        assert!(out[..3].iter().all(|o| o.survivor == 0));
    }

    #[test]
    fn singletons_survive_alone() {
        let keys = vec![key(None, 0, 1, "x"), key(None, 0, 1, "y")];
        let out = resolve(&keys, &[], &[], &[]);
        assert_eq!(out[0].survivor, 0);
        assert_eq!(out[1].survivor, 1);
    }

    #[test]
    fn license_ranks() {
        assert_eq!(license_rank(Some("MIT")), 0);
        assert_eq!(license_rank(Some("NOASSERTION")), 1);
        assert_eq!(license_rank(None), 1);
        assert_eq!(license_rank(Some("AGPL-3.0")), 2);
    }
}
