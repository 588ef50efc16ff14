//! Sharding the CPU stages by repository.
//!
//! A run at scale splits the repositories into `count` shards by a hash of their name; shard
//! `index` crawls, extracts and probes only its own repositories in its own work directory, on
//! any machine. `ksmith merge` then unions the shards' tables into one work directory for the
//! global stages (dedup onwards). The hash is a content hash of the name, so a repository always
//! lands in the same shard, on every machine and every night.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::ids::content_id;

/// Shard `index` of `count` (0-based).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Shard {
    /// This shard, from 0.
    pub index: u32,
    /// How many shards there are.
    pub count: u32,
}

impl Shard {
    /// The shard a repository belongs to, out of `count`.
    pub fn of(repo: &str, count: u32) -> u32 {
        let id = content_id(repo);
        let high = u64::from_str_radix(&id[..16], 16).unwrap_or(0);
        (high % u64::from(count.max(1))) as u32
    }

    /// True when `repo` belongs to this shard.
    pub fn contains(&self, repo: &str) -> bool {
        Shard::of(repo, self.count) == self.index
    }
}

impl fmt::Display for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

impl FromStr for Shard {
    type Err = String;

    /// Parses `INDEX/COUNT`, e.g. `3/16`.
    fn from_str(s: &str) -> Result<Shard, String> {
        let bad = || format!("shard must be INDEX/COUNT with 0 <= INDEX < COUNT, got `{s}`");
        let (i, n) = s.split_once('/').ok_or_else(bad)?;
        let index: u32 = i.trim().parse().map_err(|_| bad())?;
        let count: u32 = n.trim().parse().map_err(|_| bad())?;
        if count == 0 || index >= count {
            return Err(bad());
        }
        Ok(Shard { index, count })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_rejects() {
        assert_eq!(
            "3/16".parse::<Shard>(),
            Ok(Shard {
                index: 3,
                count: 16
            })
        );
        for bad in ["16/16", "1/0", "x/2", "2", "-1/3"] {
            assert!(bad.parse::<Shard>().is_err(), "{bad}");
        }
    }

    #[test]
    fn every_repository_is_in_exactly_one_shard() {
        let shards: Vec<Shard> = (0..4).map(|index| Shard { index, count: 4 }).collect();
        let mut sizes = [0u32; 4];
        for r in 0..1000 {
            let name = format!("owner/repo-{r}");
            let owners: Vec<&Shard> = shards.iter().filter(|s| s.contains(&name)).collect();
            assert_eq!(owners.len(), 1, "{name}");
            sizes[owners[0].index as usize] += 1;
        }
        assert!(sizes.iter().all(|&n| n > 180), "unbalanced: {sizes:?}");
    }
}
