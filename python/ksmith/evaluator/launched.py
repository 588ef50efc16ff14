"""An evaluator worker started through the sandbox launcher, for callers written in Python: the
Ray pool's actors (`ksmith.ray_pool`), the reward function's local mode (`ksmith.reward`) and
``python -m ksmith.evaluator evaluate``.

`LaunchedWorker(device, options, policy)` starts the worker the Rust pool starts, the same way:
``python -s -m ksmith.confine --policy P -- -s -m ksmith.evaluator worker --device D --options O``
with the allow-listed environment only, waits for its hello and multiplexes `evaluate` calls
over its JSON lines (`protocol`). So candidates get the whole sandbox (bubblewrap's view of the
machine, the disk limit) and not only the per-child confinement an evaluator in the caller's
own process could give them.

With the policy's ``require`` (the default) a machine without the whole sandbox makes the
constructor raise `SandboxError` with the launcher's or the worker's one line (what is missing,
how to fix it), before any untrusted code exists; only the caller's explicit opt-out (``require``
false, named by ``policy.opt_out``) runs the worker with what works, and the constructor writes
what is missing on stderr before it returns.
"""

from __future__ import annotations

import collections
import dataclasses
import itertools
import json
import os
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
import weakref
from typing import Any, NoReturn, cast

from ..confine.policy import EXIT_UNAVAILABLE, INSTALL_BWRAP, REFUSAL, Policy, SandboxError, passed_env, refusal
from . import protocol

#: The folder holding the ``ksmith`` package: the worker's ``PYTHONPATH``.
PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
#: Lines of the worker's stderr kept for error messages.
STDERR_LINES = 200


class _Spawner:
    """Starts every worker from one thread that lives as long as the process.

    The launcher runs bubblewrap with ``--die-with-parent``, which ends the worker when the
    *thread* that started it ends (``PR_SET_PDEATHSIG`` follows the thread, not the process): a
    worker started from a caller's short-lived thread (a trainer's tool executor or reward thread
    pool, a threaded Ray actor) would die with that thread, and every later call would find a
    broken pipe. A forked child starts its own spawner thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._jobs: queue.Queue[tuple[tuple[Any, ...], dict[str, Any], queue.Queue[Any]]] | None = None
        self._pid = 0
        os.register_at_fork(after_in_child=self._forget)

    def _forget(self) -> None:
        self._lock = threading.Lock()
        self._jobs = None
        self._pid = 0

    def popen(self, *args: Any, **kwargs: Any) -> subprocess.Popen[str]:
        """`subprocess.Popen(*args, **kwargs)`, run on the spawner thread."""
        with self._lock:
            if self._jobs is None or self._pid != os.getpid():
                self._jobs = queue.Queue()
                self._pid = os.getpid()
                threading.Thread(target=self._serve, args=(self._jobs,), daemon=True, name="ksmith-spawner").start()
            jobs = self._jobs
        done: queue.Queue[Any] = queue.Queue(maxsize=1)
        jobs.put((args, kwargs, done))
        ok, value = done.get()
        if not ok:
            raise value
        return cast("subprocess.Popen[str]", value)

    @staticmethod
    def _serve(jobs: queue.Queue[tuple[tuple[Any, ...], dict[str, Any], queue.Queue[Any]]]) -> None:
        while True:
            args, kwargs, done = jobs.get()
            try:
                done.put((True, subprocess.Popen(*args, **kwargs)))
            except BaseException as e:  # noqa: BLE001 - raised again in the caller's thread
                done.put((False, e))


_SPAWNER = _Spawner()


class WorkerError(RuntimeError):
    """The worker could not start, died, or answered a request with an error other than a broken
    reference."""


def _stop(proc: subprocess.Popen[str], scratch: str) -> None:
    """Ends the worker (its input closed, then killed) and removes its scratch folder."""
    try:
        if proc.stdin:
            proc.stdin.close()
    except OSError:
        pass
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    shutil.rmtree(scratch, ignore_errors=True)


class LaunchedWorker:
    """One sandboxed evaluator worker on `device` (see the module doc); thread-safe."""

    def __init__(
        self,
        device: str,
        options: dict[str, Any] | None = None,
        policy: Policy | None = None,
        startup_timeout_s: float = 300.0,
        request_timeout_s: float = 900.0,
    ):
        self.device = device
        self.request_timeout_s = request_timeout_s
        self.policy = dataclasses.replace(policy or Policy(), gpu=device.startswith("cuda"))
        # The launcher sees only the allow-listed environment: the binary travels in the policy.
        self.policy.bwrap = self.policy.bwrap or os.environ.get("KSMITH_BWRAP", "")
        self.scratch = tempfile.mkdtemp(prefix="ksmith-eval-launched-")
        self.policy.scratch = self.scratch
        env = passed_env()
        env.update(PYTHONPATH=PACKAGE_ROOT, PYTHONDONTWRITEBYTECODE="1", PYTHONNOUSERSITE="1", PYTHONUNBUFFERED="1")
        worker = ["-s", "-m", "ksmith.evaluator", "worker", "--device", device, "--options", json.dumps(options or {})]
        launcher = [sys.executable, "-s", "-m", "ksmith.confine", "--policy", self.policy.to_json(), "--"]
        self.proc = _SPAWNER.popen(
            [*launcher, *worker],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            cwd=self.scratch,
            text=True,
            encoding="utf-8",
        )
        self._finalizer = weakref.finalize(self, _stop, self.proc, self.scratch)
        self._stderr: collections.deque[str] = collections.deque(maxlen=STDERR_LINES)
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._pending: dict[str, queue.Queue[dict[str, Any] | None]] = {}
        self._lock = threading.Lock()
        self._ids = itertools.count()
        threading.Thread(target=self._drain_stderr, daemon=True).start()
        threading.Thread(target=self._read_first_line, daemon=True).start()
        try:
            line = self._lines.get(timeout=startup_timeout_s)
        except queue.Empty:
            line = None
        if line is None:
            self._fail_start(startup_timeout_s)
        try:
            self.hello = protocol.parse(line)
        except protocol.ProtocolError as e:
            self.close()
            raise WorkerError(f"the evaluator worker's first line is not a hello: {e}: {line[:200]!r}") from None
        missing = list(self.hello.get("sandbox", {}).get("missing", []))
        if missing and self.policy.require:  # the worker refuses first; never run past it
            self.close()
            raise SandboxError(refusal("; ".join(missing), INSTALL_BWRAP, self.policy.opt_out))
        if missing:
            sys.stderr.write(
                f"ksmith evaluator: candidates run without part of the sandbox, as {self.policy.opt_out} "
                f"asks: {'; '.join(missing)}\n"
            )
            sys.stderr.flush()
        threading.Thread(target=self._read_answers, daemon=True).start()

    def _drain_stderr(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self._stderr.append(line.rstrip("\n"))

    def _read_first_line(self) -> None:
        assert self.proc.stdout is not None
        self._lines.put(self.proc.stdout.readline() or None)

    def _fail_start(self, startup_timeout_s: float) -> NoReturn:
        """Raises why the worker said no hello: the sandbox's refusal, or its exit and stderr."""
        try:
            code = self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            code = None
        self.close()
        text = "\n".join(self._stderr)
        if code == EXIT_UNAVAILABLE and REFUSAL in text:
            raise SandboxError(REFUSAL + text.rsplit(REFUSAL, 1)[1].splitlines()[0])
        if code is None:
            raise WorkerError(f"the evaluator worker said no hello within {startup_timeout_s:.0f} s: {text[-2000:]}")
        raise WorkerError(f"the evaluator worker exited with status {code} at start: {text[-2000:]}")

    def _read_answers(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                msg = protocol.parse(line)
            except protocol.ProtocolError:
                continue
            with self._lock:
                waiter = self._pending.pop(str(msg.get("id")), None)
            if waiter is not None:
                waiter.put(msg)
        with self._lock:
            waiters, self._pending = list(self._pending.values()), {}
        for waiter in waiters:
            waiter.put(None)

    def evaluate(self, request: dict[str, Any]) -> dict[str, Any]:
        """The worker's result for `request`; `BrokenReference` when the task's reference does
        not run, `WorkerError` when the worker failed."""
        result: dict[str, Any] = self._ask("evaluate", request, "result")
        return result

    def preflight(self, request: dict[str, Any]) -> dict[str, Any]:
        """What building the task's reference of `request` on the worker's device gave (see the
        protocol's `preflight`); `BrokenReference` when it does not run there, `WorkerError` when
        the worker failed."""
        built: dict[str, Any] = self._ask("preflight", request, "reference")
        return built

    def _ask(self, kind: str, request: dict[str, Any], field: str) -> Any:
        """Sends a `kind` message with `request` and returns its answer's `field`; raises as
        `evaluate` says."""
        rid = str(next(self._ids))
        answer: queue.Queue[dict[str, Any] | None] = queue.Queue(maxsize=1)
        line = protocol.encode({"type": kind, "id": rid, "request": request})
        with self._lock:
            self._pending[rid] = answer
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.write(line + "\n")
                self.proc.stdin.flush()
            except (OSError, ValueError) as e:
                self._pending.pop(rid, None)
                raise WorkerError(f"cannot send to the evaluator worker: {e}: {self.stderr_tail()}") from None
        try:
            msg = answer.get(timeout=self.request_timeout_s)
        except queue.Empty:
            with self._lock:
                self._pending.pop(rid, None)
            raise WorkerError(f"the evaluator worker gave no answer within {self.request_timeout_s:.0f} s") from None
        if msg is None:
            raise WorkerError(f"the evaluator worker exited: {self.stderr_tail()}")
        if msg.get("type") != "error" and field in msg:
            return msg[field]
        error = msg.get("error") or {}
        if error.get("kind") == "broken_reference":
            from .evaluate import BrokenReference

            raise BrokenReference(str(error.get("task_id")), str(error.get("message")))
        raise WorkerError(f"the evaluator worker answered {error.get('kind')}: {error.get('message')}")

    def stderr_tail(self) -> str:
        """The end of the worker's stderr."""
        return "\n".join(self._stderr)[-2000:]

    def close(self) -> None:
        """Stops the worker (waiting for requests in flight) and removes its scratch folder."""
        self._finalizer()
