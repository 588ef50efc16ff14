"""The evaluator as ksmith runs it (its worker inside the sandbox launcher), as this user and as an
ordinary user: hostile candidates (static checks and the audit hook off, so only the sandbox stops
them) each followed by an honest one that must still be correct.

- snoop (``candidates/isolation/snoop.py``): no secret of the caller's environment, no network
  (loopback and internet TCP, a unix socket of the host, an abstract socket), no ``/etc/shadow``,
  nothing of ``/root`` or ``/home`` but the way to the Python environment and the runtime
  package, no other process, no device but the basic ones, no write outside its folder, no new
  user namespace, mount or ptrace;
- fill: writing stops at the workspace's size;
- sibling: a candidate that writes into every descriptor and working folder of every other
  process for 5 s while an honest one runs at the same time: it sees no other process, and the
  honest one is correct.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import tempfile
import threading

import pytest
from ksmith.confine import Policy
from sandboxed import SECRETS, USERS, run_launched

#: An evaluator made in this process, outside the sandbox launcher: only the per-child
#: confinement, by the explicit opt-out (the default refuses without the whole sandbox).
UNCONFINED = Policy(require=False)

HERE = os.path.dirname(os.path.abspath(__file__))
TASK = open(os.path.join(HERE, "candidates", "tasks", "elementwise.py")).read()
HONEST = open(os.path.join(HERE, "candidates", "honest", "elementwise.py")).read()
SNOOP = open(os.path.join(HERE, "candidates", "isolation", "snoop.py")).read()

FILL = """
        written = 0
        block = b"x" * (8 << 20)
        try:
            for i in range(100000):
                with open(os.path.join("/dev/shm" if i % 2 else ".", f"fill-{{i}}"), "wb") as f:
                    f.write(block)
                written += len(block)
        except OSError as e:
            raise RuntimeError(f"FILLED {{written >> 20}} MiB: {{e.strerror}}") from None
"""

ATTACK = """
        import time
        seen, reached = set(), []
        until = time.monotonic() + 5.0
        while time.monotonic() < until:
            for pid in os.listdir("/proc"):
                if not pid.isdigit() or int(pid) == os.getpid():
                    continue
                seen.add(pid)
                try:
                    for fd in os.listdir(f"/proc/{{pid}}/fd"):
                        try:
                            with open(f"/proc/{{pid}}/fd/{{fd}}", "w") as f:
                                f.write('{{"type": "correctness_done", "forged": true}}\\n')
                            reached.append(f"{{pid}}/fd/{{fd}}")
                        except OSError:
                            pass
                    with open(f"/proc/{{pid}}/cwd/out_0.pt", "wb") as f:
                        f.write(b"forged")
                    reached.append(f"{{pid}}/cwd")
                except OSError:
                    pass
            time.sleep(0.05)
        raise RuntimeError(f"ISOLATED saw {{sorted(seen)}} reached {{reached}}")
"""

VICTIM = """
        import time
        time.sleep(4.0)
"""


def candidate(probe: str, **values) -> str:
    src = HONEST.replace("import torch\n", "import os\n\nimport torch\n", 1)
    out = src.replace("        super().__init__()", "        super().__init__()" + probe.format(**values), 1)
    assert out != src
    return out


SCRIPT = """
import json, threading
from ksmith.evaluator.evaluate import DeviceEvaluator

cases = json.loads({cases!r})
task = {task!r}
ev = DeviceEvaluator(
    "cpu", {{"trials": 2, "run_timeout_s": 60, "static_checks": False, "audit": False, "memory_limit_mb": 1536}}
)
out = {{"sandbox": ev.sandbox_info()}}

def evaluate(name, source):
    r = ev.evaluate({{"task_id": "sandbox", "reference": task, "candidate": source, "measure": False}})
    out[name] = {{"status": r["status"], "log": r["error_log"]}}

for name in ("snoop", "after_snoop", "fill", "after_fill"):
    evaluate(name, cases[name])
threads = [threading.Thread(target=evaluate, args=(n, cases[n])) for n in ("attack", "victim")]
for t in threads:
    t.start()
for t in threads:
    t.join()
evaluate("after_attack", cases["after_attack"])
ev.close()
print(json.dumps(out))
"""


def report(log: str, marker: str) -> str:
    assert marker in log, log
    return log.rsplit(marker, 1)[1].strip().splitlines()[0]


@pytest.mark.parametrize("user", USERS)
def test_hostile_candidates_in_the_launched_evaluator(user):
    tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    tcp.bind(("127.0.0.1", 0))
    tcp.listen(8)
    tcp.settimeout(0.2)
    port = tcp.getsockname()[1]
    folder = tempfile.mkdtemp(prefix="ksmith-eval-sandbox-test-")
    os.chmod(folder, 0o755)
    unix_path = os.path.join(folder, "socket")
    unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    unix.bind(unix_path)
    os.chmod(unix_path, 0o777)
    unix.listen(8)
    unix.settimeout(0.2)
    abstract = "\0ksmith-eval-sandbox-test-" + str(os.getpid())
    abstract_listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    abstract_listener.bind(abstract)
    abstract_listener.listen(8)
    abstract_listener.settimeout(0.2)
    accepted = []
    stop = threading.Event()

    def accept():
        while not stop.is_set():
            for listener in (tcp, unix, abstract_listener):
                try:
                    accepted.append(listener.accept()[0])
                except OSError:
                    pass

    watcher = threading.Thread(target=accept, daemon=True)
    watcher.start()
    outside = os.path.join(folder, "escaped")
    snoop = SNOOP
    for name, value in (("PORT", port), ("UNIX_SOCKET", unix_path), ("ABSTRACT_SOCKET", abstract)):
        snoop = re.sub(rf"^{name} = .*$", lambda _, n=name, v=value: f"{n} = {v!r}", snoop, flags=re.M)
    snoop = re.sub(r"^OUTSIDE = .*$", lambda _: f"OUTSIDE = {outside!r}", snoop, flags=re.M)
    cases = {
        "snoop": snoop,
        "fill": candidate(FILL),
        "attack": candidate(ATTACK),
        "victim": candidate(VICTIM),
    }
    for name in ("snoop", "fill", "attack"):
        cases[f"after_{name}"] = HONEST
    script = SCRIPT.format(cases=json.dumps(cases), task=TASK)
    try:
        out = run_launched(script, user, {"require": True, "disk_mb": 32, "scratch": "/tmp/ksmith-eval-scratch"})
    finally:
        stop.set()
        watcher.join(timeout=5)
        for s in (tcp, unix, abstract_listener, *accepted):
            s.close()
        shutil.rmtree(folder, ignore_errors=True)

    assert out["sandbox"]["confined"] is True, out["sandbox"]
    assert out["sandbox"]["filesystem_view"] is True, out["sandbox"]
    assert accepted == [], "a candidate reached a listener of this machine"
    for name in ("snoop", "fill", "attack"):
        assert out[f"after_{name}"]["status"] == "correct", (name, out[f"after_{name}"])
    assert out["victim"]["status"] == "correct", out["victim"]

    seen = json.loads(report(out["snoop"]["log"], "SNOOP "))
    assert seen["secrets"] == [], seen
    assert seen["/etc/shadow"] == "No such file or directory", seen
    for folder_name in ("/root", "/home"):
        assert seen[folder_name] in ([], "No such file or directory"), seen
    assert seen["other processes"] == [], seen
    assert seen["/dev"] == ["fd", "full", "null", "random", "shm", "stderr", "stdin", "stdout", "urandom", "zero"]
    assert seen["loopback tcp"] == seen["internet tcp"] == "Network is unreachable", seen
    assert seen["unix socket"] == "No such file or directory", seen
    assert seen["abstract socket"] == "Connection refused", seen
    assert seen["write outside"] in ("Read-only file system", "No such file or directory"), seen
    assert not os.path.exists(outside)
    for call in ("user namespace", "mount", "ptrace"):
        assert seen[call] == "Operation not permitted", seen

    filled = report(out["fill"]["log"], "FILLED ")
    assert filled.endswith("MiB: No space left on device"), filled
    assert int(filled.split()[0]) <= 32 + 1536, filled  # disk_mb + memory_limit_mb

    assert report(out["attack"]["log"], "ISOLATED ") == "saw [] reached []", out["attack"]


def test_a_candidate_does_not_see_the_callers_secrets(monkeypatch):
    """Even where the worker itself runs outside the launcher with secrets in its environment,
    a child's environment holds the allow-listed variables only."""
    for key, value in SECRETS.items():
        monkeypatch.setenv(key, value)
    from ksmith.evaluator.evaluate import DeviceEvaluator

    leak = candidate(
        """
        leaked = [k for k, v in os.environ.items() if "ksmith-test-secret" in v]
        if leaked:
            raise RuntimeError(f"LEAKED {{leaked}}")
"""
    )
    ev = DeviceEvaluator("cpu", {"trials": 2, "run_timeout_s": 60, "static_checks": False}, policy=UNCONFINED)
    try:
        result = ev.evaluate({"task_id": "env", "reference": TASK, "candidate": leak, "measure": False})
    finally:
        ev.close()
    assert result["status"] == "correct", result["error_log"]
