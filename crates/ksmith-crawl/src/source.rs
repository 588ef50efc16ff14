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

/// The default repository name of a URL or path: `owner/name` for a URL with a host,
/// the last path component otherwise, without a `.git` suffix.
pub fn default_name(location: &str) -> String {
    let (has_host, path) = if let Some(i) = location.find("://") {
        let rest = &location[i + 3..];
        let scheme = &location[..i];
        match rest.find('/') {
            Some(slash) if scheme != "file" => (true, rest[slash..].to_string()),
            _ if scheme == "file" => (false, rest.to_string()),
            _ => (true, String::new()),
        }
    } else if is_scp_like(location) {
        let colon = location.find(':').unwrap_or(0);
        (true, location[colon + 1..].to_string())
    } else {
        (false, location.to_string())
    };
    let segments: Vec<&str> = path
        .split(['/', '\\'])
        .filter(|s| !s.is_empty() && *s != ".")
        .collect();
    let strip = |s: &str| s.strip_suffix(".git").unwrap_or(s).to_string();
    let name = match (has_host, segments.as_slice()) {
        (true, [.., owner, repo]) => format!("{owner}/{}", strip(repo)),
        (_, [.., last]) => strip(last),
        _ => String::new(),
    };
    if name.is_empty() || name == ".." {
        "repo".to_string()
    } else {
        name
    }
}

/// Expands the configured sources (reading manifests) into repositories, in order.
///
/// A malformed source or manifest line is an error: the configuration must be fixed before
/// anything is crawled.
pub fn expand(sources: &[SourceSpec]) -> Result<Vec<RepoSource>, Error> {
    let mut out = Vec::new();
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
            out.extend(manifest::read(manifest_path)?);
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
        let name = match &spec.name {
            Some(n) if !n.trim().is_empty() => n.trim().to_string(),
            Some(_) => {
                return Err(Error::Config {
                    message: format!("{origin}: `name` is empty"),
                });
            }
            None => default_name(&url),
        };
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
