//! The funnel: every `nn.Module` class extract found, followed to the step where it stopped
//! (program, runnable, sized, unique, task), per repository, with why each one was lost.
//!
//! Each step keeps a subset of the one before: a class is a program when extract emitted one,
//! runnable when the probe ran it, sized unless the probe found it unsizable for the GPU, unique
//! when dedup kept it, a task when cluster made it one. So the counts of a step add up over the
//! repositories, and a step's count plus the classes lost on the way to the next one is the
//! previous step's count. A step whose table does not exist yet is "not run" (with every step
//! after it).

use std::collections::{BTreeMap, HashMap, HashSet};

use ksmith_core::tables::{
    AnnotationRow, ClusterRow, DedupRow, ModuleRow, ModuleStatus, ProbeRow, ProbeStatus, RepoRow,
    RepoStatus, ReviewVerdict, SizeStatus, TaskRow,
};

/// The steps, in order.
pub const STEPS: [&str; 6] = [
    "classes found",
    "programs",
    "runnable",
    "sized",
    "unique",
    "tasks",
];

/// Longest example text kept, in characters.
const EXAMPLE_CHARS: usize = 200;

/// One step: the classes that reached it.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    /// The step's name (one of [`STEPS`]).
    pub name: &'static str,
    /// Classes that reached it; `None` when the stage deciding it has not run.
    pub total: Option<u64>,
    /// The same, per repository.
    pub per_repo: BTreeMap<String, u64>,
}

/// Why classes that reached one step did not reach the next.
#[derive(Debug, Clone, PartialEq)]
pub struct Loss {
    /// The step they did not reach.
    pub step: &'static str,
    /// How many.
    pub lost: u64,
    /// The reasons, most frequent first.
    pub reasons: Vec<Reason>,
}

/// One reason for a loss.
#[derive(Debug, Clone, PartialEq)]
pub struct Reason {
    /// The reason, as a code (`import_not_allowed`, `failed: RuntimeError`, `near`, ...).
    pub reason: String,
    /// Classes lost for it.
    pub count: u64,
    /// One of them: where it is and what was said about it.
    pub example: String,
}

/// A crawled repository, and why it gave no class when it was not accepted.
#[derive(Debug, Clone, PartialEq)]
pub struct Repository {
    /// Its name in the tables.
    pub repo: String,
    /// Why crawl did not accept it (`license_not_allowed: GPL-3.0`); none when accepted.
    pub refused: Option<String>,
}

/// The funnel of a work directory.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Funnel {
    /// Every repository crawl read (empty when it has not run).
    pub repos: Vec<Repository>,
    /// The steps, in the order of [`STEPS`].
    pub steps: Vec<Step>,
    /// One loss per step after the first that has run.
    pub losses: Vec<Loss>,
    /// Module ids of the classes that reached "unique" (what the family and level charts count).
    pub unique: Vec<String>,
}

/// The tables the funnel reads; `None` for one that does not exist.
pub(crate) struct Tables<'a> {
    /// `repos.parquet`.
    pub(crate) repos: Option<&'a [RepoRow]>,
    /// `modules.parquet`.
    pub(crate) modules: Option<&'a [ModuleRow]>,
    /// `probes.parquet`.
    pub(crate) probes: Option<&'a [ProbeRow]>,
    /// `dedup.parquet`.
    pub(crate) dedup: Option<&'a [DedupRow]>,
    /// `clusters.parquet`.
    pub(crate) clusters: Option<&'a [ClusterRow]>,
    /// `tasks.parquet`.
    pub(crate) tasks: Option<&'a [TaskRow]>,
    /// `annotations.parquet`.
    pub(crate) annotations: Option<&'a [AnnotationRow]>,
}

/// Whether a class passes a step.
enum Gate {
    Pass,
    /// Lost there: the reason and what was said about this class.
    Lost(String, String),
}

/// `text`'s first line, cut to [`EXAMPLE_CHARS`].
fn short(text: &str) -> String {
    let line = text
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or_default()
        .trim();
    match line.char_indices().nth(EXAMPLE_CHARS) {
        Some((i, _)) => format!("{}...", &line[..i]),
        None => line.to_string(),
    }
}

/// Builds the funnel from `t`.
pub(crate) fn funnel(t: &Tables<'_>) -> Funnel {
    let repos = t
        .repos
        .unwrap_or_default()
        .iter()
        .map(|r| Repository {
            repo: r.repo.clone(),
            refused: (r.status != RepoStatus::Ok).then(|| {
                r.reason
                    .clone()
                    .unwrap_or_else(|| r.status.as_str().to_string())
            }),
        })
        .collect();
    let Some(modules) = t.modules else {
        return Funnel {
            repos,
            steps: STEPS.iter().map(|&name| not_run(name)).collect(),
            ..Default::default()
        };
    };
    let names: HashMap<&str, &ModuleRow> = modules.iter().map(|m| (m.id.as_str(), m)).collect();
    // Which steps' stages have run: a step is counted only when it and every step before it ran.
    let mut ran = [
        true,
        true,
        t.probes.is_some(),
        t.probes.is_some(),
        t.dedup.is_some(),
        t.tasks.is_some(),
    ];
    for i in 1..ran.len() {
        ran[i] &= ran[i - 1];
    }
    let probes: HashMap<&str, &ProbeRow> = t
        .probes
        .unwrap_or_default()
        .iter()
        .map(|r| (r.module_id.as_str(), r))
        .collect();
    let dedup: HashMap<&str, &DedupRow> = t
        .dedup
        .unwrap_or_default()
        .iter()
        .map(|r| (r.module_id.as_str(), r))
        .collect();
    let clusters: HashMap<&str, &ClusterRow> = t
        .clusters
        .unwrap_or_default()
        .iter()
        .map(|c| (c.module_id.as_str(), c))
        .collect();
    let tasks: HashSet<&str> = t
        .tasks
        .unwrap_or_default()
        .iter()
        .map(|r| r.task_id.as_str())
        .collect();
    // The latest answer per module decides (the table is appended to).
    let mut review: HashMap<&str, &AnnotationRow> = HashMap::new();
    for a in t.annotations.unwrap_or_default() {
        review.insert(a.module_id.as_str(), a);
    }
    let place = |m: &ModuleRow| format!("{} in {}/{}:{}", m.class_name, m.repo, m.path, m.line);
    let name_of = |id: &str| names.get(id).map_or_else(|| id.to_string(), |m| place(m));

    let gates: [&dyn Fn(&ModuleRow) -> Gate; 5] = [
        &|m| match m.status {
            ModuleStatus::Ok => Gate::Pass,
            status => Gate::Lost(
                m.reason_code
                    .map_or_else(|| status.as_str().to_string(), |c| c.as_str().to_string()),
                m.reason.clone().unwrap_or_default(),
            ),
        },
        &|m| match probes.get(m.id.as_str()) {
            None => Gate::Lost("not probed".into(), "no row in probes.parquet".into()),
            Some(p) if p.status == ProbeStatus::Ok => Gate::Pass,
            Some(p) => Gate::Lost(
                match &p.error_class {
                    Some(class) => format!("{}: {class}", p.status.as_str()),
                    None => p.status.as_str().to_string(),
                },
                p.error_message.clone().unwrap_or_default(),
            ),
        },
        &|m| match probes.get(m.id.as_str()) {
            Some(p) if p.size_status == Some(SizeStatus::Unsizable) => Gate::Lost(
                format!(
                    "unsizable: {}",
                    p.size_reason_code.map_or("unknown", |c| c.as_str())
                ),
                p.size_reason.clone().unwrap_or_default(),
            ),
            _ => Gate::Pass,
        },
        &|m| match dedup.get(m.id.as_str()) {
            None => Gate::Lost("not deduplicated".into(), "no row in dedup.parquet".into()),
            Some(r) if r.kept => Gate::Pass,
            Some(r) => Gate::Lost(
                r.method.map_or("dropped", |x| x.as_str()).to_string(),
                format!(
                    "duplicates {}{}",
                    r.duplicate_of.as_deref().map_or_else(String::new, name_of),
                    r.similarity
                        .map_or_else(String::new, |s| format!(" (similarity {s:.2})"))
                ),
            ),
        },
        &|m| match tasks.contains(m.id.as_str()) {
            true => Gate::Pass,
            false => match (clusters.get(m.id.as_str()), review.get(m.id.as_str())) {
                (_, Some(a)) if a.verdict == ReviewVerdict::Reject => {
                    Gate::Lost("rejected in review".into(), a.note.clone())
                }
                (Some(c), _) if c.trivial.is_some() => Gate::Lost(
                    format!("trivial: {}", c.trivial.as_deref().unwrap_or_default()),
                    format!("family {}, level {}", c.family, c.level),
                ),
                (Some(c), _) => Gate::Lost(
                    "not chosen ([cluster] tasks)".into(),
                    format!(
                        "family {}, level {}, cluster {}",
                        c.family, c.level, c.cluster
                    ),
                ),
                (None, _) => {
                    Gate::Lost("not clustered".into(), "no row in clusters.parquet".into())
                }
            },
        },
    ];

    let mut steps: Vec<Step> = STEPS
        .iter()
        .zip(ran)
        .map(|(&name, ran)| Step {
            name,
            total: ran.then_some(0),
            per_repo: BTreeMap::new(),
        })
        .collect();
    let mut lost: Vec<BTreeMap<String, (u64, String)>> = vec![BTreeMap::new(); gates.len()];
    let mut unique = Vec::new();
    for m in modules {
        let mut reached = 0;
        for (i, gate) in gates.iter().enumerate().take_while(|(i, _)| ran[i + 1]) {
            match gate(m) {
                Gate::Pass => reached = i + 1,
                Gate::Lost(reason, said) => {
                    let entry = lost[i].entry(reason).or_insert((0, String::new()));
                    entry.0 += 1;
                    if entry.1.is_empty() {
                        entry.1 = format!("{}: {}", place(m), short(&said));
                    }
                    break;
                }
            }
        }
        for step in &mut steps[..=reached] {
            if let Some(n) = step.total.as_mut() {
                *n += 1;
                *step.per_repo.entry(m.repo.clone()).or_insert(0) += 1;
            }
        }
        if reached >= 4 {
            unique.push(m.id.clone());
        }
    }
    let losses = lost
        .into_iter()
        .enumerate()
        .filter(|(i, _)| ran[i + 1])
        .map(|(i, reasons)| {
            let mut reasons: Vec<Reason> = reasons
                .into_iter()
                .map(|(reason, (count, example))| Reason {
                    reason,
                    count,
                    example,
                })
                .collect();
            reasons.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.reason.cmp(&b.reason)));
            Loss {
                step: STEPS[i + 1],
                lost: reasons.iter().map(|r| r.count).sum(),
                reasons,
            }
        })
        .collect();
    Funnel {
        repos,
        steps,
        losses,
        unique,
    }
}

fn not_run(name: &'static str) -> Step {
    Step {
        name,
        total: None,
        per_repo: BTreeMap::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ksmith_core::tables::{DedupMethod, ModuleReason, SizeReason};

    fn module(id: &str, repo: &str, status: ModuleStatus) -> ModuleRow {
        ModuleRow {
            id: id.into(),
            repo: repo.into(),
            commit: "c".into(),
            path: "a.py".into(),
            class_name: id.to_uppercase(),
            line: 3,
            arg_sources: Vec::new(),
            status,
            reason: (status != ModuleStatus::Ok).then(|| "import_not_allowed: scipy".into()),
            reason_code: (status != ModuleStatus::Ok).then_some(ModuleReason::ImportNotAllowed),
            program: (status == ModuleStatus::Ok).then(|| "class Model: pass".into()),
            deps: vec![],
            imports: vec![],
            lines: 1,
            license: None,
            stars: None,
        }
    }

    fn probe(id: &str, status: ProbeStatus, size: Option<SizeStatus>) -> ProbeRow {
        ProbeRow {
            size_status: size,
            size_reason_code: (size == Some(SizeStatus::Unsizable)).then_some(SizeReason::Timeout),
            size_reason: Some("timeout: sizing ran past its 20.0 s".into()),
            error_class: (status != ProbeStatus::Ok).then(|| "RuntimeError".into()),
            error_message: Some("mat1 and mat2 shapes cannot be multiplied\nmore".into()),
            ..ProbeRow::empty(id, "r", id, status)
        }
    }

    /// Six classes in two repositories, each stopping at another step.
    #[test]
    fn every_class_stops_at_one_step_and_the_counts_add_up() {
        let modules = vec![
            module("a", "r1", ModuleStatus::Ok),       // a task
            module("b", "r1", ModuleStatus::Rejected), // no program
            module("c", "r1", ModuleStatus::Ok),       // does not run
            module("d", "r2", ModuleStatus::Ok),       // unsizable
            module("e", "r2", ModuleStatus::Ok),       // a duplicate of a
            module("f", "r2", ModuleStatus::Ok),       // trivial
        ];
        let probes = vec![
            probe("a", ProbeStatus::Ok, Some(SizeStatus::Sized)),
            probe("c", ProbeStatus::Failed, None),
            probe("d", ProbeStatus::Ok, Some(SizeStatus::Unsizable)),
            probe("e", ProbeStatus::Ok, Some(SizeStatus::Sized)),
            probe("f", ProbeStatus::Ok, Some(SizeStatus::BelowTarget)),
        ];
        let dedup: Vec<DedupRow> = ["a", "d", "e", "f"]
            .iter()
            .map(|id| DedupRow {
                module_id: id.to_string(),
                kept: *id != "e",
                method: (*id == "e").then_some(DedupMethod::Near),
                duplicate_of: (*id == "e").then(|| "a".into()),
                similarity: (*id == "e").then_some(0.91),
                contaminated_via: None,
            })
            .collect();
        let cluster = |id: &str, trivial: Option<&str>| ClusterRow {
            module_id: id.into(),
            cluster: 0,
            is_center: false,
            family: "activation".into(),
            family_rule: String::new(),
            level: 1,
            level_rule: String::new(),
            trivial: trivial.map(str::to_string),
        };
        let clusters = vec![cluster("a", None), cluster("f", Some("no_compute"))];
        let tasks = vec![TaskRow {
            task_id: "a".into(),
            repo: "r1".into(),
            class_name: "A".into(),
            program: String::new(),
            family: "activation".into(),
            level: 1,
            cluster: 0,
            license: None,
            selected_as: "all".into(),
            alt_sizes: "[]".into(),
        }];
        let f = funnel(&Tables {
            repos: None,
            modules: Some(&modules),
            probes: Some(&probes),
            dedup: Some(&dedup),
            clusters: Some(&clusters),
            tasks: Some(&tasks),
            annotations: None,
        });
        let totals: Vec<Option<u64>> = f.steps.iter().map(|s| s.total).collect();
        assert_eq!(
            totals,
            [Some(6), Some(5), Some(4), Some(3), Some(2), Some(1)]
        );
        for (step, next) in f.steps.iter().zip(&f.steps[1..]) {
            let loss = f.losses.iter().find(|l| l.step == next.name).unwrap();
            assert_eq!(
                step.total.unwrap() - loss.lost,
                next.total.unwrap(),
                "{}",
                next.name
            );
            assert_eq!(step.per_repo.values().sum::<u64>(), step.total.unwrap());
        }
        assert_eq!(
            f.steps[3].per_repo,
            BTreeMap::from([("r1".into(), 1), ("r2".into(), 2)])
        );
        let reason =
            |step: &str| f.losses.iter().find(|l| l.step == step).unwrap().reasons[0].clone();
        assert_eq!(reason("programs").reason, "import_not_allowed");
        assert_eq!(
            reason("programs").example,
            "B in r1/a.py:3: import_not_allowed: scipy"
        );
        assert_eq!(reason("runnable").reason, "failed: RuntimeError");
        assert!(
            reason("runnable").example.ends_with("cannot be multiplied"),
            "first line only"
        );
        assert_eq!(reason("sized").reason, "unsizable: timeout");
        assert_eq!(reason("unique").reason, "near");
        assert_eq!(
            reason("unique").example,
            "E in r2/a.py:3: duplicates A in r1/a.py:3 (similarity 0.91)"
        );
        assert_eq!(reason("tasks").reason, "trivial: no_compute");
        assert_eq!(f.unique, ["a", "f"]);
    }

    #[test]
    fn steps_whose_stage_has_not_run_are_not_counted() {
        let modules = vec![module("a", "r1", ModuleStatus::Ok)];
        let probes = vec![probe("a", ProbeStatus::Ok, Some(SizeStatus::Sized))];
        let f = funnel(&Tables {
            repos: None,
            modules: Some(&modules),
            probes: Some(&probes),
            dedup: None,
            clusters: None,
            tasks: None,
            annotations: None,
        });
        let totals: Vec<Option<u64>> = f.steps.iter().map(|s| s.total).collect();
        assert_eq!(totals, [Some(1), Some(1), Some(1), Some(1), None, None]);
        assert_eq!(f.losses.len(), 3, "no loss toward a step that has not run");
        assert!(f.unique.is_empty());
    }
}
