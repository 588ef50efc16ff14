"""Pids cgroups: the process limit of each child where the cgroup hierarchy is writable (as root;
the kernel does not apply RLIMIT_NPROC to the host's root user).

Layout, under the first writable hierarchy with a pids controller (cgroup v1 ``pids``, or v2)::

    ksmith-<pid>/            made by the launcher (or a worker outside the launcher), pid = its own
    ksmith-<pid>/worker/     the launcher and everything it starts (cgroup v2 needs this leaf)
    ksmith-<pid>/child-<n>/  one per child, ``pids.max`` = its limit

Folders of processes that are gone are removed by the next one that makes its own.
"""

from __future__ import annotations

import os
import time

HIERARCHIES = ("/sys/fs/cgroup/pids", "/sys/fs/cgroup")
PREFIX = "ksmith-"


def _write(path: str, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)


def _remove_tree(path: str) -> None:
    for name in os.listdir(path):
        sub = os.path.join(path, name)
        if os.path.isdir(sub):
            _remove_tree(sub)
    os.rmdir(path)


def remove_stale(base: str) -> None:
    """Removes the ``ksmith-<pid>`` folders of processes that no longer run."""
    try:
        names = [n for n in os.listdir(base) if n.startswith(PREFIX)]
    except OSError:
        return
    for name in names:
        pid = name[len(PREFIX) :]
        if pid.isdigit() and not os.path.exists(f"/proc/{pid}"):
            try:
                _remove_tree(os.path.join(base, name))
            except OSError:
                pass


def make_base(owner: int, join: bool) -> str | None:
    """Makes ``ksmith-<owner>`` in the first writable hierarchy with a pids controller and,
    with `join`, moves the calling process into its ``worker`` leaf. None where there is none."""
    for hierarchy in HIERARCHIES:
        if not (os.path.isdir(hierarchy) and os.access(hierarchy, os.W_OK)):
            continue
        remove_stale(hierarchy)
        base = os.path.join(hierarchy, f"{PREFIX}{owner}")
        try:
            os.mkdir(base)
            control = os.path.join(hierarchy, "cgroup.subtree_control")
            if not os.path.exists(os.path.join(base, "pids.max")) and os.path.exists(control):
                # cgroup v2 whose root does not hand the pids controller down yet.
                os.rmdir(base)
                _write(control, "+pids")
                os.mkdir(base)
            if not os.path.exists(os.path.join(base, "pids.max")):
                os.rmdir(base)
                continue
            if os.path.exists(os.path.join(base, "cgroup.subtree_control")):
                _write(os.path.join(base, "cgroup.subtree_control"), "+pids")
            if join:
                leaf = os.path.join(base, "worker")
                os.mkdir(leaf)
                _write(os.path.join(leaf, "cgroup.procs"), "0")
            return base
        except OSError:
            try:
                _remove_tree(base)
            except OSError:
                pass
    return None


def make_child(base: str, name: str, max_processes: int) -> str | None:
    """A child cgroup of `base` capped at `max_processes`; None when it cannot be made."""
    path = os.path.join(base, name)
    try:
        os.mkdir(path)
        _write(os.path.join(path, "pids.max"), str(max_processes))
        return path
    except OSError:
        remove(path)
        return None


def join(path: str) -> str | None:
    """Moves the calling process into the cgroup at `path`; an error text on failure."""
    try:
        _write(os.path.join(path, "cgroup.procs"), "0")
    except OSError as e:
        return str(e)
    return None


def remove(path: str) -> None:
    """Removes a child cgroup once its processes are gone (they may take a moment to leave)."""
    for _ in range(50):
        try:
            os.rmdir(path)
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.01)
