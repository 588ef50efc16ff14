//! [`Scheduler`]: which device of the pool takes the next evaluation, which devices are out, and
//! what each device did (the pool's per-device accounting).
//!
//! Every device takes at most `per_device` evaluations at once. A request goes to its task's
//! home device when that has room (the first device that served the task: a worker builds a
//! task's reference facts once and keeps them, so a task that hops between devices has them
//! built on each, and with more tasks in flight than a worker keeps, `max_cached_tasks`, rebuilt
//! again and again), else to the healthy device with the fewest in flight, and waits while none
//! has room. A device taken out
//! ([`Scheduler::take_out`]) gets no more requests; when every device is out, waiting and new
//! requests get an error naming each device and why it went.
//!
//! Accounting, per device, from the pool's start: evaluations finished, the time it had at least
//! one evaluation in flight (busy), and the time it had none while no request waited for room
//! (idle for want of work: in a rollout, waiting for the teacher's answers). Busy is the
//! evaluator's view (a worker serving a request), not the GPU's own utilization.

use std::collections::HashMap;
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// What one device did so far.
#[derive(Debug, Clone, PartialEq)]
pub struct DeviceUse {
    /// Its name in logs and reports (`cuda:0`, `cpu#1`).
    pub label: String,
    /// Requests it answered: evaluations, and the preflights of references.
    pub evaluations: u64,
    /// Time with at least one evaluation in flight.
    pub busy: Duration,
    /// Time with none in flight while no request waited (no work came).
    pub idle_no_work: Duration,
    /// Why it was taken out of the pool, when it was.
    pub failed: Option<String>,
}

#[derive(Debug)]
struct Slot {
    usage: DeviceUse,
    inflight: usize,
}

#[derive(Debug)]
struct State {
    slots: Vec<Slot>,
    /// Requests waiting for room.
    waiting: usize,
    /// Each task's home device (the first that served it).
    homes: HashMap<String, usize>,
    /// When the accounting was last brought up to date.
    settled: Instant,
}

impl State {
    /// Adds the time since the last event to each device's busy or idle account.
    fn settle(&mut self, now: Instant) {
        let dt = now.saturating_duration_since(self.settled);
        self.settled = now;
        for s in &mut self.slots {
            if s.inflight > 0 {
                s.usage.busy += dt;
            } else if self.waiting == 0 && s.usage.failed.is_none() {
                s.usage.idle_no_work += dt;
            }
        }
    }

    fn all_out(&self) -> String {
        let why: Vec<String> = self
            .slots
            .iter()
            .map(|s| {
                format!(
                    "{}: {}",
                    s.usage.label,
                    s.usage.failed.as_deref().unwrap_or("?")
                )
            })
            .collect();
        format!(
            "every device of the evaluator pool was taken out ({})",
            why.join("; ")
        )
    }
}

/// The first line of a failure's text, naming the exception: a text whose first line ends in
/// Python's `Traceback (most recent call last):` (the exception's own line is the traceback's
/// last) gets that last line in its place.
pub fn headline(why: &str) -> String {
    const TRACEBACK: &str = "Traceback (most recent call last):";
    let first = why.lines().next().unwrap_or_default().trim_end();
    let Some(before) = first.strip_suffix(TRACEBACK) else {
        return first.to_string();
    };
    let last = why
        .lines()
        .rev()
        .map(str::trim)
        .find(|l| !l.is_empty() && *l != TRACEBACK)
        .unwrap_or("(no exception line)");
    format!("{before}{last}")
}

/// The lines of `why` after its first, each on a line of its own after `  | ` (nothing when it
/// has one line): the whole text stays in the log below the one-line warning.
fn detail(why: &str) -> String {
    why.lines().skip(1).map(|l| format!("\n  | {l}")).collect()
}

/// How a request fared on the device it was given to.
#[derive(Debug)]
pub enum Attempt<T> {
    /// The device answered (whatever the answer).
    Answered(T),
    /// The device failed (why): it is taken out and the request goes to another one.
    DeviceFailed(String),
}

/// The pool's dispatcher and accounts (see the module doc). Shared by every calling thread.
#[derive(Debug)]
pub struct Scheduler {
    state: Mutex<State>,
    room: Condvar,
    per_device: usize,
    started: Instant,
}

impl Scheduler {
    /// A scheduler over devices named `labels`, each taking `per_device` evaluations at once.
    pub fn new(labels: Vec<String>, per_device: usize) -> Scheduler {
        let now = Instant::now();
        Scheduler {
            state: Mutex::new(State {
                slots: labels
                    .into_iter()
                    .map(|label| Slot {
                        usage: DeviceUse {
                            label,
                            evaluations: 0,
                            busy: Duration::ZERO,
                            idle_no_work: Duration::ZERO,
                            failed: None,
                        },
                        inflight: 0,
                    })
                    .collect(),
                waiting: 0,
                homes: HashMap::new(),
                settled: now,
            }),
            room: Condvar::new(),
            per_device: per_device.max(1),
            started: now,
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A device for a request of task `task`: its home when healthy with room, else the healthy
    /// device with the fewest evaluations in flight and room for one more (which becomes the
    /// task's home when it has none or its home is out); taken (its count raised), with how long
    /// the request waited for it. An error naming every device and why it went when all are out.
    pub fn acquire(&self, task: &str) -> Result<(usize, Duration), String> {
        let asked = Instant::now();
        let mut st = self.lock();
        st.settle(asked);
        st.waiting += 1;
        loop {
            if st.slots.iter().all(|s| s.usage.failed.is_some()) {
                st.settle(Instant::now());
                st.waiting -= 1;
                return Err(st.all_out());
            }
            let open = |s: &Slot| s.usage.failed.is_none() && s.inflight < self.per_device;
            let home = st.homes.get(task).copied();
            let best = home.filter(|h| open(&st.slots[*h])).or_else(|| {
                st.slots
                    .iter()
                    .enumerate()
                    .filter(|(_, s)| open(s))
                    .min_by_key(|(_, s)| s.inflight)
                    .map(|(i, _)| i)
            });
            if let Some(i) = best {
                st.settle(Instant::now());
                st.waiting -= 1;
                st.slots[i].inflight += 1;
                if home.is_none_or(|h| st.slots[h].usage.failed.is_some()) {
                    st.homes.insert(task.to_string(), i);
                }
                return Ok((i, asked.elapsed()));
            }
            st = self.room.wait(st).unwrap_or_else(|p| p.into_inner());
        }
    }

    /// Gives device `i`'s room back; `answered`: the evaluation got an answer there (counted).
    pub fn release(&self, i: usize, answered: bool) {
        let mut st = self.lock();
        st.settle(Instant::now());
        st.slots[i].inflight -= 1;
        if answered {
            st.slots[i].usage.evaluations += 1;
        }
        drop(st);
        self.room.notify_all();
    }

    /// Takes device `i` out of the pool for `why` (said once on stderr, with how many devices
    /// are left). Returns false when it was already out.
    pub fn take_out(&self, i: usize, why: &str) -> bool {
        let mut st = self.lock();
        st.settle(Instant::now());
        if st.slots[i].usage.failed.is_some() {
            return false;
        }
        st.slots[i].usage.failed = Some(headline(why));
        let left = st.slots.iter().filter(|s| s.usage.failed.is_none()).count();
        eprintln!(
            "warning: evaluator device {} taken out of the pool: {}; its evaluations go to the \
             other devices ({left} left){}",
            st.slots[i].usage.label,
            headline(why),
            detail(why)
        );
        drop(st);
        self.room.notify_all();
        true
    }

    /// Runs one request of `task` (`what`, for messages) with `on_device` on a device from
    /// [`acquire`]
    /// until a device answers: a device that fails is taken out (`retired` is called once for
    /// it) and the request goes to another. The answer and the time it queued, or the error of
    /// [`acquire`] once every device is out.
    ///
    /// [`acquire`]: Scheduler::acquire
    pub fn dispatch<T>(
        &self,
        task: &str,
        what: &str,
        mut on_device: impl FnMut(usize) -> Attempt<T>,
        mut retired: impl FnMut(usize),
    ) -> Result<(T, Duration), String> {
        let mut queued = Duration::ZERO;
        loop {
            let (i, waited) = self.acquire(task)?;
            queued += waited;
            let attempt = on_device(i);
            self.release(i, matches!(attempt, Attempt::Answered(_)));
            match attempt {
                Attempt::Answered(answer) => return Ok((answer, queued)),
                Attempt::DeviceFailed(why) => {
                    if self.take_out(i, &why) {
                        retired(i);
                    }
                    eprintln!(
                        "warning: {what}: sent to another device ({} failed)",
                        self.label(i)
                    );
                }
            }
        }
    }

    /// The name of device `i`.
    pub fn label(&self, i: usize) -> String {
        self.lock().slots[i].usage.label.clone()
    }

    /// Whether device `i` is still in the pool.
    pub fn healthy(&self, i: usize) -> bool {
        self.lock().slots[i].usage.failed.is_none()
    }

    /// Evaluations each device takes at once.
    pub fn per_device(&self) -> usize {
        self.per_device
    }

    /// What each device did until now, and the time since the pool started.
    pub fn usage(&self) -> (Vec<DeviceUse>, Duration) {
        let now = Instant::now();
        let mut st = self.lock();
        st.settle(now);
        (
            st.slots.iter().map(|s| s.usage.clone()).collect(),
            now.saturating_duration_since(self.started),
        )
    }
}

/// The report counters of `usage` over `wall`: per device `eval_device/<label>/evaluations`,
/// `busy_ms`, `idle_no_work_ms`, `busy_permille` (busy share of the wall) and `failed` (1 when
/// taken out); `eval_devices`, `eval_devices_failed` and `eval_wall_ms` for the pool.
pub fn usage_counters(usage: &[DeviceUse], wall: Duration) -> Vec<(String, u64)> {
    let wall_ms = wall.as_millis() as u64;
    let mut out = vec![
        ("eval_devices".to_string(), usage.len() as u64),
        (
            "eval_devices_failed".to_string(),
            usage.iter().filter(|u| u.failed.is_some()).count() as u64,
        ),
        ("eval_wall_ms".to_string(), wall_ms),
    ];
    for u in usage {
        let key = |name: &str| format!("eval_device/{}/{name}", u.label);
        let busy_ms = u.busy.as_millis() as u64;
        out.push((key("evaluations"), u.evaluations));
        out.push((key("busy_ms"), busy_ms));
        out.push((key("idle_no_work_ms"), u.idle_no_work.as_millis() as u64));
        out.push((
            key("busy_permille"),
            (busy_ms * 1000).checked_div(wall_ms).unwrap_or(0),
        ));
        out.push((key("failed"), u64::from(u.failed.is_some())));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn labels(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("fake:{i}")).collect()
    }

    #[test]
    fn requests_spread_over_devices_before_doubling_up() {
        let s = Scheduler::new(labels(3), 2);
        let picked: Vec<usize> = (0..6)
            .map(|k| s.acquire(&format!("task{k}")).unwrap().0)
            .collect();
        let mut per = [0; 3];
        for i in &picked {
            per[*i] += 1;
        }
        assert_eq!(per, [2, 2, 2], "{picked:?}");
        // The first three each went to a device of their own.
        let mut first: Vec<usize> = picked[..3].to_vec();
        first.sort();
        assert_eq!(first, [0, 1, 2]);
    }

    #[test]
    fn a_task_returns_to_its_home_device_while_it_has_room() {
        let s = Scheduler::new(labels(2), 2);
        let got = |task: &str| s.acquire(task).unwrap().0;
        assert_eq!(got("a"), 0); // both idle: the first; a's home
        assert_eq!(got("b"), 1); // the less busy one; b's home
        assert_eq!(got("c"), 0); // equal: the first; device 0 is full
        s.release(0, true);
        s.release(1, true);
        // Device 1 is idle, device 0 has one in flight and room: task a goes home.
        assert_eq!(got("a"), 0);
        // Its home full, a goes where there is room; the home stays.
        assert_eq!(got("a"), 1);
        s.release(1, true);
        s.release(0, true);
        assert_eq!(got("a"), 0);
        // Once its home is out, the task gets a new one.
        s.take_out(0, "gone");
        assert_eq!(got("a"), 1);
        s.release(1, true);
        assert_eq!(got("a"), 1);
    }

    #[test]
    fn a_full_pool_makes_requests_wait_for_room() {
        let s = Arc::new(Scheduler::new(labels(1), 1));
        let (i, _) = s.acquire("t").unwrap();
        let waiter = {
            let s = s.clone();
            std::thread::spawn(move || s.acquire("t").unwrap())
        };
        std::thread::sleep(Duration::from_millis(150));
        assert!(
            !waiter.is_finished(),
            "a second request found room on a full device"
        );
        s.release(i, true);
        let (j, queued) = waiter.join().unwrap();
        assert_eq!(j, 0);
        assert!(queued >= Duration::from_millis(100), "{queued:?}");
    }

    #[test]
    fn a_device_taken_out_gets_no_more_work_and_the_last_one_out_fails_clearly() {
        let s = Arc::new(Scheduler::new(labels(2), 1));
        assert!(s.take_out(0, "sticky CUDA error"));
        assert!(!s.take_out(0, "again"), "taken out twice");
        for _ in 0..3 {
            let (i, _) = s.acquire("t").unwrap();
            assert_eq!(i, 1);
            s.release(i, true);
        }
        // A request waiting for the busy last device is told when it goes too.
        let (i, _) = s.acquire("t").unwrap();
        let waiter = {
            let s = s.clone();
            std::thread::spawn(move || s.acquire("t"))
        };
        std::thread::sleep(Duration::from_millis(50));
        s.take_out(i, "hung kernel");
        let err = waiter.join().unwrap().unwrap_err();
        assert!(
            err.contains("fake:0: sticky CUDA error") && err.contains("fake:1: hung kernel"),
            "{err}"
        );
        assert!(s.acquire("t").is_err());
    }

    #[test]
    fn busy_and_idle_time_are_accounted_per_device() {
        let s = Scheduler::new(labels(2), 1);
        let (i, _) = s.acquire("t").unwrap();
        std::thread::sleep(Duration::from_millis(120));
        s.release(i, true);
        let (usage, wall) = s.usage();
        let (busy, idle) = (&usage[i], &usage[1 - i]);
        assert_eq!((busy.evaluations, idle.evaluations), (1, 0));
        assert!(busy.busy >= Duration::from_millis(100), "{busy:?}");
        // The other device had no work while nobody waited: idle for want of work.
        assert!(idle.idle_no_work >= Duration::from_millis(100), "{idle:?}");
        assert_eq!(idle.busy, Duration::ZERO);
        let counters = usage_counters(&usage, wall);
        let get = |k: &str| counters.iter().find(|(n, _)| n == k).map(|(_, v)| *v);
        assert_eq!(get(&format!("eval_device/fake:{i}/evaluations")), Some(1));
        let share = get(&format!("eval_device/fake:{i}/busy_permille")).unwrap();
        assert!((500..=1000).contains(&share), "{share}");
        assert_eq!(get("eval_devices"), Some(2));
        assert_eq!(get("eval_devices_failed"), Some(0));
    }

    /// A fake pool of three devices whose second fails every request given to it.
    #[test]
    fn a_failing_device_is_taken_out_and_its_requests_answered_elsewhere() {
        let s = Arc::new(Scheduler::new(labels(3), 1));
        let retired = Arc::new(Mutex::new(Vec::new()));
        let handles: Vec<_> = (0..12)
            .map(|k| {
                let (s, retired) = (s.clone(), retired.clone());
                std::thread::spawn(move || {
                    s.dispatch(
                        &format!("task{k}"),
                        &format!("request {k}"),
                        |i| {
                            std::thread::sleep(Duration::from_millis(20));
                            if i == 1 {
                                Attempt::DeviceFailed("sticky CUDA error".into())
                            } else {
                                Attempt::Answered((k, i))
                            }
                        },
                        |i| retired.lock().unwrap().push(i),
                    )
                })
            })
            .collect();
        let mut answered: Vec<(usize, usize)> = handles
            .into_iter()
            .map(|h| h.join().unwrap().unwrap().0)
            .collect();
        answered.sort();
        // Nothing lost: every request answered once, none by the failed device.
        assert_eq!(
            answered.iter().map(|a| a.0).collect::<Vec<_>>(),
            (0..12).collect::<Vec<_>>()
        );
        assert!(answered.iter().all(|a| a.1 != 1), "{answered:?}");
        assert_eq!(*retired.lock().unwrap(), [1], "retired once");
        let (usage, _) = s.usage();
        assert_eq!(usage[1].failed.as_deref(), Some("sticky CUDA error"));
        assert_eq!(usage[1].evaluations, 0);
        assert_eq!(usage[0].evaluations + usage[2].evaluations, 12);
    }

    #[test]
    fn when_every_device_fails_the_request_fails_naming_them() {
        let s = Scheduler::new(labels(2), 2);
        let mut tried = Vec::new();
        let err = s
            .dispatch(
                "t",
                "request",
                |i| {
                    tried.push(i);
                    Attempt::<()>::DeviceFailed(format!("device check failed on {i}"))
                },
                |_| {},
            )
            .unwrap_err();
        tried.sort();
        assert_eq!(tried, [0, 1]);
        assert!(
            err.contains("fake:0: device check failed on 0")
                && err.contains("fake:1: device check failed on 1"),
            "{err}"
        );
    }

    #[test]
    fn a_failure_is_named_by_its_exception_on_one_line() {
        let traceback = "worker error: RuntimeError: the judge failed: Traceback (most recent call last):\n  \
             File \"reference_child.py\", line 477, in main\n    x = y\n\
             torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n";
        assert_eq!(
            headline(traceback),
            "worker error: RuntimeError: the judge failed: torch.OutOfMemoryError: CUDA out of \
             memory. Tried to allocate 2.00 GiB"
        );
        // the worker's own text already leads with the exception: kept as it is
        let led = "worker error: RuntimeError: the judge failed: torch.OutOfMemoryError: CUDA \
             out of memory\nTraceback (most recent call last):\n  File \"x.py\"\n\
             torch.OutOfMemoryError: CUDA out of memory";
        assert_eq!(
            headline(led),
            "worker error: RuntimeError: the judge failed: torch.OutOfMemoryError: CUDA out of memory"
        );
        assert_eq!(headline("sticky CUDA error"), "sticky CUDA error");
        assert_eq!(detail("one line"), "");
        assert_eq!(detail("a\nb\nc"), "\n  | b\n  | c");
        // the device's recorded reason is the headline
        let s = Scheduler::new(labels(1), 1);
        s.take_out(0, traceback);
        assert_eq!(
            s.usage().0[0].failed.as_deref(),
            Some(headline(traceback).as_str())
        );
    }

    #[test]
    fn an_unanswered_evaluation_is_not_counted() {
        let s = Scheduler::new(labels(1), 1);
        let (i, _) = s.acquire("t").unwrap();
        s.release(i, false);
        assert_eq!(s.usage().0[0].evaluations, 0);
    }
}
