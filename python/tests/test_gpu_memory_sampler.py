"""scripts/gpu_memory_sampler.py against a fake `nvidia-smi`: the samples, each process's role
from its workspace, the kept logs, and the summary per GPU and role."""

from __future__ import annotations

import csv
import importlib.util
import os
import signal
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "scripts", "gpu_memory_sampler.py")


def load_script():
    spec = importlib.util.spec_from_file_location("gpu_memory_sampler", SCRIPT)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_samples_name_each_process_by_its_workspace_and_keep_the_logs(tmp_path):
    judge_dir = tmp_path / "judge-abc"
    judge_dir.mkdir()
    judge = subprocess.Popen(["sleep", "30"], cwd=judge_dir)
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "nvidia-smi").write_text(
        "#!/bin/sh\n"
        'case "$1" in\n'
        "  --query-gpu=*) echo '0, 00000000:19:00.0, 70000, 143771, 35' ;;\n"
        f"  --query-compute-apps=*) echo '00000000:19:00.0, {judge.pid}, 1200'; echo '00000000:19:00.0, 1, [N/A]' ;;\n"
        "esac\n"
    )
    (fake / "nvidia-smi").chmod(0o755)
    worker_log = tmp_path / "rt" / "worker-0-cuda0.log"
    worker_log.parent.mkdir()
    worker_log.write_text("started\n")
    out = tmp_path / "out"
    env = dict(os.environ, PATH=f"{fake}:{os.environ['PATH']}")
    sampler = subprocess.Popen(
        [sys.executable, SCRIPT, "sample", str(out), "--interval", "0.2", "--logs", f"a={tmp_path}/rt/worker-*.log"],
        env=env,
    )
    try:
        time.sleep(1.0)
        worker_log.write_text("started\nthe judge ran out of GPU memory\n")
        time.sleep(1.0)
    finally:
        sampler.send_signal(signal.SIGTERM)
        assert sampler.wait(10) == 0
        judge.kill()
        judge.wait()
    devices = list(csv.reader(open(out / "devices.csv")))
    assert devices and devices[0][1:] == ["0", "00000000:19:00.0", "70000", "143771", "35"]
    apps = list(csv.reader(open(out / "apps.csv")))
    assert [r[2:] for r in apps[:2]] == [[str(judge.pid), "1200", "judge"], ["1", "", "other"]]
    # the log as it grew, kept after the worker would have removed it
    assert (out / "logs" / "a-worker-0-cuda0.log").read_text().endswith("ran out of GPU memory\n")


def test_the_summary_gives_the_peak_and_each_roles_memory(tmp_path):
    mod = load_script()
    rows = [
        ["1.0", "0", "B0", "50000", "143771", "20"],
        ["2.0", "0", "B0", "140000", "143771", "60"],
        ["1.0", "1", "B1", "30000", "143771", "10"],
    ]
    with open(tmp_path / "devices.csv", "w", newline="") as f:
        csv.writer(f).writerows(rows)
    apps = [
        ["1.0", "B0", "11", "900", "judge"],
        ["2.0", "B0", "11", "1100", "judge"],
        ["2.0", "B0", "12", "1000", "judge"],
        ["2.0", "B0", "13", "3000", "harness"],
        ["1.0", "B1", "21", "800", "harness"],
    ]
    with open(tmp_path / "apps.csv", "w", newline="") as f:
        csv.writer(f).writerows(apps)
    text = mod.summary(str(tmp_path), {"0": "inflight 32", "1": "inflight 16"})
    assert "| 0 | inflight 32 | 2 | 140000 | 143771 | 1 | 40 |" in text
    assert "| 1 | inflight 16 | 1 | 30000 | 143771 | 0 | 10 |" in text
    # at the peak sample (t=2.0) GPU 0 held two judges and one harness
    assert "| 0 | judge | 2 | 1000 | 1100 | 2 |" in text
    assert "| 0 | harness | 1 | 3000 | 3000 | 1 |" in text
    assert "| 1 | harness | 1 | 800 | 800 | 1 |" in text
