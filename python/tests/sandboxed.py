"""Running a script the way ksmith runs its workers: through the sandbox launcher
(``python -m ksmith.confine``), as this process's user or as an ordinary user (when this
process is root, as on CI: ``tests/as_ordinary_user.sh`` makes the account and runs it)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PYTHON_DIR = os.path.join(ROOT, "python")
AS_ORDINARY_USER = os.path.join(ROOT, "tests", "as_ordinary_user.sh")

#: Secrets a caller's environment may hold; no sandboxed process may see any of them.
SECRETS = {
    "OPENAI_API_KEY": "sk-ksmith-test-secret-1",
    "KSMITH_TEACHER_API_KEY": "ksmith-test-secret-2",
    "HF_TOKEN": "hf_ksmith-test-secret-3",
    "AWS_SECRET_ACCESS_KEY": "ksmith-test-secret-4",
}

USERS = ["this user", "ordinary user"]


def run_launched(script: str, user: str, policy: dict, timeout: float = 600) -> dict:
    """Runs ``python -c script`` in the sandbox with the caller's environment plus `SECRETS`;
    returns the JSON document its last stdout line holds."""
    command = [sys.executable, "-s", "-m", "ksmith.confine", "--policy", json.dumps(policy), "--", "-c", script]
    if user == "ordinary user":
        if os.geteuid() != 0:
            pytest.skip("not root: the run as this user already is an ordinary user's")
        command = ["sh", AS_ORDINARY_USER, sys.executable, PYTHON_DIR, "--", *command]
    env = {**os.environ, **SECRETS, "PYTHONPATH": PYTHON_DIR, "PYTHONDONTWRITEBYTECODE": "1"}
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout, cwd=PYTHON_DIR)
    assert done.returncode == 0, (
        f"exit {done.returncode}\nstdout:\n{done.stdout[-3000:]}\nstderr:\n{done.stderr[-6000:]}"
    )
    return json.loads(done.stdout.strip().splitlines()[-1])
