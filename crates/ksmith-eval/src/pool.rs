//! [`WorkerPool`]: local workers behind the [`Evaluator`] trait.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use ksmith_core::evaluation::{EvalError, EvalRequest, EvalResult, Evaluator};

use crate::config::EvalConfig;
use crate::devices::{self, Device};
use crate::error::EvalClientError;
use crate::runtime::RuntimeDir;
use crate::worker::WorkerProcess;

/// What the evaluator runs, as its sandbox's refusals and warnings name it.
const UNTRUSTED: &str = "eval: generated kernels";

/// How long a worker may take to import torch and greet.
const STARTUP: Duration = Duration::from_secs(180);

#[derive(Debug)]
struct Slot {
    device: Device,
    worker: Mutex<Option<Arc<WorkerProcess>>>,
}

/// One worker per device; requests are queued and dispatched to the least busy worker with
/// room (at most `inflight_per_worker` each). Dead or unresponsive workers are replaced.
#[derive(Debug)]
pub struct WorkerPool {
    slots: Vec<Slot>,
    busy: Mutex<Vec<usize>>,
    room: Condvar,
    cfg: EvalConfig,
    python: PathBuf,
    next_id: AtomicU64,
    warned_sandbox: AtomicBool,
    restarts: AtomicU64,
    // Declared last: dropped after the workers stopped.
    runtime: RuntimeDir,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl WorkerPool {
    /// Validates `cfg`, writes the worker package, finds the devices and starts the workers.
    pub fn start(cfg: &EvalConfig) -> Result<WorkerPool, EvalClientError> {
        cfg.validate()?;
        let python = ksmith_core::python_env::resolve_python(cfg.python.as_deref())
            .map_err(EvalClientError::Python)?;
        let gpus = if cfg.devices.iter().any(|d| d == "auto") {
            devices::count_gpus()
        } else {
            0
        };
        let devices = devices::resolve(&cfg.devices, cfg.cpu_workers, gpus);
        let runtime = RuntimeDir::create(cfg.runtime_dir.as_deref())?;
        let pool = WorkerPool {
            slots: devices
                .into_iter()
                .map(|device| Slot {
                    device,
                    worker: Mutex::new(None),
                })
                .collect(),
            busy: Mutex::new(Vec::new()),
            room: Condvar::new(),
            cfg: cfg.clone(),
            python,
            next_id: AtomicU64::new(0),
            warned_sandbox: AtomicBool::new(false),
            restarts: AtomicU64::new(0),
            runtime,
        };
        *lock(&pool.busy) = vec![0; pool.slots.len()];
        for i in 0..pool.slots.len() {
            pool.worker(i)?;
        }
        Ok(pool)
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

    fn acquire(&self) -> usize {
        let cap = self.cfg.inflight_per_worker;
        let mut busy = lock(&self.busy);
        loop {
            let best = busy
                .iter()
                .enumerate()
                .filter(|(_, n)| **n < cap)
                .min_by_key(|(_, n)| **n)
                .map(|(i, _)| i);
            if let Some(i) = best {
                busy[i] += 1;
                return i;
            }
            busy = self.room.wait(busy).unwrap_or_else(|p| p.into_inner());
        }
    }

    fn release(&self, i: usize) {
        lock(&self.busy)[i] -= 1;
        self.room.notify_one();
    }

    fn discard(&self, i: usize, w: &Arc<WorkerProcess>) {
        let mut guard = lock(&self.slots[i].worker);
        if guard.as_ref().is_some_and(|cur| Arc::ptr_eq(cur, w)) {
            w.kill();
            *guard = None;
            self.restarts.fetch_add(1, Ordering::SeqCst);
        }
    }
}

impl Evaluator for WorkerPool {
    fn evaluate(&self, request: &EvalRequest) -> Result<EvalResult, EvalError> {
        let i = self.acquire();
        let timeout = Duration::from_secs_f64(self.cfg.request_timeout_s);
        let mut outcome = Err(EvalError::Unavailable("not attempted".into()));
        // A worker that dies under a request (not the candidate: that runs in its own child)
        // is replaced and the request sent once more.
        for _attempt in 0..2 {
            let w = match self.worker(i) {
                Ok(w) => w,
                Err(e) => {
                    outcome = Err(EvalError::Unavailable(e.to_string()));
                    break;
                }
            };
            let id = self.next_id.fetch_add(1, Ordering::SeqCst).to_string();
            outcome = w.evaluate(id, request, timeout);
            match &outcome {
                Err(EvalError::Unavailable(_)) => self.discard(i, &w),
                _ => break,
            }
        }
        self.release(i);
        outcome
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
