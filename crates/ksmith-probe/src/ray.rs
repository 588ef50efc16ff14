//! Probing on a Ray cluster: the same sandboxed workers, as Ray actors, behind one driver.
//!
//! With `[probe] ray_address` set, the stage starts one driver process (`python -m
//! ksmith.probe_ray`, embedded next to the runner) instead of local workers. The driver connects
//! to the cluster, starts one actor per CPU (each holds one sandboxed `ksmith.probe.worker` on
//! its node, built from the runner files this process wrote) and speaks the worker protocol
//! multiplexed: this side keeps a window of requests in flight and turns each answer into the
//! module's row exactly as the local pool does ([`rows::from_response`],
//! [`rows::from_failure`]), so a laptop and a cluster give the same table. A module whose actor
//! dies is run again on another actor by the driver (`ray_requeue` times). The driver failing is
//! a stage error: there is no cluster to fall back on.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::Duration;

use ksmith_core::chat::ChatClient;
use ksmith_core::progress::Tracker;
use ksmith_core::tables::{ProbeRow, ProbeStatus};

use crate::Job;
use crate::config::ProbeConfig;
use crate::error::Error;
use crate::llm_repair;
use crate::pool::{Finished, PoolOutput, cpu_us, request_for};
use crate::rows;
use crate::worker::{Worker, WorkerFailure, WorkerSpec};

/// Requests in flight per actor: one running, one queued at the driver.
const WINDOW_PER_ACTOR: usize = 2;

/// What a request in flight is for.
enum Purpose {
    /// The module's rules-only probe.
    First,
    /// The LLM's override, after the rules failed with this row.
    Llm(Box<ProbeRow>),
}

/// Probes the modules of `jobs` on the Ray cluster of `cfg.ray_address`; rows come back in
/// input order.
pub fn probe_all(
    jobs: &[Job<'_>],
    cfg: &ProbeConfig,
    spec: &WorkerSpec,
    workers: usize,
    chat: Option<&dyn ChatClient>,
    tracker: &Tracker,
    finished: Finished<'_>,
) -> Result<PoolOutput, Error> {
    let chat = if cfg.llm_repair { chat } else { None };
    let deadline = Duration::from_secs_f64(cfg.timeout_s + cfg.watchdog_grace_s);
    tracker.starting("starting the Ray driver and its sandboxed actors");
    let mut driver = start_driver(cfg, spec, workers)?;
    crate::pool::admit(spec, &driver.hello, &Mutex::new(false), tracker)?;
    tracker.started();
    let actors = driver
        .hello
        .ray
        .as_ref()
        .map(|r| r.actors)
        .unwrap_or(1)
        .max(1);
    let ray_error = |message: String| Error::Ray {
        address: cfg.ray_address.clone(),
        message,
    };
    // Silence longer than this while requests are out means the driver is stuck: a request
    // answers within its deadline, and a requeued one within a few more.
    let silence = deadline * (cfg.ray_requeue + 2) + Duration::from_secs(60);
    let mut waiting: VecDeque<(usize, Option<String>, Purpose)> = jobs
        .iter()
        .enumerate()
        .map(|(i, job)| (i, job.over.clone(), Purpose::First))
        .collect();
    let mut out: HashMap<String, VecDeque<(usize, Purpose)>> = HashMap::new();
    let mut in_flight = 0usize;
    let mut results: Vec<Option<ProbeRow>> = vec![None; jobs.len()];
    let (mut llm_asked, mut llm_fixed) = (0u64, 0u64);
    let (mut setup_us, mut runner_us) = (0u64, 0u64);
    while in_flight > 0 || !waiting.is_empty() {
        while in_flight < actors * WINDOW_PER_ACTOR {
            let Some((i, over, purpose)) = waiting.pop_front() else {
                break;
            };
            let module = jobs[i].module;
            let program = module.program.as_deref().unwrap_or_default();
            let observed = matches!(purpose, Purpose::First) && jobs[i].over.is_some();
            let request = request_for(module, program, cfg, over, observed);
            driver
                .send(&request)
                .map_err(|f| ray_error(failure_text(f)))?;
            out.entry(module.id.clone())
                .or_default()
                .push_back((i, purpose));
            in_flight += 1;
        }
        let response = driver
            .receive(silence)
            .map_err(|f| ray_error(failure_text(f)))?;
        let Some((i, purpose)) = response
            .id
            .as_ref()
            .and_then(|id| out.get_mut(id))
            .and_then(VecDeque::pop_front)
        else {
            return Err(ray_error(format!(
                "the driver answered `{}` for {:?}, which is not in flight: {}",
                response.kind,
                response.id,
                response.error_message.unwrap_or_default()
            )));
        };
        in_flight -= 1;
        let module = jobs[i].module;
        setup_us += cpu_us(response.setup_cpu_ms);
        runner_us += cpu_us(response.runner_cpu_ms);
        let row = match response.kind.as_str() {
            "result" => rows::from_response(module, response),
            "fault" => rows::from_failure(module, fault_of(&response), deadline),
            other => {
                return Err(ray_error(format!(
                    "the driver answered `{other}` for {}: {}",
                    module.id,
                    response.error_message.unwrap_or_default()
                )));
            }
        };
        let row = match (purpose, chat) {
            (Purpose::First, Some(chat))
                if row.status == ProbeStatus::Failed && jobs[i].over.is_none() =>
            {
                llm_asked += 1;
                let program = module.program.as_deref().unwrap_or_default();
                match llm_repair::ask(program, &row, cfg, chat) {
                    Ok(code) => {
                        waiting.push_front((i, Some(code), Purpose::Llm(Box::new(row))));
                        continue;
                    }
                    Err(kept) => *kept,
                }
            }
            (Purpose::Llm(failed), _) => {
                let merged = llm_repair::merge(&failed, row);
                if merged.status == ProbeStatus::Ok {
                    llm_fixed += 1;
                }
                merged
            }
            (Purpose::First, _) => row,
        };
        finished(&row)?;
        results[i] = Some(row);
        tracker.inc(1);
    }
    let (workers_started, requeued) = finish(&mut driver, silence).map_err(ray_error)?;
    let rows = results
        .into_iter()
        .zip(jobs)
        .map(|(row, job)| {
            row.unwrap_or_else(|| {
                rows::without_response(
                    job.module,
                    ProbeStatus::Crashed,
                    rows::RunnerFault::Internal,
                    "the module was not probed".into(),
                )
            })
        })
        .collect();
    Ok(PoolOutput {
        rows,
        workers_started,
        hello: Some(driver.hello.clone()),
        llm_asked,
        llm_fixed,
        requeued,
        setup_cpu_ms: setup_us / 1000,
        runner_cpu_ms: runner_us / 1000,
    })
}

/// Starts `python -m ksmith.probe_ray` and waits for its hello (the cluster is up and every
/// actor's worker has started).
fn start_driver(cfg: &ProbeConfig, spec: &WorkerSpec, workers: usize) -> Result<Worker, Error> {
    let policy = spec.launch().policy().to_string();
    let mut command = std::process::Command::new(&spec.python);
    command
        .args(["-s", "-m", "ksmith.probe_ray", "--address"])
        .arg(&cfg.ray_address)
        .args(["--policy", &policy])
        .args(["--actors", &cfg.ray_actors.to_string()])
        .args(["--grace", &cfg.watchdog_grace_s.to_string()])
        .args(["--startup-timeout", &cfg.startup_timeout_s.to_string()])
        .args(["--requeue", &cfg.ray_requeue.to_string()])
        .env("PYTHONPATH", &spec.python_path)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env("PYTHONUNBUFFERED", "1")
        .current_dir(&spec.tmp_root);
    if cfg.ray_address == "local" {
        command.args(["--cpus", &workers.to_string()]);
    }
    // Connecting to the cluster and starting every actor's worker takes longer than one worker.
    let startup = spec.startup_timeout + Duration::from_secs(120);
    Worker::spawn(command, &spec.python, startup)
}

/// Closes the driver's input and reads its closing `stats` line: the workers its actors
/// started and the requests it ran again.
fn finish(driver: &mut Worker, silence: Duration) -> Result<(u64, u64), String> {
    driver.close_input();
    let stats = driver.receive(silence).map_err(failure_text)?;
    if stats.kind != "stats" {
        return Err(format!(
            "the driver's last line is `{}`, not its stats",
            stats.kind
        ));
    }
    Ok((
        stats.workers_started.unwrap_or(0),
        stats.requeued.unwrap_or(0),
    ))
}

/// The worker failure a driver's `fault` line stands for.
fn fault_of(response: &crate::protocol::Response) -> WorkerFailure {
    let message = response.error_message.clone().unwrap_or_default();
    match response
        .error_class
        .as_deref()
        .and_then(rows::RunnerFault::parse)
    {
        Some(rows::RunnerFault::Timeout) => WorkerFailure::Timeout,
        Some(rows::RunnerFault::Protocol) => WorkerFailure::Protocol(message),
        _ => WorkerFailure::Died(message),
    }
}

fn failure_text(failure: WorkerFailure) -> String {
    match failure {
        WorkerFailure::Timeout => "the driver went silent".into(),
        WorkerFailure::Died(m) => format!("the driver died: {m}"),
        WorkerFailure::Protocol(m) => format!("the driver broke the protocol: {m}"),
    }
}
