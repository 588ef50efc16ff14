"""The worker's JSON-lines protocol (a real worker process) and the HTTP endpoint (loopback)."""

from __future__ import annotations

import os as _os
import sys as _sys

_sys.path.insert(0, _os.path.join(_os.path.dirname(_os.path.abspath(__file__)), ".."))

import json  # noqa: E402
import os  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import threading  # noqa: E402
import urllib.error  # noqa: E402
import urllib.request  # noqa: E402

from ksmith.confine import Policy  # noqa: E402
from ksmith.confine.policy import REFUSAL  # noqa: E402
from ksmith.evaluator.server import make_server  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
PYROOT = os.path.dirname(HERE)
SYNTAX_ERROR = "class ModelNew(:\n"
BROKEN_REFERENCE = (
    "import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x\ndef get_inputs():\n   "
    " raise RuntimeError('no inputs today')\ndef get_init_inputs():\n    return []\n"
)
HONEST = open(os.path.join(HERE, "candidates", "honest", "elementwise.py")).read()
ELEMENTWISE = open(os.path.join(HERE, "candidates", "tasks", "elementwise.py")).read()
CUDA = open(os.path.join(HERE, "candidates", "cuda", "honest", "add_relu_half.py")).read()


def _request(candidate: str, reference: str = "x = 1\n", task: str = "t") -> dict:
    return {"task_id": task, "reference": reference, "candidate": candidate, "measure": True}


WORKER = ["-m", "ksmith.evaluator", "worker", "--device", "cpu"]
LAUNCHER = [sys.executable, "-s", "-m", "ksmith.confine", "--policy", "{}", "--"]


def test_worker_speaks_json_lines():
    env = dict(os.environ, PYTHONPATH=PYROOT)
    proc = subprocess.Popen(
        [*LAUNCHER, *WORKER],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        hello = json.loads(proc.stdout.readline())
        assert hello["v"] == 1 and hello["type"] == "hello" and hello["device"] == "cpu"
        lines = [
            {"v": 1, "type": "ping", "id": "p"},
            {"v": 1, "type": "evaluate", "id": "a", "request": _request(SYNTAX_ERROR)},
            {"v": 1, "type": "evaluate", "id": "b", "request": _request(HONEST, BROKEN_REFERENCE, "broken")},
            {"v": 2, "type": "ping", "id": "old"},
            {"v": 1, "type": "evaluate", "id": "c", "request": {"task_id": "t"}},
            {"v": 1, "type": "evaluate", "id": "d", "request": {**_request(CUDA), "backend": "cuda"}},
            {"v": 1, "type": "evaluate", "id": "e", "request": {**_request(HONEST), "backend": "tilelang"}},
            {"v": 1, "type": "preflight", "id": "f", "request": {"task_id": "ok", "reference": ELEMENTWISE}},
            {"v": 1, "type": "preflight", "id": "g", "request": {"task_id": "broken", "reference": BROKEN_REFERENCE}},
            {"v": 1, "type": "preflight", "id": "h", "request": {"task_id": "t"}},
        ]
        for msg in lines:
            proc.stdin.write(json.dumps(msg) + "\n")
        proc.stdin.write("garbage\n")
        proc.stdin.write(json.dumps({"v": 1, "type": "shutdown"}) + "\n")
        proc.stdin.flush()
        answers = [json.loads(line) for line in proc.stdout]
        assert proc.wait(timeout=60) == 0
    finally:
        proc.kill()
    by_id = {a.get("id"): a for a in answers}
    assert by_id["p"]["type"] == "pong"
    assert by_id["a"]["type"] == "result" and by_id["a"]["result"]["status"] == "compile_error"
    # the phases it went through: the worker's admission, then the static checks that refused it
    assert set(by_id["a"]["profile"]) == {"admission", "static_check"}, by_id["a"]["profile"]
    assert by_id["b"]["type"] == "error" and by_id["b"]["error"]["kind"] == "broken_reference"
    assert "no inputs today" in by_id["b"]["error"]["message"] and by_id["b"]["error"]["task_id"] == "broken"
    assert by_id["c"]["error"]["kind"] == "bad_request"
    # a CPU worker cannot build CUDA: an error naming what is missing, never a verdict on the candidate
    assert by_id["d"]["type"] == "error" and by_id["d"]["error"]["kind"] == "backend_unavailable"
    assert "the CUDA backend is unavailable on this worker" in by_id["d"]["error"]["message"]
    assert "a CUDA GPU" in by_id["d"]["error"]["message"] and by_id["d"]["error"]["task_id"] == "t"
    assert by_id["e"]["error"]["kind"] == "bad_request" and "tilelang" in by_id["e"]["error"]["message"]
    # a preflight builds the reference and runs it, no candidate needed; one that does not run is
    # the task's, named as an evaluation names it
    assert by_id["f"]["type"] == "preflighted" and by_id["f"]["reference"]["task_id"] == "ok", by_id["f"]
    assert by_id["f"]["reference"]["reference_ms"] is None and "reference" in by_id["f"]["profile"]
    assert by_id["g"]["type"] == "error" and by_id["g"]["error"]["kind"] == "broken_reference"
    assert "no inputs today" in by_id["g"]["error"]["message"] and by_id["g"]["error"]["task_id"] == "broken"
    assert by_id["h"]["error"]["kind"] == "bad_request" and "reference" in by_id["h"]["error"]["message"]
    protocol_errors = [a for a in answers if a["type"] == "error" and a["error"]["kind"] == "protocol"]
    assert len(protocol_errors) == 2 and any("version" in a["error"]["message"] for a in protocol_errors)


def _post(url: str, body: dict) -> tuple[int, dict]:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_a_worker_started_without_the_launcher_refuses_before_its_hello():
    env = dict(os.environ, PYTHONPATH=PYROOT)
    env.pop("KSMITH_SANDBOX", None)
    done = subprocess.run([sys.executable, *WORKER], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 78 and done.stdout == "", done
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(REFUSAL), done.stderr
    assert "filesystem view: the worker was not started by the sandbox launcher" in lines[0], lines[0]


def _serve(*args: str) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=PYROOT, KSMITH_BWRAP="/nonexistent/bwrap")
    command = [sys.executable, "-m", "ksmith.evaluator", "serve", "--port", "0", *args]
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def test_serve_refuses_without_bubblewrap_unless_told_to_run_unconfined():
    refused = _serve()
    out, err = refused.communicate(timeout=300)
    assert refused.returncode == 78 and out == "", (out, err)
    assert err.startswith(REFUSAL) and err.count("\n") == 1, err
    assert "bubblewrap is not at /nonexistent/bwrap" in err and "--allow-unconfined" in err, err

    served = _serve("--allow-unconfined")
    try:
        listening = json.loads(served.stdout.readline())["listening"]
        with urllib.request.urlopen(listening + "/v1/health", timeout=30) as r:
            sandbox = json.loads(r.read())["sandbox"]
        assert sandbox["confined"] is False and sandbox["filesystem_view"] is False, sandbox
    finally:
        served.kill()
        _, err = served.communicate(timeout=60)
    # the launcher says so before it starts the server
    assert "WARNING: running without the filesystem sandbox, as --allow-unconfined asks" in err, err


def test_http_endpoint_over_loopback():
    server, evaluator = make_server("127.0.0.1", 0, "cpu", {}, policy=Policy(require=False))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        with urllib.request.urlopen(base + "/v1/health", timeout=10) as r:
            assert json.loads(r.read())["type"] == "hello"
        code, body = _post(base + "/v1/evaluate", {"v": 1, "request": _request(SYNTAX_ERROR)})
        assert code == 200 and body["result"]["status"] == "compile_error"
        code, body = _post(base + "/v1/evaluate", {"v": 9, "request": _request(SYNTAX_ERROR)})
        assert code == 400 and "version" in body["error"]["message"]
        code, body = _post(base + "/v1/evaluate", {"v": 1, "request": _request(HONEST, BROKEN_REFERENCE, "broken")})
        assert code == 422 and body["error"]["kind"] == "broken_reference"
        code, body = _post(base + "/v1/preflight", {"v": 1, "request": {"task_id": "ok", "reference": ELEMENTWISE}})
        assert code == 200 and body["reference"]["task_id"] == "ok", body
        code, body = _post(base + "/v1/preflight", {"v": 1, "request": {"task_id": "b", "reference": BROKEN_REFERENCE}})
        assert (
            code == 422
            and body["error"]["kind"] == "broken_reference"
            and "no inputs today" in body["error"]["message"]
        )
    finally:
        server.shutdown()
        evaluator.close()
