"""Candidate children are confined: no write outside their own folder, no view of the other
children's folders, no access to the worker's memory, no disk device (runtime layer alone,
static checks and the audit hook off, so only the sandbox stops them). The same candidate without confinement
escapes, which shows the checks can fail."""

from __future__ import annotations

import os

import pytest
from ksmith.confine import Policy, SandboxError
from ksmith.confine.policy import REFUSAL
from ksmith.evaluator.evaluate import DeviceEvaluator

#: An evaluator made in this process, outside the sandbox launcher: only the per-child
#: confinement, by the explicit opt-out (the default refuses without the whole sandbox).
UNCONFINED = Policy(require=False)

HERE = os.path.dirname(os.path.abspath(__file__))
TASK = open(os.path.join(HERE, "candidates", "tasks", "elementwise.py")).read()
HONEST = open(os.path.join(HERE, "candidates", "honest", "elementwise.py")).read()

# Runs in ModelNew.__init__: every escape that works is collected, and any raises, so the
# verdict is `correct` only when every escape failed.
PROBE = """
        escapes = []
        try:
            with open({marker!r}, "w") as f:
                f.write("escaped")
            escapes.append("wrote outside its folder")
        except OSError:
            pass
        try:
            with open(os.path.join(os.getcwd(), "own-file"), "w") as f:
                f.write("fine")
        except OSError as e:
            escapes.append(f"cannot write its own folder: {{e}}")
        try:
            if {secret!r} in os.listdir(os.path.dirname(os.getcwd())):
                escapes.append("sees the other children's folders")
        except OSError:
            pass
        try:
            with open(f"/proc/{{os.getppid()}}/maps") as f:
                start = int(f.readline().split("-")[0], 16)
            with open(f"/proc/{{os.getppid()}}/mem", "rb") as f:
                f.seek(start)
                if f.read(1):
                    escapes.append("read the worker's memory")
        except (OSError, ValueError, OverflowError):
            pass
        try:
            open("/proc/sys/vm/drop_caches", "w").close()
            escapes.append("may write kernel tunables")
        except OSError:
            pass
        disks = [d for d in os.listdir("/dev") if d.startswith(("sd", "vd", "nvme", "loop", "mem", "kmem"))]
        if disks:
            escapes.append(f"sees devices {{disks}}")
        if escapes:
            raise RuntimeError("ESCAPES: " + "; ".join(escapes))
"""


def candidate(marker: str, secret: str) -> str:
    src = HONEST.replace("import torch\n", "import os\n\nimport torch\n", 1)
    src = src.replace(
        "        super().__init__()", "        super().__init__()" + PROBE.format(marker=marker, secret=secret), 1
    )
    assert src != HONEST and "ESCAPES" in src
    return src


def evaluate(confine: bool, marker: str) -> dict:
    # the sandbox alone: no static checks, no audit hook (which would name the attempts first)
    options = {"trials": 2, "run_timeout_s": 30, "static_checks": False, "audit": False, "confine": confine}
    ev = DeviceEvaluator("cpu", options, policy=UNCONFINED)
    try:
        secret = "secret-of-another-child"
        os.makedirs(os.path.join(ev.root, secret))
        return ev.evaluate(
            {"task_id": "confine", "reference": TASK, "candidate": candidate(marker, secret), "measure": False}
        )
    finally:
        ev.close()


def test_a_confined_candidate_cannot_escape(tmp_path):
    marker = str(tmp_path / "escaped")
    result = evaluate(True, marker)
    assert not os.path.exists(marker), "the candidate wrote outside its folder"
    assert result["status"] == "correct", result["error_log"]


def test_without_confinement_the_same_candidate_escapes(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("the escapes need root (what the confinement takes away)")
    marker = str(tmp_path / "escaped")
    result = evaluate(False, marker)
    assert os.path.exists(marker)
    assert result["status"] == "compile_error", result
    log = result["error_log"]
    for escape in (
        "wrote outside its folder",
        "sees the other children's folders",
        "read the worker's memory",
        "may write kernel tunables",
        "sees devices",
    ):
        assert escape in log, log


def test_where_a_part_of_the_sandbox_fails_the_default_refuses_and_the_opt_out_says_so(monkeypatch, capfd):
    import ksmith.confine.child

    monkeypatch.setattr(ksmith.confine.child, "_private_dev", lambda *a: "tmpfs over /x: Operation not permitted")
    # The default policy: refused before any child that could run a candidate exists, with the
    # one line that names what is missing and how to fix it.
    with pytest.raises(SandboxError) as refused:
        DeviceEvaluator("cpu", {"trials": 2})
    line = str(refused.value)
    assert line.startswith(REFUSAL), line
    assert "private /dev: tmpfs over /x: Operation not permitted" in line, line
    assert "make sandbox" in line and "require = false" in line and "\n" not in line, line
    # The explicit opt-out runs, and says what is missing first.
    ev = DeviceEvaluator("cpu", {"trials": 2, "run_timeout_s": 30}, policy=Policy(require=False))
    try:
        missing = ev.sandbox_info()["missing"]
        assert "private /dev: tmpfs over /x: Operation not permitted" in missing, missing
        assert ev.sandbox_info()["confined"] is False
        assert "children run without part of the sandbox" in capfd.readouterr().err
    finally:
        ev.close()
