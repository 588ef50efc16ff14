//! Schedules modules over N workers, each on its own thread, and keeps the input order.
//!
//! A thread owns one worker; it takes the next module index from a shared counter, sends the
//! request and waits with the watchdog. A worker that hangs or dies is killed; its module gets
//! `timeout`/`crashed` and the thread starts a fresh worker for the next module. A worker that
//! cannot start at all stops the run with [`Error::WorkerStart`] (a broken environment), or with
//! [`Error::Sandbox`] when it refused to run without the whole sandbox; each worker's hello is
//! checked against `[sandbox]` before its first request ([`admit`]).

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use ksmith_core::chat::ChatClient;
use ksmith_core::progress::Tracker;
use ksmith_core::tables::{ModuleRow, ProbeRow, ProbeStatus};

use crate::Job;
use crate::config::ProbeConfig;
use crate::error::Error;
use crate::llm_repair;
use crate::protocol::{Hello, PROTOCOL_VERSION, Request};
use crate::rows::{self, RunnerFault};
use crate::worker::{Worker, WorkerSpec};

/// What a pool run produced.
#[derive(Debug, Default)]
pub struct PoolOutput {
    /// One row per module, in input order.
    pub rows: Vec<ProbeRow>,
    /// Workers started (more than the pool size when some were replaced).
    pub workers_started: u64,
    /// The first worker's hello (which isolation was active).
    pub hello: Option<Hello>,
    /// Modules for which the LLM was asked.
    pub llm_asked: u64,
    /// Modules that ran thanks to the LLM's answer.
    pub llm_fixed: u64,
    /// Modules run again because their Ray actor died (0 for local workers).
    pub requeued: u64,
    /// CPU time of setting children up and tearing them down (fork, confinement,
    /// copy-on-write faults, exit; the worker's share included), ms.
    pub setup_cpu_ms: u64,
    /// CPU time of the runner's work on the modules (repair, verification, sizing), ms.
    pub runner_cpu_ms: u64,
}

/// What the pool's threads share besides the queue: the workers started, the first hello, the
/// CPU time sums and whether the sandbox's warning was said.
#[derive(Default)]
struct Shared {
    started: AtomicUsize,
    hello: Mutex<Option<Hello>>,
    setup_us: AtomicU64,
    runner_us: AtomicU64,
    warned: Mutex<bool>,
}

/// What the probe runs, as its sandbox's refusals and warnings name it.
pub(crate) const UNTRUSTED: &str = "probe: crawled modules";

/// Checks a worker's hello against `[sandbox]` before its first request: an incomplete sandbox
/// stops the run unless the configuration opts out, and then it is said once, before any
/// worker's first request (the others wait for `warned` while it is said).
pub(crate) fn admit(
    spec: &WorkerSpec,
    hello: &Hello,
    warned: &Mutex<bool>,
    tracker: &Tracker,
) -> Result<(), Error> {
    let missing = ksmith_sandbox::missing(&hello.sandbox);
    if let Some(warning) = ksmith_sandbox::admit(&spec.sandbox, &missing, UNTRUSTED)? {
        let mut said = warned.lock().unwrap_or_else(|e| e.into_inner());
        if !*said {
            tracker.warn(&warning);
            *said = true;
        }
    }
    Ok(())
}

/// The request for one module; `observed`: `over` is the configuration a model of the
/// repository gave the class (`observed`), not the LLM's answer.
pub fn request_for(
    module: &ModuleRow,
    program: &str,
    cfg: &ProbeConfig,
    over: Option<String>,
    observed: bool,
) -> Request {
    Request {
        v: PROTOCOL_VERSION,
        id: module.id.clone(),
        program: program.to_string(),
        seed: cfg.seed,
        timeout_s: cfg.timeout_s,
        memory_mb: cfg.memory_mb,
        max_steps: cfg.max_steps,
        restarts: cfg.restarts,
        repair_budget_s: cfg.repair_budget_s,
        output_cap_bytes: cfg.output_cap_bytes,
        r#override: over,
        sizing: cfg.sizing.enabled.then(|| cfg.sizing.clone()),
        arg_sources: module.arg_sources.clone(),
        observed,
    }
}

/// A response's CPU milliseconds as whole microseconds (none or negative: 0).
pub(crate) fn cpu_us(ms: Option<f64>) -> u64 {
    (ms.unwrap_or(0.0).max(0.0) * 1000.0) as u64
}

/// Called with each row as soon as its module is done (from the worker's thread).
pub type Finished<'a> = &'a (dyn Fn(&ProbeRow) -> Result<(), Error> + Sync);

/// Probes the modules of `jobs` (each must have a program) with `workers` worker processes,
/// handing each row to `finished` when it is done.
pub fn probe_all(
    jobs: &[Job<'_>],
    cfg: &ProbeConfig,
    spec: &WorkerSpec,
    workers: usize,
    chat: Option<&dyn ChatClient>,
    tracker: &Tracker,
    finished: Finished<'_>,
) -> Result<PoolOutput, Error> {
    let next = AtomicUsize::new(0);
    let abort = AtomicBool::new(false);
    let results: Vec<Mutex<Option<ProbeRow>>> = jobs.iter().map(|_| Mutex::new(None)).collect();
    let first_error: Mutex<Option<Error>> = Mutex::new(None);
    let shared = Shared::default();
    let llm_asked = AtomicUsize::new(0);
    let llm_fixed = AtomicUsize::new(0);
    let chat = if cfg.llm_repair { chat } else { None };
    let deadline = Duration::from_secs_f64(cfg.timeout_s + cfg.watchdog_grace_s);
    let workers = workers.max(1);
    tracker.starting(&format!(
        "starting {workers} sandboxed worker{}",
        if workers == 1 { "" } else { "s" }
    ));
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| {
                let mut worker: Option<Worker> = None;
                loop {
                    if abort.load(Ordering::SeqCst) {
                        break;
                    }
                    let i = next.fetch_add(1, Ordering::SeqCst);
                    let Some(job) = jobs.get(i) else { break };
                    let module = job.module;
                    let program = module.program.as_deref().unwrap_or_default();
                    let mut row = match probe_one(
                        &mut worker,
                        spec,
                        module,
                        program,
                        cfg,
                        job.over.clone(),
                        job.over.is_some(),
                        deadline,
                        &shared,
                        tracker,
                    ) {
                        Ok(row) => row,
                        Err(e) => {
                            abort.store(true, Ordering::SeqCst);
                            if let Ok(mut slot) = first_error.lock() {
                                slot.get_or_insert(e);
                            }
                            break;
                        }
                    };
                    // An override that does not run leaves the module's own row; the LLM is
                    // asked about the module's own program only.
                    if let (ProbeStatus::Failed, Some(chat), None) = (row.status, chat, &job.over) {
                        {
                            llm_asked.fetch_add(1, Ordering::SeqCst);
                            match llm_attempt(
                                &mut worker,
                                spec,
                                module,
                                program,
                                cfg,
                                &row,
                                chat,
                                deadline,
                                &shared,
                                tracker,
                            ) {
                                Ok(new_row) => {
                                    if new_row.status == ProbeStatus::Ok {
                                        llm_fixed.fetch_add(1, Ordering::SeqCst);
                                    }
                                    row = new_row;
                                }
                                Err(e) => {
                                    abort.store(true, Ordering::SeqCst);
                                    if let Ok(mut slot) = first_error.lock() {
                                        slot.get_or_insert(e);
                                    }
                                    break;
                                }
                            }
                        }
                    }
                    if let Err(e) = finished(&row) {
                        abort.store(true, Ordering::SeqCst);
                        if let Ok(mut slot) = first_error.lock() {
                            slot.get_or_insert(e);
                        }
                        break;
                    }
                    if let Ok(mut slot) = results[i].lock() {
                        *slot = Some(row);
                    }
                    tracker.inc(1);
                }
            });
        }
    });
    if let Some(e) = first_error.into_inner().ok().flatten() {
        return Err(e);
    }
    let rows = results
        .into_iter()
        .zip(jobs)
        .map(|(slot, job)| {
            slot.into_inner().ok().flatten().unwrap_or_else(|| {
                rows::without_response(
                    job.module,
                    ProbeStatus::Crashed,
                    RunnerFault::Internal,
                    "the module was not probed".into(),
                )
            })
        })
        .collect();
    Ok(PoolOutput {
        rows,
        workers_started: shared.started.load(Ordering::SeqCst) as u64,
        hello: shared.hello.into_inner().ok().flatten(),
        llm_asked: llm_asked.load(Ordering::SeqCst) as u64,
        llm_fixed: llm_fixed.load(Ordering::SeqCst) as u64,
        requeued: 0,
        setup_cpu_ms: shared.setup_us.load(Ordering::SeqCst) / 1000,
        runner_cpu_ms: shared.runner_us.load(Ordering::SeqCst) / 1000,
    })
}

#[allow(clippy::too_many_arguments)]
fn probe_one(
    worker: &mut Option<Worker>,
    spec: &WorkerSpec,
    module: &ModuleRow,
    program: &str,
    cfg: &ProbeConfig,
    over: Option<String>,
    observed: bool,
    deadline: Duration,
    shared: &Shared,
    tracker: &Tracker,
) -> Result<ProbeRow, Error> {
    if worker.is_none() {
        let w = Worker::start(spec)?;
        admit(spec, &w.hello, &shared.warned, tracker)?;
        tracker.started();
        shared.started.fetch_add(1, Ordering::SeqCst);
        if let Ok(mut h) = shared.hello.lock() {
            h.get_or_insert_with(|| w.hello.clone());
        }
        *worker = Some(w);
    }
    let Some(w) = worker.as_mut() else {
        return Err(Error::Python("no worker".into()));
    };
    let request = request_for(module, program, cfg, over, observed);
    Ok(match w.probe(&request, deadline) {
        Ok(response) => {
            shared
                .setup_us
                .fetch_add(cpu_us(response.setup_cpu_ms), Ordering::SeqCst);
            shared
                .runner_us
                .fetch_add(cpu_us(response.runner_cpu_ms), Ordering::SeqCst);
            rows::from_response(module, response)
        }
        Err(failure) => {
            *worker = None;
            rows::from_failure(module, failure, deadline)
        }
    })
}

#[allow(clippy::too_many_arguments)]
fn llm_attempt(
    worker: &mut Option<Worker>,
    spec: &WorkerSpec,
    module: &ModuleRow,
    program: &str,
    cfg: &ProbeConfig,
    failed: &ProbeRow,
    chat: &dyn ChatClient,
    deadline: Duration,
    shared: &Shared,
    tracker: &Tracker,
) -> Result<ProbeRow, Error> {
    let code = match llm_repair::ask(program, failed, cfg, chat) {
        Ok(code) => code,
        Err(kept) => return Ok(*kept),
    };
    let row = probe_one(
        worker,
        spec,
        module,
        program,
        cfg,
        Some(code),
        false,
        deadline,
        shared,
        tracker,
    )?;
    Ok(llm_repair::merge(failed, row))
}
