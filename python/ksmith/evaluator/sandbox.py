"""Spawning and supervising a child process (reference or candidate).

Each child is a fresh `python -m ...` process (fork + exec: no CUDA state is ever inherited), in a
new session so the whole process group can be killed, in a new network namespace where this
process may create one (root: no network at all, see `network_isolation`), with its own working
directory, temporary folder and Triton cache, stdout/stderr going to a log file (its messages
use a private descriptor, see `child_common`). Where this process may create mount namespaces
(`mount_isolation`), the child confines itself before it loads any program (see
`child_common.enter_sandbox` and `ksmith.confine`): only its own folder is writable, the other
children's folders are hidden, `/dev` holds only the basic and the GPU nodes, and it has no
capabilities. A watchdog thread polls the child's resident memory and kills the group past the
limit; every wait has a deadline after which the group is killed (`timeout`).

The worker itself is made non-dumpable (`ksmith.confine.set_undumpable`), so a child running
as the same user cannot ptrace it or read its memory (which holds the reference outputs).
"""

from __future__ import annotations

import functools
import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import threading
import time

PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class ChildTimeout(Exception):
    """The child did not answer before its deadline (it has been killed)."""


class ChildDied(Exception):
    """The child exited without sending what was expected."""

    def __init__(self, message: str, log: str):
        super().__init__(message)
        self.log = log


@functools.lru_cache(maxsize=1)
def network_isolation() -> list[str]:
    """The command prefix that starts a child in a new network namespace (`unshare --net`), or
    an empty list where this process may not create one (not root, no unshare). A child in its
    own namespace has only a downed loopback: no network at all. Checked once per process."""
    tool = shutil.which("unshare")
    if tool is None or os.geteuid() != 0:
        return []
    try:
        ok = subprocess.run([tool, "--net", "--", "true"], capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.SubprocessError):
        ok = False
    return [tool, "--net", "--"] if ok else []


@functools.lru_cache(maxsize=4)
def mount_isolation(device: str) -> bool:
    """Whether children on `device` can confine themselves: this process is root and a forked
    child could carry out the children's own confinement (`child_common.confine`) on a
    throwaway folder. Where it cannot (no root, or a container that forbids mounts), children
    run without it and one line on stderr says why. Checked once per process and device."""
    if os.geteuid() != 0:
        return False
    import tempfile

    from .child_common import confine

    root = tempfile.mkdtemp(prefix="ksmith-confine-check-")
    inner = tempfile.mkdtemp(dir=root)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            err = confine(inner, device)
            if err is None:
                with open(os.path.join(inner, "probe"), "w") as f:
                    f.write("ok")
        except BaseException as e:  # noqa: BLE001 - reported to the parent
            err = f"{type(e).__name__}: {e}"
        os.write(w, (err or "").encode()[:4000])
        os._exit(0 if err is None else 1)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        err = f.read().decode("utf-8", "replace")
    _, status = os.waitpid(pid, 0)
    shutil.rmtree(root, ignore_errors=True)
    ok = os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    if not ok:
        print(
            f"ksmith evaluator: children cannot be confined here ({err or 'the check died'}); they run without the "
            "mount sandbox",
            file=sys.stderr,
            flush=True,
        )
    return ok


@functools.lru_cache(maxsize=1)
def ensure_gpu_nodes() -> None:
    """Initializes the CUDA driver once in a throwaway process, so that every NVIDIA device
    node (`nvidia-uvm` appears on first use) exists before a confined child copies the list of
    nodes into its private `/dev` (where it could not create one)."""
    try:
        subprocess.run(
            [sys.executable, "-c", "import ctypes; ctypes.CDLL('libcuda.so.1').cuInit(0)"],
            capture_output=True,
            timeout=60,
        )
    except (OSError, subprocess.SubprocessError):
        pass


def _rss_mb(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return 0.0


class Child:
    """One supervised child process speaking JSON lines."""

    def __init__(
        self,
        module: str,
        workdir: str,
        device: str,
        memory_limit_mb: int,
        log_limit: int,
        extra_env: dict | None = None,
    ):
        self.workdir = workdir
        self.log_path = os.path.join(workdir, "child.log")
        self.log_limit = log_limit
        self.memory_limit_mb = memory_limit_mb
        self.killed_for_memory = 0.0
        env = {k: v for k, v in os.environ.items() if not k.startswith("KSMITH_WORKER")}
        env["PYTHONPATH"] = PACKAGE_ROOT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
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
        # `unshare` execs the interpreter in place, so the pid (and the kill) stay the child's.
        self.proc = subprocess.Popen(
            network_isolation() + [sys.executable, "-s", "-m", module, workdir],
            cwd=workdir,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            start_new_session=True,
            close_fds=True,
        )
        self.messages: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._watch_memory, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            try:
                msg = json.loads(raw.decode("utf-8", "replace"))
                if isinstance(msg, dict):
                    self.messages.put(msg)
            except ValueError:
                continue
        self.messages.put(None)

    def _watch_memory(self) -> None:
        while self.proc.poll() is None:
            rss = _rss_mb(self.proc.pid)
            if self.memory_limit_mb and rss > self.memory_limit_mb:
                self.killed_for_memory = rss
                self.kill()
                return
            time.sleep(0.02)

    def receive(self, timeout_s: float) -> dict:
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
