"""scripts/no_leftovers.py, the check `make test` runs each suite under: a process that outlives
the command fails it (and is killed), a command that cleans up passes with its own status."""

from __future__ import annotations

import os
import subprocess
import sys
import time

SCRIPT = os.path.join(
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "scripts", "no_leftovers.py"
)


def run(*command: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, SCRIPT, "--grace", "1", "--", *command], capture_output=True, text=True, timeout=60
    )


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_an_orphaned_process_fails_the_command_and_is_killed():
    # The shell starts a sleeper in the background and exits: the sleeper is orphaned.
    done = run("sh", "-c", "sleep 300 & echo $!")
    assert done.returncode == 1, done
    pid = int(done.stdout.split()[0])
    assert "1 process(es) outlived `sh -c sleep 300 & echo $!`" in done.stderr, done.stderr
    assert f"{pid} sleep 300" in done.stderr, done.stderr
    time.sleep(0.5)
    assert not alive(pid), "the leftover was killed"


def test_a_command_that_cleans_up_keeps_its_status():
    assert run("sh", "-c", "sleep 300 & kill $!; wait; exit 0").returncode == 0
    done = run("sh", "-c", "exit 3")
    assert done.returncode == 3 and done.stderr == "", done
