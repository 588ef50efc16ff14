//! The worker pool and the remote evaluator against the real Python worker, in Triton's CPU
//! interpreter (needs the ksmith Python environment: `make venv`).

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Arc;

use ksmith_core::evaluation::{Backend, EvalError, EvalRequest, EvalStatus, Evaluator, HackKind};
use ksmith_eval::{EvalConfig, RemoteEvaluator, WorkerPool};

fn candidates() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../python/tests/candidates")
}

fn request(task: &str, candidate: &str) -> EvalRequest {
    let dir = candidates();
    EvalRequest {
        task_id: task.to_string(),
        reference: std::fs::read_to_string(dir.join(task)).expect("task file"),
        candidate: std::fs::read_to_string(dir.join(candidate)).expect("candidate file"),
        measure: true,
        alt_sizes: Vec::new(),
        backend: Backend::Triton,
    }
}

fn cpu_config(workers: usize) -> EvalConfig {
    EvalConfig {
        devices: vec!["cpu".to_string(); workers],
        trials: 2,
        run_timeout_s: 60.0,
        compile_timeout_s: 120.0,
        timing_timeout_s: 60.0,
        request_timeout_s: 300.0,
        memory_limit_mb: 2048,
        ..Default::default()
    }
}

#[test]
fn pool_serves_concurrent_callers_with_distinct_verdicts() {
    let pool = Arc::new(WorkerPool::start(&cpu_config(1)).unwrap());
    let jobs = [
        (
            "tasks/softmax.py",
            "honest/softmax.py",
            EvalStatus::Correct,
            None,
        ),
        (
            "tasks/elementwise.py",
            "garbage/wrong_values.py",
            EvalStatus::Incorrect,
            None,
        ),
        (
            "tasks/elementwise.py",
            "adversarial/output_caching.py",
            EvalStatus::Hacked,
            Some(HackKind::OutputCaching),
        ),
        (
            "tasks/elementwise.py",
            "garbage/syntax_error.py",
            EvalStatus::CompileError,
            None,
        ),
    ];
    let handles: Vec<_> = jobs
        .iter()
        .map(|(task, cand, _, _)| {
            let pool = pool.clone();
            let req = request(task, cand);
            std::thread::spawn(move || pool.evaluate(&req))
        })
        .collect();
    for (h, (_, cand, status, hack)) in handles.into_iter().zip(jobs.iter()) {
        let r = h.join().unwrap().unwrap();
        assert_eq!(
            (r.status, r.hack),
            (*status, *hack),
            "{cand}: {}",
            r.error_log
        );
        // no GPU: correctness only, timing not measured
        assert!(r.candidate_timing.is_none() && r.speedup.is_none());
        assert_eq!(r.hardware.device, "cpu (triton interpreter)");
    }
}

#[test]
fn broken_reference_is_an_error_naming_the_task() {
    let pool = WorkerPool::start(&cpu_config(1)).unwrap();
    let mut req = request("tasks/elementwise.py", "honest/elementwise.py");
    req.task_id = "broken-task".into();
    req.reference = req.reference.replace(
        "return [torch.randn(N), torch.randn(N)]",
        "raise ValueError('no inputs')",
    );
    match pool.evaluate(&req) {
        Err(EvalError::BrokenReference { task_id, message }) => {
            assert_eq!(task_id, "broken-task");
            assert!(message.contains("no inputs"), "{message}");
        }
        other => panic!("expected a broken reference, got {other:?}"),
    }
}

/// `pid` and every process under it (a worker is bubblewrap, its sandbox's init and the Python
/// worker).
fn process_tree(pid: u32) -> Vec<u32> {
    let mut out = vec![pid];
    let mut i = 0;
    while i < out.len() {
        let tasks = std::fs::read_dir(format!("/proc/{}/task", out[i]))
            .into_iter()
            .flatten()
            .flatten();
        for task in tasks {
            let children =
                std::fs::read_to_string(task.path().join("children")).unwrap_or_default();
            out.extend(
                children
                    .split_whitespace()
                    .filter_map(|c| c.parse::<u32>().ok()),
            );
        }
        i += 1;
    }
    out
}

#[test]
fn a_dead_worker_is_replaced() {
    let pool = WorkerPool::start(&cpu_config(1)).unwrap();
    let pid = pool.worker_pids()[0];
    let tree = process_tree(pid);
    assert!(tree.len() > 1, "the worker runs in its sandbox: {tree:?}");
    let status = Command::new("kill")
        .arg("-9")
        .args(tree.iter().map(|p| p.to_string()))
        .status()
        .unwrap();
    assert!(status.success());
    let r = pool
        .evaluate(&request("tasks/elementwise.py", "garbage/no_modelnew.py"))
        .unwrap();
    assert_eq!(r.status, EvalStatus::StaticRejected);
    assert_eq!(pool.restarts(), 1);
    assert_ne!(pool.worker_pids()[0], pid);
}

#[test]
fn remote_evaluator_over_loopback() {
    let python = ksmith_core::python_env::resolve_python(None).unwrap();
    let mut server = Command::new(python)
        .args([
            "-m",
            "ksmith.evaluator",
            "serve",
            "--port",
            "0",
            "--device",
            "cpu",
        ])
        .env("PYTHONPATH", candidates().join("../.."))
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(server.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let listening: serde_json::Value = serde_json::from_str(&line).unwrap();
    let url = listening["listening"].as_str().unwrap().to_string();
    let remote = RemoteEvaluator::new(&url, 300.0);
    let garbage = remote.evaluate(&request("tasks/elementwise.py", "garbage/syntax_error.py"));
    let honest = remote.evaluate(&request("tasks/elementwise.py", "honest/elementwise.py"));
    let mut broken = request("tasks/elementwise.py", "honest/elementwise.py");
    broken.task_id = "remote-broken".into();
    broken.reference = "import torch\n".into();
    let broken = remote.evaluate(&broken);
    server.kill().unwrap();
    server.wait().unwrap();
    // The launcher's process is bubblewrap; the server inside dies with it, a moment later.
    let addr = url
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_string();
    let until = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while std::net::TcpStream::connect(&addr).is_ok() && std::time::Instant::now() < until {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert_eq!(garbage.unwrap().status, EvalStatus::CompileError);
    assert_eq!(honest.unwrap().status, EvalStatus::Correct);
    assert!(
        matches!(broken, Err(EvalError::BrokenReference { task_id, .. }) if task_id == "remote-broken")
    );
    let gone = RemoteEvaluator::new(&url, 5.0)
        .evaluate(&request("tasks/elementwise.py", "garbage/syntax_error.py"));
    assert!(matches!(gone, Err(EvalError::Unavailable(_))), "{gone:?}");
}

#[test]
fn build_picks_remote_when_configured() {
    let cfg = EvalConfig {
        remote_url: Some("http://127.0.0.1:9".into()),
        ..Default::default()
    };
    let ev = ksmith_eval::build(&cfg).unwrap();
    let r = ev.evaluate(&request("tasks/elementwise.py", "garbage/syntax_error.py"));
    assert!(matches!(r, Err(EvalError::Unavailable(_))));
}

/// `[sandbox] require`, the default: a sandbox that cannot be set up (here: no bubblewrap where
/// the config says) stops the pool with one line naming what is missing and how to fix it,
/// before any candidate runs; `require = false`, the explicit opt-out, runs candidates with what
/// works.
#[test]
fn an_incomplete_sandbox_stops_the_pool_unless_the_config_opts_out() {
    let mut cfg = cpu_config(1);
    cfg.sandbox = ksmith_sandbox::SandboxConfig {
        bwrap: "/nonexistent/bwrap".into(),
        ..Default::default()
    };
    let err = WorkerPool::start(&cfg).unwrap_err();
    assert!(
        matches!(err, ksmith_eval::EvalClientError::Sandbox(_)),
        "{err:?}"
    );
    let line = err.to_string();
    assert!(
        line.starts_with("eval: ksmith sandbox: refusing to run untrusted code: bubblewrap is not at /nonexistent/bwrap"),
        "{line}"
    );
    assert!(
        line.contains("`make sandbox`") && line.contains("[sandbox] require = false"),
        "{line}"
    );
    assert!(!line.contains('\n'), "one line: {line}");

    cfg.sandbox.require = false;
    let pool = WorkerPool::start(&cfg).expect("the opt-out runs without bubblewrap");
    let r = pool
        .evaluate(&request("tasks/elementwise.py", "honest/elementwise.py"))
        .unwrap();
    assert_eq!(r.status, EvalStatus::Correct, "{}", r.error_log);
}

/// The pool's report counters by name.
fn report(pool: &WorkerPool) -> BTreeMap<String, u64> {
    pool.report_counters().into_iter().collect()
}

/// A GPU 0 (none on a machine without GPUs: its worker cannot start or its device check fails)
/// and the CPU, one evaluation at a time each.
fn missing_gpu_then_cpu() -> EvalConfig {
    EvalConfig {
        devices: vec!["0".to_string(), "cpu".to_string()],
        inflight_per_worker: Some(1),
        ..cpu_config(1)
    }
}

/// Evaluates two wrong candidates at once on `pool` (two requests in flight); both `incorrect`.
fn two_wrong_candidates_at_once(pool: &Arc<WorkerPool>) {
    let handles: Vec<_> = (0..2)
        .map(|_| {
            let pool = pool.clone();
            let req = request("tasks/elementwise.py", "garbage/wrong_values.py");
            std::thread::spawn(move || pool.evaluate(&req))
        })
        .collect();
    for h in handles {
        let result = h
            .join()
            .expect("the evaluating thread panicked")
            .expect("the pool evaluates the request");
        assert_eq!(result.status, EvalStatus::Incorrect);
    }
}

/// A pool of two CPU workers stands for two devices: requests in flight go one to each, and
/// the pool accounts per device (evaluations, busy time) and by phase (the workers' profiles).
#[test]
fn two_workers_share_the_work_and_account_for_it() {
    let cfg = EvalConfig {
        inflight_per_worker: Some(1),
        ..cpu_config(2)
    };
    let pool = Arc::new(WorkerPool::start(&cfg).unwrap());
    assert_eq!(pool.capacity(), 2);
    assert!(
        pool.describe().contains("cpu#0, cpu#1"),
        "{}",
        pool.describe()
    );
    two_wrong_candidates_at_once(&pool);
    let counters = report(&pool);
    for device in ["cpu#0", "cpu#1"] {
        let get = |name: &str| counters[&format!("eval_device/{device}/{name}")];
        assert_eq!(get("evaluations"), 1, "{counters:?}");
        assert!(
            get("busy_ms") > 0 && get("busy_permille") > 0,
            "{counters:?}"
        );
        assert_eq!(get("failed"), 0);
    }
    assert_eq!(counters["eval_devices"], 2);
    assert_eq!(counters["eval_profiled"], 2);
    for phase in ["reference", "spawn", "compile", "correctness", "queue"] {
        assert!(
            counters.contains_key(&format!("eval_phase_ms/{phase}")),
            "{phase}: {counters:?}"
        );
    }
    assert!(counters["eval_phase_ms/correctness"] > 0);
    // The workers started side by side (each from a thread of its own) are still the first
    // ones: none died with the thread that started it.
    assert_eq!(pool.restarts(), 0);
}

/// A worker replaced on behalf of a thread that then ends lives on (bubblewrap's
/// die-with-parent follows the thread that started a process).
#[test]
fn a_worker_replaced_for_a_short_lived_thread_outlives_it() {
    let pool = Arc::new(WorkerPool::start(&cpu_config(1)).unwrap());
    let tree = process_tree(pool.worker_pids()[0]);
    let status = Command::new("kill")
        .arg("-9")
        .args(tree.iter().map(|p| p.to_string()))
        .status()
        .unwrap();
    assert!(status.success());
    let short = {
        let pool = pool.clone();
        std::thread::spawn(move || {
            pool.evaluate(&request("tasks/elementwise.py", "garbage/no_modelnew.py"))
        })
    };
    assert_eq!(
        short.join().unwrap().unwrap().status,
        EvalStatus::StaticRejected
    );
    assert_eq!(pool.restarts(), 1);
    let pid = pool.worker_pids()[0];
    std::thread::sleep(std::time::Duration::from_secs(2));
    let r = pool
        .evaluate(&request("tasks/elementwise.py", "garbage/no_modelnew.py"))
        .unwrap();
    assert_eq!(r.status, EvalStatus::StaticRejected);
    assert_eq!(pool.restarts(), 1, "the replacement died with its thread");
    assert_eq!(pool.worker_pids()[0], pid);
}

/// A GPU that fails (here one that does not exist: its worker cannot start or its device check
/// fails) is taken out of the pool, and every request is evaluated on the device left. Skipped
/// where a GPU 0 exists.
#[test]
fn a_failing_gpu_is_taken_out_and_its_work_evaluated_elsewhere() {
    if ksmith_eval::devices::count_gpus() > 0 {
        eprintln!("skipped: this machine has a GPU 0");
        return;
    }
    let cfg = missing_gpu_then_cpu();
    let pool = Arc::new(WorkerPool::start(&cfg).unwrap());
    two_wrong_candidates_at_once(&pool);
    let counters = report(&pool);
    assert_eq!(counters["eval_device/cuda:0/failed"], 1, "{counters:?}");
    assert_eq!(counters["eval_device/cuda:0/evaluations"], 0);
    assert_eq!(counters["eval_device/cpu/evaluations"], 2);
    assert_eq!(counters["eval_devices_failed"], 1);
}

#[test]
fn a_backend_the_worker_cannot_run_is_refused_without_losing_the_worker_or_its_device() {
    if ksmith_eval::devices::count_gpus() > 0 {
        eprintln!("skipped: this machine has a GPU (the CUDA backend may be available)");
        return;
    }
    let pool = WorkerPool::start(&cpu_config(1)).unwrap();
    let pid = pool.worker_pids()[0];
    let cuda = EvalRequest {
        backend: Backend::Cuda,
        ..request("tasks/elementwise.py", "cuda/honest/add_relu_half.py")
    };
    match pool.evaluate(&cuda) {
        Err(EvalError::Unavailable(m)) => {
            assert!(m.contains("CUDA backend is unavailable"), "{m}")
        }
        other => panic!("expected the backend to be unavailable, got {other:?}"),
    }
    // the same worker, on a device still in the pool, evaluates the next (Triton) request
    let r = pool
        .evaluate(&request("tasks/elementwise.py", "garbage/wrong_values.py"))
        .unwrap();
    assert_eq!(r.status, EvalStatus::Incorrect);
    assert_eq!((pool.restarts(), pool.worker_pids()[0]), (0, pid));
    let counters = report(&pool);
    assert_eq!(
        counters.get("eval_devices_failed").copied().unwrap_or(0),
        0,
        "{counters:?}"
    );
}

/// A candidate that rewrites its harness to hand the judge a result file no honest harness
/// writes: its own verdict (`sandbox_escape`), not a judge failure that replaced the worker and
/// took the device out of the pool (it did, twice in a row, and then every other device too).
#[test]
fn a_crafted_result_file_is_the_candidates_verdict_and_the_device_stays() {
    let cfg = EvalConfig {
        static_checks: false, // the runtime layer alone: the static checks refuse `import sys`
        ..cpu_config(1)
    };
    let pool = WorkerPool::start(&cfg).unwrap();
    let pid = pool.worker_pids()[0];
    let r = pool
        .evaluate(&request(
            "tasks/elementwise.py",
            "adversarial/crafted_result_file.py",
        ))
        .unwrap();
    assert_eq!(
        (r.status, r.hack),
        (EvalStatus::Hacked, Some(HackKind::SandboxEscape)),
        "{}",
        r.error_log
    );
    assert!(
        r.error_log.contains("not written by the harness"),
        "{}",
        r.error_log
    );
    assert_eq!((pool.restarts(), pool.worker_pids()[0]), (0, pid));
    let counters = report(&pool);
    assert_eq!(counters["eval_devices_failed"], 0, "{counters:?}");
}

/// A request the worker answers with an internal error (here a reference that fails in the judge
/// only) is tried again on the same worker and then answered with that error: the worker is not
/// replaced (its other evaluations go on) and the device stays in the pool (sent on, the request
/// would have taken every device out in turn).
#[test]
fn an_internal_error_fails_the_request_not_the_worker_or_its_device() {
    let pool = WorkerPool::start(&cpu_config(1)).unwrap();
    let pid = pool.worker_pids()[0];
    match pool.evaluate(&request("tasks/fails_in_judge.py", "honest/elementwise.py")) {
        Err(EvalError::Unavailable(m)) => {
            assert!(
                m.starts_with("worker error: RuntimeError: the judge did not start: "),
                "{m}"
            );
            assert!(
                m.lines()
                    .next()
                    .unwrap()
                    .contains("RuntimeError: this reference refuses to judge"),
                "the first line names the exception: {m}"
            );
        }
        other => panic!("expected the worker's error, got {other:?}"),
    }
    let r = pool
        .evaluate(&request("tasks/elementwise.py", "honest/elementwise.py"))
        .unwrap();
    assert_eq!(r.status, EvalStatus::Correct, "{}", r.error_log);
    assert_eq!((pool.restarts(), pool.worker_pids()[0]), (0, pid));
    let counters = report(&pool);
    assert_eq!(counters["eval_devices_failed"], 0, "{counters:?}");
}

/// A preflight builds the task's reference on the device its evaluations then go to (its home),
/// and a reference that fails only on the evaluator's device (a CPU tensor made in `forward`;
/// here the interpreter stands for the GPU) is the task's `BrokenReference`, naming the error:
/// no device is taken out for it.
#[test]
fn a_preflight_builds_the_reference_where_the_task_is_evaluated_and_a_broken_one_keeps_the_device()
{
    let cfg = EvalConfig {
        inflight_per_worker: Some(1),
        ..cpu_config(2)
    };
    let pool = WorkerPool::start(&cfg).unwrap();
    let healthy = request("tasks/elementwise.py", "garbage/wrong_values.py");
    let built = pool.preflight(&healthy).unwrap();
    assert_eq!(built.reference_ms, None, "nothing is timed on the CPU");
    assert_eq!(
        pool.evaluate(&healthy).unwrap().status,
        EvalStatus::Incorrect
    );
    let counters = report(&pool);
    let on = |device: &str| counters[&format!("eval_device/{device}/evaluations")];
    assert_eq!(
        (on("cpu#0"), on("cpu#1")),
        (2, 0),
        "the preflight made the task's home: {counters:?}"
    );
    assert_eq!(counters["eval_preflights"], 1);
    assert!(counters.contains_key("eval_preflight_phase_ms/reference"));

    let swin = EvalRequest {
        task_id: "swin-v2".into(),
        ..request("tasks/cpu_tensor_in_forward.py", "honest/elementwise.py")
    };
    match pool.preflight(&swin) {
        Err(EvalError::BrokenReference { task_id, message }) => {
            assert_eq!(task_id, "swin-v2");
            assert!(
                message.starts_with("RuntimeError: Expected all tensors to be on the same device"),
                "{message}"
            );
        }
        other => panic!("expected a broken reference, got {other:?}"),
    }
    let counters = report(&pool);
    assert_eq!(counters["eval_devices_failed"], 0, "{counters:?}");
    assert_eq!(pool.restarts(), 0);
}

/// A GPU that fails under a preflight (here one that does not exist: its worker cannot start or
/// its device check fails) is taken out and the preflight answered by the device left: the task
/// is not refused (the worker's side, a reference failing on a GPU that then fails its check
/// answered `device_failed`, is `python/tests/test_eval_health.py`'s). Skipped where a GPU 0
/// exists.
#[test]
fn a_device_that_fails_during_a_preflight_is_taken_out_and_another_answers_it() {
    if ksmith_eval::devices::count_gpus() > 0 {
        eprintln!("skipped: this machine has a GPU 0");
        return;
    }
    let cfg = missing_gpu_then_cpu();
    let pool = WorkerPool::start(&cfg).unwrap();
    let built = pool.preflight(&request("tasks/elementwise.py", "garbage/wrong_values.py"));
    assert!(built.is_ok(), "{built:?}");
    let counters = report(&pool);
    assert_eq!(counters["eval_device/cuda:0/failed"], 1, "{counters:?}");
    assert_eq!(counters["eval_device/cpu/evaluations"], 1);
}
