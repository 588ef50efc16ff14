"""Candidate children have no network: a candidate that connects to a listener on this machine's
loopback reaches nothing (static checks and the audit hook off, so only the sandbox stops it); with
the audit hook on, the runtime layer names the attempt (`sandbox_escape`)."""

from __future__ import annotations

import os
import socket
import threading

from ksmith.confine import Policy
from ksmith.evaluator.evaluate import DeviceEvaluator

#: An evaluator made in this process, outside the sandbox launcher: only the per-child
#: confinement, by the explicit opt-out (the default refuses without the whole sandbox).
UNCONFINED = Policy(require=False)

HERE = os.path.dirname(os.path.abspath(__file__))
TASK = os.path.join(HERE, "candidates", "tasks", "elementwise.py")
HONEST = open(os.path.join(HERE, "candidates", "honest", "elementwise.py")).read()


def test_a_candidate_cannot_reach_a_loopback_listener():
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.settimeout(0.5)
    port = listener.getsockname()[1]
    accepted = []
    stop = threading.Event()

    def accept():
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
                accepted.append(conn)
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    leak = HONEST.replace(
        "        super().__init__()",
        f"        super().__init__()\n        import socket\n        socket.create_connection(('127.0.0.1', {port}), "
        "timeout=2).sendall(b'secret')",
    )
    assert leak != HONEST
    request = {"task_id": "net", "reference": open(TASK).read(), "candidate": leak, "measure": False}
    ev = DeviceEvaluator(
        "cpu", {"trials": 2, "run_timeout_s": 15, "static_checks": False, "audit": False}, policy=UNCONFINED
    )
    audited = DeviceEvaluator("cpu", {"trials": 2, "run_timeout_s": 15, "static_checks": False}, policy=UNCONFINED)
    try:
        result = ev.evaluate(request)
        named = audited.evaluate(request)
    finally:
        ev.close()
        audited.close()
        stop.set()
        thread.join(timeout=5)
        listener.close()
    assert accepted == [], "the candidate reached the loopback listener"
    assert result["status"] in ("compile_error", "runtime_error"), result
    assert (named["status"], named["hack"]) == ("hacked", "sandbox_escape"), named
    assert "socket" in named["error_log"], named
    assert "Network is unreachable" in result["error_log"] or "refused" in result["error_log"].lower(), result[
        "error_log"
    ]
    # The same candidate without the connection is correct: the namespace breaks nothing else.
    ev = DeviceEvaluator("cpu", {"trials": 2, "run_timeout_s": 15, "static_checks": False}, policy=UNCONFINED)
    try:
        ok = ev.evaluate({"task_id": "net", "reference": open(TASK).read(), "candidate": HONEST, "measure": False})
    finally:
        ev.close()
    assert ok["status"] == "correct", ok["error_log"]
