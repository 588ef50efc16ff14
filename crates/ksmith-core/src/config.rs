//! The configuration: one TOML file, every key documented in `configs/default.toml`.
//!
//! The file has a `[run]` table (work directory, threads), a list of `[[source]]` tables (what
//! crawl reads) and one table per stage (`[crawl]`, `[extract]`, ...). Each stage crate owns the
//! type of its own table and reads it with [`Config::section`]; a missing table means the
//! stage's defaults. Unknown top-level tables are an error, so a typo is caught before any work
//! starts.
//!
//! Relative paths in the file are resolved against the current working directory.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::ids::content_id;

/// The names of the per-stage tables a configuration may contain (and `[sandbox]`, which the
/// probe and the evaluator share).
pub const STAGE_SECTIONS: &[&str] = &[
    "discover", "crawl", "extract", "probe", "dedup", "cluster", "eval", "rollout", "teacher",
    "select", "export", "sandbox",
];

/// Settings that concern the whole run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RunConfig {
    /// Where tables, mirrors and reports go (overridden by `--workdir`).
    pub workdir: PathBuf,
    /// Worker threads for the CPU stages; 0 means one per core.
    pub threads: usize,
}

impl Default for RunConfig {
    fn default() -> Self {
        RunConfig {
            workdir: PathBuf::from("work"),
            threads: 0,
        }
    }
}

/// One `[[source]]` entry: where crawl finds repositories.
///
/// Exactly one of `git`, `path` and `manifest` is set.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SourceSpec {
    /// Name of the repository in the tables; derived from the URL or path when absent.
    pub name: Option<String>,
    /// A git URL (`https://`, `file://`) or the path of a local git repository (bare or not).
    pub git: Option<String>,
    /// A local folder that is not a git repository, read as it is.
    pub path: Option<PathBuf>,
    /// A JSONL manifest, one repository a line: `repo`, `url`, `rev`, `license`, `stars` (and
    /// what `ksmith discover` records besides; see [`crate::manifest`]).
    pub manifest: Option<PathBuf>,
    /// Branch, tag or commit to pin (the remote HEAD when absent).
    pub rev: Option<String>,
    /// License to record instead of the one detected from the repository's license file.
    pub license: Option<String>,
    /// Star count to record (provenance and dedup tie-breaks).
    pub stars: Option<i64>,
}

impl SourceSpec {
    /// Checks that exactly one location is given.
    pub fn validate(&self, index: usize) -> std::result::Result<(), String> {
        let given = [
            self.git.is_some(),
            self.path.is_some(),
            self.manifest.is_some(),
        ]
        .iter()
        .filter(|g| **g)
        .count();
        if given != 1 {
            return Err(format!(
                "source #{} must set exactly one of `git`, `path` and `manifest` (found {given})",
                index + 1
            ));
        }
        Ok(())
    }
}

#[derive(Deserialize)]
struct RawConfig {
    #[serde(default)]
    run: RunConfig,
    #[serde(default)]
    source: Vec<SourceSpec>,
    #[serde(flatten)]
    sections: BTreeMap<String, toml::Value>,
}

/// A loaded configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// Where it came from: a path, or `embedded default`.
    pub origin: String,
    /// The `[run]` table.
    pub run: RunConfig,
    /// The `[[source]]` tables, in file order.
    pub sources: Vec<SourceSpec>,
    sections: BTreeMap<String, toml::Value>,
}

impl Config {
    /// Reads and parses a configuration file.
    pub fn load(path: &Path) -> Result<Config> {
        let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
        Config::parse(&text, &path.display().to_string())
    }

    /// Parses configuration text; `origin` names it in error messages.
    pub fn parse(text: &str, origin: &str) -> Result<Config> {
        let raw: RawConfig = toml::from_str(text).map_err(|e| Error::Config {
            origin: origin.to_string(),
            message: e.to_string(),
        })?;
        for name in raw.sections.keys() {
            if !STAGE_SECTIONS.contains(&name.as_str()) {
                return Err(Error::Config {
                    origin: origin.to_string(),
                    message: format!(
                        "unknown table `[{name}]`; known tables are [run], [[source]] and {}",
                        STAGE_SECTIONS
                            .iter()
                            .map(|s| format!("[{s}]"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                });
            }
        }
        for (i, source) in raw.source.iter().enumerate() {
            source.validate(i).map_err(|message| Error::Config {
                origin: origin.to_string(),
                message,
            })?;
        }
        Ok(Config {
            origin: origin.to_string(),
            run: raw.run,
            sources: raw.source,
            sections: raw.sections,
        })
    }

    /// The typed table of one stage, or its defaults when the file has none.
    ///
    /// Unknown keys and wrongly typed values are errors that name the table.
    pub fn section<T: DeserializeOwned + Default>(&self, name: &str) -> Result<T> {
        match self.sections.get(name) {
            None => Ok(T::default()),
            Some(value) => value.clone().try_into().map_err(|e| Error::Config {
                origin: self.origin.clone(),
                message: format!("[{name}]: {e}"),
            }),
        }
    }

    /// Applies one `SECTION.KEY=VALUE` override (the CLI's `--set`) on top of the file: VALUE
    /// is read as a TOML value (`8`, `true`, `"x"`, `[1, 2]`) and otherwise taken as a string
    /// (`probe.ray_address=auto`). The section must be a stage's; the typed check of the value
    /// happens when the section is read, as for a value in the file.
    pub fn set(&mut self, assignment: &str) -> Result<()> {
        let bad = |message: String| Error::Config {
            origin: format!("--set {assignment}"),
            message,
        };
        let (path, value) = assignment
            .split_once('=')
            .ok_or_else(|| bad("expected SECTION.KEY=VALUE".into()))?;
        let (section, key) = path
            .trim()
            .split_once('.')
            .ok_or_else(|| bad("expected SECTION.KEY=VALUE".into()))?;
        if !STAGE_SECTIONS.contains(&section) {
            return Err(bad(format!(
                "unknown table `[{section}]`; --set takes {}",
                STAGE_SECTIONS.join(", ")
            )));
        }
        if key.is_empty() || key.contains('.') {
            return Err(bad(format!("`{key}` is not a key of [{section}]")));
        }
        let value = value.trim();
        let parsed = toml::from_str::<toml::Table>(&format!("v = {value}"))
            .ok()
            .and_then(|mut t| t.remove("v"))
            .unwrap_or_else(|| toml::Value::String(value.to_string()));
        let table = self
            .sections
            .entry(section.to_string())
            .or_insert_with(|| toml::Value::Table(Default::default()));
        let toml::Value::Table(table) = table else {
            return Err(bad(format!(
                "[{section}] is not a table in {}",
                self.origin
            )));
        };
        table.insert(key.to_string(), parsed);
        self.origin = format!("{} with --set {assignment}", self.origin);
        Ok(())
    }

    /// True when the file's `[section]` table sets `key` (as opposed to taking its default).
    pub fn section_has_key(&self, section: &str, key: &str) -> bool {
        self.sections
            .get(section)
            .and_then(|v| v.as_table())
            .is_some_and(|t| t.contains_key(key))
    }

    /// A hash of the sources list, used in crawl's fingerprint.
    pub fn sources_hash(&self) -> String {
        content_id(serde_json::to_vec(&self.sources).unwrap_or_default())
    }
}

/// The hash of a typed config section, for stage fingerprints.
///
/// Hashes the section after defaults were applied, so writing a default value explicitly does not
/// change the fingerprint.
pub fn section_hash<T: Serialize>(section: &T) -> String {
    content_id(serde_json::to_vec(section).unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Default, PartialEq, Serialize, Deserialize)]
    #[serde(deny_unknown_fields, default)]
    struct Demo {
        limit: u32,
    }

    #[test]
    fn missing_section_gives_defaults() {
        let cfg = Config::parse("", "test").expect("parses");
        assert_eq!(cfg.run, RunConfig::default());
        let demo: Demo = cfg.section("crawl").expect("section");
        assert_eq!(demo, Demo::default());
    }

    #[test]
    fn section_is_typed_and_strict() {
        let cfg = Config::parse("[crawl]\nlimit = 3\n", "test").expect("parses");
        let demo: Demo = cfg.section("crawl").expect("section");
        assert_eq!(demo.limit, 3);
        let cfg = Config::parse("[crawl]\nlimt = 3\n", "test").expect("parses");
        let err = cfg.section::<Demo>("crawl").expect_err("typo must fail");
        assert!(err.to_string().contains("[crawl]"), "{err}");
        assert!(err.to_string().contains("limt"), "{err}");
    }

    #[derive(Debug, Default, PartialEq, Serialize, Deserialize)]
    #[serde(deny_unknown_fields, default)]
    struct Overridden {
        limit: u32,
        address: String,
        on: bool,
    }

    #[test]
    fn set_overrides_the_file_with_typed_values_or_strings() {
        let mut cfg = Config::parse(
            "[probe]
limit = 3
on = true
",
            "cfg.toml",
        )
        .unwrap();
        cfg.set("probe.limit=8").unwrap();
        cfg.set("probe.address=auto").unwrap();
        cfg.set("probe.on = false").unwrap();
        let got: Overridden = cfg.section("probe").unwrap();
        assert_eq!(
            got,
            Overridden {
                limit: 8,
                address: "auto".into(),
                on: false
            }
        );
        // A section the file lacks is created; a wrongly typed value fails when read, naming
        // the override.
        cfg.set("dedup.limit=many").unwrap();
        let err = cfg.section::<Overridden>("dedup").unwrap_err().to_string();
        assert!(err.contains("--set dedup.limit=many"), "{err}");
    }

    #[test]
    fn set_rejects_what_is_not_a_stage_key() {
        let mut cfg = Config::parse("", "t").unwrap();
        for bad in ["probe", "probe.x.y=1", "nope.x=1", "run.threads=2", ".x=1"] {
            let err = cfg.set(bad).expect_err(bad).to_string();
            assert!(err.contains(bad), "{err}");
        }
    }

    #[test]
    fn unknown_table_is_rejected() {
        let err = Config::parse("[crawll]\n", "cfg.toml").expect_err("typo must fail");
        assert!(err.to_string().contains("crawll"), "{err}");
        assert!(err.to_string().contains("cfg.toml"), "{err}");
    }

    #[test]
    fn sources_need_exactly_one_location() {
        let ok = Config::parse("[[source]]\npath = \"data/x\"\n", "t").expect("parses");
        assert_eq!(ok.sources.len(), 1);
        let err = Config::parse("[[source]]\npath = \"a\"\ngit = \"b\"\n", "t")
            .expect_err("two locations");
        assert!(err.to_string().contains("exactly one"), "{err}");
        Config::parse("[[source]]\nname = \"x\"\n", "t").expect_err("no location");
    }
}
