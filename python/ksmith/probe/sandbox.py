"""The sandboxed child process that runs one program.

The warm worker (torch imported once, one intra-op thread, no torch op run) forks for every
module::

    worker ──fork──> supervisor ──fork──> runner (PID 1 of a new PID namespace when permitted)

The **supervisor** starts a new session, joins the worker's pids cgroup (when one could be made),
forks the runner, waits for it with a wall-clock limit, kills it, and reports how it ended (exit
code or signal, CPU time of everything it ran) on its own pipe. The **runner**:

- works in a private temporary directory (cwd, ``HOME``, ``TMPDIR``, torch/triton caches);
- gets ``/dev/null`` as stdin and capped files as stdout/stderr (Python-level writes beyond the
  cap are dropped; native writes beyond ``RLIMIT_FSIZE`` fail with EFBIG);
- has a fixed seed, ``SIGALRM`` at the time limit and ``RLIMIT_CPU`` just after it;
- has ``RLIMIT_AS`` = its address space at fork + the memory limit (torch CPU works under it);
- has no network: the worker unshares its network namespace at start (only a down loopback
  remains), or, where that is not permitted, ``socket.socket`` refuses to connect;
- sees every mount read-only except its temporary directory, and a private ``/dev`` that holds
  only null, zero, full, random, urandom and an empty private ``shm`` (a new mount namespace;
  when not permitted, only the cwd/HOME/TMPDIR redirection holds, and writes elsewhere are NOT
  prevented);
- runs with every capability dropped and ``no_new_privs`` (uid 0 stays, but it cannot remount,
  raise its rlimits, load modules or bypass permissions);
- cannot fork-bomb the machine: its processes live in a PID namespace that the kernel tears down
  when the runner ends, and in a pids cgroup capped at ``max_processes`` where the cgroup
  hierarchy is writable; without either, the supervisor kills the session's process group
  (a process that calls ``setsid()`` escapes that).

The runner writes its result as one JSON document to a pipe; only the runner's own PID writes
it (forked copies of the runner do not). The worker reads both pipes with a deadline and kills
the supervisor when it passes.

Not guaranteed: code that targets this runner on purpose runs in the same process as the
result writer and can forge its result (the Rust side still checks ids and the protocol, and a
forged success carries no verified program); without a PID namespace, a process that calls
``setsid()`` escapes the final ``killpg`` and ``kill(-1)`` reaches every process of the user.
"""

from __future__ import annotations

import ctypes
import errno
import io
import json
import os
import resource
import select
import shutil
import signal
import socket
import sys
import tempfile
import time
from typing import Any

from ..confine import CLONE_NEWNET, CLONE_NEWNS, CLONE_NEWPID, confine_writes, drop_capabilities
from ..confine import unshare as _unshare
from .result import empty_result

PR_SET_PDEATHSIG = 1

RESULT_LIMIT = 32 << 20  # bytes of result JSON the worker accepts
GRACE_S = 3.0  # supervisor's wall limit past the runner's own alarm

_libc = ctypes.CDLL(None, use_errno=True)


def _pdeathsig() -> None:
    _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def _vm_size() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    return 0


class Sandbox:
    """Per-worker sandbox state: what isolation is available, and the pids cgroup."""

    def __init__(self, tmp_root: str, max_processes: int = 64):
        self.tmp_root = tmp_root
        self.max_processes = max_processes
        self.info: dict[str, Any] = {}
        self.cgroup: str | None = None
        os.makedirs(tmp_root, exist_ok=True)
        err = _unshare(CLONE_NEWNET)
        self.info["network_namespace"] = err is None
        if err:
            self.info["network_namespace_error"] = err
        self.info["pid_namespace"] = self._probe_unshare(CLONE_NEWPID)
        self.info["mount_namespace"] = self._probe_unshare(CLONE_NEWNS)
        self._make_cgroup()
        self.info["pids_cgroup"] = self.cgroup is not None

    @staticmethod
    def _probe_unshare(flag: int) -> bool:
        """Whether a child may unshare ``flag`` (tried in a throwaway child)."""
        pid = os.fork()
        if pid == 0:
            os._exit(0 if _unshare(flag) is None else 1)
        _, status = os.waitpid(pid, 0)
        return os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0

    @staticmethod
    def _remove_stale_cgroups(base: str) -> None:
        """Removes empty cgroups of workers that were killed before they could clean up."""
        try:
            names = [n for n in os.listdir(base) if n.startswith("ksmith-probe-")]
        except OSError:
            return
        for name in names:
            pid = name.rsplit("-", 1)[-1]
            if pid.isdigit() and not os.path.exists(f"/proc/{pid}"):
                try:
                    os.rmdir(os.path.join(base, name))
                except OSError:
                    pass

    def _make_cgroup(self) -> None:
        for base in ("/sys/fs/cgroup/pids", "/sys/fs/cgroup"):
            self._remove_stale_cgroups(base)
            path = os.path.join(base, f"ksmith-probe-{os.getpid()}")
            limit_file = os.path.join(path, "pids.max")
            try:
                if not os.path.isdir(base) or not os.access(base, os.W_OK):
                    continue
                os.mkdir(path)
                if not os.path.exists(limit_file):
                    os.rmdir(path)
                    continue
                with open(limit_file, "w") as f:
                    f.write(str(self.max_processes + 2))
                self.cgroup = path
                return
            except OSError:
                try:
                    os.rmdir(path)
                except OSError:
                    pass

    def close(self) -> None:
        """Removes the cgroup (it is empty once every child has ended)."""
        if self.cgroup:
            try:
                os.rmdir(self.cgroup)
            except OSError:
                pass
            self.cgroup = None

    # --- running one request ---------------------------------------------------------------

    def run(self, request: dict[str, Any], close_fds: list[int], runner) -> dict[str, Any]:
        """Runs ``runner(request)`` in a sandboxed child; returns the response fields."""
        timeout = float(request.get("timeout_s", 30.0))
        tmp = tempfile.mkdtemp(prefix="run-", dir=self.tmp_root)
        res_r, res_w = os.pipe()
        meta_r, meta_w = os.pipe()
        started = time.monotonic()
        pid = os.fork()
        if pid == 0:  # supervisor
            code = 70
            try:
                os.close(res_r)
                os.close(meta_r)
                for fd in close_fds:
                    try:
                        os.close(fd)
                    except OSError:
                        pass
                self._supervise(request, tmp, res_w, meta_w, timeout, runner)
                code = 0
            finally:
                os._exit(code)
        os.close(res_w)
        os.close(meta_w)
        result, meta, killed = _read_pipes(res_r, meta_r, started + timeout + GRACE_S + 5.0, pid)
        try:
            os.waitpid(pid, 0)
        except ChildProcessError:
            pass
        shutil.rmtree(tmp, ignore_errors=True)
        return assemble(result, meta, killed, timeout, time.monotonic() - started)

    def _supervise(self, request, tmp, res_w, meta_w, timeout, runner) -> None:
        _pdeathsig()
        os.setsid()
        if self.cgroup:
            try:
                with open(os.path.join(self.cgroup, "cgroup.procs"), "w") as f:
                    f.write(str(os.getpid()))
            except OSError:
                pass
        in_pid_ns = self.info.get("pid_namespace") and _unshare(CLONE_NEWPID) is None
        child = os.fork()
        if child == 0:  # runner
            status = 71
            try:
                os.close(meta_w)
                _run_child(request, tmp, res_w, timeout, self, runner)
                status = 0
            except BaseException:  # noqa: BLE001
                status = 72
            finally:
                os._exit(status)
        os.close(res_w)
        timed_out = False

        def on_alarm(signum, frame):
            raise TimeoutError

        signal.signal(signal.SIGALRM, on_alarm)
        signal.setitimer(signal.ITIMER_REAL, timeout + GRACE_S)
        status = None
        try:
            _, status = os.waitpid(child, 0)
            signal.setitimer(signal.ITIMER_REAL, 0)
        except TimeoutError:
            timed_out = True
            try:
                os.kill(child, signal.SIGKILL)
            except ProcessLookupError:
                pass
            _, status = os.waitpid(child, 0)
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        meta = {
            "timed_out": timed_out,
            "exit": os.WEXITSTATUS(status) if status is not None and os.WIFEXITED(status) else None,
            "signal": os.WTERMSIG(status) if status is not None and os.WIFSIGNALED(status) else None,
            "cpu_ms": (usage.ru_utime + usage.ru_stime) * 1000.0,
            "pid_namespace": bool(in_pid_ns),
        }
        data = json.dumps(meta).encode()
        os.write(meta_w, data)
        os.close(meta_w)
        if not in_pid_ns:
            # Everything left in the session's process group goes, the supervisor included.
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            try:
                os.killpg(0, signal.SIGKILL)
            except OSError:
                pass


def _read_pipes(res_r: int, meta_r: int, deadline: float, pid: int):
    """Reads the result and meta pipes until both close or ``deadline`` passes."""
    chunks = {res_r: [], meta_r: []}
    sizes = {res_r: 0, meta_r: 0}
    open_fds = [res_r, meta_r]
    killed = False
    while open_fds:
        left = deadline - time.monotonic()
        if left <= 0:
            killed = True
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            break
        ready, _, _ = select.select(open_fds, [], [], min(left, 1.0))
        for fd in ready:
            data = os.read(fd, 1 << 16)
            if not data:
                open_fds.remove(fd)
                continue
            if sizes[fd] < RESULT_LIMIT:
                chunks[fd].append(data)
            sizes[fd] += len(data)
    for fd in (res_r, meta_r):
        os.close(fd)
    result = b"".join(chunks[res_r]) if sizes[res_r] <= RESULT_LIMIT else None
    meta = b"".join(chunks[meta_r])
    return result, meta, killed


def assemble(result: bytes | None, meta_bytes: bytes, killed: bool, timeout: float, wall_s: float) -> dict[str, Any]:
    """The response fields from what the runner and the supervisor wrote."""
    try:
        meta = json.loads(meta_bytes.decode()) if meta_bytes else {}
    except ValueError:
        meta = {}
    parsed = None
    garbled = False
    if result:
        try:
            parsed = json.loads(result.decode())
            if not isinstance(parsed, dict) or "status" not in parsed:
                parsed, garbled = None, True
        except ValueError:
            garbled = True
    cpu_ms = float(meta.get("cpu_ms") or 0.0)
    if parsed is not None:
        parsed["cpu_time_ms"] = cpu_ms
        parsed["wall_ms"] = wall_s * 1000.0
        return parsed
    out = empty_result("crashed")
    out["cpu_time_ms"] = cpu_ms
    out["wall_ms"] = wall_s * 1000.0
    sig = meta.get("signal")
    if killed or meta.get("timed_out") or sig in (signal.SIGXCPU, signal.SIGALRM):
        out["status"] = "timeout"
        out["error_class"] = "Timeout"
        out["error_message"] = f"killed after the time limit of {timeout:g} s"
    elif garbled:
        out["error_class"] = "GarbledResult"
        out["error_message"] = "the runner's result was not valid JSON (the module wrote to it?)"
    elif sig is not None:
        name = signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else str(sig)
        out["error_class"] = name
        out["error_message"] = f"the process was killed by {name}"
        if sig == signal.SIGXFSZ:
            out["error_message"] += " (output file size limit)"
    elif meta.get("exit") is not None:
        out["error_class"] = "Exit"
        out["error_message"] = f"the process exited with code {meta['exit']} without a result"
    else:
        out["error_class"] = "NoResult"
        out["error_message"] = "the process ended without a result"
    return out


class _CappedText(io.TextIOBase):
    """A text stream that keeps the first ``cap`` bytes and drops the rest."""

    def __init__(self, fd: int, cap: int):
        self._fd = fd
        self._left = cap
        self.dropped = 0

    def writable(self) -> bool:
        return True

    def write(self, s: str) -> int:
        data = s.encode("utf-8", "replace")
        if self._left > 0:
            part = data[: self._left]
            try:
                os.write(self._fd, part)
            except OSError:
                self._left = 0
            self._left -= len(part)
            self.dropped += len(data) - len(part)
        else:
            self.dropped += len(data)
        return len(s)

    def flush(self) -> None:
        pass

    def fileno(self) -> int:
        return self._fd


def _no_network(*args, **kwargs):
    raise OSError(errno.ENETUNREACH, "network access is disabled in the ksmith probe sandbox")


def _run_child(request, tmp, res_w, timeout, sandbox: Sandbox, runner) -> None:
    me = os.getpid()
    _pdeathsig()
    # Files and environment.
    os.chdir(tmp)
    for key in (
        "HOME",
        "TMPDIR",
        "TMP",
        "TEMP",
        "TORCH_HOME",
        "XDG_CACHE_HOME",
        "TRITON_CACHE_DIR",
        "TORCHINDUCTOR_CACHE_DIR",
    ):
        os.environ[key] = tmp
    tempfile.tempdir = tmp
    cap = int(request.get("output_cap_bytes", 1 << 20))
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    for fd, name in ((1, "stdout.txt"), (2, "stderr.txt")):
        f = os.open(os.path.join(tmp, name), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(f, fd)
        os.close(f)
    sys.stdout = _CappedText(1, cap)
    sys.stderr = _CappedText(2, cap)
    problems = []
    if sandbox.info.get("mount_namespace"):
        err = confine_writes(tmp)
        if err:
            problems.append(err)
    if not sandbox.info.get("network_namespace"):
        socket.socket.connect = _no_network  # type: ignore[method-assign]
        socket.socket.connect_ex = _no_network  # type: ignore[method-assign]
        socket.create_connection = _no_network  # type: ignore[assignment]
    # Limits.
    memory = int(request.get("memory_mb", 4096)) << 20
    limit = _vm_size() + memory
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    cpu = int(timeout) + 2
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 2))
    resource.setrlimit(resource.RLIMIT_FSIZE, (cap, cap))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    err = drop_capabilities()
    if err:
        problems.append(err)
    if problems:
        sys.stderr.write("ksmith probe sandbox: " + "; ".join(problems) + "\n")

    from .execute import ProbeTimeout

    def on_alarm(signum, frame):
        raise ProbeTimeout()

    signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, timeout)
    result = runner(request)
    signal.setitimer(signal.ITIMER_REAL, 0)
    if os.getpid() != me:
        return  # a forked copy of the runner: never write a result
    data = json.dumps(result).encode()
    view = memoryview(data)
    while view:
        n = os.write(res_w, view)
        view = view[n:]
    os.close(res_w)
