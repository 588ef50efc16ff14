#!/usr/bin/env python3
"""Smoke test of the sandbox on the evaluator's GPU path (and its CPU path where there is none).

    python3 scripts/sandbox_gpu_smoke.py --device cuda     (on a GPU machine, after scripts/setup-bwrap.sh)
    python3 scripts/sandbox_gpu_smoke.py --device cpu      (anywhere: Triton's interpreter)

Starts the evaluator worker the way ksmith does (through the sandbox launcher, with secrets in
the caller's environment; the first check says whether the whole sandbox is in place) and, for comparison, an unconfined
worker (`confine` off, no launcher). Then:

1. an honest Triton kernel (`python/tests/candidates/honest/elementwise.py`, 2^24 elements on a
   GPU) must be `correct` in both, and on a GPU its timed median in the sandbox must be within
   15 % of the unconfined one (the children still reach the GPU: cuInit, compilation, timing);
2. a hostile candidate (`python/tests/candidates/isolation/snoop.py`, static checks off) that
   reads /etc/shadow, looks for the caller's secrets, connects to a TCP listener of this
   machine, to 1.1.1.1:53 and to a unix socket of this machine, writes outside its folder,
   creates a user namespace, and lists /dev and /proc, must find none of it (only the basic and
   NVIDIA device nodes, only itself);
3. the honest kernel again must be `correct`.

Prints PASS/FAIL per check and the sandbox the worker reports; exits 1 when a check fails.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PYTHON_DIR = os.path.join(ROOT, "python")
sys.path.insert(0, PYTHON_DIR)
from ksmith.shared.versions import EVAL_PROTOCOL  # noqa: E402

CAND = os.path.join(PYTHON_DIR, "tests", "candidates")
SECRETS = {"OPENAI_API_KEY": "sk-ksmith-test-secret", "KSMITH_TEACHER_API_KEY": "ksmith-test-secret"}


class Worker:
    """An evaluator worker speaking the JSON-lines protocol."""

    def __init__(self, device: str, options: dict[str, Any], policy: dict[str, Any] | None):
        command = [sys.executable, "-s", "-m", "ksmith.evaluator", "worker", "--device", device]
        command += ["--options", json.dumps(options)]
        if policy is not None:
            command = [sys.executable, "-s", "-m", "ksmith.confine", "--policy", json.dumps(policy), "--", *command[1:]]
        env = {**os.environ, **SECRETS, "PYTHONPATH": PYTHON_DIR, "PYTHONUNBUFFERED": "1"}
        if policy is None:  # the unconfined comparison: the explicit opt-out, without the launcher
            env["KSMITH_SANDBOX"] = json.dumps({"require": False})
        self.log = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(
            command, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, text=True
        )
        self.hello = self._read()
        self.n = 0

    def _read(self) -> dict[str, Any]:
        assert self.proc.stdout is not None and self.proc.stdin is not None  # both piped
        line = self.proc.stdout.readline()
        if not line:
            self.log.seek(0)
            raise SystemExit(f"the worker ended (exit {self.proc.wait()}):\n{self.log.read().decode()[-4000:]}")
        msg: dict[str, Any] = json.loads(line)
        return msg

    def evaluate(self, reference: str, candidate: str, measure: bool) -> dict[str, Any]:
        self.n += 1
        request = {"task_id": "smoke", "reference": reference, "candidate": candidate, "measure": measure}
        line = json.dumps({"v": EVAL_PROTOCOL, "type": "evaluate", "id": str(self.n), "request": request})
        assert self.proc.stdin is not None  # piped
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        msg = self._read()
        if msg.get("type") != "result":
            raise SystemExit(f"worker error: {msg}")
        result: dict[str, Any] = msg["result"]
        return result

    def close(self) -> None:
        assert self.proc.stdin is not None  # piped
        self.proc.stdin.close()
        self.proc.wait(timeout=60)


def _literal(text: str) -> Callable[[re.Match[str]], str]:
    """A `re.sub` replacement that is `text` as it is (no backslash escapes)."""
    return lambda _: text


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    a = ap.parse_args()
    gpu = a.device == "cuda"
    task = open(os.path.join(CAND, "tasks", "elementwise.py")).read()
    if gpu:
        task = re.sub(r"^N = .*$", "N = 2**24", task, flags=re.M)
    honest = open(os.path.join(CAND, "honest", "elementwise.py")).read()

    tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    tcp.bind(("127.0.0.1", 0))
    tcp.listen(4)
    tcp.settimeout(0.2)
    folder = tempfile.mkdtemp(prefix="ksmith-smoke-")
    unix_path = os.path.join(folder, "socket")
    unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    unix.bind(unix_path)
    unix.listen(4)
    unix.settimeout(0.2)
    outside = os.path.join(folder, "escaped")
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            for listener in (tcp, unix):
                try:
                    accepted.append(listener.accept()[0])
                except OSError:
                    pass

    threading.Thread(target=accept, daemon=True).start()
    hostile = open(os.path.join(CAND, "isolation", "snoop.py")).read()
    for name, value in (("PORT", tcp.getsockname()[1]), ("UNIX_SOCKET", unix_path), ("OUTSIDE", outside)):
        hostile = re.sub(rf"^{name} = .*$", _literal(f"{name} = {value!r}"), hostile, flags=re.M)

    options = {"run_timeout_s": 120, "timing_timeout_s": 120, "memory_limit_mb": 8192}
    # Not required, so that every check below runs and reports even where a part is missing.
    policy = {"require": False, "gpu": gpu, "scratch": os.path.join(folder, "scratch")}
    sandboxed = Worker(a.device, options, policy)
    plain = Worker(a.device, {**options, "confine": False}, None)
    print("sandbox:", json.dumps(sandboxed.hello.get("sandbox")))
    first = sandboxed.evaluate(task, honest, gpu)
    sandboxed_rt = Worker(a.device, {**options, "static_checks": False}, policy)
    bad = sandboxed_rt.evaluate(task, hostile, False)
    again = sandboxed.evaluate(task, honest, gpu)
    base = plain.evaluate(task, honest, gpu)
    for w in (sandboxed, sandboxed_rt, plain):
        w.close()
    stop.set()

    failures = 0

    def check(ok: bool, what: str, detail: object = "") -> None:
        nonlocal failures
        failures += 0 if ok else 1
        print(f"{'PASS' if ok else 'FAIL'} {what}" + (f": {detail}" if detail != "" else ""))

    info = sandboxed.hello.get("sandbox") or {}
    check(info.get("confined") is True, "the sandboxed worker's children are confined", info.get("missing"))
    for name, r in (("honest kernel, sandboxed", first), ("honest kernel again", again), ("honest, unconfined", base)):
        check(r["status"] == "correct", name, f"{r['status']} {r['error_log'][-1500:]}".strip())
    if gpu:
        t_box = first["candidate_timing"]["median_ms"] if first.get("candidate_timing") else None
        t_plain = base["candidate_timing"]["median_ms"] if base.get("candidate_timing") else None
        ok = bool(t_box and t_plain and abs(t_box / t_plain - 1) <= 0.15)
        check(ok, "the sandbox does not change the kernel's time", f"{t_box} ms sandboxed vs {t_plain} ms unconfined")
        print(f"speedup sandboxed {first.get('speedup')} vs unconfined {base.get('speedup')}")
    log = bad.get("error_log", "")
    found = log.rsplit("SNOOP ", 1)[1].strip().splitlines()[0] if "SNOOP " in log else None
    check(found is not None, "the hostile candidate ran and reported", bad["status"])
    if found:
        seen = json.loads(found)
        print("hostile candidate saw:", json.dumps(seen))
        check(seen["/etc/shadow"] == "No such file or directory", "no /etc/shadow", seen["/etc/shadow"])
        check(seen["secrets"] == [], "no secret of the caller's environment", seen["secrets"])
        for name in ("loopback tcp", "internet tcp"):
            check(seen[name] == "Network is unreachable", f"no network ({name})", seen[name])
        check(seen["unix socket"] == "No such file or directory", "no unix socket of the host", seen["unix socket"])
        check(seen["abstract socket"] == "Connection refused", "no abstract socket", seen["abstract socket"])
        check(seen["/root"] in ([], "No such file or directory"), "nothing of /root", seen["/root"])
        blocked = seen["write outside"] in ("Read-only file system", "No such file or directory")
        check(blocked, "no write outside its folder", seen["write outside"])
        check(seen["user namespace"] == "Operation not permitted", "no user namespace", seen["user namespace"])
        basic = {"null", "zero", "full", "random", "urandom", "shm", "fd", "stdin", "stdout", "stderr"}
        extra = [d for d in seen["/dev"] if d not in basic and not d.startswith("nvidia")]
        check(extra == [], "only the basic and NVIDIA device nodes", seen["/dev"])
        check(not gpu or any(d.startswith("nvidia") for d in seen["/dev"]), "the NVIDIA nodes are there on a GPU")
        check(seen["other processes"] == [], "no other process visible", seen["other processes"])
    check(not os.path.exists(outside), "nothing written outside")
    check(accepted == [], "no listener of this machine reached")
    for s in (tcp, unix, *accepted):
        s.close()
    shutil.rmtree(folder, ignore_errors=True)
    print("all checks passed" if failures == 0 else f"{failures} checks failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
