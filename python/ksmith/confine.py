"""Linux confinement of an untrusted child process: a private mount namespace where one
directory is writable and everything else is read-only, a minimal ``/dev``, no capabilities.

Used by the probe's runner (see ``probe.sandbox``) and by the evaluator's reference and
candidate children (see ``evaluator.sandbox``). Every function returns an error text instead of
raising, so the caller decides whether a missing piece is fatal (the evaluator: yes; the probe:
it logs and goes on with what it has).
"""

from __future__ import annotations

import ctypes
import errno
import glob
import os
from collections.abc import Iterable

CLONE_NEWNS = 0x00020000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_REMOUNT = 32
MS_BIND = 4096
MS_MOVE = 8192
MS_REC = 16384
MS_PRIVATE = 1 << 18
PR_SET_DUMPABLE = 4
PR_CAPBSET_DROP = 24
PR_SET_NO_NEW_PRIVS = 38
PR_CAP_AMBIENT = 47
PR_CAP_AMBIENT_CLEAR_ALL = 4

#: Device nodes every confined process gets (no disk, no terminal).
BASIC_DEVICES = ("null", "zero", "full", "random", "urandom")

_libc = ctypes.CDLL(None, use_errno=True)


def unshare(flags: int) -> str | None:
    """``unshare(2)``; an error text on failure."""
    if _libc.unshare(ctypes.c_int(flags)) != 0:
        return os.strerror(ctypes.get_errno())
    return None


def mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None) -> str | None:
    """``mount(2)``; an error text on failure."""
    enc = lambda s: s.encode() if s is not None else None  # noqa: E731
    if _libc.mount(enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data)) != 0:
        return os.strerror(ctypes.get_errno())
    return None


def gpu_devices() -> list[str]:
    """The NVIDIA device nodes under ``/dev`` (``nvidiactl``, ``nvidia0``, ``nvidia-uvm``, the
    ``nvidia-caps`` folder...), as names relative to ``/dev``."""
    return sorted(os.path.basename(p) for p in glob.glob("/dev/nvidia*"))


#: Parts of ``/proc`` kept read-only when ``/proc`` itself stays writable (what container
#: runtimes protect): kernel tunables and interfaces that act on the whole machine.
PROC_READONLY = ("sys", "sysrq-trigger", "irq", "bus", "fs")


def confine_writes(
    writable: str, devices: Iterable[str] = BASIC_DEVICES, hide: str | None = None, writable_proc: bool = False
) -> str | None:
    """Moves the calling process into a new mount namespace where only ``writable`` (and a
    private ``/dev/shm``) can be written.

    Every mount is remounted read-only; ``/dev`` is replaced by a small tmpfs holding only the
    named ``devices`` (nodes or folders of the real ``/dev``), ``shm`` and the ``fd``/``std*``
    links. When ``hide`` is given (a folder that contains ``writable``), an empty tmpfs covers it
    and only ``writable`` is put back inside, so sibling folders (other children's files) cannot
    be read. With ``writable_proc``, ``/proc`` stays writable (the CUDA driver fails to
    initialize under a read-only ``/proc``) except ``PROC_READONLY``; the process's own
    capabilities still decide what it may write there. The working directory becomes
    ``writable``. Returns an error text when a step failed.
    """
    writable = os.path.realpath(writable)
    err = unshare(CLONE_NEWNS)
    if err:
        return f"unshare(CLONE_NEWNS): {err}"
    err = mount(None, "/", None, MS_REC | MS_PRIVATE, None)
    if err:
        return f"make mounts private: {err}"
    # Opened in the new namespace (a bind source must be a mount of the caller's namespace),
    # before `hide` covers it.
    keep_fd = os.open(writable, os.O_PATH | os.O_DIRECTORY)
    try:
        if hide:
            hide = os.path.realpath(hide)
            if os.path.dirname(writable) != hide:
                return f"{writable} is not directly inside {hide}"
            err = mount("tmpfs", hide, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,mode=700")
            if err:
                return f"tmpfs over {hide}: {err}"
            os.mkdir(writable, 0o700)
        err = mount(f"/proc/self/fd/{keep_fd}", writable, None, MS_BIND | MS_REC, None)
        if err:
            return f"bind {writable}: {err}"
    finally:
        os.close(keep_fd)
    err = _private_dev(writable, devices)
    if err:
        return err
    keep = {writable, "/dev/shm"}
    if writable_proc:
        keep.add("/proc")
        for name in PROC_READONLY:
            part = os.path.join("/proc", name)
            if os.path.exists(part):
                err = mount(part, part, None, MS_BIND | MS_REC, None)
                if err:
                    return f"bind {part}: {err}"
    failed = []
    with open("/proc/self/mountinfo") as f:
        points = [line.split()[4].replace("\\040", " ") for line in f]
    for point in points:
        if point in keep or not os.path.lexists(point):
            continue
        flags = MS_REMOUNT | MS_BIND | MS_RDONLY
        if mount(None, point, None, flags, None) and mount(None, point, None, flags | MS_NOSUID | MS_NODEV, None):
            failed.append(point)
    if failed:
        return "could not make read-only: " + ", ".join(failed[:5])
    os.chdir(writable)  # the old cwd is the same folder seen through the read-only mount
    return None


def _private_dev(writable: str, devices: Iterable[str]) -> str | None:
    """Builds the new ``/dev`` in a staging folder inside ``writable`` and moves it into place."""
    staging = os.path.join(writable, ".ksmith-dev")
    os.mkdir(staging, 0o755)
    err = mount("tmpfs", staging, "tmpfs", MS_NOSUID, "size=1m,mode=755")
    if err:
        return f"tmpfs for /dev: {err}"
    for name in devices:
        source = os.path.join("/dev", name)
        node = os.path.join(staging, name)
        if os.path.isdir(source):
            os.mkdir(node, 0o755)
        else:
            open(node, "w").close()
        err = mount(source, node, None, MS_BIND | MS_REC, None)
        if err:
            return f"bind /dev/{name}: {err}"
    os.mkdir(os.path.join(staging, "shm"), 0o1777)
    err = mount("tmpfs", os.path.join(staging, "shm"), "tmpfs", MS_NOSUID | MS_NODEV, "size=64m")
    if err:
        return f"tmpfs for /dev/shm: {err}"
    for name, target in (
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
    ):
        os.symlink(target, os.path.join(staging, name))
    err = mount(staging, "/dev", None, MS_MOVE, None)
    if err:
        return f"move the new /dev into place: {err}"
    return None


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def drop_capabilities() -> str | None:
    """Drops every capability (bounding, ambient, effective, permitted) and sets no_new_privs.

    Afterwards the process cannot undo its mounts, raise its limits, load kernel modules, bypass
    file permissions or trace processes it could not trace anyway, even though it still runs as
    uid 0.
    """
    _libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    _libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    for cap in range(64):
        if _libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 and ctypes.get_errno() == errno.EINVAL:
            break
    header = _CapHeader(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3
    data = (_CapData * 2)()
    if _libc.capset(ctypes.byref(header), data) != 0:
        return f"capset: {os.strerror(ctypes.get_errno())}"
    return None


def set_undumpable() -> None:
    """Makes the calling process non-dumpable: a process of the same user without
    ``CAP_SYS_PTRACE`` (a confined child) can neither ptrace it nor read its memory through
    ``/proc/PID/mem``."""
    _libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
