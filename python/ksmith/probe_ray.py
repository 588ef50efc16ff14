"""The probe's workers on a Ray cluster: one actor per CPU, each holding one sandboxed probe worker.

    python -m ksmith.probe_ray --address auto|local|ADDR --policy JSON [--actors N] [--cpus N]
                               [--grace S] [--startup-timeout S] [--requeue N]

Started by `ksmith probe` when `[probe] ray_address` is set, never by hand. It speaks the probe
worker's JSON-lines protocol on stdin/stdout, multiplexed: requests (each with its module `id`)
come in as fast as the stage sends them, and one line goes out per request as soon as an actor
has it, in any order:

- at start, ``{"v": 1, "type": "hello", ...}``: the first actor's worker hello (its sandbox) with
  ``"ray": {"actors": N, "nodes": K}`` added;
- for a request the worker answered, the worker's own ``result`` line, unchanged;
- for one it did not, ``{"v": 1, "type": "fault", "id": ..., "error_class": "Timeout" |
  "WorkerDied" | "Protocol", "error_message": ...}`` (the actor killed and replaced its worker,
  as the local pool does);
- after stdin closes and every request is answered, ``{"v": 1, "type": "stats",
  "workers_started": N, "requeued": R}``.

Each actor writes the runner package this driver was started from (``ksmith/probe``,
``ksmith/confine``) into a private folder of its node and starts ``python -m ksmith.confine
--policy ... -- -m ksmith.probe.worker`` there: the same code and sandbox as a local run, so the
table is the same. A request whose actor dies (its node lost, its process killed) goes back to
the queue and runs on another actor, up to ``--requeue`` times; only then is it a ``WorkerDied``
fault. Ray restarts dead actors.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path

from ksmith.shared.versions import PROBE_PROTOCOL as PROTOCOL_VERSION

#: The folders of the ksmith package a worker needs, relative to the package's parent.
RUNNER_PACKAGES = ("ksmith/probe", "ksmith/confine", "ksmith/shared")


def runner_files(root: Path) -> dict[str, str]:
    """The runner's source files under `root` (the folder holding `ksmith/`), by relative path."""
    files = {"ksmith/__init__.py": (root / "ksmith/__init__.py").read_text(encoding="utf-8")}
    for package in RUNNER_PACKAGES:
        for path in sorted((root / package).iterdir()):
            if path.suffix in (".py", ".json"):
                files[f"{package}/{path.name}"] = path.read_text(encoding="utf-8")
    return files


#: Name prefix of an actor's private folder, followed by the actor's pid.
ORPHAN_PREFIX = "ksmith-probe-ray-"


def _remove_orphans(tmp: Path) -> None:
    """Removes the folders of actors that died without closing (killed, node restarted)."""
    import shutil

    for path in tmp.glob(f"{ORPHAN_PREFIX}*"):
        pid = path.name[len(ORPHAN_PREFIX) :].split("-", 1)[0]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            shutil.rmtree(path, ignore_errors=True)


def _pipe_lines(pipe, put) -> None:
    """Hands each line of `pipe` to `put`, then None when it closes."""
    for line in pipe:
        put(line)
    put(None)


def _actor_class(ray):
    @ray.remote(num_cpus=1, max_restarts=-1, max_task_retries=0)
    class ProbeActor:
        """One sandboxed probe worker on this actor's node, restarted when it fails."""

        def __init__(self, files: dict, policy: dict, env_passed: list, startup_timeout_s: float):
            import tempfile

            _remove_orphans(Path(tempfile.gettempdir()))
            self.root = Path(tempfile.mkdtemp(prefix=f"{ORPHAN_PREFIX}{os.getpid()}-"))
            for rel, text in files.items():
                path = self.root / "py" / rel
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(text, encoding="utf-8")
            scratch = self.root / "tmp"
            scratch.mkdir()
            self.policy = dict(policy, scratch=str(scratch))
            if not self.policy.get("bwrap"):
                self.policy["bwrap"] = os.environ.get("KSMITH_BWRAP", "")
            self.env = {k: os.environ[k] for k in env_passed if k in os.environ}
            self.env.update(
                PYTHONPATH=str(self.root / "py"),
                PYTHONDONTWRITEBYTECODE="1",
                PYTHONNOUSERSITE="1",
                PYTHONUNBUFFERED="1",
            )
            self.startup_timeout_s = startup_timeout_s
            self.started = 0
            self.proc: subprocess.Popen[str] | None = None
            self.lines: queue.Queue[str | None] = queue.Queue()
            self.stderr_tail: collections.deque[str | None] = collections.deque(maxlen=64)
            self.hello_line = self._start()

        def _start(self) -> str:
            self.started += 1
            command = [sys.executable, "-s", "-m", "ksmith.confine", "--policy", json.dumps(self.policy), "--"]
            self.proc = proc = subprocess.Popen(
                [*command, "-m", "ksmith.probe.worker"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=self.env,
                cwd=self.policy["scratch"],
                text=True,
                encoding="utf-8",
            )
            self.lines = queue.Queue()
            self.stderr_tail = collections.deque(maxlen=64)
            threading.Thread(target=_pipe_lines, args=(proc.stdout, self.lines.put), daemon=True).start()
            threading.Thread(target=_pipe_lines, args=(proc.stderr, self.stderr_tail.append), daemon=True).start()
            line = self._next_line(self.startup_timeout_s)
            if line is None:
                raise RuntimeError(f"the probe worker did not start: {self._kill()}")
            return line

        def _next_line(self, timeout_s: float) -> str | None:
            try:
                return self.lines.get(timeout=timeout_s)
            except queue.Empty:
                return None

        def _kill(self) -> str:
            if self.proc is not None:
                self.proc.kill()
                self.proc.wait()
                self.proc = None
            return "".join(x for x in self.stderr_tail if x).strip()[-2000:]

        def close(self) -> None:
            """Stops the worker and removes this actor's folder."""
            import shutil

            self._kill()
            shutil.rmtree(self.root, ignore_errors=True)

        def hello(self) -> dict:
            import ray as ray_here

            hello = json.loads(self.hello_line)
            hello["node"] = ray_here.get_runtime_context().get_node_id()
            return hello

        def workers_started(self) -> int:
            return self.started

        def probe(self, line: str, request_id, deadline_s: float) -> str:
            """One request line in, the worker's response line out (or a fault line)."""
            if self.proc is None:
                self._start()
            proc = self.proc
            assert proc is not None and proc.stdin is not None  # started with a pipe
            try:
                proc.stdin.write(line if line.endswith("\n") else line + "\n")
                proc.stdin.flush()
            except OSError as e:
                return self._fault(request_id, "WorkerDied", f"cannot send the request: {e}; stderr: {self._kill()}")
            answer = self._next_line(deadline_s)
            if answer is None and proc.poll() is None:
                self._kill()
                message = f"the worker did not answer within {deadline_s:.0f} s; it was killed and replaced"
                return self._fault(request_id, "Timeout", message)
            if answer is None:
                return self._fault(request_id, "WorkerDied", f"the worker exited; stderr: {self._kill()}")
            try:
                parsed = json.loads(answer)
            except ValueError:
                parsed = None
            if not isinstance(parsed, dict) or parsed.get("type") != "result" or parsed.get("id") != request_id:
                return self._fault(request_id, "Protocol", f"unexpected answer {answer[:200]!r}; {self._kill()}")
            return answer.rstrip("\n")

        def _fault(self, request_id, kind: str, message: str) -> str:
            body = {"v": PROTOCOL_VERSION, "type": "fault", "id": request_id}
            return json.dumps(body | {"error_class": kind, "error_message": message})

    return ProbeActor


class Dispatcher:
    """Hands queued requests to idle actors and writes each answer as it comes back.

    An actor whose call failed because it died is not given work again until it answers a
    ping (Ray restarts it; calls to a restarting actor fail at once), so a requeued request goes
    to a live actor instead of using up its runs on a dead one.
    """

    #: Seconds between pings of an actor that is not back yet.
    PING_EVERY_S = 1.0

    def __init__(self, ray, actors: list, out, grace_s: float, requeue: int):
        self.ray = ray
        self.idle = collections.deque(actors)
        self.out = out
        self.grace_s = grace_s
        self.requeue = requeue
        self.waiting: collections.deque = collections.deque()
        self.in_flight: dict = {}
        self.pings: dict = {}
        self.recovering: list = []
        self.lost: collections.Counter = collections.Counter()
        self.requeued = 0

    def submit(self, line: str) -> None:
        """Queues one request line; an unreadable one is answered at once with an error line."""
        try:
            request = json.loads(line)
            if not isinstance(request, dict) or not isinstance(request.get("program"), str):
                raise ValueError("a request is an object with a string `program`")
        except ValueError as e:
            self._write({"v": PROTOCOL_VERSION, "type": "error", "id": None, "message": str(e)})
            return
        self.waiting.append((line, request))

    def pump(self, wait_s: float) -> None:
        """Starts what idle actors can take, pings dead ones, then takes in what is ready
        within `wait_s`."""
        while self.idle and self.waiting:
            actor = self.idle.popleft()
            line, request = self.waiting.popleft()
            deadline = float(request.get("timeout_s", 30.0)) + self.grace_s
            ref = actor.probe.remote(line, request.get("id"), deadline)
            self.in_flight[ref] = (actor, line, request)
        now = time.monotonic()
        for actor, when in [x for x in self.recovering if x[1] <= now]:
            self.recovering.remove((actor, when))
            self.pings[actor.workers_started.remote()] = actor
        pending = list(self.in_flight) + list(self.pings)
        if not pending:
            time.sleep(wait_s)
            return
        ready, _ = self.ray.wait(pending, num_returns=1, timeout=wait_s)
        for ref in ready:
            if ref in self.pings:
                self._pinged(ref)
                continue
            actor, line, request = self.in_flight.pop(ref)
            try:
                answer = self.ray.get(ref)
            except self.ray.exceptions.RayActorError as e:
                self.recovering.append((actor, now + self.PING_EVERY_S))
                self._lost(line, request, e)
                continue
            self.idle.append(actor)
            self.out.write(answer + "\n")
            self.out.flush()

    def _pinged(self, ref) -> None:
        actor = self.pings.pop(ref)
        try:
            self.ray.get(ref)
        except self.ray.exceptions.RayActorError:
            self.recovering.append((actor, time.monotonic() + self.PING_EVERY_S))
            return
        self.idle.append(actor)

    def _lost(self, line: str, request: dict, error: Exception) -> None:
        key = request.get("id")
        self.lost[key] += 1
        if self.lost[key] <= self.requeue:
            self.requeued += 1
            self.waiting.appendleft((line, request))
            return
        message = f"the Ray actor running it died {self.lost[key]} times: {str(error)[:500]}"
        self._write({"v": PROTOCOL_VERSION, "type": "fault", "id": key} | _died(message))

    def busy(self) -> bool:
        """Whether requests are waiting or in flight."""
        return bool(self.waiting or self.in_flight)

    def _write(self, obj: dict) -> None:
        self.out.write(json.dumps(obj) + "\n")
        self.out.flush()


def _died(message: str) -> dict:
    return {"error_class": "WorkerDied", "error_message": message}


def _ask_each(ray, actors: list, method: str) -> list:
    """Calls `method` on every actor; an actor that cannot answer any more is left out."""
    answers = []
    for ref in [getattr(x, method).remote() for x in actors]:
        try:
            answers.append(ray.get(ref))
        except ray.exceptions.RayActorError:
            pass
    return [x for x in answers if x is not None]


def _read_requests(source, sink: collections.deque, done: threading.Event) -> None:
    for line in source:
        if line.strip():
            sink.append(line)
    done.set()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m ksmith.probe_ray")
    ap.add_argument("--address", required=True, help="`auto`, a cluster address, or `local` for a private cluster")
    ap.add_argument("--policy", required=True, help="the sandbox policy (scratch is chosen per actor)")
    ap.add_argument("--actors", type=int, default=0, help="actors; 0: one per CPU of the cluster")
    ap.add_argument("--cpus", type=int, default=None, help="CPUs of a `local` cluster")
    ap.add_argument("--grace", type=float, default=20.0, help="seconds past a request's timeout_s")
    ap.add_argument("--startup-timeout", type=float, default=120.0)
    ap.add_argument("--requeue", type=int, default=2, help="runs of a request whose actor died")
    a = ap.parse_args(argv)

    # The protocol keeps the original stdout; Ray's own messages go to stderr.
    out = os.fdopen(os.dup(1), "w", buffering=1, encoding="utf-8")
    os.dup2(2, 1)

    import ray

    from ksmith.confine.policy import ENV_PASSED

    if a.address == "local":
        ray.init(num_cpus=a.cpus, include_dashboard=False, log_to_driver=False)
    else:
        ray.init(address=a.address, log_to_driver=False)
    try:
        count = a.actors or int(ray.cluster_resources().get("CPU", 1))
        # Held here for the whole run: Ray restarts a dead actor from these arguments.
        files = ray.put(runner_files(Path(__file__).resolve().parent.parent))
        cls = _actor_class(ray)
        policy = json.loads(a.policy)
        actors = [cls.remote(files, policy, list(ENV_PASSED), a.startup_timeout) for _ in range(count)]
        hellos = ray.get([x.hello.remote() for x in actors], timeout=a.startup_timeout + 60)
        nodes = len({h.get("node") for h in hellos})
        hello = dict(hellos[0], ray={"actors": count, "nodes": nodes})
        hello.pop("node", None)
        out.write(json.dumps(hello) + "\n")
        out.flush()

        incoming: collections.deque = collections.deque()
        closed = threading.Event()
        threading.Thread(target=_read_requests, args=(sys.stdin, incoming, closed), daemon=True).start()
        dispatch = Dispatcher(ray, actors, out, a.grace, a.requeue)
        while True:
            while incoming:
                dispatch.submit(incoming.popleft())
            if closed.is_set() and not incoming and not dispatch.busy():
                break
            dispatch.pump(0.05)
            if not dispatch.busy() and not closed.is_set():
                closed.wait(0.05)
        started = sum(_ask_each(ray, actors, "workers_started"))
        _ask_each(ray, actors, "close")
        stats = {"v": PROTOCOL_VERSION, "type": "stats", "workers_started": started, "requeued": dispatch.requeued}
        out.write(json.dumps(stats) + "\n")
        out.flush()
    finally:
        ray.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
