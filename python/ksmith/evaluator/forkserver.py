"""Warm children: a fork server with torch and triton imported, from which every reference and
candidate child is forked.

The worker is multi-threaded (one thread per request), so it cannot fork safely itself; and a
fresh interpreter per child pays `import torch` and `import triton` (seconds) every time. The
fork server is a single-threaded process the worker starts once (`ForkServer`, with the children's
environment), that imports torch, triton and the children's modules, runs no torch operation and
never initializes CUDA (so forking it is safe), freezes what it imported out of the garbage
collector's reach (a collection in a child then copies no page), and answers fork requests on a
private socket:

    worker ──socket──> fork server ──fork──> child (PID 1 of a new PID namespace, where it may)

A request names the child's module, its workspace, its environment and its channel secret, and
carries three descriptors: the child's stdin (commands), its message pipe and its log file. The
forked child starts a new session, puts those on 0, 1 and 2, closes every other descriptor,
takes the environment and runs ``<module>.main(workspace, secret)``; its first act there is to
confine itself (`child_common.enter_sandbox`, exactly as before: the sandbox stays around every
child). The server answers with the child's pid (the worker kills the child's process group by
it) and, when the child ends, with its wait status (the server reaps its children). When the
worker goes away the server's socket closes and the server exits; its children die with it
(`ksmith.confine.die_with_parent`).
"""

from __future__ import annotations

import gc
import importlib
import json
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import traceback
from typing import Any

#: The modules a child may run (`main(workspace, secret)`).
CHILD_MODULES = (
    "ksmith.evaluator.reference_child",
    "ksmith.evaluator.candidate_child",
    "ksmith.evaluator.build_child",
)
#: Largest request the server reads.
MAX_REQUEST = 1 << 20


class ForkServerDied(RuntimeError):
    """The fork server is gone (the worker starts a new one)."""


class ForkServer:
    """The worker's side: starts the server and asks it for children (thread-safe)."""

    def __init__(self, env: dict[str, str], log_path: str):
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._log = open(log_path, "ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-s", "-m", "ksmith.evaluator.forkserver", str(theirs.fileno())],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=self._log,
            pass_fds=(theirs.fileno(),),
            close_fds=True,
        )
        theirs.close()
        self.sock = ours
        self._send_lock = threading.Lock()
        self._cond = threading.Condition()
        self._answers: dict[int, dict[str, Any]] = {}
        self._exits: dict[int, int] = {}
        self._next_id = 0
        self._alive = True
        threading.Thread(target=self._read, daemon=True, name="forkserver-reader").start()

    def _read(self) -> None:
        while True:
            try:
                data = self.sock.recv(MAX_REQUEST)
            except OSError:
                data = b""
            if not data:
                break
            try:
                msg = json.loads(data)
            except ValueError:
                continue
            with self._cond:
                if "exited" in msg:
                    self._exits[int(msg["exited"])] = int(msg["status"])
                else:
                    self._answers[int(msg["id"])] = msg
                self._cond.notify_all()
        with self._cond:
            self._alive = False
            self._cond.notify_all()

    @property
    def alive(self) -> bool:
        """Whether the server is up (its reader has not seen the socket close, and the process runs)."""
        return self._alive and self.proc.poll() is None

    def fork(self, module: str, workdir: str, env: dict[str, str], secret: bytes, fds: list[int], pid_ns: bool) -> int:
        """Forks `module` for `workdir`, handing it `fds` (stdin, message pipe, log); returns its
        pid. Raises `ForkServerDied` or `OSError` (the reason the server gave)."""
        if module not in CHILD_MODULES:
            raise ValueError(f"not a child module: {module}")
        with self._cond:
            if not self.alive:
                raise ForkServerDied("the fork server has exited")
            self._next_id += 1
            rid = self._next_id
        request = {
            "id": rid,
            "module": module,
            "workdir": workdir,
            "env": env,
            "secret": secret.hex(),
            "pid_namespace": pid_ns,
        }
        with self._send_lock:
            try:
                socket.send_fds(self.sock, [json.dumps(request).encode()], fds)
            except OSError as e:
                with self._cond:
                    self._alive = False
                    self._cond.notify_all()
                raise ForkServerDied(f"the fork server does not answer: {e}") from None
        with self._cond:
            while rid not in self._answers and self.alive:
                self._cond.wait(1.0)
            answer = self._answers.pop(rid, None)
        if answer is None:
            raise ForkServerDied("the fork server exited before answering")
        if "error" in answer:
            raise OSError(f"the fork server could not fork a child: {answer['error']}")
        return int(answer["pid"])

    def wait(self, pid: int, timeout_s: float | None) -> int | None:
        """The wait status of child `pid` once it ended (None if still running after
        `timeout_s`; -SIGKILL's status when the server died: its children died with it)."""
        with self._cond:
            self._cond.wait_for(lambda: pid in self._exits or not self.alive, timeout_s)
            if pid in self._exits:
                return self._exits.pop(pid)
            if not self.alive:
                return signal.SIGKILL
            return None

    def close(self) -> None:
        """Ends the server (its children die with it)."""
        try:
            self.sock.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._log.close()


# --- the server ---------------------------------------------------------------------------------


def _warm_up() -> None:
    """Imports what every child needs, without initializing CUDA or running a torch operation
    (the server's environment has ``PYTORCH_NVML_BASED_CUDA_CHECK=1``, so even an import that asks
    whether CUDA is available does not initialize it). Raises when CUDA got initialized anyway:
    a child forked after that could not use the GPU."""
    import torch

    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:
        pass
    import torch._dynamo  # noqa: F401 - entering a dispatch mode imports it; once here, not per child
    import triton  # noqa: F401
    import triton.language  # noqa: F401

    try:
        import numpy.random  # noqa: F401
    except ImportError:
        pass
    for name in CHILD_MODULES:
        importlib.import_module(name)
    from . import integrity, timing  # noqa: F401

    if torch.cuda.is_initialized():
        raise RuntimeError("CUDA was initialized while the fork server imported torch and triton")


def serve(fd: int) -> int:
    """The server's loop: fork on request, report exits; ends when the worker's side closes."""
    from ..confine import PidNamespaces, set_undumpable

    set_undumpable()
    _warm_up()
    sock = socket.socket(fileno=fd)
    namespaces = PidNamespaces()
    gc.collect()
    gc.freeze()
    children: dict[int, int] = {}  # pidfd -> pid
    while True:
        waiting: list[socket.socket | int] = [sock, *children]
        ready, _, _ = select.select(waiting, [], [])
        for pidfd in [r for r in ready if r in children]:
            pid = children.pop(pidfd)
            os.close(pidfd)
            _, status = os.waitpid(pid, 0)
            _answer(sock, {"exited": pid, "status": status})
        if sock not in ready:
            continue
        try:
            data, fds, _, _ = socket.recv_fds(sock, MAX_REQUEST, 3)
        except OSError:
            data, fds = b"", []
        if not data:
            for pid in children.values():
                _kill(pid)
            return 0
        try:
            request = json.loads(data)
            if request["module"] not in CHILD_MODULES or len(fds) != 3:
                raise ValueError("bad request")
            with namespaces.new() if request["pid_namespace"] else _nothing():
                pid = os.fork()
            if pid == 0:
                _child(request, fds, sock.fileno())
            children[os.pidfd_open(pid)] = pid
            _answer(sock, {"id": request["id"], "pid": pid})
        except Exception as e:  # noqa: BLE001 - answered, the server goes on
            _answer(sock, {"id": _request_id(data), "error": f"{type(e).__name__}: {e}"})
        finally:
            for f in fds:
                os.close(f)


class _nothing:  # noqa: N801 - a context manager that does nothing
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def _request_id(data: bytes) -> int:
    try:
        return int(json.loads(data)["id"])
    except (ValueError, KeyError, TypeError):
        return -1


def _answer(sock: socket.socket, msg: dict[str, Any]) -> None:
    try:
        sock.send(json.dumps(msg).encode())
    except OSError:
        pass


def _kill(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _child(request: dict[str, Any], fds: list[int], server_fd: int) -> None:
    """In the forked child: its descriptors, session and environment, then its module's `main`.
    Never returns."""
    code = 70
    try:
        os.setsid()
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        stdin, messages, log = fds
        os.dup2(stdin, 0)
        os.dup2(messages, 1)
        os.dup2(log, 2)
        os.closerange(3, os.sysconf("SC_OPEN_MAX") if os.sysconf("SC_OPEN_MAX") > 0 else 65536)
        del server_fd
        os.chdir(request["workdir"])
        os.environ.clear()
        os.environ.update(request["env"])
        tempfile.tempdir = None  # the server's temporary folder was cached; the child has its own
        module = importlib.import_module(request["module"])
        code = int(module.main(request["workdir"], bytes.fromhex(request["secret"])) or 0)
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 1
    except BaseException:  # noqa: BLE001 - reported in the child's log
        try:
            os.write(2, traceback.format_exc().encode(errors="replace"))
        except OSError:
            pass
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except (OSError, ValueError):
            pass
        os._exit(code)


if __name__ == "__main__":
    sys.exit(serve(int(sys.argv[1])))
