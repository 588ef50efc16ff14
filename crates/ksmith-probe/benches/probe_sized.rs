//! Probe throughput on real-sized programs: this checkout's runner (repair, verification and
//! sizing) side by side with an older commit's runner (repair and verification), in one run.
//!
//! The programs are `benches/corpus/*.py`: whole modules of the kinds real repositories hold
//! (residual and bottleneck blocks, attention and transformer blocks, U-Net stages, recurrent
//! encoders, KernelBench problems, a config-driven GPT block...), written for this bench, each
//! with the guessed arguments a static guesser emits (`[4, 4, 4, 4]` inputs, `4` for sizes) so
//! the repair search works as on crawled code. `KSMITH_BENCH_MODULES=<modules.parquet>` adds
//! the runnable modules of a work directory (real crawled code; `KSMITH_BENCH_LIMIT`, default
//! 200, caps how many).
//!
//! Both runners are driven by this crate's pool in the same sandbox, one worker per core; the
//! variants take turns repetition by repetition so they see the same machine load. The older
//! runner's Python files come from git (`KSMITH_BENCH_BASE`, default the commit this work
//! started from); without git history only this checkout is measured.
//!
//! Printed per variant (medians of `KSMITH_BENCH_REPS`, default 3): modules/s with the workers'
//! start (importing torch, and for sizing the meta kernels' Python code) and without it (a
//! run of one trivial module per worker, measured apart, taken off), the CPU time of the
//! modules' children per module, and where this checkout's runner reports it, the split of the
//! CPU per module between set-up (fork, confinement, copy-on-write faults, exit, workspace and
//! cgroup; the worker's share included) and the runner's Python work (repair, verification,
//! sizing). On a machine shared with other work the wall-clock rates fall with the load; the
//! CPU per module does not.
//!
//! `cargo bench -p ksmith-probe --bench probe_sized` (`KSMITH_BENCH_WORKERS`, default the
//! number of cores).

mod common;

use std::path::Path;
use std::time::Instant;

use ksmith_core::progress::Tracker;
use ksmith_core::table::read_table;
use ksmith_core::tables::{ModuleRow, ModuleStatus, ProbeStatus, SizeStatus};
use ksmith_probe::runtime::Runtime;
use ksmith_probe::{Job, PoolOutput, ProbeConfig, probe_programs_in};

/// The commit this work started from: the runner before sizing.
const BASE: &str = "b276674";

fn env_num(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

fn corpus() -> Vec<ModuleRow> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/corpus");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("benches/corpus")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "py"))
        .collect();
    files.sort();
    let mut out: Vec<ModuleRow> = files
        .iter()
        .map(|p| {
            let name = p
                .file_stem()
                .expect("a file name")
                .to_string_lossy()
                .into_owned();
            common::module_row(&name, std::fs::read_to_string(p).expect("corpus file"))
        })
        .collect();
    if let Ok(path) = std::env::var("KSMITH_BENCH_MODULES") {
        let limit = env_num("KSMITH_BENCH_LIMIT", 200);
        let rows: Vec<ModuleRow> = read_table(Path::new(&path)).expect("KSMITH_BENCH_MODULES");
        out.extend(
            rows.into_iter()
                .filter(|m| m.status == ModuleStatus::Ok && m.program.is_some())
                .take(limit),
        );
    }
    out
}

/// The older commit's `python/ksmith` files, from git.
fn base_files(commit: &str) -> Option<Vec<(String, String)>> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let git = |args: &[&str]| {
        let out = std::process::Command::new("git")
            .arg("-C")
            .arg(&root)
            .args(args)
            .output()
            .ok()?;
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
    };
    let listing = git(&["ls-tree", "-r", "--name-only", commit, "python/ksmith"])?;
    let mut files = Vec::new();
    for path in listing
        .lines()
        .filter(|p| p.ends_with(".py") || p.ends_with(".json"))
    {
        let text = git(&["show", &format!("{commit}:{path}")])?;
        files.push((path.trim_start_matches("python/").to_string(), text));
    }
    Some(files)
}

struct Run {
    wall_s: f64,
    out: PoolOutput,
}

impl Run {
    /// CPU seconds of the modules' children (both runners report them).
    fn child_cpu_s(&self) -> f64 {
        self.out.rows.iter().map(|r| r.cpu_time_ms).sum::<f64>() / 1000.0
    }
}

fn run(runtime: &Runtime, set: &[ModuleRow], cfg: &ProbeConfig, workers: usize) -> Run {
    let jobs: Vec<Job<'_>> = set.iter().map(Job::own).collect();
    let t0 = Instant::now();
    let out = probe_programs_in(
        runtime,
        &jobs,
        cfg,
        workers,
        None,
        &Tracker::hidden(),
        &|_| Ok(()),
    )
    .expect("probe run");
    Run {
        wall_s: t0.elapsed().as_secs_f64(),
        out,
    }
}

struct Variant {
    name: String,
    runtime: Runtime,
    cfg: ProbeConfig,
    start: Vec<Run>,
    runs: Vec<Run>,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn main() {
    let reps = env_num("KSMITH_BENCH_REPS", 3).max(1);
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let workers = env_num("KSMITH_BENCH_WORKERS", cores);
    let set = corpus();
    let trivial: Vec<ModuleRow> = (0..workers)
        .map(|i| common::module_row(&format!("trivial{i}"), common::trivial_program()))
        .collect();
    let base_commit = std::env::var("KSMITH_BENCH_BASE").unwrap_or_else(|_| BASE.into());
    let mut variants = Vec::new();
    match base_files(&base_commit) {
        Some(files) => variants.push(Variant {
            name: format!("base {base_commit} (repair)"),
            runtime: Runtime::with_files(files.iter().map(|(a, b)| (a.as_str(), b.as_str())))
                .expect("base runtime"),
            cfg: ProbeConfig::default(),
            start: vec![],
            runs: vec![],
        }),
        None => println!("(no base: commit {base_commit} is not in this clone's history)"),
    }
    variants.push(Variant {
        name: "this (repair + sizing)".into(),
        runtime: Runtime::create().expect("runtime"),
        cfg: ProbeConfig::default(),
        start: vec![],
        runs: vec![],
    });
    for _ in 0..reps {
        for v in &mut variants {
            v.start.push(run(&v.runtime, &trivial, &v.cfg, workers));
            v.runs.push(run(&v.runtime, &set, &v.cfg, workers));
        }
    }
    println!(
        "probe_sized bench: {cores} cores, {workers} workers, {} programs ({} corpus files), {reps} \
         repetitions (median)",
        set.len(),
        set.iter().filter(|m| m.repo == common::BENCH_REPO).count()
    );
    println!(
        "{:<28} {:>8} {:>9} {:>10} {:>12} {:>10} {:>6} {:>6} {:>15} {:>16}",
        "variant",
        "start s",
        "median s",
        "modules/s",
        "w/o start /s",
        "child CPU ms",
        "ok",
        "sized",
        "set-up ms/mod",
        "runner ms/mod"
    );
    for v in &variants {
        let n = set.len() as f64;
        let start_s = median(v.start.iter().map(|r| r.wall_s).collect());
        let wall = median(v.runs.iter().map(|r| r.wall_s).collect());
        let cpu = median(v.runs.iter().map(Run::child_cpu_s).collect());
        let last = &v.runs[v.runs.len() - 1].out;
        let ok = last
            .rows
            .iter()
            .filter(|r| r.status == ProbeStatus::Ok)
            .count();
        let sized = last
            .rows
            .iter()
            .filter(|r| r.size_status == Some(SizeStatus::Sized))
            .count();
        let split = |f: fn(&PoolOutput) -> u64| {
            let ms = median(v.runs.iter().map(|r| f(&r.out) as f64).collect());
            if ms > 0.0 {
                format!("{:.1}", ms / n)
            } else {
                "n/a".into()
            }
        };
        println!(
            "{:<28} {:>8.2} {:>9.2} {:>10.2} {:>12.2} {:>10.1} {:>6} {:>6} {:>15} {:>16}",
            v.name,
            start_s,
            wall,
            n / wall,
            n / (wall - start_s).max(1e-9),
            1000.0 * cpu / n,
            ok,
            sized,
            split(|o| o.setup_cpu_ms),
            split(|o| o.runner_cpu_ms),
        );
    }
    if let (Some(_), Some(v)) = (std::env::var_os("KSMITH_BENCH_VERBOSE"), variants.last()) {
        for r in &v.runs[v.runs.len() - 1].out.rows {
            eprintln!(
                "{:<32} {:?} {:?} {} {:?}",
                r.module_id, r.status, r.size_status, r.sizes, r.error_message
            );
        }
    }
}
