//! Incremental re-runs: a module whose program was probed before, with the same `[probe]`
//! configuration, runner source and LLM setting, keeps its previous row.
//!
//! Module ids are content hashes of the program, and a probe is deterministic for a program
//! (fixed seed), so a nightly refresh probes only new or changed modules. The key of the
//! previous run is kept next to the table in `probes.key`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use ksmith_core::config::section_hash;
use ksmith_core::ids::IdHasher;
use ksmith_core::table::{Table, read_table, write_bytes_atomically};
use ksmith_core::tables::{ModuleRow, ProbeRow, ProbeStatus};

use crate::config::ProbeConfig;
use crate::{CODE_VERSION, runtime};

/// Where the key of the last run is kept.
pub fn key_path(workdir: &Path) -> PathBuf {
    workdir.join("probes.key")
}

/// What decides a module's row besides its program.
pub fn key(cfg: &ProbeConfig, has_chat: bool) -> String {
    let llm = if cfg.llm_repair && has_chat {
        "on"
    } else {
        "off"
    };
    IdHasher::new()
        .part(CODE_VERSION.to_le_bytes())
        .part(section_hash(&cfg.output_relevant()))
        .part(runtime::runner_hash())
        .part(llm)
        .finish()
}

/// Rows of the previous run by module id, when it was made with `key` (else empty).
///
/// Rows that ended in `crashed` or `timeout` are not reused: those can depend on the machine's
/// load or a worker that died, so they are probed again.
pub fn previous_rows(workdir: &Path, key: &str) -> HashMap<String, ProbeRow> {
    let stored = std::fs::read_to_string(key_path(workdir)).unwrap_or_default();
    if stored.trim() != key {
        return HashMap::new();
    }
    let rows: Vec<ProbeRow> = read_table(&ProbeRow::path_in(workdir)).unwrap_or_default();
    rows.into_iter()
        .filter(|r| !matches!(r.status, ProbeStatus::Crashed | ProbeStatus::Timeout))
        .map(|r| (r.module_id.clone(), r))
        .collect()
}

/// All rows in the order of `todo`: reused rows (with the current module's repo and class)
/// and the rows just probed (`fresh`, in the order of the modules not in `previous`).
pub fn merge(
    todo: &[&ModuleRow],
    previous: &HashMap<String, ProbeRow>,
    fresh: Vec<ProbeRow>,
) -> Vec<ProbeRow> {
    let mut fresh = fresh.into_iter();
    let mut out = Vec::with_capacity(todo.len());
    for m in todo {
        match previous.get(&m.id) {
            Some(row) => {
                let mut row = row.clone();
                row.repo = m.repo.clone();
                row.class_name = m.class_name.clone();
                out.push(row);
            }
            None => {
                if let Some(row) = fresh.next() {
                    out.push(row);
                }
            }
        }
    }
    out
}

/// Records the key of the run that wrote `probes.parquet`.
pub fn save_key(workdir: &Path, key: &str) -> ksmith_core::Result<()> {
    write_bytes_atomically(&key_path(workdir), key.as_bytes())
}
