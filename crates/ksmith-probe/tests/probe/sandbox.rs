//! Hostile programs, run by the real Python runner in the real sandbox (`[sandbox] require`, so
//! a missing part fails the test): each ends as a clear status, and the modules after it are
//! unaffected. Every test runs as this process's user and again as an ordinary user (when
//! this process is root, as on CI: `tests/as_ordinary_user.sh`).
#![allow(clippy::unwrap_used)]

use std::io::Read;
use std::net::TcpListener;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixListener};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::common::{leftover_processes, module, program, rerun_as_ordinary_user};
use ksmith_core::progress::Tracker;
use ksmith_core::tables::{ProbeRow, ProbeStatus};
use ksmith_probe::{ProbeConfig, SizingConfig, probe_programs};
use ksmith_sandbox::SandboxConfig;

/// The sandbox every test here asks for: all of it, and a small disk to fill.
/// The modules here test isolation; sizing (which runs in the same child) has its own tests.
fn without_sizing() -> SizingConfig {
    SizingConfig {
        enabled: false,
        ..Default::default()
    }
}

fn sandbox() -> SandboxConfig {
    SandboxConfig {
        require: true,
        disk_mb: 64,
        ..Default::default()
    }
}

fn row<'a>(rows: &'a [ProbeRow], id: &str) -> &'a ProbeRow {
    rows.iter()
        .find(|r| r.module_id == id)
        .expect("a row per module")
}

#[test]
fn hostile_programs_end_as_clear_statuses_and_the_next_module_runs() {
    let _workers = crate::common::workers_alone();
    hostile_programs();
}

#[test]
fn hostile_programs_as_an_ordinary_user() {
    let _workers = crate::common::workers_shared();
    rerun_as_ordinary_user("sandbox::hostile_programs_in_this_process");
}

#[test]
#[ignore = "run by hostile_programs_as_an_ordinary_user, as that user"]
fn hostile_programs_in_this_process() {
    let _workers = crate::common::workers_alone();
    hostile_programs();
}

#[test]
fn a_module_cannot_reach_a_sibling_running_at_the_same_time() {
    let _workers = crate::common::workers_shared();
    sibling_attack();
}

#[test]
fn a_module_cannot_reach_a_sibling_as_an_ordinary_user() {
    let _workers = crate::common::workers_shared();
    rerun_as_ordinary_user("sandbox::sibling_attack_in_this_process");
}

#[test]
#[ignore = "run by a_module_cannot_reach_a_sibling_as_an_ordinary_user, as that user"]
fn sibling_attack_in_this_process() {
    sibling_attack();
}

/// Accepts connections on `listeners` until `stop`; sets `connected` when one comes.
fn watch(
    listeners: Vec<Box<dyn FnMut() -> bool + Send>>,
    connected: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<()> {
    let mut listeners = listeners;
    std::thread::spawn(move || {
        while !stop.load(Ordering::SeqCst) {
            for accept in listeners.iter_mut() {
                if accept() {
                    connected.store(true, Ordering::SeqCst);
                }
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    })
}

fn hostile_programs() {
    let me = std::process::id();
    let outside = std::env::temp_dir().join(format!("ksmith-probe-outside-{me}"));
    let _ = std::fs::remove_file(&outside);
    let secret = std::env::temp_dir().join(format!("ksmith-probe-secret-{me}"));
    std::fs::write(&secret, "top secret").unwrap();
    let socket_path = std::env::temp_dir().join(format!("ksmith-probe-socket-{me}"));
    let _ = std::fs::remove_file(&socket_path);
    let tcp = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = tcp.local_addr().unwrap().port();
    tcp.set_nonblocking(true).unwrap();
    let unix = UnixListener::bind(&socket_path).unwrap();
    unix.set_nonblocking(true).unwrap();
    let name = format!("ksmith-probe-socket-{me}");
    let abstract_unix =
        UnixListener::bind_addr(&SocketAddr::from_abstract_name(name.as_bytes()).unwrap()).unwrap();
    abstract_unix.set_nonblocking(true).unwrap();
    let connected = Arc::new(AtomicBool::new(false));
    let stop = Arc::new(AtomicBool::new(false));
    let mut buf = [0u8; 16];
    let watcher = watch(
        vec![
            Box::new(move || tcp.accept().map(|(mut s, _)| s.read(&mut buf)).is_ok()),
            Box::new(move || unix.accept().is_ok()),
            Box::new(move || abstract_unix.accept().is_ok()),
        ],
        connected.clone(),
        stop.clone(),
    );

    let hostile = [
        "infinite_loop",
        "memory_bomb",
        "exit_3",
        "segfault",
        "write_outside",
        "fork_bomb",
        "chatty",
        "garble_stdout",
        "sleepy_init",
        "network",
        "random_output",
        "raises",
        "env_leak",
        "host_socket",
        "snoop",
        "fill_disk",
        "user_namespace",
    ];
    let mut modules = Vec::new();
    for name in hostile {
        let text = program(name)
            .replace(
                "os.environ.get(\"KSMITH_TEST_OUTSIDE\", \"/tmp/ksmith-probe-outside\")",
                &format!("{:?}", outside.display().to_string()),
            )
            .replace(
                "int(os.environ.get(\"KSMITH_TEST_PORT\", \"1\"))",
                &port.to_string(),
            )
            .replace(
                "os.environ.get(\"KSMITH_TEST_SOCKET\", \"/tmp/ksmith-probe-socket\")",
                &format!("{:?}", socket_path.display().to_string()),
            )
            .replace(
                "os.environ.get(\"KSMITH_TEST_SECRET\", \"/tmp/ksmith-probe-secret\")",
                &format!("{:?}", secret.display().to_string()),
            );
        modules.push(module(name, text));
        // After every hostile module, a good one: it must be unaffected.
        modules.push(module(&format!("after_{name}"), program("ok_linear")));
    }
    let refs: Vec<_> = modules.iter().collect();
    let cfg = ProbeConfig {
        timeout_s: 3.0,
        memory_mb: 512,
        max_steps: 4,
        restarts: 1,
        sandbox: sandbox(),
        sizing: without_sizing(),
        ..Default::default()
    };
    let started = Instant::now();
    let out = probe_programs(&refs, &cfg, 2, None, &Tracker::hidden()).unwrap();
    let elapsed = started.elapsed();
    stop.store(true, Ordering::SeqCst);
    watcher.join().unwrap();
    let rows = &out.rows;
    let hello = out.hello.clone().unwrap();
    eprintln!(
        "sandbox: {:?}; {} modules in {elapsed:?}",
        hello.sandbox,
        rows.len()
    );
    for r in rows {
        eprintln!(
            "{:<22} {:?} {:?} {:?}",
            r.module_id, r.status, r.error_class, r.error_message
        );
    }

    // Order is the input order.
    let ids: Vec<&str> = rows.iter().map(|r| r.module_id.as_str()).collect();
    let want: Vec<&str> = modules.iter().map(|m| m.id.as_str()).collect();
    assert_eq!(ids, want);
    for name in hostile {
        let next = row(rows, &format!("after_{name}"));
        assert_eq!(
            next.status,
            ProbeStatus::Ok,
            "module after {name}: {next:?}"
        );
        assert_eq!(next.output_shapes, vec!["[8, 32]".to_string()]);
    }

    assert_eq!(row(rows, "infinite_loop").status, ProbeStatus::Timeout);
    assert_eq!(row(rows, "sleepy_init").status, ProbeStatus::Timeout);
    assert_eq!(row(rows, "fork_bomb").status, ProbeStatus::Timeout);
    let oom = row(rows, "memory_bomb");
    assert_eq!(oom.status, ProbeStatus::Oom, "{oom:?}");
    let exit = row(rows, "exit_3");
    assert_eq!(exit.status, ProbeStatus::Crashed);
    assert!(
        exit.error_message.as_deref().unwrap().contains("code 3"),
        "{exit:?}"
    );
    let segv = row(rows, "segfault");
    assert_eq!(segv.status, ProbeStatus::Crashed);
    assert_eq!(segv.error_class.as_deref(), Some("SIGSEGV"));
    let chatty = row(rows, "chatty");
    assert_eq!(chatty.status, ProbeStatus::Ok, "{chatty:?}");
    let garbled = row(rows, "garble_stdout");
    assert_eq!(garbled.status, ProbeStatus::Crashed, "{garbled:?}");
    assert_eq!(garbled.error_class.as_deref(), Some("GarbledResult"));
    let random = row(rows, "random_output");
    assert_eq!(random.status, ProbeStatus::Nondeterministic, "{random:?}");
    let raises = row(rows, "raises");
    assert_eq!(raises.status, ProbeStatus::Failed);
    assert_eq!(raises.error_class.as_deref(), Some("ValueError"));
    assert!(
        raises
            .error_message
            .as_deref()
            .unwrap()
            .contains("always fails")
    );

    // The module sees none of this process's environment (a teacher API key, say): only the
    // variables the worker passes on or sets itself.
    let env = row(rows, "env_leak").error_message.clone().unwrap();
    let seen: Vec<&str> = env
        .trim_start_matches("forward: environment: ")
        .split(' ')
        .collect();
    let set_by_runner = [
        "HOME",
        "PYTHONPATH",
        "PYTHONDONTWRITEBYTECODE",
        "PYTHONNOUSERSITE",
        "PYTHONUNBUFFERED",
        "OMP_NUM_THREADS",
        "MKL_NUM_THREADS",
        "OPENBLAS_NUM_THREADS",
        "CUDA_VISIBLE_DEVICES",
        "TMP",
        "TEMP",
        "TMPDIR",
        "TORCH_HOME",
        "XDG_CACHE_HOME",
        "TRITON_CACHE_DIR",
        "TORCHINDUCTOR_CACHE_DIR",
    ];
    for key in &seen {
        assert!(
            ksmith_sandbox::ENV_PASSED.contains(key) || set_by_runner.contains(key),
            "{key} reached the module: {env}"
        );
    }
    assert!(seen.contains(&"HOME"), "{env}");

    // The whole sandbox was required, so all of it is in place.
    assert_eq!(
        hello.sandbox.get("confined").and_then(|v| v.as_bool()),
        Some(true),
        "{:?}",
        hello.sandbox
    );
    let w = row(rows, "write_outside");
    assert_eq!(w.status, ProbeStatus::Failed, "{w:?}");
    assert!(
        w.error_message.as_deref().unwrap().contains("Read-only"),
        "{w:?}"
    );
    assert!(!outside.exists(), "a module wrote {}", outside.display());
    let net = row(rows, "network");
    assert_eq!(net.status, ProbeStatus::Failed, "{net:?}");
    assert!(
        !connected.load(Ordering::SeqCst),
        "a module reached a listener of this machine (loopback TCP, unix socket or abstract socket)"
    );
    let sock = row(rows, "host_socket");
    assert_eq!(sock.status, ProbeStatus::Failed, "{sock:?}");
    let message = sock.error_message.as_deref().unwrap();
    assert!(message.contains("forward: blocked: "), "{sock:?}");

    // Nothing of the machine is visible: no /etc/shadow, no other work folder, nothing of
    // /root or /home but the way to the Python environment, no other process.
    let snoop = row(rows, "snoop");
    let message = snoop.error_message.as_deref().unwrap();
    let seen: serde_json::Value =
        serde_json::from_str(message.split_once("SNOOP ").expect("the snoop report").1).unwrap();
    assert_eq!(seen["/etc/shadow"], "No such file or directory", "{seen}");
    assert_eq!(
        seen[secret.display().to_string()],
        "No such file or directory",
        "{seen}"
    );
    for folder in ["/root", "/home"] {
        let s = seen[folder].as_str().unwrap();
        assert!(
            s == "nothing else" || s == "No such file or directory",
            "{folder}: {seen}"
        );
    }
    assert_eq!(seen["other processes"], serde_json::json!([]), "{seen}");

    // The workspace is a tmpfs of disk_mb (the module alternates its folder and /dev/shm).
    let fill = row(rows, "fill_disk");
    let message = fill.error_message.as_deref().unwrap();
    assert!(message.contains("No space left on device"), "{fill:?}");
    let mib: u64 = message
        .split("filled ")
        .nth(1)
        .and_then(|m| m.split(' ').next())
        .and_then(|n| n.parse().ok())
        .expect("filled N MiB");
    assert!((32..=64).contains(&mib), "{fill:?}");

    // No new user namespace, no mount, no ptrace, no keyctl.
    let userns = row(rows, "user_namespace");
    assert_eq!(userns.status, ProbeStatus::Failed, "{userns:?}");
    let message = userns.error_message.as_deref().unwrap();
    for blocked in [
        "user namespace: Operation not permitted",
        "mount: Operation not permitted",
        "ptrace: Operation not permitted",
        "keyctl: Operation not permitted",
    ] {
        assert!(message.contains(blocked), "{userns:?}");
    }

    // Nothing the modules started is still running (a killed sandbox's processes take a moment
    // to go on a loaded machine; an escaped daemon would stay).
    let until = Instant::now() + Duration::from_secs(5);
    while !leftover_processes().is_empty() && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(leftover_processes(), Vec::<String>::new());
    let _ = std::fs::remove_file(&outside);
    let _ = std::fs::remove_file(&secret);
    let _ = std::fs::remove_file(&socket_path);
}

/// Two modules at once on two workers: one tries to write into every descriptor
/// (`/proc/PID/fd`) and working folder (`/proc/PID/cwd`) of every other process for 6 s, while
/// the other sleeps 5 s in its first run and then must still give its own result. Each module
/// sees only itself in its `/proc`.
fn sibling_attack() {
    let modules = [
        module("victim", program("victim")),
        module("sibling_attack", program("sibling_attack")),
        module("after_victim", program("ok_linear")),
        module("after_sibling_attack", program("ok_linear")),
    ];
    let refs: Vec<_> = modules.iter().collect();
    let cfg = ProbeConfig {
        timeout_s: 20.0,
        memory_mb: 512,
        max_steps: 4,
        restarts: 1,
        sandbox: sandbox(),
        sizing: without_sizing(),
        ..Default::default()
    };
    let out = probe_programs(&refs, &cfg, 2, None, &Tracker::hidden()).unwrap();
    let rows = &out.rows;
    for r in rows {
        eprintln!("{:<22} {:?} {:?}", r.module_id, r.status, r.error_message);
    }
    let victim = row(rows, "victim");
    assert_eq!(victim.status, ProbeStatus::Ok, "{victim:?}");
    assert_eq!(victim.output_shapes, vec!["[8, 32]".to_string()]);
    let attack = row(rows, "sibling_attack");
    assert_eq!(attack.status, ProbeStatus::Failed, "{attack:?}");
    assert_eq!(
        attack.error_message.as_deref(),
        Some("forward: isolated: saw processes [], reached []"),
        "{attack:?}"
    );
    for name in ["after_victim", "after_sibling_attack"] {
        assert_eq!(row(rows, name).status, ProbeStatus::Ok, "{name}");
    }
}

/// A sandbox that cannot be set up (here: no bubblewrap where the config says) is never chosen
/// silently: by default the run stops before any module runs, with one line naming what is
/// missing and how to fix it; with the explicit opt-out the modules run with the rest of the
/// sandbox and the worker's hello names what is missing (the pool warns with it first).
#[test]
fn without_the_whole_sandbox_the_probe_refuses_by_default_and_runs_when_the_config_opts_out() {
    let _workers = crate::common::workers_shared();
    let modules = [module("ok", program("ok_linear"))];
    let refs: Vec<_> = modules.iter().collect();
    let mut cfg = ProbeConfig {
        timeout_s: 20.0,
        sandbox: SandboxConfig {
            bwrap: "/nonexistent/bwrap".into(),
            ..Default::default()
        },
        ..Default::default()
    };
    let err = probe_programs(&refs, &cfg, 1, None, &Tracker::hidden()).unwrap_err();
    assert!(matches!(err, ksmith_probe::Error::Sandbox(_)), "{err:?}");
    let line = err.to_string();
    assert!(
        line.starts_with(
            "probe: ksmith sandbox: refusing to run untrusted code: bubblewrap is not at \
             /nonexistent/bwrap"
        ) && line.contains("`make sandbox`")
            && line.contains("[sandbox] require = false")
            && !line.contains('\n'),
        "{line}"
    );

    cfg.sandbox.require = false;
    let out = probe_programs(&refs, &cfg, 1, None, &Tracker::hidden()).unwrap();
    assert_eq!(out.rows[0].status, ProbeStatus::Ok, "{:?}", out.rows[0]);
    let missing = ksmith_sandbox::missing(&out.hello.unwrap().sandbox);
    assert!(
        missing
            .iter()
            .any(|m| m.contains("filesystem view: bubblewrap is not at /nonexistent/bwrap")),
        "{missing:?}"
    );
}
