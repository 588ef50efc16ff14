//! Turning `[[source]]` entries and manifest lines into the list of repositories to crawl.

use std::path::{Path, PathBuf};

use ksmith_core::config::SourceSpec;
use ksmith_core::ids::content_id;
use ksmith_core::tables::SourceKind;

use crate::error::Error;
use crate::manifest;

/// Where one repository is read from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    /// A git URL, fetched into the mirror cache.
    Url(String),
    /// A git repository on this machine, read in place (bare or not).
    LocalGit(PathBuf),
    /// A plain folder, read as it is.
    Folder(PathBuf),
}

impl Location {
    /// The `source_kind` column for this location.
    pub fn kind(&self) -> SourceKind {
        match self {
            Location::Url(_) => SourceKind::Git,
            Location::LocalGit(_) => SourceKind::LocalGit,
            Location::Folder(_) => SourceKind::Folder,
        }
    }
}

/// One repository to crawl, with what the configuration or manifest says about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepoSource {
    /// Unique name in the tables.
    pub name: String,
    /// Where it is read from.
    pub location: Location,
    /// What the `url` column records (credentials removed).
    pub url: String,
    /// Branch, tag or commit asked for.
    pub rev: Option<String>,
    /// License given by the configuration or manifest, overriding detection.
    pub license: Option<String>,
    /// `config` or `manifest` when `license` is set.
    pub license_source: Option<&'static str>,
    /// Star count.
    pub stars: Option<i64>,
    /// Where this entry was given, for messages (`source #2`, `manifest m.jsonl line 4`).
    pub origin: String,
}

impl RepoSource {
    /// The folder name used for this repository's mirror and snapshots: a sanitized name and
    /// a short hash of its URL, so two repositories never share one.
    pub fn key(&self) -> String {
        let mut safe: String = self
            .name
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' {
                    c
                } else {
                    '_'
                }
            })
            .take(64)
            .collect();
        if safe.trim_matches('.').is_empty() {
            safe = "repo".to_string();
        }
        let hash = content_id(format!("{}\n{}", self.name, self.url));
        format!("{safe}-{}", &hash[..10])
    }
}

/// True when a `git` value is a URL rather than a local path.
pub fn is_url(value: &str) -> bool {
    value.contains("://") || is_scp_like(value)
}

/// `user@host:path`, the scp-like syntax of ssh remotes.
fn is_scp_like(value: &str) -> bool {
    match (value.find('@'), value.find(':')) {
        (Some(at), Some(colon)) => at < colon && !value[..colon].contains('/'),
        _ => false,
    }
}

/// A URL with any `user:password@` part removed, so tokens never reach the tables.
pub fn redact_url(url: &str) -> String {
    let Some(scheme_end) = url.find("://") else {
        return url.to_string();
    };
    let rest = &url[scheme_end + 3..];
    let authority_end = rest.find('/').unwrap_or(rest.len());
    match rest[..authority_end].rfind('@') {
        Some(at) => format!("{}{}", &url[..scheme_end + 3], &rest[at + 1..]),
        None => url.to_string(),
    }
}

/// The names a repository at a URL or path can go by, shortest first: `owner/name` for a URL
/// with a host, then with each folder above it and finally the host; for a path (or `file://`
/// URL) the last folder, then with each parent folder. `.git` is dropped from the last part.
pub fn name_candidates(location: &str) -> Vec<String> {
    let (host, path) = if let Some(i) = location.find("://") {
        let rest = &location[i + 3..];
        let scheme = &location[..i];
        match rest.find('/') {
            _ if scheme == "file" => (None, rest.to_string()),
            Some(slash) => (Some(&rest[..slash]), rest[slash..].to_string()),
            None => (Some(rest), String::new()),
        }
    } else if is_scp_like(location) {
        let colon = location.find(':').unwrap_or(0);
        let at = location.find('@').map_or(0, |a| a + 1);
        (
            Some(&location[at..colon]),
            location[colon + 1..].to_string(),
        )
    } else {
        (None, location.to_string())
    };
    let mut parts: Vec<String> = path
        .split(['/', '\\'])
        .filter(|s| !s.is_empty() && *s != "." && *s != "..")
        .map(str::to_string)
        .collect();
    if let Some(last) = parts.last_mut()
        && let Some(stripped) = last.strip_suffix(".git")
    {
        *last = stripped.to_string();
    }
    parts.retain(|p| !p.is_empty());
    if let Some(host) = host.filter(|h| !h.is_empty()) {
        // The host (without user or port) is the outermost part of a URL's name.
        let host = host.rsplit('@').next().unwrap_or(host);
        parts.insert(0, host.split(':').next().unwrap_or(host).to_string());
    }
    // A URL's shortest name is `owner/name` (two parts), a path's the last folder.
    let shortest = if host.is_some() { 2 } else { 1 };
    let mut out = Vec::new();
    for take in shortest.min(parts.len())..=parts.len() {
        if take > 0 {
            out.push(parts[parts.len() - take..].join("/"));
        }
    }
    out
}

/// The default repository name of a URL or path: `owner/name` for a URL with a host,
/// the last path component otherwise, without a `.git` suffix (the first of
/// [`name_candidates`]).
pub fn default_name(location: &str) -> String {
    name_candidates(location)
        .into_iter()
        .next()
        .unwrap_or_else(|| "repo".to_string())
}

/// Makes derived names unique: a source without a `name` whose derived name another source
/// also has takes its next longer candidate (`/a/x/repo` and `/b/y/repo` become `x/repo` and
/// `y/repo`), until no two names collide or the candidates run out. `candidates[i]` is `None`
/// for a source whose name is given.
fn disambiguate(names: &mut [String], candidates: &[Option<Vec<String>>]) {
    let mut level = vec![0usize; names.len()];
    // The same place given twice has no longer name that tells them apart.
    let same_place = |i: usize| {
        (0..candidates.len())
            .any(|j| j != i && candidates[j].is_some() && candidates[j] == candidates[i])
    };
    loop {
        let mut count: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
        for n in names.iter() {
            *count.entry(n.as_str()).or_default() += 1;
        }
        let colliding: Vec<usize> = (0..names.len())
            .filter(|&i| count.get(names[i].as_str()).copied().unwrap_or(0) > 1)
            .filter(|&i| {
                candidates[i]
                    .as_ref()
                    .is_some_and(|c| level[i] + 1 < c.len())
                    && !same_place(i)
            })
            .collect();
        if colliding.is_empty() {
            return;
        }
        for i in colliding {
            level[i] += 1;
            if let Some(c) = &candidates[i] {
                names[i] = c[level[i]].clone();
            }
        }
    }
}

/// Expands the configured sources (reading manifests) into repositories, in order.
///
/// A malformed source or manifest line is an error: the configuration must be fixed before
/// anything is crawled.
pub fn expand(sources: &[SourceSpec]) -> Result<Vec<RepoSource>, Error> {
    let mut out = Vec::new();
    // The longer names each source without a `name` could take (None: given or from a manifest).
    let mut derived: Vec<Option<Vec<String>>> = Vec::new();
    for (i, spec) in sources.iter().enumerate() {
        spec.validate(i)
            .map_err(|message| Error::Config { message })?;
        let origin = format!("source #{}", i + 1);
        if let Some(manifest_path) = &spec.manifest {
            if spec.name.is_some()
                || spec.rev.is_some()
                || spec.license.is_some()
                || spec.stars.is_some()
            {
                return Err(Error::Config {
                    message: format!(
                        "{origin}: a manifest source takes `name`, `rev`, `license` and `stars` from each manifest line, not from the source"
                    ),
                });
            }
            let listed = manifest::read(manifest_path)?;
            derived.extend(listed.iter().map(|_| None));
            out.extend(listed);
            continue;
        }
        let (location, raw) = match (&spec.git, &spec.path) {
            (Some(git), _) if is_url(git) => (Location::Url(git.clone()), git.clone()),
            (Some(git), _) => (Location::LocalGit(PathBuf::from(git)), git.clone()),
            (None, Some(path)) => (Location::Folder(path.clone()), path.display().to_string()),
            (None, None) => {
                return Err(Error::Config {
                    message: format!("{origin}: no location"),
                });
            }
        };
        let url = redact_url(&raw);
        let (name, candidates) = match &spec.name {
            Some(n) if !n.trim().is_empty() => (n.trim().to_string(), None),
            Some(_) => {
                return Err(Error::Config {
                    message: format!("{origin}: `name` is empty"),
                });
            }
            None => (default_name(&url), Some(name_candidates(&url))),
        };
        derived.push(candidates);
        if let Some(l) = &spec.license
            && !crate::license::is_plausible_spdx_id(l)
        {
            return Err(Error::Config {
                message: format!("{origin}: license `{l}` is not an SPDX id"),
            });
        }
        if matches!(location, Location::Folder(_)) && spec.rev.is_some() {
            return Err(Error::Config {
                message: format!("{origin}: `rev` only applies to git sources"),
            });
        }
        out.push(RepoSource {
            name,
            location,
            url,
            rev: spec.rev.clone(),
            license: spec.license.clone(),
            license_source: spec.license.as_ref().map(|_| "config"),
            stars: spec.stars,
            origin,
        });
    }
    let mut names: Vec<String> = out.iter().map(|r| r.name.clone()).collect();
    disambiguate(&mut names, &derived);
    for (repo, name) in out.iter_mut().zip(names) {
        repo.name = name;
    }
    Ok(out)
}

/// Resolves a manifest `url` that is a relative local path against the manifest's folder.
pub fn resolve_relative(base: &Path, value: &str) -> Location {
    if is_url(value) {
        Location::Url(value.to_string())
    } else {
        let p = Path::new(value);
        if p.is_absolute() {
            Location::LocalGit(p.to_path_buf())
        } else {
            Location::LocalGit(base.join(p))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_from_urls_and_paths() {
        assert_eq!(
            default_name("https://github.com/owner/proj.git"),
            "owner/proj"
        );
        assert_eq!(default_name("https://github.com/owner/proj/"), "owner/proj");
        assert_eq!(default_name("git@github.com:owner/proj.git"), "owner/proj");
        assert_eq!(default_name("file:///tmp/x/proj.git"), "proj");
        assert_eq!(default_name("/srv/repos/proj"), "proj");
        assert_eq!(default_name("data/corpus/attn/"), "attn");
        assert_eq!(default_name("/"), "repo");
        assert_eq!(default_name(".."), "repo");
    }

    #[test]
    fn longer_names_come_from_parent_folders_and_hosts() {
        assert_eq!(
            name_candidates("/work/.mirror/owner+name/repo"),
            vec![
                "repo",
                "owner+name/repo",
                ".mirror/owner+name/repo",
                "work/.mirror/owner+name/repo"
            ]
        );
        assert_eq!(
            name_candidates("https://user@gitlab.com:8443/group/sub/proj.git"),
            vec!["sub/proj", "group/sub/proj", "gitlab.com/group/sub/proj"]
        );
        assert_eq!(
            name_candidates("git@github.com:owner/proj.git"),
            vec!["owner/proj", "github.com/owner/proj"]
        );
        assert_eq!(
            name_candidates("file:///tmp/x/proj.git"),
            vec!["proj", "x/proj", "tmp/x/proj"]
        );
    }

    #[test]
    fn derived_names_are_made_unique_and_given_names_win() {
        let git = |v: &str| SourceSpec {
            git: Some(v.into()),
            ..Default::default()
        };
        let named = |v: &str, n: &str| SourceSpec {
            git: Some(v.into()),
            name: Some(n.into()),
            ..Default::default()
        };
        let names = |specs: &[SourceSpec]| -> Vec<String> {
            expand(specs).unwrap().into_iter().map(|r| r.name).collect()
        };
        assert_eq!(
            names(&[git("/a/x/repo"), git("/b/y/repo"), git("/c/z/other")]),
            ["x/repo", "y/repo", "other"]
        );
        assert_eq!(
            names(&[git("/a/x/repo"), git("/b/x/repo"), git("/c/z/repo")]),
            ["a/x/repo", "b/x/repo", "z/repo"]
        );
        assert_eq!(
            names(&[
                git("https://github.com/o/r.git"),
                git("https://gitlab.com/o/r")
            ]),
            ["github.com/o/r", "gitlab.com/o/r"]
        );
        // A given name stays; the derived one moves out of its way.
        assert_eq!(
            names(&[named("/a/x/repo", "repo"), git("/b/y/repo")]),
            ["repo", "y/repo"]
        );
        // The same place twice cannot be told apart: both keep the name (run() then asks for one).
        assert_eq!(names(&[git("/x/proj"), git("/x/proj")]), ["proj", "proj"]);
    }

    #[test]
    fn urls_versus_paths() {
        assert!(is_url("https://h/x"));
        assert!(is_url("file:///x"));
        assert!(is_url("git@h:x/y"));
        assert!(!is_url("/srv/x"));
        assert!(!is_url("./relative/dir"));
        assert!(!is_url("dir/user@x:y"));
    }

    #[test]
    fn credentials_never_reach_the_table() {
        assert_eq!(
            redact_url("https://user:tok3n@github.com/o/r.git"),
            "https://github.com/o/r.git"
        );
        assert_eq!(
            redact_url("https://github.com/o/r@x"),
            "https://github.com/o/r@x"
        );
        assert_eq!(redact_url("/local/path"), "/local/path");
        let spec = SourceSpec {
            git: Some("https://u:secret@example.com/o/r.git".into()),
            ..Default::default()
        };
        let repos = expand(&[spec]).unwrap();
        assert_eq!(repos[0].url, "https://example.com/o/r.git");
        assert_eq!(repos[0].name, "o/r");
        assert_eq!(
            repos[0].location,
            Location::Url("https://u:secret@example.com/o/r.git".into())
        );
    }

    #[test]
    fn keys_are_safe_and_distinct() {
        let mk = |name: &str, url: &str| RepoSource {
            name: name.into(),
            location: Location::Url(url.into()),
            url: url.into(),
            rev: None,
            license: None,
            license_source: None,
            stars: None,
            origin: String::new(),
        };
        let a = mk("o/r", "https://a/o/r").key();
        let b = mk("o/r", "https://b/o/r").key();
        assert_ne!(a, b);
        assert!(a.starts_with("o_r-"));
        let evil = mk("../../etc", "x").key();
        assert!(!evil.contains('/'), "{evil}");
        assert!(mk("..", "x").key().starts_with("repo-"));
    }

    #[test]
    fn bad_sources_are_config_errors() {
        let spec = SourceSpec {
            path: Some("x".into()),
            rev: Some("main".into()),
            ..Default::default()
        };
        assert!(expand(&[spec]).unwrap_err().to_string().contains("rev"));
        let spec = SourceSpec {
            git: Some("x".into()),
            license: Some("MIT License".into()),
            ..Default::default()
        };
        assert!(expand(&[spec]).unwrap_err().to_string().contains("SPDX"));
        let spec = SourceSpec {
            manifest: Some("m.jsonl".into()),
            stars: Some(3),
            ..Default::default()
        };
        assert!(
            expand(&[spec])
                .unwrap_err()
                .to_string()
                .contains("manifest")
        );
        let spec = SourceSpec::default();
        assert!(
            expand(&[spec])
                .unwrap_err()
                .to_string()
                .contains("exactly one")
        );
    }
}
