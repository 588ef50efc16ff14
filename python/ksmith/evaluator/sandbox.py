"""Spawning and supervising a child process (reference or candidate).

Each child is a fresh `python -m ...` process (fork + exec: no CUDA state is ever inherited), in a
new session so the whole process group can be killed, with its own workspace (a tmpfs where the
worker runs inside the sandbox launcher, see `ksmith.confine.Jail.workspace`), an environment of
the allow-listed variables only (`ksmith.confine.policy.ENV_PASSED`: no API key or token of the caller)
plus its own folders, and stdout/stderr going to a log file in its workspace (its messages use a
private descriptor, see `child_common`). Its first act, before it loads any program, is to confine
itself with the `ksmith.confine.ChildSpec` the worker wrote into its `config.json`
(`child_common.enter_sandbox`): its own PID and network namespaces and `/proc`, its workspace as
the only writable place, the other children's workspaces hidden, a `/dev` with the basic and the
GPU nodes, its process limit, no capabilities, the child seccomp filter. A watchdog thread polls
the resident memory of the child's process tree and kills the group past the limit; every wait
has a deadline after which the group is killed (`timeout`).

The worker itself is made non-dumpable (`ksmith.confine.set_undumpable`), so a child running
as the same user cannot ptrace it or read its memory (which holds the reference outputs).
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from typing import Any

from ..confine import passed_env
from . import messages

PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class ChildTimeout(Exception):
    """The child did not answer before its deadline (it has been killed)."""


class ChildDied(Exception):
    """The child exited without sending what was expected."""

    def __init__(self, message: str, log: str):
        super().__init__(message)
        self.log = log


def _tree_rss_mb(pid: int) -> float:
    """Resident memory of `pid` and its descendants (outside the launcher's sandbox without
    root, a confined child runs as the child of a small supervisor, `ksmith.confine.mirror`)."""
    total = 0.0
    todo = [pid]
    seen = set()
    while todo:
        p = todo.pop()
        if p in seen:
            continue
        seen.add(p)
        try:
            with open(f"/proc/{p}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1]) / 1024.0
                        break
            for tid in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{tid}/children") as f:
                    todo.extend(int(c) for c in f.read().split())
        except (OSError, ValueError):
            continue
    return total


class Child:
    """One supervised child process speaking JSON lines."""

    def __init__(
        self,
        module: str,
        workdir: str,
        device: str,
        memory_limit_mb: int,
        log_limit: int,
        extra_env: dict[str, Any] | None = None,
        namespace: contextlib.AbstractContextManager | None = None,
    ):
        """Starts `module`; `namespace` wraps the spawn (`ksmith.confine.Jail.new_pid_namespace`
        makes the child PID 1 of a PID namespace of its own)."""
        self.workdir = workdir
        self.log_path = os.path.join(workdir, "child.log")
        self.log_limit = log_limit
        self.memory_limit_mb = memory_limit_mb
        self.killed_for_memory = 0.0
        env = passed_env()
        path = os.environ.get("PYTHONPATH")
        env["PYTHONPATH"] = PACKAGE_ROOT + (os.pathsep + path if path else "")
        env["HOME"] = workdir
        env["TRITON_CACHE_DIR"] = os.path.join(workdir, "triton-cache")
        env["TRITON_HOME"] = workdir
        env["TMPDIR"] = os.path.join(workdir, "tmp")
        os.makedirs(env["TMPDIR"], exist_ok=True)
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        env["OMP_NUM_THREADS"] = env.get("KSMITH_CHILD_THREADS", "1")
        if device.startswith("cuda"):
            env.pop("TRITON_INTERPRET", None)
        else:
            env["TRITON_INTERPRET"] = "1"
            env["CUDA_VISIBLE_DEVICES"] = ""
        env.update(extra_env or {})
        self._log = open(self.log_path, "wb")
        with namespace or contextlib.nullcontext():
            self.proc = subprocess.Popen(
                [sys.executable, "-s", "-m", module, workdir],
                cwd=workdir,
                env=env,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=self._log,
                start_new_session=True,
                close_fds=True,
            )
        self.messages: queue.Queue[messages.Message | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._watch_memory, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            try:
                obj = json.loads(raw.decode("utf-8", "replace"))
            except ValueError:
                continue
            if isinstance(obj, dict):
                self.messages.put(messages.read(obj))
        self.messages.put(None)

    def _watch_memory(self) -> None:
        while self.proc.poll() is None:
            rss = _tree_rss_mb(self.proc.pid)
            if self.memory_limit_mb and rss > self.memory_limit_mb:
                self.killed_for_memory = rss
                self.kill()
                return
            time.sleep(0.02)

    def receive(self, timeout_s: float) -> messages.Message:
        """The next message; kills the child and raises on timeout or death."""
        try:
            msg = self.messages.get(timeout=max(timeout_s, 0.01))
        except queue.Empty:
            self.kill()
            raise ChildTimeout(f"no answer within {timeout_s:.0f} s") from None
        if msg is None:
            code = self.proc.wait()
            raise ChildDied(self.describe_exit(code), self.log_tail())
        return msg

    def describe_exit(self, code: int) -> str:
        if self.killed_for_memory:
            return (
                f"memory limit exceeded: resident memory {self.killed_for_memory:.0f} MiB > {self.memory_limit_mb} "
                "MiB (process killed)"
            )
        if code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = str(-code)
            return f"the process died with signal {name}"
        return f"the process exited with code {code} before reporting"

    def command(self, text: str) -> None:
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.write((text + "\n").encode())
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            pass

    def kill(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass

    def finish(self, timeout_s: float = 10.0) -> None:
        """Closes its stdin (a waiting child reads `stop`), waits for exit (killing the group
        after `timeout_s`) and reaps it."""
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            pass
        self.kill()
        self.proc.wait()
        self._log.close()

    def log_tail(self) -> str:
        try:
            with open(self.log_path, "rb") as f:
                f.seek(0, os.SEEK_END)
                size = f.tell()
                f.seek(max(0, size - self.log_limit))
                text = f.read().decode("utf-8", "replace")
                return ("...\n" if size > self.log_limit else "") + text
        except OSError:
            return ""
