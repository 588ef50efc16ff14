//! [`Spawner`]: starts the pool's worker processes from one thread that lives as long as the
//! pool.
//!
//! A worker runs under bubblewrap with `--die-with-parent`, which follows the *thread* that
//! started it (the parent-death signal is sent when that thread ends), so a worker started from
//! a short-lived thread (a start in parallel, a replacement asked for by a rollout task's
//! thread) would die with it. Every worker is therefore forked by the spawner's thread; the
//! caller then waits for its greeting itself, so workers still start side by side.

use std::io;
use std::process::{Child, Command};
use std::sync::Mutex;
use std::sync::mpsc;

type Job = (Command, mpsc::Sender<io::Result<Child>>);

/// The pool's process-starting thread (see the module doc); it ends when the spawner is
/// dropped.
#[derive(Debug)]
pub struct Spawner {
    jobs: Mutex<mpsc::Sender<Job>>,
}

impl Spawner {
    /// Starts the thread.
    pub fn new() -> io::Result<Spawner> {
        let (tx, rx) = mpsc::channel::<Job>();
        std::thread::Builder::new()
            .name("ksmith-eval-spawner".into())
            .spawn(move || {
                for (mut cmd, reply) in rx {
                    let _ = reply.send(cmd.spawn());
                }
            })?;
        Ok(Spawner {
            jobs: Mutex::new(tx),
        })
    }

    /// Starts `cmd` on the spawner's thread.
    pub fn spawn(&self, cmd: Command) -> io::Result<Child> {
        let (tx, rx) = mpsc::channel();
        let sent = self
            .jobs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .send((cmd, tx));
        if sent.is_err() {
            return Err(io::Error::other("the worker spawner thread has ended"));
        }
        rx.recv()
            .unwrap_or_else(|_| Err(io::Error::other("the worker spawner thread has ended")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A child started for a thread that has ended still runs under the spawner's thread (its
    /// parent thread is the spawner's, which lives on).
    #[test]
    fn children_are_started_by_the_spawner_thread() {
        let spawner = Spawner::new().unwrap();
        let mut child = std::thread::scope(|s| {
            s.spawn(|| {
                let mut cmd = Command::new("sleep");
                cmd.arg("5");
                spawner.spawn(cmd).unwrap()
            })
            .join()
            .unwrap()
        });
        // The thread that asked is gone; the child's parent (this process) runs on.
        assert!(child.try_wait().unwrap().is_none());
        child.kill().unwrap();
        child.wait().unwrap();
    }
}
