"""The probe sandbox: how a child's end becomes a status, capped output, and one real child run
(the hostile programs are tested end to end from Rust, `crates/ksmith-probe/tests/sandbox.rs`)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from ksmith.probe import sandbox as S  # noqa: E402


def meta(**kw) -> dict:
    base = {"timed_out": False, "exit": None, "signal": None, "cpu_ms": 12.5}
    base.update(kw)
    return base


def test_a_result_wins_and_gets_the_cpu_time():
    result = json.dumps({"status": "ok", "attempts": 2}).encode()
    out = S.assemble(result, meta(exit=0), False, 5.0, 0.1)
    assert out["status"] == "ok" and out["cpu_time_ms"] == 12.5


def test_no_result_is_classified_by_how_the_child_ended():
    assert S.assemble(None, meta(timed_out=True, signal=9), False, 5.0, 8.0)["status"] == "timeout"
    assert S.assemble(None, meta(signal=int(signal.SIGXCPU)), False, 5.0, 8.0)["status"] == "timeout"
    assert S.assemble(None, meta(signal=9), True, 5.0, 8.0)["status"] == "timeout"
    segv = S.assemble(None, meta(signal=int(signal.SIGSEGV)), False, 5.0, 0.1)
    assert segv["status"] == "crashed" and segv["error_class"] == "SIGSEGV"
    exited = S.assemble(None, meta(exit=3), False, 5.0, 0.1)
    assert exited["status"] == "crashed" and "code 3" in exited["error_message"]
    garbled = S.assemble(b'{"status": "ok"}{"status"', meta(exit=0), False, 5.0, 0.1)
    assert garbled["status"] == "crashed" and garbled["error_class"] == "GarbledResult"
    not_a_result = S.assemble(b"[1, 2]", meta(exit=0), False, 5.0, 0.1)
    assert not_a_result["error_class"] == "GarbledResult"


def test_capped_text_keeps_the_head_and_counts_the_rest():
    fd, path = tempfile.mkstemp()
    try:
        out = S._CappedText(fd, 10)
        out.write("0123456789abcdef")
        out.write("more")
        with open(path) as f:
            assert f.read() == "0123456789"
        assert out.dropped == 10
    finally:
        os.close(fd)
        os.remove(path)


PROGRAM = """import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.fc = nn.Linear(n, 2)

    def forward(self, x):
        print("hello from the module")
        return self.fc(x)


def get_inputs():
    return [torch.rand(3, 4)]


def get_init_inputs():
    return [5]
"""


RUN_ONE = """
import json, sys
import torch
from ksmith.confine import Policy
from ksmith.probe import sandbox as S
from ksmith.probe.execute import run_request
root, program = sys.argv[1], sys.stdin.read()
# In this process, outside the launcher: the per-child confinement only, by the explicit opt-out.
sandbox = S.Sandbox(Policy(scratch=root, require=False))
try:
    out = sandbox.run({"program": program, "timeout_s": 20, "memory_mb": 1024}, [], lambda r: run_request(r, torch))
finally:
    sandbox.close()
print(json.dumps(out))
"""


def test_one_real_child_repairs_and_reports():
    # In a separate process: the sandbox's trial forks a confined child, which the pytest
    # process that runs other tests should not do.
    here = os.path.join(os.path.dirname(__file__), "..")
    with tempfile.TemporaryDirectory() as root:
        done = subprocess.run(
            [sys.executable, "-c", RUN_ONE, root],
            input=PROGRAM,
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, "PYTHONPATH": here},
        )
        assert done.returncode == 0, done.stderr
        out = json.loads(done.stdout.strip().splitlines()[-1])
        assert out["status"] == "ok", out
        assert out["output_shapes"] == ["[3, 2]"]
        assert "return [5]" in out["program"] and "torch.rand([3, 5])" in out["program"]
        assert out["cpu_time_ms"] > 0
        assert os.listdir(root) == []  # the module's temporary directory is gone
