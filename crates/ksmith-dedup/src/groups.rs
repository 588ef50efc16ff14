//! Duplicate groups: union-find over matched pairs, the survivor of each group, and what each
//! dropped member is recorded as duplicating.

use std::cmp::Ordering;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

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
        DedupMethod::Contamination => 4,
    }
}

/// Union-find with path halving and union by size.
#[derive(Debug, Clone)]
pub struct UnionFind {
    parent: Vec<u32>,
    size: Vec<u32>,
}

impl UnionFind {
    /// `n` singletons.
    pub fn new(n: usize) -> Self {
        UnionFind {
            parent: (0..n as u32).collect(),
            size: vec![1; n],
        }
    }

    /// The representative of `x`'s set.
    pub fn find(&mut self, mut x: u32) -> u32 {
        while self.parent[x as usize] != x {
            let grand = self.parent[self.parent[x as usize] as usize];
            self.parent[x as usize] = grand;
            x = grand;
        }
        x
    }

    /// Merges the sets of `a` and `b`.
    pub fn union(&mut self, a: u32, b: u32) {
        let (ra, rb) = (self.find(a), self.find(b));
        if ra == rb {
            return;
        }
        let (big, small) = if self.size[ra as usize] >= self.size[rb as usize] {
            (ra, rb)
        } else {
            (rb, ra)
        };
        self.parent[small as usize] = big;
        self.size[big as usize] += self.size[small as usize];
    }
}

/// The outcome for one item.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// The surviving item of its group (itself when kept).
    pub survivor: u32,
    /// The method of the edge through which it was reached from the survivor.
    pub method: Option<DedupMethod>,
    /// The similarity of that edge.
    pub similarity: Option<f64>,
}

/// Resolves groups: one outcome per item.
///
/// Items connected by edges form a group (connected component); its best member by
/// [`SurvivorKey::better`] survives. Every other member is recorded as a duplicate of the
/// survivor, with the method and similarity of the edge through which a best-first walk from the
/// survivor attached it: the walk always takes the strongest method (exact, structural, near,
/// semantic) leaving the part of the group reached so far, so a member reports the strongest
/// method that ties it to its group. The result depends only on the set of edges, not on their
/// order.
pub fn resolve(keys: &[SurvivorKey], edges: &[Edge]) -> Vec<Outcome> {
    let n = keys.len();
    let mut uf = UnionFind::new(n);
    let mut adj: Vec<Vec<(u8, u32, usize)>> = vec![Vec::new(); n];
    for (k, e) in edges.iter().enumerate() {
        if e.a == e.b {
            continue;
        }
        uf.union(e.a, e.b);
        let p = method_priority(e.method);
        adj[e.a as usize].push((p, e.b, k));
        adj[e.b as usize].push((p, e.a, k));
    }
    for list in &mut adj {
        // Sort by priority, neighbour, then the edge's own content (not its position).
        list.sort_by(|x, y| {
            x.0.cmp(&y.0).then(x.1.cmp(&y.1)).then_with(|| {
                let (ex, ey) = (&edges[x.2], &edges[y.2]);
                ey.similarity
                    .unwrap_or(1.0)
                    .partial_cmp(&ex.similarity.unwrap_or(1.0))
                    .unwrap_or(Ordering::Equal)
            })
        });
    }
    // Best member of each component.
    let mut best: Vec<Option<u32>> = vec![None; n];
    for i in 0..n as u32 {
        let r = uf.find(i) as usize;
        best[r] = Some(match best[r] {
            Some(b) if keys[b as usize].better(&keys[i as usize]) != Ordering::Greater => b,
            _ => i,
        });
    }
    let mut out: Vec<Option<Outcome>> = vec![None; n];
    for i in 0..n as u32 {
        let r = uf.find(i) as usize;
        let s = best[r].unwrap_or(i);
        if out[s as usize].is_some() {
            continue;
        }
        out[s as usize] = Some(Outcome {
            survivor: s,
            method: None,
            similarity: None,
        });
        // Best-first walk (Prim on method priority): a member is attached by the strongest
        // method that links it to the part of the group already reached.
        let mut heap: BinaryHeap<Reverse<(u8, u32, u32, usize)>> = BinaryHeap::new();
        let push = |heap: &mut BinaryHeap<_>, v: u32, order: &mut u32| {
            for &(p, w, k) in &adj[v as usize] {
                heap.push(Reverse((p, *order, w, k)));
                *order += 1;
            }
        };
        let mut order = 0u32;
        push(&mut heap, s, &mut order);
        while let Some(Reverse((_, _, w, k))) = heap.pop() {
            if out[w as usize].is_some() {
                continue;
            }
            out[w as usize] = Some(Outcome {
                survivor: s,
                method: Some(edges[k].method),
                similarity: edges[k].similarity,
            });
            push(&mut heap, w, &mut order);
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
        let edges = vec![
            edge(0, 1, DedupMethod::Near),
            edge(1, 2, DedupMethod::Exact),
            edge(2, 3, DedupMethod::Near),
            edge(3, 4, DedupMethod::Structural),
        ];
        let out = resolve(&keys, &edges);
        assert!(out.iter().all(|o| o.survivor == 3), "{out:?}");
        assert_eq!(out[3].method, None);
        assert_eq!(out[4].method, Some(DedupMethod::Structural));
        // 2 is reached from 3 by Near only; 1 then through 2 by Exact.
        assert_eq!(out[2].method, Some(DedupMethod::Near));
        assert_eq!(out[1].method, Some(DedupMethod::Exact));
        let mut shuffled = edges.clone();
        shuffled.reverse();
        assert_eq!(resolve(&keys, &shuffled), out);
    }

    #[test]
    fn singletons_survive_alone() {
        let keys = vec![key(None, 0, 1, "x"), key(None, 0, 1, "y")];
        let out = resolve(&keys, &[]);
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
