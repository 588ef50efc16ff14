#!/usr/bin/env python3
"""Runs a command and fails when it leaves a process behind (`make test` runs each test suite
under it).

    python3 scripts/no_leftovers.py [--grace S] -- COMMAND [ARGS...]

This process becomes a child subreaper (Linux `PR_SET_CHILD_SUBREAPER`), so every process the
command starts that outlives its parent is re-parented here rather than to init. Once the
command has exited, whatever is still running below this process is a leftover: a daemon a test
started and only half stopped, a worker whose pipe was never closed. After `--grace` seconds for
processes that are already on their way out, each leftover is printed (pid and command line) and
killed, and the exit status is 1 (or the command's own, when it failed).
"""

from __future__ import annotations

import argparse
import ctypes
import os
import signal
import subprocess
import sys
import time

PR_SET_CHILD_SUBREAPER = 36


def descendants(root: int) -> dict[int, str]:
    """The live processes below `root` (zombies excluded), with their command lines."""
    parents: dict[int, int] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        # "pid (comm) state ppid ...": comm may hold spaces and parentheses.
        fields = stat[stat.rindex(")") + 2 :].split()
        if fields[0] != "Z":
            parents[int(name)] = int(fields[1])
    found: dict[int, str] = {}
    todo = [root]
    while todo:
        parent = todo.pop()
        for pid, ppid in parents.items():
            if ppid == parent and pid not in found:
                found[pid] = command_line(pid)
                todo.append(pid)
    return found


def command_line(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode("utf-8", "replace").strip() or "?"
    except OSError:
        return "?"


def reap() -> None:
    """Collects the exit status of every re-parented child that has ended."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--grace", type=float, default=10.0, help="seconds for ending processes to go")
    ap.add_argument("command", nargs=argparse.REMAINDER)
    a = ap.parse_args(argv)
    command = a.command[1:] if a.command[:1] == ["--"] else a.command
    if not command:
        ap.error("no command")
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        print(f"no_leftovers: cannot become a subreaper: {os.strerror(ctypes.get_errno())}", file=sys.stderr)
        return 2
    status = subprocess.call(command)
    me = os.getpid()
    until = time.monotonic() + a.grace
    left = descendants(me)
    while left and time.monotonic() < until:
        time.sleep(0.2)
        reap()
        left = descendants(me)
    if not left:
        return status
    print(f"no_leftovers: {len(left)} process(es) outlived `{' '.join(command)}`:", file=sys.stderr)
    for pid, cmd in sorted(left.items()):
        print(f"  {pid} {cmd}", file=sys.stderr)
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    time.sleep(0.5)
    reap()
    return status or 1


if __name__ == "__main__":
    sys.exit(main())
