"""The sandbox's parts on their own: the seccomp filters, the policy, the launcher's view and its
answer when bubblewrap is missing (the hostile programs run end to end in test_eval_sandbox.py
and crates/ksmith-probe/tests/probe/sandbox.rs)."""

from __future__ import annotations

import ctypes
import json
import os
import struct
import subprocess
import sys

import pytest
from ksmith.confine import Policy, launch, seccomp
from ksmith.confine.policy import REFUSAL
from ksmith.confine.syscalls import CLONE_NEWUSER, PR_SET_NO_NEW_PRIVS, install_seccomp, prctl, unshare
from sandboxed import PYTHON_DIR, SECRETS


def in_child(check) -> str:
    """Runs `check()` (returns a text) in a forked process; its answer."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            answer = check()
        except BaseException as e:  # noqa: BLE001 - reported to the test
            answer = f"{type(e).__name__}: {e}"
        os.write(w, answer.encode())
        os._exit(0)
    os.close(w)
    with os.fdopen(r) as f:
        answer = f.read()
    os.waitpid(pid, 0)
    return answer


def test_filters_compile_for_both_architectures_and_jumps_stay_in_range():
    for machine in ("x86_64", "aarch64"):
        for kind in ("child", "worker"):
            program = seccomp.compile_filter(kind, machine)
            assert program and len(program) % 8 == 0
            records = [struct.unpack("<HBBI", program[i : i + 8]) for i in range(0, len(program), 8)]
            assert records[-1] == (0x06, 0, 0, seccomp.RET_KILL_PROCESS)
            for i, (code, jt, jf, _) in enumerate(records):
                if code & 0x07 == 0x05:  # a jump stays inside the program
                    assert i + 1 + max(jt, jf) < len(records)
    assert seccomp.compile_filter("child", "riscv64") is None
    with pytest.raises(ValueError):
        seccomp.compile_filter("everything")


def test_the_child_filter_refuses_namespaces_mounts_and_tracing_but_not_threads_or_processes():
    def check() -> str:
        assert prctl(PR_SET_NO_NEW_PRIVS, 1) is None
        assert install_seccomp(seccomp.compile_filter("child")) is None
        libc = ctypes.CDLL(None, use_errno=True)
        out = [f"user namespace: {unshare(CLONE_NEWUSER)}"]
        out.append(f"ptrace: {os.strerror(ctypes.get_errno()) if libc.ptrace(0, 0, 0, 0) else 'done'}")
        out.append(f"mount: {os.strerror(ctypes.get_errno()) if libc.mount(b'x', b'/', b'tmpfs', 0, None) else 'done'}")
        done = subprocess.run([sys.executable, "-c", "import threading; t = threading.Thread(target=print); t.start()"])
        out.append(f"a process with a thread: exit {done.returncode}")
        return "; ".join(out)

    assert in_child(check) == (
        "user namespace: Operation not permitted; ptrace: Operation not permitted; mount: Operation not permitted; "
        "a process with a thread: exit 0"
    )


def test_the_worker_filter_refuses_user_namespaces_that_are_allowed_without_it():
    assert in_child(lambda: str(unshare(CLONE_NEWUSER))) == "None"

    def filtered() -> str:
        prctl(PR_SET_NO_NEW_PRIVS, 1)
        assert install_seccomp(seccomp.compile_filter("worker")) is None
        return str(unshare(CLONE_NEWUSER))

    assert in_child(filtered) == "Operation not permitted"


def test_a_policy_names_unknown_keys_and_leaves_the_environment_with_its_variable(monkeypatch):
    with pytest.raises(ValueError, match="unknown sandbox policy keys: disk"):
        Policy.from_json('{"disk": 1}')
    monkeypatch.setenv("KSMITH_SANDBOX", Policy(disk_mb=99, outer="bwrap").to_json())
    monkeypatch.setenv("PWD", "/tmp/x")
    policy = Policy.take_from_env()
    assert (policy.disk_mb, policy.outer) == (99, "bwrap")
    assert "KSMITH_SANDBOX" not in os.environ and "PWD" not in os.environ


def test_the_view_holds_the_environment_outside_usr_without_nesting():
    paths = launch.python_paths()
    assert all(not p.startswith("/usr/") for p in paths), paths
    assert os.path.realpath(sys.prefix) in paths or sys.prefix.startswith("/usr"), paths
    for p in paths:
        assert not any(p != q and p.startswith(q + "/") for q in paths), paths


def launched(policy: dict, code: str, **env_over: str) -> subprocess.CompletedProcess:
    env = {**os.environ, **SECRETS, "PYTHONPATH": PYTHON_DIR, **env_over}
    env.pop("KSMITH_BWRAP", None)
    return subprocess.run(
        [sys.executable, "-s", "-m", "ksmith.confine", "--policy", json.dumps(policy), "--", "-c", code],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def refusal_line(done: subprocess.CompletedProcess) -> str:
    """The launcher's one line of a refusal (exit 78, nothing ran)."""
    assert done.returncode == 78, done
    assert "ran" not in done.stdout
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(REFUSAL), done.stderr
    return lines[0]


def test_by_default_a_wrong_bubblewrap_path_refuses_before_anything_runs():
    line = refusal_line(launched({"bwrap": "/nonexistent/bwrap"}, "print('ran')"))
    assert "bubblewrap is not at /nonexistent/bwrap ([sandbox] bwrap or KSMITH_BWRAP)" in line, line
    assert "`make sandbox`, or Debian's `bubblewrap` package" in line, line
    assert "[sandbox] require = false" in line, line


def test_by_default_a_machine_without_bubblewrap_refuses_and_says_how_to_install_it(tmp_path):
    # No bwrap on PATH and none unpacked under this HOME's cache.
    done = launched({}, "print('ran')", PATH=str(tmp_path), HOME=str(tmp_path))
    line = refusal_line(done)
    assert "bubblewrap (bwrap) is not installed; install bubblewrap: `make sandbox`" in line, line
    assert "Debian's `bubblewrap` package" in line, line


def test_the_explicit_opt_out_warns_before_running_and_still_drops_secrets(tmp_path):
    code = "import json, os; print(json.dumps(sorted(os.environ)))"
    done = launched({"require": False, "bwrap": "/nonexistent/bwrap", "scratch": str(tmp_path)}, code)
    assert done.returncode == 0, done
    assert (
        "WARNING: running without the filesystem sandbox, as [sandbox] require = false asks: "
        "bubblewrap is not at /nonexistent/bwrap" in done.stderr
    ), done.stderr
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert not set(SECRETS) & set(seen), seen
    assert "KSMITH_SANDBOX" in seen  # the worker learns what is missing
