//! Hostile programs, run by the real Python runner: each ends as a clear status, and the
//! modules after it are unaffected.

use std::io::Read;
use std::net::TcpListener;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::common::{leftover_processes, module, program};
use ksmith_core::progress::Tracker;
use ksmith_core::tables::{ProbeRow, ProbeStatus};
use ksmith_probe::{ProbeConfig, probe_programs};

fn row<'a>(rows: &'a [ProbeRow], id: &str) -> &'a ProbeRow {
    rows.iter()
        .find(|r| r.module_id == id)
        .expect("a row per module")
}

#[test]
fn hostile_programs_end_as_clear_statuses_and_the_next_module_runs() {
    let _workers = crate::common::workers_alone();
    let outside = std::env::temp_dir().join(format!("ksmith-probe-outside-{}", std::process::id()));
    let _ = std::fs::remove_file(&outside);
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    listener.set_nonblocking(true).unwrap();
    let connected = Arc::new(AtomicBool::new(false));
    let stop = Arc::new(AtomicBool::new(false));
    let watcher = {
        let (connected, stop) = (connected.clone(), stop.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::SeqCst) {
                if let Ok((mut s, _)) = listener.accept() {
                    let mut buf = [0u8; 16];
                    let _ = s.read(&mut buf);
                    connected.store(true, Ordering::SeqCst);
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        })
    };

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
            ksmith_probe::worker::PASSED_ENV.contains(key) || set_by_runner.contains(key),
            "{key} reached the module: {env}"
        );
    }
    assert!(seen.contains(&"HOME"), "{env}");

    let flag = |k: &str| hello.sandbox.get(k).and_then(|v| v.as_bool()) == Some(true);
    if flag("mount_namespace") {
        let w = row(rows, "write_outside");
        assert_eq!(w.status, ProbeStatus::Failed, "{w:?}");
        assert!(
            w.error_message.as_deref().unwrap().contains("Read-only"),
            "{w:?}"
        );
    } else {
        eprintln!("note: no mount namespace here; writes outside the temp dir are not prevented");
    }
    assert!(
        !outside.exists() || !flag("mount_namespace"),
        "a module wrote {}",
        outside.display()
    );
    let net = row(rows, "network");
    assert_eq!(net.status, ProbeStatus::Failed, "{net:?}");
    assert!(
        !connected.load(Ordering::SeqCst),
        "a module reached a loopback listener"
    );

    // Nothing the modules started is still running.
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(leftover_processes(), Vec::<String>::new());
    let _ = std::fs::remove_file(&outside);
}
