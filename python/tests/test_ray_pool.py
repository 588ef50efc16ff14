"""The Ray evaluator pool on loopback: a private one-node Ray cluster in CPU-interpreter mode,
served over the evaluator's HTTP protocol, judging honest, hacked and broken candidates."""

from __future__ import annotations

import os as _os
import sys as _sys

_sys.path.insert(0, _os.path.join(_os.path.dirname(_os.path.abspath(__file__)), ".."))

import json  # noqa: E402
import os  # noqa: E402
import select  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import urllib.error  # noqa: E402
import urllib.request  # noqa: E402

import pytest  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
PYROOT = os.path.dirname(HERE)
CANDIDATES = os.path.join(HERE, "candidates")


def _read(rel: str) -> str:
    with open(os.path.join(CANDIDATES, rel)) as f:
        return f.read()


@pytest.fixture(scope="module")
def pool_url():
    env = dict(os.environ, PYTHONPATH=PYROOT, RAY_USAGE_STATS_ENABLED="0")
    proc = subprocess.Popen(
        [sys.executable, "-m", "ksmith.ray_pool", "--local", "--num-cpus", "2", "--cpu-actors", "2", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
        start_new_session=True,
    )
    deadline = time.monotonic() + 240
    line = ""
    while time.monotonic() < deadline and proc.poll() is None:
        ready, _, _ = select.select([proc.stdout], [], [], 1.0)
        if ready:
            line = proc.stdout.readline()
            if line.startswith("{"):
                break
    if not line.startswith("{"):
        proc.kill()
        pytest.fail(f"the Ray pool did not start (exit {proc.poll()})")
    info = json.loads(line)
    assert info["actors"] == 2 and info["devices"] == ["cpu"]
    yield info["listening"]
    os.killpg(proc.pid, 15)
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)


def _post(url: str, body: dict, route: str = "/v1/evaluate") -> tuple[int, dict]:
    req = urllib.request.Request(
        url + route, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(req, timeout=300) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def _evaluate(url: str, candidate: str, task: str) -> dict:
    code, body = _post(
        url,
        {
            "v": 1,
            "request": {"task_id": task, "reference": _read(task), "candidate": _read(candidate), "measure": True},
        },
    )
    assert code == 200, body
    return body["result"]


def test_health_lists_one_worker_per_actor(pool_url):
    with urllib.request.urlopen(pool_url + "/v1/health", timeout=60) as r:
        body = json.loads(r.read())
    assert body["pool"] == "ray" and body["actors"] == 2
    assert {w["device"] for w in body["workers"]} == {"cpu"}
    assert len({w["actor_pid"] for w in body["workers"]}) == 2, "each actor is its own process"
    for w in body["workers"]:  # each actor's worker runs inside the launcher's sandbox
        assert w["sandbox"]["confined"] is True and w["sandbox"]["launcher"] == "bwrap", w["sandbox"]


def test_honest_candidate_is_correct_and_not_timed_on_cpu(pool_url):
    r = _evaluate(pool_url, "honest/elementwise.py", "tasks/elementwise.py")
    assert r["status"] == "correct", r["error_log"]
    assert r["speedup"] is None
    assert r["hardware"]["device"].startswith("cpu")


def test_hacks_and_garbage_keep_their_verdicts_through_the_pool(pool_url):
    assert _evaluate(pool_url, "adversarial/torch_fallback.py", "tasks/elementwise.py")["hack"] == "torch_fallback"
    assert _evaluate(pool_url, "garbage/wrong_shape.py", "tasks/elementwise.py")["status"] == "incorrect"


def test_broken_reference_is_a_422_not_a_verdict(pool_url):
    broken = (
        "import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x\ndef "
        "get_inputs():\n    raise RuntimeError('no inputs')\ndef get_init_inputs():\n    return []\n"
    )
    code, body = _post(
        pool_url,
        {
            "v": 1,
            "request": {
                "task_id": "broken",
                "reference": broken,
                "candidate": _read("honest/elementwise.py"),
                "measure": False,
            },
        },
    )
    assert code == 422 and body["error"]["kind"] == "broken_reference", body


def test_preflight_builds_the_reference_on_an_actor_or_names_why_it_does_not_run(pool_url):
    task = "tasks/elementwise.py"
    code, body = _post(pool_url, {"v": 1, "request": {"task_id": task, "reference": _read(task)}}, "/v1/preflight")
    assert code == 200 and body["reference"]["task_id"] == task, body
    broken = _read(task).replace(
        "def forward(self, x, y):", "def forward(self, x, y):\n        raise ValueError('not here')"
    )
    assert broken != _read(task)
    request = {"task_id": "broken-forward", "reference": broken}
    code, body = _post(pool_url, {"v": 1, "request": request}, "/v1/preflight")
    assert code == 422 and body["error"]["kind"] == "broken_reference", body
    assert "ValueError: not here" in body["error"]["message"], body


def test_wrong_protocol_version_is_refused(pool_url):
    code, body = _post(pool_url, {"v": 99, "request": {}})
    assert code == 400 and body["error"]["kind"] == "bad_request"


def test_without_bubblewrap_the_pool_refuses_in_one_line_before_any_candidate():
    env = dict(os.environ, PYTHONPATH=PYROOT, RAY_USAGE_STATS_ENABLED="0", KSMITH_BWRAP="/nonexistent/bwrap")
    done = subprocess.run(
        [sys.executable, "-m", "ksmith.ray_pool", "--local", "--num-cpus", "1", "--cpu-actors", "1", "--port", "0"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode == 78 and "listening" not in done.stdout, done
    lines = [x for x in done.stderr.splitlines() if x.startswith("ksmith sandbox: refusing to run untrusted code")]
    assert lines and "bubblewrap is not at /nonexistent/bwrap" in lines[-1], done.stderr
    assert "--allow-unconfined" in lines[-1], lines[-1]
