"""scripts/rollout_scaling_table.py: the window's rate, and the steady window that starts once
every task has finished its first step (its reference built)."""

from __future__ import annotations

import importlib.util
import json
import os

import pyarrow as pa
import pyarrow.parquet as pq

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "scripts", "rollout_scaling_table.py")


def load_script():
    spec = importlib.util.spec_from_file_location("rollout_scaling_table", SCRIPT)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def write_run(path, steps, window_start_s=0, window_s=120):
    work = path / "work"
    (work / "reports").mkdir(parents=True)
    meta = {"label": "", "gpus": 1, "first_gpu": 0, "latency": "0", "inflight": 8}
    meta |= {"window_start_s": window_start_s, "window_s": window_s}
    (path / "meta.json").write_text(json.dumps(meta))
    (work / "reports" / "rollout.json").write_text(json.dumps({"counters": {}}))
    rows = {
        "task_id": [s[0] for s in steps],
        "started_at_ms": [int(s[1] * 1000) for s in steps],
        "finished_at_ms": [int(s[2] * 1000) for s in steps],
        "eval_status": ["correct"] * len(steps),
    }
    pq.write_table(pa.table(rows), work / "steps.parquet")


def test_steady_window_starts_when_every_task_finished_its_first_step(tmp_path):
    mod = load_script()
    # Task a's first step ends at 10 s, task b's at 40 s (a slow reference build); afterwards
    # each finishes a step every 10 s. The run's first step starts at 0.
    steps = [("a", 0, 10), ("b", 0, 40)]
    steps += [("a", t - 10, t) for t in range(20, 121, 10)]
    steps += [("b", t - 10, t) for t in range(50, 121, 10)]
    write_run(tmp_path, steps)
    d = mod.load(str(tmp_path))
    assert d["steps_per_min"] == len(steps) / 2
    assert d["steady_s"] == 80
    # From 40 s to 120 s: b's first step (at 40), a's steps at 40..120 (9), b's at 50..120 (8).
    assert d["steady_steps_per_min"] == 18 / (80 / 60)


def test_a_task_still_on_its_first_step_leaves_no_steady_window(tmp_path):
    mod = load_script()
    steps = [("a", 0, 10), ("a", 10, 20), ("b", 0, 500)]
    write_run(tmp_path, steps)
    d = mod.load(str(tmp_path))
    assert d["steady_s"] == 0
    assert "steady_steps_per_min" not in d


def test_host_cpu_busy_is_the_share_not_idle_between_the_windows_samples(tmp_path):
    mod = load_script()
    # /proc/stat's cpu line: user nice system idle iowait irq softirq ...; samples at 5, 10, 20 s
    # and 200 s, the window 0-120 s: from the sample at 5 s to the one at 20 s, 30 + 10 busy
    # ticks (user, system, irq) against 50 idle and 10 iowait.
    lines = [
        "5.0 cpu 100 0 50 500 10 0 0 0 0 0",
        "10.0 cpu 110 0 55 520 15 0 0 0 0 0",
        "20.0 cpu 130 0 55 550 20 5 5 0 0 0",
        "200.0 cpu 999 0 999 999 99 0 0 0 0 0",
        "garbage",
    ]
    (tmp_path / "cpu.log").write_text("\n".join(lines) + "\n")
    assert mod.cpu_busy(str(tmp_path / "cpu.log"), 0, 120) == (30 + 5 + 5 + 5) / (30 + 5 + 50 + 10 + 5 + 5)
    assert mod.cpu_busy(str(tmp_path / "cpu.log"), 100, 300) != mod.cpu_busy(str(tmp_path / "cpu.log"), 100, 300)
    assert mod.cpu_busy(str(tmp_path / "missing.log"), 0, 120) != 0.0


def test_timing_quality_and_speedup_gaps_between_builds(tmp_path):
    mod = load_script()

    def result(cv, rounds=1, noisy=False, hack=None, interfered=False):
        timing = {"cv": cv, "rounds": [{}] * (rounds - 1) + [{"interfered": interfered}], "noisy": noisy}
        return json.dumps({"hack": hack, "candidate_timing": timing if hack is None else None})

    def run(path, label, rows):
        write_run(path, [(task, 0, 10) for task, *_ in rows])
        meta = json.loads((path / "meta.json").read_text()) | {"label": label}
        (path / "meta.json").write_text(json.dumps(meta))
        table = pq.read_table(path / "work" / "steps.parquet")
        table = table.append_column("program", pa.array([r[1] for r in rows]))
        table = table.append_column("speedup", pa.array([r[2] for r in rows], pa.float64()))
        table = table.append_column("eval_json", pa.array([r[3] for r in rows]))
        pq.write_table(table, path / "work" / "steps.parquet")

    # build a: four timed candidates (one measured twice and left noisy) and a timing_anomaly
    run(
        tmp_path / "a",
        "off",
        [
            ("t1", "p1", 2.0, result(0.01)),
            ("t1", "p2", 1.0, result(0.02)),
            ("t2", "p1", 4.0, result(0.03)),
            ("t2", "p3", 1.5, result(0.20, rounds=3, noisy=True, interfered=True)),
            ("t3", "p9", None, result(0.0, hack="timing_anomaly")),
        ],
    )
    # build b timed two of the same programs of the same tasks, and one of another task
    run(
        tmp_path / "b",
        "on",
        [("t1", "p1", 2.2, result(0.01)), ("t2", "p1", 4.0, result(0.01)), ("t3", "p1", 9.0, result(0.01))],
    )
    a, b = mod.load(str(tmp_path / "a")), mod.load(str(tmp_path / "b"))
    q = a["timing"]
    assert q["timed"] == 4 and q["anomalies"] == 1 and q["interfered"] == 1
    assert q["remeasured"] == 0.25 and q["noisy"] == 0.25
    assert q["cv_median"] == 0.03 and q["cv_p90"] == 0.20
    # pairs (t1, p1): 2.0 / 2.2 -> 9.1 % apart; (t2, p1): 0 %; t3's programs differ: not a pair
    [(pair, latency, n, median, p90)] = mod.speedup_gaps([a, b])
    assert (pair, latency, n) == ("off / on", "0", 2)
    assert abs(p90 - (1 - 2.0 / 2.2)) < 1e-9 and median in (0.0, p90)
