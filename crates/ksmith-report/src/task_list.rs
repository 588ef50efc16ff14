//! The tasks the run made: what each is (family, level), how large (its sizes, the estimated
//! eager time of one call on the reference GPU) and where it came from (a link to the class).

use std::collections::HashMap;
use std::path::Path;

use ksmith_core::tables::{ModuleRow, ProbeRow, RepoRow, SourceKind, TaskRow};

/// One task as the report lists it.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskInfo {
    /// The task.
    pub task_id: String,
    /// Its module's class name in the repository.
    pub class_name: String,
    /// Its functional family.
    pub family: String,
    /// Its difficulty level.
    pub level: u8,
    /// Its sizes (`batch_size=16, dim=4096`); empty when the program was not sized.
    pub sizes: String,
    /// Estimated time of one forward call in PyTorch eager on the reference GPU, ms.
    pub est_ms: Option<f64>,
    /// Where the class is: `repo/path:line`.
    pub source: String,
    /// A link to it: the repository's web page at the pinned commit, or the crawled copy in
    /// the work directory; none when neither is known.
    pub href: Option<String>,
}

/// The tasks of `tasks` by family, level and class name, with what the other tables say about
/// each.
pub(crate) fn task_list(
    workdir: &Path,
    tasks: &[TaskRow],
    modules: &[ModuleRow],
    probes: &[ProbeRow],
    repos: &[RepoRow],
) -> Vec<TaskInfo> {
    let modules: HashMap<&str, &ModuleRow> = modules.iter().map(|m| (m.id.as_str(), m)).collect();
    let probes: HashMap<&str, &ProbeRow> =
        probes.iter().map(|p| (p.module_id.as_str(), p)).collect();
    let repos: HashMap<&str, &RepoRow> = repos.iter().map(|r| (r.repo.as_str(), r)).collect();
    let workdir = std::fs::canonicalize(workdir).ok();
    let mut list: Vec<TaskInfo> = tasks
        .iter()
        .map(|t| {
            let module = modules.get(t.task_id.as_str()).copied();
            let probe = probes.get(t.task_id.as_str());
            let repo = repos.get(t.repo.as_str()).copied();
            let (source, href) = source(workdir.as_deref(), &t.repo, repo, module);
            TaskInfo {
                task_id: t.task_id.clone(),
                class_name: t.class_name.clone(),
                family: t.family.clone(),
                level: t.level,
                sizes: probe.map(|p| sizes(&p.sizes)).unwrap_or_default(),
                est_ms: probe.and_then(|p| p.est_ms),
                source,
                href,
            }
        })
        .collect();
    list.sort_by(|a, b| {
        (&a.family, a.level, &a.class_name, &a.task_id).cmp(&(
            &b.family,
            b.level,
            &b.class_name,
            &b.task_id,
        ))
    });
    list
}

/// `{"batch_size": 16, "dim": 4096}` as `batch_size=16, dim=4096` (empty for `{}` or a text
/// that is not such an object).
fn sizes(json: &str) -> String {
    let Ok(serde_json::Value::Object(map)) = serde_json::from_str(json) else {
        return String::new();
    };
    map.iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Where a class is, as text, and a link to it.
fn source(
    workdir: Option<&Path>,
    repo_name: &str,
    repo: Option<&RepoRow>,
    module: Option<&ModuleRow>,
) -> (String, Option<String>) {
    let Some(m) = module else {
        return (repo_name.to_string(), None);
    };
    let text = format!("{repo_name}/{}:{}", m.path, m.line);
    let Some(repo) = repo else {
        return (text, None);
    };
    let web = repo.url.trim_end_matches('/').trim_end_matches(".git");
    let href =
        match (repo.source_kind, repo.commit.as_deref()) {
            (SourceKind::Git, Some(commit)) if web.starts_with("https://github.com/") => Some(
                format!("{web}/blob/{commit}/{}#L{}", encode(&m.path), m.line),
            ),
            (SourceKind::Git, Some(commit)) if web.starts_with("https://gitlab.com/") => Some(
                format!("{web}/-/blob/{commit}/{}#L{}", encode(&m.path), m.line),
            ),
            _ => match (workdir, &repo.snapshot) {
                (Some(w), Some(snapshot)) => Some(format!(
                    "file://{}",
                    encode(&w.join(snapshot).join(&m.path).to_string_lossy())
                )),
                _ => None,
            },
        };
    (text, href)
}

/// `path` with every byte outside the characters a URL path keeps as they are percent-encoded.
fn encode(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    for b in path.bytes() {
        if b.is_ascii_alphanumeric() || b"/-_.~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use ksmith_core::tables::{ModuleStatus, ProbeStatus};

    fn module(repo: &str) -> ModuleRow {
        ModuleRow {
            id: "t".into(),
            repo: repo.into(),
            commit: "abc".into(),
            path: "pkg/my layers.py".into(),
            class_name: "Norm".into(),
            line: 12,
            arg_sources: Vec::new(),
            status: ModuleStatus::Ok,
            reason: None,
            reason_code: None,
            program: None,
            deps: vec![],
            imports: vec![],
            lines: 1,
            license: None,
            stars: None,
        }
    }

    fn repo(url: &str, kind: SourceKind) -> RepoRow {
        let mut r = RepoRow::failed("o/n", url, "x");
        r.source_kind = kind;
        r.commit = Some("abc".into());
        r.snapshot = Some("snapshots/n/abc".into());
        r
    }

    #[test]
    fn a_github_class_links_to_its_line_at_the_pinned_commit() {
        let m = module("o/n");
        let r = repo("https://github.com/o/n.git", SourceKind::Git);
        assert_eq!(
            source(None, "o/n", Some(&r), Some(&m)),
            (
                "o/n/pkg/my layers.py:12".to_string(),
                Some("https://github.com/o/n/blob/abc/pkg/my%20layers.py#L12".to_string())
            )
        );
    }

    #[test]
    fn a_local_class_links_to_the_crawled_copy() {
        let m = module("o/n");
        let r = repo("/src/n", SourceKind::Folder);
        let (_, href) = source(Some(Path::new("/w")), "o/n", Some(&r), Some(&m));
        assert_eq!(
            href.as_deref(),
            Some("file:///w/snapshots/n/abc/pkg/my%20layers.py")
        );
        assert_eq!(source(None, "o/n", Some(&r), Some(&m)).1, None);
    }

    #[test]
    fn sizes_and_time_come_from_the_probe() {
        let dir = tempfile::tempdir().unwrap();
        let task = TaskRow {
            task_id: "t".into(),
            repo: "o/n".into(),
            class_name: "Norm".into(),
            program: String::new(),
            family: "normalization".into(),
            level: 1,
            cluster: 0,
            license: None,
            selected_as: "all".into(),
            alt_sizes: "[]".into(),
        };
        let probe = ProbeRow {
            sizes: r#"{"dim": 4096, "batch_size": 16}"#.into(),
            est_ms: Some(1.25),
            ..ProbeRow::empty("t", "o/n", "Norm", ProbeStatus::Ok)
        };
        let list = task_list(dir.path(), &[task], &[module("o/n")], &[probe], &[]);
        assert_eq!(list[0].sizes, "batch_size=16, dim=4096");
        assert_eq!(list[0].est_ms, Some(1.25));
        assert_eq!(list[0].source, "o/n/pkg/my layers.py:12");
        assert_eq!(list[0].href, None, "no repository row: no link");
    }
}
