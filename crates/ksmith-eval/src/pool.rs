//! [`WorkerPool`]: local workers behind the [`Evaluator`] trait.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ksmith_core::evaluation::{EvalError, EvalRequest, EvalResult, Evaluator, Preflight};

use crate::config::EvalConfig;
use crate::devices::{self, Device};
use crate::error::EvalClientError;
use crate::runtime::RuntimeDir;
use crate::schedule::{Attempt, DeviceUse, Scheduler, usage_counters};
use crate::spawner::Spawner;
use crate::worker::{Answer, Ask, Profile, Reply, WorkerProcess};

/// What the evaluator runs, as its sandbox's refusals and warnings name it.
const UNTRUSTED: &str = "eval: generated kernels";

/// How long a worker may take to import torch and greet.
const STARTUP: Duration = Duration::from_secs(180);

/// How many times in a row a device's worker may fail a request (die, stop answering) before the
/// device is taken out; the worker is replaced in between. A request the worker answers with an
/// internal error is tried as many times on the same worker, then answered with that error.
const FAILURES_IN_A_ROW: u32 = 2;

#[derive(Debug)]
struct Slot {
    device: Device,
    label: String,
    worker: Mutex<Option<Arc<WorkerProcess>>>,
}

/// One worker per device; requests are queued and dispatched to their task's home device when
/// it has room, else to the least busy healthy device with room (at most `inflight_per_worker`
/// each, [`Scheduler`]), so a task's reference facts are built on as few devices as possible. A worker that dies or stops
/// answering is replaced; a device whose worker fails twice in a row, does not start, or whose
/// check fails (the worker answers `device_failed`) is taken out of the pool and the request
/// goes to another device. A request the worker answers with an internal error (its GPU passed
/// its check) is tried once more on the same worker, whose other evaluations go on, and then
/// answered with the error: the request fails, not the device (sent on, a request that fails
/// every time would take every device out in turn). A request whose backend the worker cannot run (`backend_unavailable`,
/// e.g. CUDA without nvcc) is answered `Unavailable` at once: worker and device stay. A
/// preflight ([`Evaluator::preflight`]) goes the same way: a reference that does not run on a
/// device that passes its check is the task's `BrokenReference`, the device stays.
#[derive(Debug)]
pub struct WorkerPool {
    slots: Vec<Slot>,
    schedule: Scheduler,
    cfg: EvalConfig,
    python: PathBuf,
    next_id: AtomicU64,
    warned_sandbox: AtomicBool,
    restarts: AtomicU64,
    /// Seconds by phase summed over the answered evaluations (the workers' profiles and the
    /// queue), and how many evaluations sent a profile.
    phases: Mutex<(BTreeMap<String, f64>, u64)>,
    /// The same of the answered preflights.
    preflight_phases: Mutex<(BTreeMap<String, f64>, u64)>,
    /// Forks every worker from one pool-long thread (bubblewrap's die-with-parent follows the
    /// starting thread).
    spawner: Spawner,
    // Declared last: dropped after the workers stopped.
    runtime: RuntimeDir,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl WorkerPool {
    /// Validates `cfg`, writes the worker package, finds the devices and starts their workers
    /// at once. A device whose worker does not start is taken out (with a warning) unless none
    /// starts; a sandbox refusal stops the pool.
    pub fn start(cfg: &EvalConfig) -> Result<WorkerPool, EvalClientError> {
        cfg.validate()?;
        let python = ksmith_core::python_env::resolve_python(cfg.python.as_deref())
            .map_err(EvalClientError::Python)?;
        let devices = devices::planned(cfg);
        let inflight = cfg.inflight_for(&devices);
        let labels = devices::slot_labels(&devices);
        let runtime = RuntimeDir::create(cfg.runtime_dir.as_deref())?;
        let pool = WorkerPool {
            slots: devices
                .into_iter()
                .zip(labels.iter().cloned())
                .map(|(device, label)| Slot {
                    device,
                    label,
                    worker: Mutex::new(None),
                })
                .collect(),
            schedule: Scheduler::new(labels, inflight),
            cfg: cfg.clone(),
            python,
            next_id: AtomicU64::new(0),
            warned_sandbox: AtomicBool::new(false),
            restarts: AtomicU64::new(0),
            phases: Mutex::new((BTreeMap::new(), 0)),
            preflight_phases: Mutex::new((BTreeMap::new(), 0)),
            spawner: Spawner::new().map_err(|source| EvalClientError::Io {
                path: PathBuf::from("(the worker spawner thread)"),
                source,
            })?,
            runtime,
        };
        let started: Vec<Result<(), EvalClientError>> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..pool.slots.len())
                .map(|i| {
                    let pool = &pool;
                    s.spawn(move || pool.worker(i).map(|_| ()))
                })
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join().unwrap_or_else(|_| {
                        Err(EvalClientError::Config("a worker start panicked".into()))
                    })
                })
                .collect()
        });
        let mut first_error = None;
        let mut up = 0;
        for (i, r) in started.into_iter().enumerate() {
            match r {
                Ok(()) => up += 1,
                Err(e @ EvalClientError::Sandbox(_)) => return Err(e),
                Err(e) => {
                    pool.schedule
                        .take_out(i, &format!("its worker did not start: {e}"));
                    first_error.get_or_insert(e);
                }
            }
        }
        match first_error {
            Some(e) if up == 0 => Err(e),
            _ => Ok(pool),
        }
    }

    /// The devices of the workers.
    pub fn devices(&self) -> Vec<Device> {
        self.slots.iter().map(|s| s.device.clone()).collect()
    }

    /// Process ids of the running workers (diagnostics).
    pub fn worker_pids(&self) -> Vec<u32> {
        self.slots
            .iter()
            .filter_map(|s| lock(&s.worker).as_ref().map(|w| w.pid()))
            .collect()
    }

    /// How many workers were replaced since the start.
    pub fn restarts(&self) -> u64 {
        self.restarts.load(Ordering::SeqCst)
    }

    /// What each device did so far, and the time since the pool started.
    pub fn usage(&self) -> (Vec<DeviceUse>, std::time::Duration) {
        self.schedule.usage()
    }

    /// The live worker of slot `i`, started (again) when needed.
    fn worker(&self, i: usize) -> Result<Arc<WorkerProcess>, EvalClientError> {
        let slot = &self.slots[i];
        let mut guard = lock(&slot.worker);
        if let Some(w) = guard.as_ref() {
            if w.is_alive() {
                return Ok(w.clone());
            }
            w.kill();
            self.restarts.fetch_add(1, Ordering::SeqCst);
        }
        let w = Arc::new(WorkerProcess::spawn(
            &self.python,
            &self.runtime,
            slot.device.clone(),
            &self.cfg,
            STARTUP,
            i,
            &self.spawner,
        )?);
        // Before its first request: an incomplete sandbox stops here unless the config opts
        // out, and then it is said once.
        let admitted = ksmith_sandbox::admit(&self.cfg.sandbox, w.sandbox_missing(), UNTRUSTED);
        match admitted {
            Err(refused) => {
                w.kill();
                return Err(refused.into());
            }
            Ok(Some(warning)) if !self.warned_sandbox.swap(true, Ordering::SeqCst) => {
                eprintln!("warning: {warning}");
            }
            Ok(_) => {}
        }
        *guard = Some(w.clone());
        Ok(w)
    }

    fn discard(&self, i: usize, w: &Arc<WorkerProcess>) {
        let mut guard = lock(&self.slots[i].worker);
        if guard.as_ref().is_some_and(|cur| Arc::ptr_eq(cur, w)) {
            w.kill();
            *guard = None;
            self.restarts.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// Stops the worker of a device taken out.
    fn retire(&self, i: usize) {
        if let Some(w) = lock(&self.slots[i].worker).take() {
            w.kill();
        }
    }

    /// Adds one answered request's profile (`ask`: an evaluation's or a preflight's).
    fn record(&self, ask: Ask, profile: &Profile) {
        let mut phases = lock(match ask {
            Ask::Evaluate => &self.phases,
            Ask::Preflight => &self.preflight_phases,
        });
        for (name, s) in profile {
            if s.is_finite() && *s >= 0.0 {
                *phases.0.entry(name.clone()).or_default() += s;
            }
        }
        phases.1 += 1;
    }

    /// The request on device `i` (`ask`: what of it): its worker (re)started as needed and the
    /// request sent, once more on a fresh worker when the first fails.
    fn on_device(
        &self,
        i: usize,
        ask: Ask,
        request: &EvalRequest,
    ) -> Attempt<Result<Reply, EvalError>> {
        let timeout = Duration::from_secs_f64(self.cfg.request_timeout_s);
        let mut why = String::new();
        let mut answered = false;
        for _attempt in 0..FAILURES_IN_A_ROW {
            let w = match self.worker(i) {
                Ok(w) => w,
                Err(e) => return Attempt::DeviceFailed(format!("its worker does not start: {e}")),
            };
            let id = self.next_id.fetch_add(1, Ordering::SeqCst).to_string();
            match w.send(ask, id, request, timeout) {
                Answer::DeviceFailed(m) => return Attempt::DeviceFailed(m),
                // the machine lacks what the request's backend needs: not the worker's fault
                Answer::BackendUnavailable(m) => {
                    return Attempt::Answered(Err(EvalError::Unavailable(m)));
                }
                // the worker lives and its GPU passed its check: tried again on it
                Answer::Internal(m) => {
                    why = format!("worker error: {m}");
                    answered = true;
                }
                Answer::Done(outcome, profile) => match *outcome {
                    Err(EvalError::Unavailable(m)) => {
                        self.discard(i, &w);
                        why = m;
                        answered = false;
                    }
                    outcome => {
                        self.record(ask, &profile);
                        return Attempt::Answered(outcome);
                    }
                },
            }
        }
        if answered {
            return Attempt::Answered(Err(EvalError::Unavailable(why)));
        }
        Attempt::DeviceFailed(format!(
            "its worker failed {FAILURES_IN_A_ROW} times in a row (replaced in between); last: {why}"
        ))
    }

    /// `ask` of `request` on a device of the pool: a request whose device fails goes to
    /// another one, until none is left (`what` names it in the warning).
    fn dispatch(&self, ask: Ask, request: &EvalRequest, what: &str) -> Result<Reply, EvalError> {
        let (outcome, queued) = self
            .schedule
            .dispatch(
                &request.task_id,
                what,
                |i| self.on_device(i, ask, request),
                |i| self.retire(i),
            )
            .map_err(EvalError::Unavailable)?;
        let phases = match ask {
            Ask::Evaluate => &self.phases,
            Ask::Preflight => &self.preflight_phases,
        };
        *lock(phases).0.entry("queue".to_string()).or_default() += queued.as_secs_f64();
        outcome
    }
}

/// The error of a worker that answered a request with the answer to another kind of request.
fn mismatched(task: &str, asked: &str, reply: &Reply) -> EvalError {
    EvalError::Protocol(format!(
        "task {task}: the worker answered {asked} with {}",
        match reply {
            Reply::Evaluated(_) => "an evaluation's result",
            Reply::Preflighted(_) => "a preflight's",
        }
    ))
}

impl Evaluator for WorkerPool {
    fn evaluate(&self, request: &EvalRequest) -> Result<EvalResult, EvalError> {
        let what = format!("the evaluation of a candidate of task {}", request.task_id);
        match self.dispatch(Ask::Evaluate, request, &what)? {
            Reply::Evaluated(r) => Ok(*r),
            other => Err(mismatched(&request.task_id, "an evaluation", &other)),
        }
    }

    /// On the task's home device (which it becomes when the task has none), so its evaluations
    /// find the reference's facts built there.
    fn preflight(&self, request: &EvalRequest) -> Result<Preflight, EvalError> {
        let what = format!("the preflight of the reference of task {}", request.task_id);
        match self.dispatch(Ask::Preflight, request, &what)? {
            Reply::Preflighted(p) => Ok(p),
            other => Err(mismatched(&request.task_id, "a preflight", &other)),
        }
    }

    fn capacity(&self) -> usize {
        self.slots.len() * self.schedule.per_device()
    }

    fn describe(&self) -> String {
        let labels: Vec<&str> = self.slots.iter().map(|s| s.label.as_str()).collect();
        format!(
            "{} evaluator worker(s) ({}), {} evaluation(s) at once each",
            self.slots.len(),
            labels.join(", "),
            self.schedule.per_device()
        )
    }

    fn report_counters(&self) -> Vec<(String, u64)> {
        let (usage, wall) = self.schedule.usage();
        let mut out = usage_counters(&usage, wall);
        out.push(("eval_worker_restarts".to_string(), self.restarts()));
        let phases = lock(&self.phases);
        out.push(("eval_profiled".to_string(), phases.1));
        for (name, s) in &phases.0 {
            out.push((format!("eval_phase_ms/{name}"), (s * 1000.0).round() as u64));
        }
        let preflights = lock(&self.preflight_phases);
        out.push(("eval_preflights".to_string(), preflights.1));
        for (name, s) in &preflights.0 {
            out.push((
                format!("eval_preflight_phase_ms/{name}"),
                (s * 1000.0).round() as u64,
            ));
        }
        out
    }
}

impl Drop for WorkerPool {
    fn drop(&mut self) {
        for s in &self.slots {
            if let Some(w) = lock(&s.worker).take() {
                w.stop();
            }
        }
    }
}
