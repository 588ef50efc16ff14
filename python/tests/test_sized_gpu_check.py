"""scripts/sized_gpu_check.py on the CPU: it times each program at its sizes (or an alternate),
runs the alternates, and writes the table's JSON; a program out of the time range fails it."""

from __future__ import annotations

import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "scripts", "sized_gpu_check.py")

PROGRAM = """import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.fc = nn.Linear(dim, dim)

    def forward(self, x):
        return torch.relu(self.fc(x))


batch_size = 64
dim = 256


def get_inputs():
    return [torch.rand(batch_size, dim)]


def get_init_inputs():
    return [dim]
"""


def run(tmp_path, *args):
    folder = tmp_path / "programs"
    folder.mkdir(exist_ok=True)
    (folder / "linear.py").write_text(PROGRAM)
    manifest = {
        "linear.py": {
            "est_ms": 0.01,
            "est_flops": 2 * 64 * 256 * 256,
            "sizes": json.dumps({"batch_size": 64, "dim": 256}),
            "alt_sizes": json.dumps([{"batch_size": 8, "dim": 32}, {"batch_size": 7, "dim": 24}]),
        }
    }
    (folder / "manifest.json").write_text(json.dumps(manifest))
    out = tmp_path / "out"
    cmd = [sys.executable, SCRIPT, "--programs", str(folder), "--device", "cpu", "--runs", "3", "--warmup", "1"]
    proc = subprocess.run([*cmd, "--out", str(out), *args], capture_output=True, text=True, timeout=600)
    return proc, json.loads((out / "sized_gpu_check.json").read_text())


def test_times_programs_runs_alternates_and_writes_json(tmp_path):
    proc, result = run(tmp_path, "--min-ms", "0", "--max-ms", "1e6", "--alternates")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    row = result["rows"][0]
    assert row["status"] == "ok" and row["median_ms"] > 0 and row["alternates_ok"] == 2
    assert result["in_range"] == 1 and "linear.py" in proc.stdout


def test_out_of_range_fails_and_an_alternate_can_be_timed(tmp_path):
    proc, result = run(tmp_path, "--min-ms", "1e6", "--alternate", "1")
    assert proc.returncode == 1
    row = result["rows"][0]
    assert row["status"] == "out_of_range" and row["sizes"] == {"batch_size": 7, "dim": 24}
