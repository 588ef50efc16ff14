//! One Python worker process and the watchdog around each request.
//!
//! The worker is `python -m ksmith.probe.worker`, started in the sandbox by the shared launcher
//! ([`ksmith_sandbox::Launch`]: environment allow-list, bubblewrap, per-module confinement); a
//! reader thread turns its stdout into lines,
//! another keeps the end of its stderr for error messages. [`Worker::probe`] sends one request
//! and waits for the matching response with a deadline; a worker that misses it, dies, or
//! answers garbage is killed, and the caller starts a new one for the next module.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::error::Error;
use crate::protocol::{Hello, PROTOCOL_VERSION, Request, Response};

/// Bytes of the worker's stderr kept for error messages.
const STDERR_TAIL: usize = 8 << 10;

/// Why a request got no usable response; the worker is dead afterwards.
#[derive(Debug, Clone, PartialEq)]
pub enum WorkerFailure {
    /// No response before the watchdog deadline.
    Timeout,
    /// The worker exited or closed its stdout.
    Died(String),
    /// The worker wrote something that is not a response to this request.
    Protocol(String),
}

/// A running worker.
pub struct Worker {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<std::io::Result<String>>,
    stderr_tail: Arc<Mutex<VecDeque<u8>>>,
    stderr_closed: Receiver<()>,
    /// The worker's hello (sandbox capabilities).
    pub hello: Hello,
}

/// How to start workers.
#[derive(Debug, Clone)]
pub struct WorkerSpec {
    /// The interpreter.
    pub python: PathBuf,
    /// `PYTHONPATH` holding the runner.
    pub python_path: PathBuf,
    /// The workers' scratch folder (module workspaces).
    pub tmp_root: PathBuf,
    /// Process cap per module.
    pub max_processes: u32,
    /// How long the worker may take to say hello.
    pub startup_timeout: Duration,
    /// The `[sandbox]` section.
    pub sandbox: ksmith_sandbox::SandboxConfig,
}

impl WorkerSpec {
    /// The sandbox a worker of this spec runs in.
    pub fn launch(&self) -> ksmith_sandbox::Launch<'_> {
        ksmith_sandbox::Launch {
            config: &self.sandbox,
            scratch: &self.tmp_root,
            max_processes: self.max_processes,
            gpu: false,
        }
    }
}

impl Worker {
    /// Starts a worker and waits for its hello.
    pub fn start(spec: &WorkerSpec) -> Result<Worker, Error> {
        let fail = |message: String| Error::WorkerStart {
            python: spec.python.clone(),
            message,
        };
        let launch = spec.launch();
        // Module code must not see the parent's environment (API keys of the teacher, tokens):
        // the launcher gets the allow-listed variables only.
        let mut command = launch
            .command(&spec.python, &["-m", "ksmith.probe.worker"])
            .map_err(|e| fail(format!("cannot make the scratch folder: {e}")))?;
        command
            .env("PYTHONPATH", &spec.python_path)
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .env("PYTHONNOUSERSITE", "1")
            .env("PYTHONUNBUFFERED", "1")
            .current_dir(&spec.tmp_root);
        Worker::spawn(command, &spec.python, spec.startup_timeout)
    }

    /// Runs `command` (a program that speaks the worker protocol) with piped stdio and waits
    /// up to `startup_timeout` for its hello.
    pub fn spawn(
        mut command: Command,
        python: &Path,
        startup_timeout: Duration,
    ) -> Result<Worker, Error> {
        let fail = |message: String| Error::WorkerStart {
            python: python.to_path_buf(),
            message,
        };
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| fail(format!("cannot run the interpreter: {e}")))?;
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| fail("no stdout pipe".into()))?;
        let stderr = child
            .stderr
            .take()
            .ok_or_else(|| fail("no stderr pipe".into()))?;
        let stdin = child.stdin.take();
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(stdout);
            loop {
                let mut line = String::new();
                match reader.read_line(&mut line) {
                    Ok(0) => break,
                    Ok(_) => {
                        if tx.send(Ok(line)).is_err() {
                            break;
                        }
                    }
                    Err(e) => {
                        let _ = tx.send(Err(e));
                        break;
                    }
                }
            }
        });
        let stderr_tail = Arc::new(Mutex::new(VecDeque::with_capacity(STDERR_TAIL)));
        let tail = Arc::clone(&stderr_tail);
        let (stderr_closed_tx, stderr_closed) = channel();
        std::thread::spawn(move || {
            let _closed = CloseSignal(stderr_closed_tx);
            let mut stderr = stderr;
            let mut buf = [0u8; 4096];
            while let Ok(n) = stderr.read(&mut buf) {
                if n == 0 {
                    break;
                }
                if let Ok(mut t) = tail.lock() {
                    t.extend(&buf[..n]);
                    while t.len() > STDERR_TAIL {
                        t.pop_front();
                    }
                }
            }
        });
        let placeholder = Hello {
            v: PROTOCOL_VERSION,
            kind: "hello".into(),
            pid: child.id(),
            torch: String::new(),
            sandbox: Default::default(),
            ray: None,
        };
        let mut worker = Worker {
            child,
            stdin,
            lines,
            stderr_tail,
            stderr_closed,
            hello: placeholder,
        };
        // A worker that says no hello may have refused to run without the whole sandbox: that
        // one line is the error, not a broken environment.
        let failed = |worker: &mut Worker, what: String| {
            let stderr = worker.kill_and_stderr();
            match ksmith_sandbox::refusal(&stderr) {
                Some(refused) => Error::Sandbox(refused),
                None => fail(format!("{what}; stderr: {}", truncate(&stderr, 2000))),
            }
        };
        let line = match worker.lines.recv_timeout(startup_timeout) {
            Ok(Ok(line)) => line,
            Ok(Err(e)) => return Err(failed(&mut worker, format!("reading its output: {e}"))),
            Err(RecvTimeoutError::Timeout) => {
                let what = format!("no hello within {startup_timeout:?}");
                return Err(failed(&mut worker, what));
            }
            Err(RecvTimeoutError::Disconnected) => {
                return Err(failed(&mut worker, "it exited at start".into()));
            }
        };
        match serde_json::from_str::<Hello>(&line) {
            Ok(hello) if hello.v == PROTOCOL_VERSION && hello.kind == "hello" => {
                worker.hello = hello;
                Ok(worker)
            }
            Ok(hello) => {
                worker.kill_and_tail();
                Err(fail(format!(
                    "it speaks protocol version {} (`{}`), this ksmith speaks {PROTOCOL_VERSION}",
                    hello.v, hello.kind
                )))
            }
            Err(e) => {
                let tail = worker.kill_and_tail();
                Err(fail(format!(
                    "its first line is not a hello ({e}): {}; stderr: {tail}",
                    line.trim()
                )))
            }
        }
    }

    /// Sends one request and waits up to `deadline` for its response.
    pub fn probe(
        &mut self,
        request: &Request,
        deadline: Duration,
    ) -> Result<Response, WorkerFailure> {
        self.send(request)?;
        let response = self.receive(deadline)?;
        if response.kind == "error" {
            self.kill_and_tail();
            return Err(WorkerFailure::Protocol(format!(
                "the worker refused the request: {}",
                response.error_message.unwrap_or_default()
            )));
        }
        if response.id.as_deref() != Some(request.id.as_str()) {
            self.kill_and_tail();
            return Err(WorkerFailure::Protocol(format!(
                "response for {:?} while waiting for {}",
                response.id, request.id
            )));
        }
        Ok(response)
    }

    /// Writes one request line.
    pub fn send(&mut self, request: &Request) -> Result<(), WorkerFailure> {
        let mut line = serde_json::to_string(request)
            .map_err(|e| WorkerFailure::Protocol(format!("cannot encode the request: {e}")))?;
        line.push('\n');
        let sent = match self.stdin.as_mut() {
            Some(stdin) => stdin.write_all(line.as_bytes()).and_then(|_| stdin.flush()),
            None => Err(std::io::Error::other("stdin closed")),
        };
        sent.map_err(|e| {
            WorkerFailure::Died(format!(
                "cannot send the request: {e}; stderr: {}",
                self.kill_and_tail()
            ))
        })
    }

    /// Closes the worker's stdin: the end of its requests.
    pub fn close_input(&mut self) {
        self.stdin = None;
    }

    /// Waits up to `deadline` for the next line and reads it as a [`Response`] of this
    /// protocol version; the worker is killed when there is none or it is unreadable.
    pub fn receive(&mut self, deadline: Duration) -> Result<Response, WorkerFailure> {
        match self.lines.recv_timeout(deadline) {
            Ok(Ok(text)) => {
                let response: Response = match serde_json::from_str(&text) {
                    Ok(r) => r,
                    Err(e) => {
                        self.kill_and_tail();
                        return Err(WorkerFailure::Protocol(format!(
                            "unreadable response ({e}): {}",
                            truncate(&text, 200)
                        )));
                    }
                };
                if response.v != PROTOCOL_VERSION {
                    self.kill_and_tail();
                    return Err(WorkerFailure::Protocol(format!(
                        "response with protocol version {}",
                        response.v
                    )));
                }
                Ok(response)
            }
            Ok(Err(e)) => Err(WorkerFailure::Died(format!(
                "reading its output: {e}; stderr: {}",
                self.kill_and_tail()
            ))),
            Err(RecvTimeoutError::Timeout) => {
                self.kill_and_tail();
                Err(WorkerFailure::Timeout)
            }
            Err(RecvTimeoutError::Disconnected) => Err(WorkerFailure::Died(format!(
                "the worker exited; stderr: {}",
                self.kill_and_tail()
            ))),
        }
    }

    /// The worker's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Kills the worker and returns the end of its stderr, cut to 2000 bytes.
    fn kill_and_tail(&mut self) -> String {
        let stderr = self.kill_and_stderr();
        truncate(&stderr, 2000).to_string()
    }

    /// Kills the worker and returns the end of its stderr (the last 8 KiB).
    fn kill_and_stderr(&mut self) -> String {
        self.stdin = None;
        let _ = self.child.kill();
        let _ = self.child.wait();
        // Let the reader take in what the worker wrote last (its stderr closes with it).
        let _ = self.stderr_closed.recv_timeout(Duration::from_millis(500));
        let tail = self
            .stderr_tail
            .lock()
            .map(|t| String::from_utf8_lossy(&t.iter().copied().collect::<Vec<u8>>()).into_owned())
            .unwrap_or_default();
        tail.trim().to_string()
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        // Closing stdin lets the worker end its loop and remove its cgroup; kill if it lingers.
        self.stdin = None;
        let until = Instant::now() + Duration::from_secs(2);
        while Instant::now() < until {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Sends on drop: tells the owner that a reader thread has finished.
struct CloseSignal(std::sync::mpsc::Sender<()>);

impl Drop for CloseSignal {
    fn drop(&mut self) {
        let _ = self.0.send(());
    }
}

fn truncate(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// Checks that `python` exists, for a clear error before any worker starts.
pub fn check_interpreter(python: &Path) -> Result<(), Error> {
    if python.exists() {
        Ok(())
    } else {
        Err(Error::Python(format!(
            "Python interpreter {} does not exist; run `make venv` or set KSMITH_PYTHON",
            python.display()
        )))
    }
}
