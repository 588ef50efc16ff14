//! The cluster centers a reviewer sees: their program, family, level, cluster size and any
//! answer already saved, read from `clusters.parquet`, `probes.parquet` (the repaired program)
//! or `modules.parquet`, and `annotations.parquet`.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use ksmith_core::table::{Table, read_table};
use ksmith_core::tables::{AnnotationRow, ClusterRow, ModuleRow, ProbeRow};

use crate::Error;

/// One cluster center to review.
#[derive(Debug, Clone, PartialEq)]
pub struct Center {
    /// Module id (the task id).
    pub module_id: String,
    /// Class name in its repository.
    pub class_name: String,
    /// Repository.
    pub repo: String,
    /// The program (the probe's repaired one when there is one).
    pub program: String,
    /// Family as labelled (by the rules, or by an earlier review through cluster).
    pub family: String,
    /// The rule that gave the family.
    pub family_rule: String,
    /// Level as labelled.
    pub level: u8,
    /// Cluster id.
    pub cluster: i32,
    /// Modules in its cluster.
    pub cluster_size: usize,
    /// The answer saved for it, if any.
    pub saved: Option<AnnotationRow>,
}

/// What the page shows: the centers (largest clusters first) and every family in use.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Catalog {
    /// The centers.
    pub centers: Vec<Center>,
    /// Families of all clustered modules and of saved relabels, sorted.
    pub families: Vec<String>,
}

fn table<T: Table>(workdir: &Path) -> Result<Option<Vec<T>>, Error> {
    let path = T::path_in(workdir);
    if !path.exists() {
        return Ok(None);
    }
    Ok(Some(read_table(&path)?))
}

/// Reads the centers of `workdir`; without `clusters.parquet` it is an error naming the stage.
pub fn load(workdir: &Path) -> Result<Catalog, Error> {
    let clusters_path = ClusterRow::path_in(workdir);
    let clusters: Vec<ClusterRow> = table(workdir)?.ok_or(ksmith_core::Error::MissingInput {
        path: clusters_path,
        writer: "cluster",
    })?;
    let modules: Vec<ModuleRow> = table(workdir)?.unwrap_or_default();
    let probes: Vec<ProbeRow> = table(workdir)?.unwrap_or_default();
    let saved: Vec<AnnotationRow> = table(workdir)?.unwrap_or_default();
    let modules: HashMap<&str, &ModuleRow> = modules.iter().map(|m| (m.id.as_str(), m)).collect();
    let repaired: HashMap<&str, &str> = probes
        .iter()
        .filter_map(|p| p.program.as_deref().map(|s| (p.module_id.as_str(), s)))
        .collect();
    let saved: HashMap<String, AnnotationRow> = saved
        .into_iter()
        .map(|a| (a.module_id.clone(), a))
        .collect();
    let mut sizes: BTreeMap<i32, usize> = BTreeMap::new();
    for r in &clusters {
        *sizes.entry(r.cluster).or_default() += 1;
    }
    let mut families: Vec<String> = clusters.iter().map(|r| r.family.clone()).collect();
    families.extend(saved.values().filter_map(|a| a.family.clone()));
    families.sort();
    families.dedup();
    let mut centers: Vec<Center> = clusters
        .iter()
        .filter(|r| r.is_center)
        .map(|r| {
            let module = modules.get(r.module_id.as_str());
            let program = repaired
                .get(r.module_id.as_str())
                .map(|s| s.to_string())
                .or_else(|| module.and_then(|m| m.program.clone()))
                .unwrap_or_default();
            Center {
                module_id: r.module_id.clone(),
                class_name: module.map(|m| m.class_name.clone()).unwrap_or_default(),
                repo: module.map(|m| m.repo.clone()).unwrap_or_default(),
                program,
                family: r.family.clone(),
                family_rule: r.family_rule.clone(),
                level: r.level,
                cluster: r.cluster,
                cluster_size: sizes.get(&r.cluster).copied().unwrap_or(1),
                saved: saved.get(&r.module_id).cloned(),
            }
        })
        .collect();
    centers.sort_by(|a, b| {
        b.cluster_size
            .cmp(&a.cluster_size)
            .then(a.module_id.cmp(&b.module_id))
    });
    Ok(Catalog { centers, families })
}
