"""The sandboxed child process that runs one program.

The warm worker (torch imported once, one intra-op thread, no torch op run) runs inside the
launcher's bubblewrap sandbox (`ksmith.confine.launch`) and forks for every module::

    worker ──fork──> supervisor ──fork──> runner (PID 1 of a new PID namespace)

The worker gives each module a workspace (a tmpfs of ``[sandbox] disk_mb``) and a pids cgroup
where one can be made (`ksmith.confine.Jail`). The **supervisor** starts a new session, joins the
cgroup, unshares the namespaces and forks the runner (`ksmith.confine.enter`), waits for it with
a wall-clock limit, kills it, and reports how it ended (exit code or signal, CPU time of
everything it ran) on its own pipe. The **runner** confines itself before the program is
loaded (see `ksmith.confine.child`):

- a fresh ``/proc`` of its own PID namespace: no other module, no worker is visible, and the
  kernel kills everything it started when it ends;
- its workspace as the only writable place (cwd, ``HOME``, ``TMPDIR``, torch/triton caches,
  ``/dev/shm``), the other workspaces hidden, every other mount read-only;
- no network (a network namespace of its own), a ``/dev`` with only null, zero, full, random,
  urandom;
- ``/dev/null`` as stdin and capped files as stdout/stderr (Python-level writes beyond the cap
  are dropped; native writes beyond ``RLIMIT_FSIZE`` fail with EFBIG);
- a fixed seed, ``SIGALRM`` at the time limit and ``RLIMIT_CPU`` just after it, ``RLIMIT_AS`` =
  its address space at fork + the memory limit (torch CPU works under it), at most
  ``max_processes`` processes (pids cgroup, else RLIMIT_NPROC);
- no capabilities, ``no_new_privs`` and the child seccomp filter (no mount, no new namespaces,
  no ptrace...).

The runner writes its result as one JSON document to a pipe; only the runner's own PID writes
it (forked copies of the runner do not). The worker reads both pipes with a deadline and kills
the supervisor when it passes. What could not be set up is in the worker's hello
(``sandbox.missing``); with ``[sandbox] require`` the worker does not start instead.

Not guaranteed: code that targets this runner on purpose runs in the same process as the
result writer and can forge its result (the Rust side still checks ids and the protocol, and a
forged success carries no verified program).
"""

from __future__ import annotations

import io
import json
import os
import resource
import select
import signal
import sys
import tempfile
import time
from typing import Any

from ..confine import Jail, Limits, Policy, SandboxError, die_with_parent, enter
from .result import empty_result

RESULT_LIMIT = 32 << 20  # bytes of result JSON the worker accepts
GRACE_S = 3.0  # supervisor's wall limit past the runner's own alarm


def _vm_size() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    return 0


class Sandbox:
    """Per-worker sandbox state: the `Jail` (what isolation is available) and its policy."""

    def __init__(self, policy: Policy):
        self.policy = policy
        self.jail = Jail(policy)
        self.info: dict[str, Any] = self.jail.info

    def close(self) -> None:
        """Removes what the jail made (its own cgroup folder)."""
        self.jail.close()

    # --- running one request ---------------------------------------------------------------

    def run(self, request: dict[str, Any], close_fds: list[int], runner) -> dict[str, Any]:
        """Runs ``runner(request)`` in a sandboxed child; returns the response fields."""
        timeout = float(request.get("timeout_s", 30.0))
        cap = int(request.get("output_cap_bytes", 1 << 20))
        limits = Limits(processes=self.policy.max_processes, cpu_s=int(timeout) + 2, file_bytes=cap)
        with self.jail.workspace() as tmp:
            spec = self.jail.spec(tmp, limits)
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
                    self._supervise(request, spec, res_w, meta_w, timeout, runner)
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
            self.jail.release(spec)
        return assemble(result, meta, killed, timeout, time.monotonic() - started)

    def _supervise(self, request, spec, res_w, meta_w, timeout, runner) -> None:
        die_with_parent()
        os.setsid()
        try:
            iso = enter(spec)
        except SandboxError as e:  # raised in the runner only, before any program code
            out = empty_result("crashed")
            out["error_class"] = "SandboxError"
            out["error_message"] = f"the sandbox could not be set up: {e}"[:2000]
            _write_all(res_w, json.dumps(out).encode())
            os._exit(0)
        if iso.pid == 0:  # runner
            status = 71
            try:
                os.close(meta_w)
                _run_child(request, spec.workdir, res_w, timeout, runner, iso.problems)
                status = 0
            except BaseException:  # noqa: BLE001
                status = 72
            finally:
                os._exit(status)
        child = iso.pid
        in_pid_ns = not any(p.startswith("PID namespace") for p in iso.problems)
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
            "pid_namespace": in_pid_ns,
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


def _run_child(request, tmp, res_w, timeout, runner, problems: list[str]) -> None:
    me = os.getpid()
    # Files and environment (the runner is already confined to `tmp`, see `Sandbox`).
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
    # Memory: the address space at fork (torch's mappings) plus the module's allowance.
    memory = int(request.get("memory_mb", 4096)) << 20
    limit = _vm_size() + memory
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
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
    _write_all(res_w, json.dumps(result).encode())


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]
    os.close(fd)
