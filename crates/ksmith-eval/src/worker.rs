//! One Python worker process and the requests in flight on it.
//!
//! The worker is started in the sandbox by the shared launcher ([`ksmith_sandbox::Launch`]: an
//! environment of the allow-listed variables only, bubblewrap with the GPU's device nodes when
//! it serves one, and every reference and candidate child confined further).

use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::path::Path;
use std::process::{Child, ChildStdin, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ksmith_core::evaluation::{EvalError, EvalRequest, EvalResult, Preflight};

use crate::config::EvalConfig;
use crate::devices::Device;
use crate::error::EvalClientError;
use crate::protocol::{self, Outgoing};
use crate::runtime::RuntimeDir;
use crate::spawner::Spawner;

/// Seconds an evaluation spent in each phase, as the worker measured them.
pub type Profile = BTreeMap<String, f64>;

/// What a worker answered to a request ([`Ask`]).
#[derive(Debug)]
pub enum Reply {
    /// The result of an evaluation.
    Evaluated(Box<EvalResult>),
    /// What a preflight gave.
    Preflighted(Preflight),
}

/// What a request asks of the worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ask {
    /// Evaluate its candidate (`evaluate`).
    Evaluate,
    /// Build and run its reference only (`preflight`).
    Preflight,
}

impl Ask {
    /// The protocol's message type.
    pub fn message_type(self) -> &'static str {
        match self {
            Ask::Evaluate => "evaluate",
            Ask::Preflight => "preflight",
        }
    }
}

/// A worker's answer to one request.
#[derive(Debug)]
pub enum Answer {
    /// A result (an evaluation's or a preflight's) or an error, with the worker's profile of it
    /// (empty when it sent none).
    Done(Box<Result<Reply, EvalError>>, Profile),
    /// The worker's device failed its check after this request went wrong (the message says
    /// how): the request was not evaluated and may go to another device.
    DeviceFailed(String),
    /// The request's backend cannot run on this worker (`backend_unavailable`: its toolchain or
    /// GPU is missing; the message names what): the worker and its device are sound and keep
    /// serving other requests.
    BackendUnavailable(String),
    /// The worker answered that the evaluation failed on its side (`internal`: the message says
    /// what) after its GPU passed its check: the worker lives, and its other evaluations go on.
    Internal(String),
}

type Pending = Arc<Mutex<HashMap<String, mpsc::Sender<Answer>>>>;

/// A running worker: `python -m ksmith.evaluator worker --device ...`.
#[derive(Debug)]
pub struct WorkerProcess {
    child: Mutex<Child>,
    stdin: Mutex<ChildStdin>,
    pending: Pending,
    alive: Arc<AtomicBool>,
    device: Device,
    log_path: std::path::PathBuf,
    sandbox_missing: Vec<String>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let start = text.len().saturating_sub(2000);
    let start = (start..text.len())
        .find(|i| text.is_char_boundary(*i))
        .unwrap_or(text.len());
    text[start..].to_string()
}

impl WorkerProcess {
    /// Starts a worker in the sandbox of `cfg` (forked by `spawner`'s thread) and waits for its
    /// `hello` (up to `startup`).
    pub fn spawn(
        python: &Path,
        runtime: &RuntimeDir,
        device: Device,
        cfg: &EvalConfig,
        startup: Duration,
        index: usize,
        spawner: &Spawner,
    ) -> Result<WorkerProcess, EvalClientError> {
        let label = device.label();
        let fail = |message: String| EvalClientError::WorkerStart {
            device: label.clone(),
            message,
        };
        let log_path = runtime
            .logs()
            .join(format!("worker-{index}-{}.log", label.replace(':', "")));
        let log = std::fs::File::create(&log_path).map_err(|source| EvalClientError::Io {
            path: log_path.clone(),
            source,
        })?;
        let scratch = runtime.scratch();
        let launch = ksmith_sandbox::Launch {
            config: &cfg.sandbox,
            scratch: &scratch,
            max_processes: cfg.max_processes,
            gpu: matches!(device, Device::Gpu(_)),
        };
        let options = cfg.worker_options().to_string();
        let mut cmd = launch
            .command(
                python,
                &[
                    "-s",
                    "-m",
                    "ksmith.evaluator",
                    "worker",
                    "--device",
                    device.worker_arg(),
                    "--options",
                    &options,
                ],
            )
            .map_err(|source| EvalClientError::Io {
                path: scratch.clone(),
                source,
            })?;
        cmd.env("PYTHONPATH", runtime.path())
            .env("PYTHONUNBUFFERED", "1")
            .current_dir(runtime.logs())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(log));
        if let Device::Gpu(i) = device {
            cmd.env("CUDA_VISIBLE_DEVICES", i.to_string());
        }
        let mut child = spawner
            .spawn(cmd)
            .map_err(|e| fail(format!("{}: {e}", python.display())))?;
        let (stdin, stdout) = match (child.stdin.take(), child.stdout.take()) {
            (Some(i), Some(o)) => (i, o),
            _ => return Err(fail("no pipes to the worker".into())),
        };
        // The output is read on a thread of its own, so a silent worker cannot block us past
        // `startup`; its first line is the greeting.
        let lines = ksmith_sandbox::lines(stdout);
        let stop = |child: &mut Child| {
            let _ = child.kill();
            let _ = child.wait();
        };
        let line = match ksmith_sandbox::first_line(&lines, startup) {
            Ok(line) => line,
            Err(why) => {
                stop(&mut child);
                let log = std::fs::read_to_string(&log_path).unwrap_or_default();
                return Err(match ksmith_sandbox::unstarted(&why, &log) {
                    ksmith_sandbox::Unstarted::Refused(refused) => {
                        EvalClientError::Sandbox(refused)
                    }
                    ksmith_sandbox::Unstarted::Failed(message) => fail(message),
                });
            }
        };
        let hello = match ksmith_sandbox::parse_greeting(&line, protocol::VERSION) {
            Ok(hello) => hello,
            Err(why) => {
                stop(&mut child);
                return Err(fail(format!("{why}; worker log:\n{}", tail(&log_path))));
            }
        };
        let sandbox_missing = hello
            .get("sandbox")
            .and_then(|s| s.as_object())
            .map(ksmith_sandbox::missing)
            .unwrap_or_default();
        let pending: Pending = Arc::new(Mutex::new(HashMap::new()));
        let alive = Arc::new(AtomicBool::new(true));
        {
            let pending = pending.clone();
            let alive = alive.clone();
            let label = label.clone();
            std::thread::spawn(move || {
                for line in lines {
                    let Ok(line) = line else { break };
                    if line.trim().is_empty() {
                        continue;
                    }
                    let msg = protocol::parse(&line);
                    if let Ok(protocol::Incoming {
                        notice: Some(notice),
                        ..
                    }) = &msg
                    {
                        eprintln!("warning: evaluator device {label}: {notice}");
                    }
                    let (id, reply) = match msg {
                        Ok(msg) => {
                            match (msg.kind.as_str(), msg.result, msg.reference, msg.error) {
                                ("result", Some(r), _, _) => (
                                    msg.id,
                                    Answer::Done(
                                        Box::new(Ok(Reply::Evaluated(Box::new(r)))),
                                        msg.profile.unwrap_or_default(),
                                    ),
                                ),
                                ("preflighted", _, Some(p), _) => (
                                    msg.id,
                                    Answer::Done(
                                        Box::new(Ok(Reply::Preflighted(p))),
                                        msg.profile.unwrap_or_default(),
                                    ),
                                ),
                                ("error", _, _, Some(e)) if e.kind == "device_failed" => {
                                    (msg.id, Answer::DeviceFailed(e.message))
                                }
                                ("error", _, _, Some(e)) if e.kind == "backend_unavailable" => {
                                    (msg.id, Answer::BackendUnavailable(e.message))
                                }
                                ("error", _, _, Some(e)) if e.kind == "internal" => {
                                    (msg.id, Answer::Internal(e.message))
                                }
                                ("error", _, _, Some(e)) => (
                                    msg.id,
                                    Answer::Done(
                                        Box::new(Err(e.into_eval_error())),
                                        msg.profile.unwrap_or_default(),
                                    ),
                                ),
                                _ => continue,
                            }
                        }
                        Err(_) => continue,
                    };
                    if let Some(id) = id
                        && let Some(tx) = lock(&pending).remove(&id)
                    {
                        let _ = tx.send(reply);
                    }
                }
                alive.store(false, Ordering::SeqCst);
                for (_, tx) in lock(&pending).drain() {
                    let _ = tx.send(Answer::Done(
                        Box::new(Err(EvalError::Unavailable(
                            "the evaluator worker exited".into(),
                        ))),
                        Profile::new(),
                    ));
                }
            });
        }
        Ok(WorkerProcess {
            child: Mutex::new(child),
            stdin: Mutex::new(stdin),
            pending,
            alive,
            device,
            log_path,
            sandbox_missing,
        })
    }

    /// What the worker's sandbox could not set up (from its hello; empty when complete).
    pub fn sandbox_missing(&self) -> &[String] {
        &self.sandbox_missing
    }

    /// Whether the worker still runs.
    pub fn is_alive(&self) -> bool {
        self.alive.load(Ordering::SeqCst) && matches!(lock(&self.child).try_wait(), Ok(None))
    }

    /// The worker's process id.
    pub fn pid(&self) -> u32 {
        lock(&self.child).id()
    }

    /// The device it serves.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// Sends one request (`ask`: what of it) and waits for its answer (up to `timeout`; past
    /// it, or when the request cannot be written, an `Unavailable` error).
    pub fn send(&self, ask: Ask, id: String, request: &EvalRequest, timeout: Duration) -> Answer {
        let unavailable =
            |m: String| Answer::Done(Box::new(Err(EvalError::Unavailable(m))), Profile::new());
        let (tx, rx) = mpsc::channel();
        lock(&self.pending).insert(id.clone(), tx);
        let msg = Outgoing {
            v: protocol::VERSION,
            kind: ask.message_type(),
            id: Some(id.clone()),
            request: Some(request),
        };
        let line = match serde_json::to_string(&msg) {
            Ok(line) => line,
            Err(e) => {
                lock(&self.pending).remove(&id);
                let e = EvalError::Protocol(format!("encoding the request: {e}"));
                return Answer::Done(Box::new(Err(e)), Profile::new());
            }
        };
        let sent = {
            let mut stdin = lock(&self.stdin);
            writeln!(stdin, "{line}").and_then(|_| stdin.flush())
        };
        if let Err(e) = sent {
            lock(&self.pending).remove(&id);
            return unavailable(format!(
                "writing to the {} worker: {e}",
                self.device.label()
            ));
        }
        match rx.recv_timeout(timeout) {
            Ok(reply) => reply,
            Err(_) => {
                lock(&self.pending).remove(&id);
                unavailable(format!(
                    "the {} worker gave no answer for task {} within {} s; worker log:\n{}",
                    self.device.label(),
                    request.task_id,
                    timeout.as_secs(),
                    tail(&self.log_path)
                ))
            }
        }
    }

    /// Stops the worker (asks, then kills).
    pub fn stop(&self) {
        {
            let mut stdin = lock(&self.stdin);
            let _ = writeln!(stdin, "{{\"v\":1,\"type\":\"shutdown\"}}");
            let _ = stdin.flush();
        }
        let mut child = lock(&self.child);
        for _ in 0..20 {
            if matches!(child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = child.kill();
        let _ = child.wait();
    }

    /// Kills the worker at once.
    pub fn kill(&self) {
        let mut child = lock(&self.child);
        let _ = child.kill();
        let _ = child.wait();
    }
}
