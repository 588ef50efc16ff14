"""Starting and supervising a child process (reference or candidate).

Each child is forked from the worker's warm fork server (`forkserver`: torch and triton imported
once, no CUDA state), in a new session so the whole process group can be killed, with its own
workspace (a tmpfs where the worker runs inside the sandbox launcher, see
`ksmith.confine.Jail.workspace`), an environment of the allow-listed variables only
(`ksmith.confine.policy.ENV_PASSED`: no API key or token of the caller) plus its own folders, and
stdout/stderr going to a log file in its workspace (its messages use a private descriptor, see
`child_common`, sealed with a secret of its own, see `messages`). Its first act, before it loads
any program, is to confine itself with the `ksmith.confine.ChildSpec` the worker wrote into its
`config.json` (`child_common.enter_sandbox`): its own PID and network namespaces and `/proc`, its
workspace as the only writable place, the other children's workspaces hidden, a `/dev` with the
basic and the GPU nodes, its process limit, no capabilities, the child seccomp filter. A watchdog
thread polls the resident memory of the child's process tree and kills the tree past the limit;
every wait has a deadline after which the tree is killed (`timeout`). Stopping and continuing the
child (the GPU gate's pause) and killing it signal every process of its tree, not its process group
alone: a process of the tree that left the group (``setsid`` from native code) is reached too.

The worker (and the fork server) are non-dumpable (`ksmith.confine.set_undumpable`), so a child
running as the same user can neither ptrace them nor read their memory.
"""

from __future__ import annotations

import os
import queue
import secrets
import signal
import threading
import time
from collections.abc import Iterator

from ..confine import passed_env
from . import messages
from .forkserver import ForkServer

PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class ChildTimeout(Exception):
    """The child did not answer before its deadline (it has been killed)."""


class ChildDied(Exception):
    """The child exited without sending what was expected."""

    def __init__(self, message: str, log: str):
        super().__init__(message)
        self.log = log


class ChildForged(Exception):
    """A line on the child's channel that the harness did not write (the child has been killed)."""


def server_env(device: str) -> dict[str, str]:
    """The environment of the fork server (and so of every child): the allow-listed variables,
    the runtime package on the path, one intra-op thread unless ``KSMITH_CHILD_THREADS`` says
    otherwise, Triton's interpreter and no GPU on a CPU device."""
    env = passed_env()
    path = os.environ.get("PYTHONPATH")
    env["PYTHONPATH"] = PACKAGE_ROOT + (os.pathsep + path if path else "")
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["OMP_NUM_THREADS"] = env.get("KSMITH_CHILD_THREADS", "1")
    env["PYTORCH_NVML_BASED_CUDA_CHECK"] = "1"  # asking whether CUDA is there does not initialize it
    if device.startswith("cuda"):
        env.pop("TRITON_INTERPRET", None)
    else:
        env["TRITON_INTERPRET"] = "1"
        env["CUDA_VISIBLE_DEVICES"] = ""
    return env


def child_env(base: dict[str, str], workdir: str, extra: dict[str, str] | None = None) -> dict[str, str]:
    """A child's environment: the server's plus its own home, temporary and Triton folders."""
    env = dict(base)
    env["HOME"] = workdir
    env["TRITON_CACHE_DIR"] = os.path.join(workdir, "triton-cache")
    env["TRITON_HOME"] = workdir
    env["TMPDIR"] = os.path.join(workdir, "tmp")
    os.makedirs(env["TMPDIR"], exist_ok=True)
    env.update(extra or {})
    return env


#: Longest `kill_tree` waits for the tree to show as stopped before it kills it.
KILL_STOP_S = 0.5


def _tree(pid: int) -> Iterator[int]:
    """`pid` and its descendants, read from /proc's children lists as it goes (a process that
    ended on the way is skipped). A child has a PID namespace of its own, so an orphan of its
    tree is adopted by the namespace's first process and stays in the tree, whatever its
    session or process group."""
    todo = [pid]
    seen = set()
    while todo:
        p = todo.pop()
        if p in seen:
            continue
        seen.add(p)
        yield p
        try:
            for tid in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{tid}/children") as f:
                    todo.extend(int(c) for c in f.read().split())
        except (OSError, ValueError):
            continue


def _tree_rss_mb(pid: int) -> float:
    """Resident memory of `pid` and its descendants (outside the launcher's sandbox without
    root, a confined child runs as the child of a small supervisor, `ksmith.confine.mirror`)."""
    total = 0.0
    for p in _tree(pid):
        try:
            with open(f"/proc/{p}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1]) / 1024.0
                        break
        except (OSError, ValueError):
            continue
    return total


def signal_tree(pid: int, sig: signal.Signals) -> None:
    """`sig` to `pid`'s process group and to every process of its tree: a descendant that made a
    session or group of its own (``setsid``) is out of reach of the group's signal, and kept
    running its GPU work while the rest was stopped for another child's timing. The tree is read
    before any signal goes out (a process that dies first leaves its children to another parent,
    out of the tree)."""
    tree = list(_tree(pid))
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass
    for p in tree:
        try:
            os.kill(p, sig)
        except (ProcessLookupError, PermissionError):
            pass


def kill_tree(pid: int) -> None:
    """SIGKILL to `pid`'s process group and every process of its tree, stopped first (for at
    most `KILL_STOP_S`) so that none forks, or leaves the tree by its parent's death, while they
    are killed."""
    signal_tree(pid, signal.SIGSTOP)
    tree_stopped(pid, time.monotonic() + KILL_STOP_S)
    signal_tree(pid, signal.SIGKILL)


def _stopped(p: int) -> bool | None:
    """Whether every thread of `p` shows as stopped (or a zombie); None when `p` is gone."""
    try:
        for tid in os.listdir(f"/proc/{p}/task"):
            with open(f"/proc/{p}/task/{tid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] not in ("T", "t", "Z", "X"):
                    return False
    except (OSError, IndexError):
        return None
    return True


def tree_stopped(pid: int, deadline: float) -> bool:
    """Whether every thread of every process of `pid`'s tree showed as stopped by `deadline`
    (monotonic seconds; False too when `pid` is gone). A process still running meanwhile (one
    forked as the stop went out, or outside the group) is sent SIGSTOP again."""
    while True:
        running = []
        for p in _tree(pid):
            state = _stopped(p)
            if state is None and p == pid:
                return False
            if state is False:
                running.append(p)
        if not running:
            return True
        if time.monotonic() > deadline:
            return False
        for p in running:
            try:
                os.kill(p, signal.SIGSTOP)
            except (ProcessLookupError, PermissionError):
                pass
        time.sleep(0.001)


class Child:
    """One supervised child process speaking sealed JSON lines."""

    def __init__(
        self,
        forks: ForkServer,
        module: str,
        workdir: str,
        env: dict[str, str],
        memory_limit_mb: int,
        log_limit: int,
        pid_namespace: bool,
    ):
        """Forks `module` on `workdir` from `forks` (PID 1 of a PID namespace of its own when
        `pid_namespace`)."""
        self.forks = forks
        self.workdir = workdir
        self.log_path = os.path.join(workdir, "child.log")
        self.log_limit = log_limit
        self.memory_limit_mb = memory_limit_mb
        self.killed_for_memory = 0.0
        self.forged: str | None = None
        self.status: int | None = None
        secret = secrets.token_bytes(32)
        self._unsealer = messages.Unsealer(secret)
        cmd_r, cmd_w = os.pipe()
        msg_r, msg_w = os.pipe()
        log = os.open(self.log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            self.pid = forks.fork(module, workdir, env, secret, [cmd_r, msg_w, log], pid_namespace)
        except BaseException:
            for fd in (cmd_w, msg_r):
                os.close(fd)
            raise
        finally:
            for fd in (cmd_r, msg_w, log):
                os.close(fd)
        self._stdin = os.fdopen(cmd_w, "wb", buffering=0)
        self._stdout = os.fdopen(msg_r, "rb")
        self.messages: queue.Queue[messages.Message | None] = queue.Queue()
        self._ended = threading.Event()
        self._pause_lock = threading.Lock()
        self._paused_since: float | None = None
        self._paused_s = 0.0
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._watch, daemon=True).start()

    def _read(self) -> None:
        for raw in self._stdout:
            if self.forged:
                continue
            try:
                self.messages.put(self._unsealer.open(raw.rstrip(b"\n")))
            except messages.BadMessage as e:
                self.forged = str(e)
                self.kill()
                self.messages.put(None)
        self._stdout.close()
        self.messages.put(None)

    def _watch(self) -> None:
        """Waits for the end (the fork server reports it), killing the group past the memory
        limit meanwhile."""
        while True:
            status = self.forks.wait(self.pid, 0.02)
            if status is not None:
                self.status = status
                self._ended.set()
                return
            if self.memory_limit_mb and not self.killed_for_memory:
                rss = _tree_rss_mb(self.pid)
                if rss > self.memory_limit_mb:
                    self.killed_for_memory = rss
                    self.kill()

    def pause(self) -> None:
        """Stops the child's process group and every process of its tree (SIGSTOP,
        `signal_tree`; the GPU gate, for another child's timing). A signal is delivered
        asynchronously: `settle` waits until it took effect."""
        with self._pause_lock:
            if self._paused_since is None and not self._ended.is_set():
                signal_tree(self.pid, signal.SIGSTOP)
                self._paused_since = time.monotonic()

    def settle(self, deadline: float) -> bool:
        """Waits until every thread of every process of a paused child's tree shows as stopped
        (or `deadline`, monotonic seconds), so that it issues no GPU work afterwards; whether it
        did (True for a child that is not paused or has ended: it issues nothing)."""
        if self._paused_since is None or self._ended.is_set():
            return True
        return tree_stopped(self.pid, deadline) or self._ended.is_set()

    def resume(self) -> None:
        """Continues the tree `pause` stopped (SIGCONT; nothing is signalled once the child ended:
        its pid may be another process's by then)."""
        with self._pause_lock:
            if self._paused_since is not None:
                if not self._ended.is_set():
                    signal_tree(self.pid, signal.SIGCONT)
                self._paused_s += time.monotonic() - self._paused_since
                self._paused_since = None

    def paused_s(self) -> float:
        """Seconds the child has been stopped by `pause` so far (a pause in progress included)."""
        with self._pause_lock:
            now = time.monotonic() - self._paused_since if self._paused_since is not None else 0.0
            return self._paused_s + now

    def receive(self, timeout_s: float) -> messages.Message:
        """The next message; kills the child and raises on timeout, death or forgery. Time the
        child spends stopped (`pause`) does not count against `timeout_s`."""
        timeout_s = max(timeout_s, 0.01)
        deadline = time.monotonic() + timeout_s
        paused_at_start = self.paused_s()
        while True:
            left = deadline + (self.paused_s() - paused_at_start) - time.monotonic()
            if left <= 0:
                self.kill()
                raise ChildTimeout(f"no answer within {timeout_s:.2f} s")
            try:
                msg = self.messages.get(timeout=min(left, 0.5))
                break
            except queue.Empty:
                continue
        if self.forged:
            raise ChildForged(self.forged)
        if msg is None:
            self.messages.put(None)  # every later receive sees the end too
            self._ended.wait(10.0)
            raise ChildDied(self.describe_exit(self.status), self.log_tail())
        return msg

    def describe_exit(self, status: int | None) -> str:
        if self.killed_for_memory:
            return (
                f"memory limit exceeded: resident memory {self.killed_for_memory:.0f} MiB > {self.memory_limit_mb} "
                "MiB (process killed)"
            )
        if status is None:
            return "the process closed its channel before reporting"
        code = os.waitstatus_to_exitcode(status)
        if code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = str(-code)
            return f"the process died with signal {name}"
        return f"the process exited with code {code} before reporting"

    def command(self, text: str) -> None:
        try:
            self._stdin.write((text + "\n").encode())
        except (BrokenPipeError, OSError, ValueError):
            pass

    def kill(self) -> None:
        """SIGKILL to the child's process group and, while the child runs, to every process of
        its tree (`kill_tree`: also one that left the group); once it ended, to what is left of
        its group only (its pid may be another process's by then)."""
        if not self._ended.is_set():
            kill_tree(self.pid)
            return
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass

    def finish(self, timeout_s: float = 10.0) -> None:
        """Closes its stdin (a waiting child reads `stop`), waits for its end (killing the group
        after `timeout_s`)."""
        try:
            self._stdin.close()
        except OSError:
            pass
        if self._paused_since is not None:
            self.kill()  # stopped for another child's timing: it would not read its end
        if not self._ended.wait(timeout_s):
            self.kill()
            self._ended.wait(30.0)
        self.kill()  # what is left of its process group

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
