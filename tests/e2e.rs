//! End-to-end tests across stages, driven through the CLI's library (`ksmith_cli::pipeline`)
//! exactly as `ksmith run` drives them.

use std::path::Path;

use ksmith_cli::args::Common;
use ksmith_cli::pipeline::Session;
use ksmith_cli::stages::Stage;
use ksmith_core::report::StageReport;
use ksmith_core::table::{Table, read_table};
use ksmith_core::tables::{ModuleRow, ModuleStatus, ProbeRow, ProbeStatus, RepoRow, RepoStatus};

const LICENSE_MIT: &str = "MIT License\n\nCopyright (c) 2026 ksmith tests\n\n\
Permission is hereby granted, free of charge, to any person obtaining a copy of this software \
and associated documentation files (the \"Software\"), to deal in the Software without \
restriction, including without limitation the rights to use, copy, modify, merge, publish, \
distribute, sublicense, and/or sell copies of the Software, and to permit persons to whom the \
Software is furnished to do so, subject to the following conditions:\n\n\
The above copyright notice and this permission notice shall be included in all copies or \
substantial portions of the Software.\n\n\
THE SOFTWARE IS PROVIDED \"AS IS\", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR IMPLIED.\n";

const LAYERS: &str = r#"import torch
import torch.nn as tnn
import torch.nn.functional as F

HIDDEN = 32


def gelu_tanh(x):
    return 0.5 * x * (1.0 + torch.tanh(0.7978845608 * (x + 0.044715 * x ** 3)))


class Block(tnn.Module):
    def __init__(self, dim=HIDDEN):
        super().__init__()
        self.fc = tnn.Linear(dim, dim)

    def forward(self, x):
        return gelu_tanh(self.fc(x))
"#;

const MODELS: &str = r#"import torch
from torch import nn
from .layers import Block, HIDDEN


class Residual(Block):
    def forward(self, x):
        return x + super().forward(x)


class Head(nn.Module):
    def __init__(self, classes=10):
        super().__init__()
        self.body = Residual(HIDDEN)
        self.out = nn.Linear(HIDDEN, classes)

    def forward(self, x):
        return self.out(self.body(x))
"#;

/// Creates a git repository with a package of two files and returns its path.
fn make_repo(dir: &Path) -> std::path::PathBuf {
    let path = dir.join("src-repo");
    let repo = git2::Repository::init(&path).expect("init");
    std::fs::create_dir_all(path.join("pkg")).expect("mkdir");
    std::fs::write(path.join("LICENSE"), LICENSE_MIT).expect("write");
    std::fs::write(path.join("pkg/__init__.py"), "").expect("write");
    std::fs::write(path.join("pkg/layers.py"), LAYERS).expect("write");
    std::fs::write(path.join("pkg/models.py"), MODELS).expect("write");
    commit_all(&repo, "init");
    path
}

/// Commits every file of the work tree on top of HEAD (the first commit when there is none)
/// and returns the commit id.
fn commit_all(repo: &git2::Repository, message: &str) -> String {
    let mut index = repo.index().expect("index");
    index
        .add_all(["*"], git2::IndexAddOption::DEFAULT, None)
        .expect("add");
    index.write().expect("write index");
    let tree = repo
        .find_tree(index.write_tree().expect("tree"))
        .expect("tree");
    let sig = git2::Signature::now("t", "t@example.com").expect("sig");
    let parent = repo.head().ok().and_then(|h| h.peel_to_commit().ok());
    let parents: Vec<&git2::Commit> = parent.iter().collect();
    repo.commit(Some("HEAD"), &sig, &sig, message, &tree, &parents)
        .expect("commit")
        .to_string()
}

fn session(dir: &Path, config: &str) -> Session {
    let cfg_path = dir.join("ksmith.toml");
    std::fs::write(&cfg_path, config).expect("write config");
    Session::open(&Common {
        config: Some(cfg_path),
        workdir: Some(dir.join("work")),
        threads: Some(2),
        quiet: true,
        force: false,
        shard: None,
        set: Vec::new(),
    })
    .expect("config loads")
}

fn report(dir: &Path, stage: &str) -> StageReport {
    let text = std::fs::read_to_string(StageReport::path_in(&dir.join("work"), stage))
        .expect("report written");
    serde_json::from_str(&text).expect("report is JSON")
}

/// From a git repository created here to modules.parquet: crawl pins the commit over file://,
/// extract finds the indirect subclass across files and emits runnable, self-contained programs.
#[test]
fn git_repository_to_modules() {
    let dir = tempfile::tempdir().expect("tempdir");
    let repo = make_repo(dir.path());
    let config = format!(
        "[[source]]\nname = \"demo/net\"\ngit = \"file://{}\"\nstars = 5\n",
        repo.display()
    );
    let s = session(dir.path(), &config);
    s.run(&[Stage::Crawl, Stage::Extract]).expect("stages run");

    let repos: Vec<RepoRow> = read_table(&RepoRow::path_in(&s.ctx.workdir)).expect("repos");
    assert_eq!(repos.len(), 1);
    assert_eq!(repos[0].status, RepoStatus::Ok, "{:?}", repos[0].reason);
    assert_eq!(repos[0].license.as_deref(), Some("MIT"));
    let head = git2::Repository::open(&repo)
        .expect("open")
        .head()
        .expect("head")
        .peel_to_commit()
        .expect("commit")
        .id()
        .to_string();
    assert_eq!(repos[0].commit.as_deref(), Some(head.as_str()));

    let modules: Vec<ModuleRow> = read_table(&ModuleRow::path_in(&s.ctx.workdir)).expect("modules");
    let mut names: Vec<&str> = modules.iter().map(|m| m.class_name.as_str()).collect();
    names.sort();
    assert_eq!(names, ["Block", "Head", "Residual"]);
    for m in &modules {
        assert_eq!(
            m.status,
            ModuleStatus::Ok,
            "{}: {:?}",
            m.class_name,
            m.reason
        );
        assert_eq!(m.commit, head);
        let program = m.program.as_deref().expect("program");
        assert!(program.contains("def get_inputs("), "{program}");
        assert!(program.contains("def get_init_inputs("), "{program}");
        assert!(program.contains("Model"), "{program}");
    }
    let head_module = modules
        .iter()
        .find(|m| m.class_name == "Head")
        .expect("Head");
    let program = head_module.program.as_deref().expect("program");
    // The closure crossed files: the base class, its helper and the constant are inlined.
    for needed in [
        "class Block",
        "def gelu_tanh",
        "HIDDEN = 32",
        "class Residual",
    ] {
        assert!(program.contains(needed), "missing {needed}:\n{program}");
    }
    assert!(
        !program.contains("from .layers"),
        "relative import kept:\n{program}"
    );

    // Nothing changed: the second run of extract does nothing.
    let s = session(dir.path(), &config);
    s.run(&[Stage::Crawl, Stage::Extract]).expect("second run");
    assert!(
        report(dir.path(), "extract").skipped,
        "extract re-ran with nothing changed"
    );
}

/// Discover against the loopback fake of GitHub lists two repositories whose clone URLs are
/// local git repositories made here; crawl reads the manifest it wrote and pins exactly the
/// commits discover pinned (an older one for the first repository, whose branch moved on after
/// the fake reported its head), with the license and stars discover recorded.
#[test]
fn discovered_repositories_are_crawled_at_their_pinned_commits() {
    use ksmith_discover::SystemClock;
    use ksmith_discover::loopback::{FakeGitHub, FakeRepo, Limits};

    let dir = tempfile::tempdir().expect("tempdir");
    // The head commit and branch name of a repository.
    let head_of = |path: &Path| {
        let repo = git2::Repository::open(path).expect("open");
        let head = repo.head().expect("head");
        let commit = head.peel_to_commit().expect("commit").id().to_string();
        (commit, head.shorthand().expect("branch name").to_string())
    };
    let a = make_repo(&dir.path().join("a"));
    let (pinned_a, branch_a) = head_of(&a);
    // A later commit on the branch that the manifest's pin must not pick up.
    let repo = git2::Repository::open(&a).expect("open");
    std::fs::write(a.join("pkg/extra.py"), "X = 1\n").expect("write");
    assert_ne!(commit_all(&repo, "later"), pinned_a);
    let b = make_repo(&dir.path().join("b"));
    let (head_b, branch_b) = head_of(&b);

    let mut fa = FakeRepo::new(1, "octo/alpha");
    fa.clone_url = format!("file://{}", a.display());
    fa.default_branch = branch_a;
    fa.head = Some(pinned_a.clone());
    fa.stars = 42;
    let mut fb = FakeRepo::new(2, "octo/beta");
    fb.clone_url = format!("file://{}", b.display());
    fb.default_branch = branch_b;
    fb.head = Some(head_b.clone());
    fb.license = Some("Apache-2.0".into());
    let fake = FakeGitHub::start(
        vec![fa, fb],
        Vec::new(),
        std::sync::Arc::new(SystemClock),
        Limits::github(),
        |_, _| None,
    )
    .expect("fake");
    let config = format!(
        "[discover]\napi_url = \"{}\"\ntoken_env = \"KSMITH_E2E_NO_SUCH_TOKEN\"\n\n\
         [[source]]\nmanifest = \"{}\"\n",
        fake.url(),
        dir.path().join("work/manifest.jsonl").display()
    );
    let s = session(dir.path(), &config);
    let found = ksmith_cli::stages::run_discover(&s).expect("discover");
    assert_eq!(found.rows_written, 2);
    s.run(&[Stage::Crawl]).expect("crawl reads the manifest");

    let repos: Vec<RepoRow> = read_table(&RepoRow::path_in(&s.ctx.workdir)).expect("repos");
    let row = |name: &str| {
        repos
            .iter()
            .find(|r| r.repo == name)
            .unwrap_or_else(|| panic!("{name} crawled: {repos:?}"))
    };
    let alpha = row("octo/alpha");
    assert_eq!(alpha.status, RepoStatus::Ok, "{:?}", alpha.reason);
    assert_eq!(alpha.commit.as_deref(), Some(pinned_a.as_str()));
    assert_eq!(alpha.rev.as_deref(), Some(pinned_a.as_str()));
    assert_eq!(alpha.stars, Some(42));
    assert_eq!(alpha.license.as_deref(), Some("MIT"));
    assert_eq!(alpha.license_source.as_deref(), Some("manifest"));
    assert!(!alpha.files.iter().any(|f| f.ends_with("extra.py")));
    let beta = row("octo/beta");
    assert_eq!(beta.status, RepoStatus::Ok, "{:?}", beta.reason);
    assert_eq!(beta.commit.as_deref(), Some(head_b.as_str()));
    assert_eq!(beta.license.as_deref(), Some("Apache-2.0"));
}

/// The probe runs the extracted programs in the real Python environment: all three modules of
/// the demo repository run, and the repaired programs are written back.
#[test]
fn modules_run_in_probe() {
    let dir = tempfile::tempdir().expect("tempdir");
    let repo = make_repo(dir.path());
    let config = format!(
        "[[source]]\nname = \"demo/net\"\ngit = \"{}\"\n\n[probe]\ntimeout_s = 60.0\n",
        repo.display()
    );
    let s = session(dir.path(), &config);
    s.run(&[Stage::Crawl, Stage::Extract, Stage::Probe])
        .expect("stages run");
    let probes: Vec<ProbeRow> = read_table(&ProbeRow::path_in(&s.ctx.workdir)).expect("probes");
    assert_eq!(probes.len(), 3);
    for p in &probes {
        assert_eq!(
            p.status,
            ProbeStatus::Ok,
            "{}: {:?}",
            p.class_name,
            p.error_message
        );
        assert!(!p.output_shapes.is_empty());
        assert!(
            p.program
                .as_deref()
                .is_some_and(|prog| prog.contains("get_inputs"))
        );
    }
}

const SCALED_RELU: &str = r#"import torch
from torch import nn


class ScaledRelu(nn.Module):
    def __init__(self, scale=2.0):
        super().__init__()
        self.scale = scale

    def forward(self, x):
        return torch.relu(x) * self.scale
"#;

/// The teacher's answer: a Triton `ModelNew` for `ScaledRelu` with block size `block`.
fn triton_answer(block: u32) -> String {
    format!(
        r#"Here is the Triton version.

```python
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def scaled_relu_kernel(x_ptr, out_ptr, n, scale, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, tl.maximum(x, 0.0) * scale, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, scale=2.0):
        super().__init__()
        self.scale = scale

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        scaled_relu_kernel[(triton.cdiv(n, {block}),)](x, out, n, self.scale, BLOCK={block})
        return out
```
"#
    )
}

/// The whole pipeline on one small repository with a scripted teacher on loopback and the CPU
/// evaluator (Triton interpreter): every stage runs, the teacher's correct translation becomes a
/// correctness SFT sample, and the exported datasets exist in the Hugging Face layout.
#[test]
fn whole_pipeline_with_a_loopback_teacher() {
    use ksmith_core::evaluation::EvalStatus;
    use ksmith_core::tables::{EditOutcome, SftRow, StepRow, TaskRow};
    use ksmith_teacher::loopback::{LoopbackServer, Reply};

    let dir = tempfile::tempdir().expect("tempdir");
    let repo = dir.path().join("acts");
    std::fs::create_dir_all(&repo).expect("mkdir");
    std::fs::write(repo.join("LICENSE"), LICENSE_MIT).expect("write");
    std::fs::write(repo.join("act.py"), SCALED_RELU).expect("write");

    // Step 0: a correct translation. Step 1: a 429 (retried), then a SEARCH/REPLACE that changes
    // nothing. Step 2: prose instead of code. Step 3: a kernel computing the wrong thing.
    let teacher = LoopbackServer::start(|_, n| match n {
        0 => Reply::chat(triton_answer(256)),
        1 => Reply::status(429, "slow down"),
        2 => Reply::chat(
            "<<<<<<< SEARCH\n    mask = offs < n\n=======\n    mask = offs < n\n>>>>>>> REPLACE\n",
        ),
        3 => Reply::chat("I think the kernel is already optimal."),
        _ => Reply::chat(triton_answer(512).replace("* scale", "* scale * 1.5")),
    })
    .expect("loopback teacher");
    let config = format!(
        r#"[[source]]
path = "{repo}"

# Evaluated on the CPU (Triton's interpreter): at the probe's sizes, not at a GPU's.
[probe.sizing]
enabled = false

[cluster]
tasks = "all"

[rollout]
iterations = 4
num_islands = 1
parallel_tasks = 1
measure = false

[teacher]
max_retries = 2
backoff_initial_ms = 10
backoff_max_ms = 50
timeout_s = 30.0

[[teacher.endpoints]]
url = "{url}"
model = "scripted"

[eval]
cpu_workers = 1
"#,
        repo = repo.display(),
        url = teacher.url()
    );
    let s = session(dir.path(), &config);
    s.run(&ksmith_cli::stages::Stage::ALL)
        .expect("every stage runs");

    let tasks: Vec<TaskRow> = read_table(&TaskRow::path_in(&s.ctx.workdir)).expect("tasks");
    assert_eq!(tasks.len(), 1, "{tasks:?}");
    let mut steps: Vec<StepRow> = read_table(&StepRow::path_in(&s.ctx.workdir)).expect("steps");
    steps.sort_by_key(|s| s.iteration);
    assert_eq!(steps.len(), 4);
    let first = &steps[0];
    assert!(
        first.correct,
        "translation judged {:?}: {:?}",
        first.eval_status, first.eval_json
    );
    assert!(
        first.user_prompt.contains("class Model"),
        "the prompt shows the reference"
    );
    let outcomes: Vec<EditOutcome> = steps.iter().map(|s| s.edit_outcome).collect();
    assert_eq!(
        outcomes,
        [
            EditOutcome::Applied,
            EditOutcome::NoOp,
            EditOutcome::Unparseable,
            EditOutcome::Applied
        ]
    );
    assert_eq!(
        steps[3].eval_status,
        Some(EvalStatus::Incorrect),
        "{:?}",
        steps[3].eval_json
    );
    // A failed edit is fed back: the step after the no-op shows it in its prompt.
    let after_no_op = steps[2].user_prompt.to_lowercase();
    assert!(
        ["no-op", "unchanged", "no change", "did not change"]
            .iter()
            .any(|w| after_no_op.contains(w)),
        "the no-op edit is not in the next prompt:\n{}",
        steps[2].user_prompt
    );
    assert_eq!(
        teacher.received().len(),
        5,
        "one request per step, plus the retried 429"
    );

    let sft: Vec<SftRow> = read_table(&SftRow::path_in(&s.ctx.workdir)).expect("sft");
    assert!(
        sft.iter().any(|r| r.step_id == first.step_id),
        "the correct translation is a correctness SFT sample"
    );
    let datasets = s.ctx.workdir.join("datasets");
    // The dataset folders (besides them: export.json).
    let names: Vec<String> = std::fs::read_dir(&datasets)
        .expect("datasets written")
        .filter_map(|e| e.ok())
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert!(!names.is_empty());
    for name in &names {
        assert!(
            datasets.join(name).join("README.md").exists(),
            "{name} has a card"
        );
        assert!(
            datasets.join(name).join("data").is_dir(),
            "{name} has data/"
        );
    }

    // On CPU nothing is timed: the performance-based GRPO rule gives no rows, so the RL formats
    // are left out (no empty dataset), and export.json says why.
    for rl in ["verl-rl", "trl-grpo", "openrlhf-rl"] {
        assert!(
            !names.contains(&rl.to_string()),
            "{rl} written without rows"
        );
    }
    let record: serde_json::Value =
        serde_json::from_slice(&std::fs::read(datasets.join("export.json")).expect("export.json"))
            .expect("json");
    let why = record["omitted"]["verl-rl"]
        .as_str()
        .expect("verl-rl left out");
    assert!(
        why.contains("best_steps") && why.contains("no timings"),
        "{why}"
    );
    assert!(names.contains(&"verl-sft".to_string()));
    let first_reports: Vec<StageReport> = [
        "extract", "probe", "dedup", "cluster", "rollout", "select", "export",
    ]
    .iter()
    .map(|stage| report(dir.path(), stage))
    .collect();

    // A second run with nothing changed asks the teacher nothing and re-runs nothing; every
    // skipped stage keeps its last real report, marked skipped.
    let s = session(dir.path(), &config);
    s.run(&ksmith_cli::stages::Stage::ALL).expect("second run");
    assert_eq!(teacher.received().len(), 5, "nothing re-asked");
    for first in first_reports {
        let again = report(dir.path(), &first.stage);
        assert!(again.skipped, "{} re-ran with nothing changed", first.stage);
        assert_eq!(
            StageReport {
                skipped: false,
                skip_reason: None,
                ..again
            },
            first,
            "the skipped report keeps the real counts"
        );
    }
}

/// `configs/default.toml` with `sources` instead of the sample corpus and `teacher` as its only
/// teacher: every other key at its default (sizing on, the default evaluator).
fn default_config_with(sources: &str, teacher: &str) -> String {
    let text =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/configs/default.toml"))
            .expect("configs/default.toml");
    let mut out = String::new();
    let mut in_source = false;
    for line in text.lines() {
        if line.starts_with('[') {
            in_source = line == "[[source]]";
        }
        if !in_source {
            out.push_str(line);
            out.push('\n');
        }
    }
    assert!(!out.lines().any(|l| l == "[[source]]"));
    format!("{out}\n{sources}\n[[teacher.endpoints]]\nurl = \"{teacher}\"\nmodel = \"scripted\"\n")
}

/// The default configuration on a machine without a GPU: tasks are sized for the GPU (sizing
/// on), and the CPU evaluator (Triton's interpreter, correctness only) judges each at its
/// smallest recorded size set, so a scripted teacher's correct translation becomes correctness
/// SFT data in the time of a test.
#[test]
fn the_default_configuration_on_the_cpu_gives_correctness_sft_data() {
    use ksmith_core::tables::{SftRow, StepRow, TaskRow};
    use ksmith_teacher::loopback::{LoopbackServer, Reply};

    let started = std::time::Instant::now();
    let dir = tempfile::tempdir().expect("tempdir");
    let repo = dir.path().join("acts");
    std::fs::create_dir_all(&repo).expect("mkdir");
    std::fs::write(repo.join("LICENSE"), LICENSE_MIT).expect("write");
    std::fs::write(repo.join("act.py"), SCALED_RELU).expect("write");
    let teacher =
        LoopbackServer::start(|_, _| Reply::chat(triton_answer(256))).expect("loopback teacher");
    let config = default_config_with(
        &format!("[[source]]\npath = \"{}\"\n", repo.display()),
        teacher.url(),
    );
    let cfg_path = dir.path().join("ksmith.toml");
    std::fs::write(&cfg_path, &config).expect("write config");
    let s = Session::open(&Common {
        config: Some(cfg_path),
        workdir: Some(dir.path().join("work")),
        threads: Some(2),
        quiet: true,
        force: false,
        shard: None,
        // Two steps a task instead of 40: the path is the default one, the test stays short.
        set: vec!["rollout.iterations=2".into()],
    })
    .expect("config loads");
    s.run(&Stage::ALL).expect("every stage runs");

    let tasks: Vec<TaskRow> = read_table(&TaskRow::path_in(&s.ctx.workdir)).expect("tasks");
    assert_eq!(tasks.len(), 1, "{tasks:?}");
    assert!(
        tasks[0].alt_sizes.starts_with("[{"),
        "the task is sized: {:?}",
        tasks[0].alt_sizes
    );
    let steps: Vec<StepRow> = read_table(&StepRow::path_in(&s.ctx.workdir)).expect("steps");
    let first = steps
        .iter()
        .find(|s| s.iteration == 0)
        .expect("a first step");
    let judged = first.eval_json.as_deref().unwrap_or_default();
    assert!(
        first.correct,
        "translation judged {:?}: {judged}",
        first.eval_status
    );
    assert!(
        judged.contains("judged on the CPU at the task's smallest size set"),
        "{judged}"
    );
    let sft: Vec<SftRow> = read_table(&SftRow::path_in(&s.ctx.workdir)).expect("sft");
    assert!(
        sft.iter().any(|r| r.step_id == first.step_id),
        "the correct translation is a correctness SFT sample"
    );
    assert!(
        s.ctx.workdir.join("datasets/verl-sft/README.md").exists(),
        "an SFT dataset with its card"
    );
    eprintln!(
        "default configuration on the CPU, crawl to export: {:.1} s",
        started.elapsed().as_secs_f64()
    );
}

/// Crawl, extract and probe in two shards, merged, give the same modules and probe results as
/// one unsharded run, and dedup runs on the merged work directory.
#[test]
fn sharded_run_merges_to_the_unsharded_result() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let mut config = String::new();
    for name in [
        "tinyact", "normzoo", "attnlab", "convnets", "seqkit", "gplnet",
    ] {
        config.push_str(&format!(
            "[[source]]\npath = \"{}\"\n\n",
            root.join("data/corpus").join(name).display()
        ));
    }
    let cfg_path = dir.path().join("ksmith.toml");
    std::fs::write(&cfg_path, &config).expect("write config");
    let open = |workdir: &Path, shard: Option<&str>| {
        Session::open(&Common {
            config: Some(cfg_path.clone()),
            workdir: Some(workdir.to_path_buf()),
            threads: Some(2),
            quiet: true,
            force: false,
            shard: shard.map(|s| s.parse().expect("shard")),
            set: Vec::new(),
        })
        .expect("config loads")
    };
    let cpu = [Stage::Crawl, Stage::Extract, Stage::Probe];
    let whole = dir.path().join("whole");
    open(&whole, None).run(&cpu).expect("unsharded run");
    let shards: Vec<std::path::PathBuf> = (0..2)
        .map(|i| dir.path().join(format!("shard-{i}")))
        .collect();
    for (i, shard_dir) in shards.iter().enumerate() {
        open(shard_dir, Some(&format!("{i}/2")))
            .run(&cpu)
            .expect("shard run");
    }
    let sizes: Vec<usize> = shards
        .iter()
        .map(|d| {
            read_table::<RepoRow>(&RepoRow::path_in(d))
                .expect("repos")
                .len()
        })
        .collect();
    assert_eq!(sizes.iter().sum::<usize>(), 6, "{sizes:?}");
    assert!(
        sizes.iter().all(|&n| n > 0),
        "both shards own repositories: {sizes:?}"
    );

    let merged = dir.path().join("merged");
    ksmith_cli::merge::merge(&shards, &merged).expect("merge");
    let key = |m: &ModuleRow| (m.id.clone(), m.repo.clone(), m.class_name.clone(), m.status);
    let a: Vec<_> = read_table::<ModuleRow>(&ModuleRow::path_in(&whole))
        .expect("modules")
        .iter()
        .map(key)
        .collect();
    let b: Vec<_> = read_table::<ModuleRow>(&ModuleRow::path_in(&merged))
        .expect("modules")
        .iter()
        .map(key)
        .collect();
    assert_eq!(a, b);
    let probe_key = |p: &ProbeRow| (p.module_id.clone(), p.status);
    let a: Vec<_> = read_table::<ProbeRow>(&ProbeRow::path_in(&whole))
        .expect("probes")
        .iter()
        .map(probe_key)
        .collect();
    let b: Vec<_> = read_table::<ProbeRow>(&ProbeRow::path_in(&merged))
        .expect("probes")
        .iter()
        .map(probe_key)
        .collect();
    assert_eq!(a, b);
    open(&merged, None)
        .run(&[Stage::Dedup])
        .expect("dedup on the merged tables");

    // Shards that only crawl and extract (the probe then runs once on the merged modules, as on
    // a Ray cluster) merge too, and probing the merged modules gives the same rows.
    let unprobed: Vec<std::path::PathBuf> = (0..2)
        .map(|i| dir.path().join(format!("unprobed-{i}")))
        .collect();
    for (i, shard_dir) in unprobed.iter().enumerate() {
        open(shard_dir, Some(&format!("{i}/2")))
            .run(&[Stage::Crawl, Stage::Extract])
            .expect("shard run");
    }
    let mixed = [shards[0].clone(), unprobed[1].clone()];
    let err = ksmith_cli::merge::merge(&mixed, &dir.path().join("mixed")).unwrap_err();
    assert!(err.to_string().contains("probe every shard"), "{err}");
    let merged_late = dir.path().join("merged-late");
    ksmith_cli::merge::merge(&unprobed, &merged_late).expect("merge of unprobed shards");
    assert!(!ProbeRow::path_in(&merged_late).exists());
    open(&merged_late, None)
        .run(&[Stage::Probe])
        .expect("probe of the merged modules");
    let c: Vec<_> = read_table::<ProbeRow>(&ProbeRow::path_in(&merged_late))
        .expect("probes")
        .iter()
        .map(probe_key)
        .collect();
    assert_eq!(a, c);
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("read corpus") {
        let entry = entry.expect("entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("type").is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy");
        }
    }
}

/// A nightly refresh where one repository changed: extract re-reads only that repository, probe
/// runs only the new program, and the stages downstream re-run; a run with nothing changed does
/// nothing at all.
#[test]
fn changing_one_repository_reruns_only_its_work() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    for name in ["tinyact", "normzoo"] {
        copy_dir(&root.join("data/corpus").join(name), &dir.path().join(name));
    }
    let config = format!(
        "[[source]]\npath = \"{}\"\n\n[[source]]\npath = \"{}\"\n",
        dir.path().join("tinyact").display(),
        dir.path().join("normzoo").display()
    );
    let stages = [
        Stage::Crawl,
        Stage::Extract,
        Stage::Probe,
        Stage::Dedup,
        Stage::Cluster,
    ];
    let s = session(dir.path(), &config);
    s.run(&stages).expect("first run");
    let probes: Vec<ProbeRow> = read_table(&ProbeRow::path_in(&s.ctx.workdir)).expect("probes");
    let before = probes.len() as u64;

    // Nothing changed: every stage after crawl skips.
    let s = session(dir.path(), &config);
    s.run(&stages).expect("second run");
    for stage in ["extract", "probe", "dedup", "cluster"] {
        assert!(report(dir.path(), stage).skipped, "{stage} re-ran");
    }

    // One new module in one repository.
    std::fs::write(
        dir.path().join("tinyact/extra.py"),
        "import torch\nfrom torch import nn\n\n\nclass Softsign2(nn.Module):\n    \
         def forward(self, x):\n        return x / (1 + torch.abs(x)) * 2\n",
    )
    .expect("write");
    let s = session(dir.path(), &config);
    s.run(&stages).expect("third run");
    let extract = report(dir.path(), "extract");
    assert!(!extract.skipped);
    assert_eq!(
        extract.counters.get("repos_reused"),
        Some(&1),
        "{extract:?}"
    );
    let probe = report(dir.path(), "probe");
    assert_eq!(probe.rows_written, before + 1);
    assert_eq!(probe.counters.get("reused"), Some(&before), "{probe:?}");
    assert!(
        !report(dir.path(), "dedup").skipped,
        "dedup sees the new module"
    );
}
