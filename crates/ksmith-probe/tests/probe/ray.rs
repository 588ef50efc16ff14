//! Probing on a Ray cluster (`[probe] ray_address`): a private cluster on loopback with two
//! actors gives the table of the local pool, and a module whose actor is killed mid-run is run
//! again on another actor instead of being lost.

use std::time::{Duration, Instant};

use crate::common::{module, program};
use ksmith_core::progress::Tracker;
use ksmith_core::tables::{ModuleRow, ProbeRow};
use ksmith_probe::{ProbeConfig, probe_programs};

fn on_ray() -> ProbeConfig {
    ProbeConfig {
        timeout_s: 40.0,
        ray_address: "local".into(),
        ..Default::default()
    }
}

/// A row without what depends on the machine's speed (CPU time and the forward's duration).
fn comparable(row: &ProbeRow) -> ProbeRow {
    ProbeRow {
        cpu_time_ms: 0.0,
        forward_ms: None,
        ..row.clone()
    }
}

fn comparable_rows(rows: &[ProbeRow]) -> Vec<ProbeRow> {
    rows.iter().map(comparable).collect()
}

#[test]
fn a_loopback_cluster_gives_the_table_of_local_workers() {
    let _workers = crate::common::workers_shared();
    let modules: Vec<ModuleRow> = ["ok_linear", "wrong_conv", "raises", "needs_dict", "exit_3"]
        .into_iter()
        .map(|name| module(name, program(name)))
        .collect();
    let refs: Vec<&ModuleRow> = modules.iter().collect();
    let local_cfg = ProbeConfig {
        ray_address: String::new(),
        ..on_ray()
    };
    let local = probe_programs(&refs, &local_cfg, 2, None, &Tracker::hidden()).unwrap();
    let ray = probe_programs(&refs, &on_ray(), 2, None, &Tracker::hidden()).unwrap();
    assert_eq!(comparable_rows(&ray.rows), comparable_rows(&local.rows));
    let hello = ray.hello.expect("the driver's hello");
    let cluster = hello.ray.expect("the hello names the cluster");
    assert_eq!((cluster.actors, cluster.nodes), (2, 1));
    assert_eq!(hello.sandbox, local.hello.expect("local hello").sandbox);
    assert_eq!(ray.requeued, 0);
}

/// A Ray probe actor running a module: Ray titles an actor's process with the method it runs,
/// `ray::ProbeActor.probe` while it has a request (`ray::ProbeActor.__init__` while its worker
/// still starts).
fn busy_actor() -> Option<i32> {
    std::fs::read_dir("/proc")
        .expect("/proc")
        .flatten()
        .find_map(|entry| {
            let pid = entry.file_name().to_string_lossy().parse::<i32>().ok()?;
            let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
            String::from_utf8_lossy(&cmdline)
                .starts_with("ray::ProbeActor.probe")
                .then_some(pid)
        })
}

#[test]
fn a_module_whose_actor_is_killed_runs_again_on_another() {
    let _workers = crate::common::workers_alone();
    let modules: Vec<ModuleRow> = (0..8)
        .map(|i| module(&format!("slow_{i}"), program("slow_forward")))
        .collect();
    let refs: Vec<&ModuleRow> = modules.iter().collect();
    let killer = std::thread::spawn(|| {
        // Once an actor's worker runs a module, kill the actor: every module runs for seconds,
        // so it dies mid-module (however long its worker took to start).
        let until = Instant::now() + Duration::from_secs(180);
        let mut busy = busy_actor();
        while busy.is_none() && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(100));
            busy = busy_actor();
        }
        let victim = busy.expect("an actor running a module within 180 s");
        let killed = std::process::Command::new("kill")
            .args(["-9", &victim.to_string()])
            .status()
            .unwrap();
        assert!(killed.success());
        victim
    });
    let out = probe_programs(&refs, &on_ray(), 2, None, &Tracker::hidden()).unwrap();
    let victim = killer.join().unwrap();
    assert!(victim > 0);
    assert!(
        out.requeued >= 1,
        "the killed actor's module went back to the queue"
    );
    for row in &out.rows {
        assert_eq!(row.status, ksmith_core::tables::ProbeStatus::Ok, "{row:?}");
    }
    let first = comparable(&out.rows[0]);
    for row in &out.rows[1..] {
        assert_eq!(
            ProbeRow {
                module_id: first.module_id.clone(),
                ..comparable(row)
            },
            first
        );
    }
}
