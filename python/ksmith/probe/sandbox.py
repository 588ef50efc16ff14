"""The sandboxed child process that runs one program.

The warm worker (torch imported once, one intra-op thread, no torch op run) runs inside the
launcher's bubblewrap sandbox (`ksmith.confine.launch`) and forks once for every module::

    worker ──fork──> runner (PID 1 of a new PID namespace)

The worker gives each module a workspace (a tmpfs of ``[sandbox] disk_mb``), a pids cgroup where
one can be made and a PID namespace of its own (`ksmith.confine.Jail`), waits for the runner with
a wall-clock limit, kills it, and reads how it ended (exit code or signal, CPU time). The
**runner** starts a new session and confines itself before the program is loaded
(`ksmith.confine.enter`, see `ksmith.confine.child`):

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
it (forked copies of the runner do not). The worker reads the pipe with a deadline and kills the
runner's process group when it passes (the PID namespace takes everything else with it). What
could not be set up is in the worker's hello (``sandbox.missing``); with ``[sandbox] require``
the worker does not start instead.

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

from ..confine import Jail, Limits, Policy, SandboxError, die_with_parent, enter, mirror
from . import DEFAULTS
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
        timeout = float(request.get("timeout_s", DEFAULTS["timeout_s"]))
        cap = int(request.get("output_cap_bytes", DEFAULTS["output_cap_bytes"]))
        own = resource.getrusage(resource.RUSAGE_SELF)
        limits = Limits(processes=self.policy.max_processes, cpu_s=int(timeout) + 2, file_bytes=cap)
        with self.jail.workspace() as tmp:
            spec = self.jail.spec(tmp, limits)
            res_r, res_w = os.pipe()
            started = time.monotonic()
            with self.jail.new_pid_namespace():
                pid = os.fork()
            if pid == 0:
                os.close(res_r)
                _child(request, spec, res_w, close_fds, timeout, runner)
            os.close(res_w)
            result, meta = _wait(pid, res_r, started + timeout + GRACE_S)
            self.jail.release(spec)
        after = resource.getrusage(resource.RUSAGE_SELF)
        meta["worker_cpu_ms"] = (after.ru_utime + after.ru_stime - own.ru_utime - own.ru_stime) * 1000.0
        return assemble(result, meta, meta["timed_out"], timeout, time.monotonic() - started)


def _child(request, spec, res_w, close_fds, timeout, runner) -> None:
    """The runner: confines itself (`ksmith.confine.enter`), runs the request, writes the result
    and exits. Never returns."""
    status = 71
    try:
        for fd in close_fds:
            try:
                os.close(fd)
            except OSError:
                pass
        die_with_parent()
        os.setsid()  # its own process group, killed as a whole where no PID namespace holds it
        try:
            iso = enter(spec)
        except SandboxError as e:  # before any program code
            out = empty_result("crashed")
            out["error_class"] = "SandboxError"
            out["error_message"] = f"the sandbox could not be set up: {e}"[:2000]
            _write_all(res_w, json.dumps(out).encode())
            status = 0
            return
        if iso.pid:
            mirror(iso)  # outside the sandbox without root: the confined process is a child
        _run_child(request, spec.workdir, res_w, timeout, runner, iso.problems)
        status = 0
    except BaseException:  # noqa: BLE001
        status = 72
    finally:
        os._exit(status)


def _wait(pid: int, res_r: int, deadline: float) -> tuple[bytes | None, dict[str, Any]]:
    """Reads the result pipe until the child ends, killing it (and its process group) at
    ``deadline``; returns the result and how the child ended."""
    chunks: list[bytes] = []
    size = 0
    timed_out = False
    pidfd = os.pidfd_open(pid)
    watched = [res_r, pidfd]
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                timed_out = True
                _kill(pid)
                break
            ready, _, _ = select.select(watched, [], [], min(left, 1.0))
            if res_r in ready:
                data = os.read(res_r, 1 << 16)
                if not data:
                    watched.remove(res_r)
                elif size < RESULT_LIMIT:
                    chunks.append(data)
                size += len(data)
            elif pidfd in ready:
                # Ended: take what is left without waiting for copies that may hold the pipe.
                os.set_blocking(res_r, False)
                while res_r in watched:
                    try:
                        data = os.read(res_r, 1 << 16)
                    except BlockingIOError:
                        break
                    if not data:
                        break
                    if size < RESULT_LIMIT:
                        chunks.append(data)
                    size += len(data)
                break
    finally:
        os.close(pidfd)
        os.close(res_r)
    _kill(pid)  # what is left of its process group (a zombie leader keeps the group's id)
    _, status, usage = os.wait4(pid, 0)
    meta = {
        "timed_out": timed_out,
        "exit": os.WEXITSTATUS(status) if os.WIFEXITED(status) else None,
        "signal": os.WTERMSIG(status) if os.WIFSIGNALED(status) else None,
        "cpu_ms": (usage.ru_utime + usage.ru_stime) * 1000.0,
    }
    return (b"".join(chunks) if size <= RESULT_LIMIT else None), meta


def _kill(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def assemble(result: bytes | None, meta: dict[str, Any], killed: bool, timeout: float, wall_s: float) -> dict[str, Any]:
    """The response fields from what the runner wrote and how it ended (``meta``: timed_out,
    exit, signal, cpu_ms)."""
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
        # Set-up: what the child and the worker spent besides the runner's own work (fork,
        # confinement, copy-on-write faults, exit, workspace and cgroup).
        runner = float(parsed.get("runner_cpu_ms") or 0.0)
        parsed["setup_cpu_ms"] = max(0.0, cpu_ms - runner) + float(meta.get("worker_cpu_ms") or 0.0)
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
    cap = int(request.get("output_cap_bytes", DEFAULTS["output_cap_bytes"]))
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
    memory = int(request.get("memory_mb", DEFAULTS["memory_mb"])) << 20
    limit = _vm_size() + memory
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    if problems:
        sys.stderr.write("ksmith probe sandbox: " + "; ".join(problems) + "\n")

    from .loading import ProbeTimeout

    def on_alarm(signum, frame):
        raise ProbeTimeout()

    signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, timeout)
    started = time.process_time()
    result = runner(request)
    signal.setitimer(signal.ITIMER_REAL, 0)
    result["runner_cpu_ms"] = (time.process_time() - started) * 1000.0
    if os.getpid() != me:
        return  # a forked copy of the runner: never write a result
    _write_all(res_w, json.dumps(result).encode())


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]
    os.close(fd)
