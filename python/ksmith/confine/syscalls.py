"""The Linux calls the sandbox makes that Python's standard library does not offer (``unshare``,
``mount``, ``prctl``, ``capset``), through ctypes. Each returns an error text instead of
raising, so the caller decides whether a missing piece is fatal.
"""

from __future__ import annotations

import ctypes
import errno
import os

CLONE_NEWNS = 0x00020000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000

MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_NOEXEC = 8
MS_REMOUNT = 32
MS_BIND = 4096
MS_MOVE = 8192
MS_REC = 16384
MS_PRIVATE = 1 << 18
MNT_DETACH = 2

PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_CAPBSET_DROP = 24
PR_SET_NO_NEW_PRIVS = 38
PR_CAP_AMBIENT = 47
PR_CAP_AMBIENT_CLEAR_ALL = 4
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2

CAP_SYS_ADMIN = 21

_libc = ctypes.CDLL(None, use_errno=True)


def _error() -> str:
    return os.strerror(ctypes.get_errno())


def unshare(flags: int) -> str | None:
    """``unshare(2)``; an error text on failure."""
    if _libc.unshare(ctypes.c_int(flags)) != 0:
        return _error()
    return None


def setns(fd: int, nstype: int) -> str | None:
    """``setns(2)``; an error text on failure."""
    if _libc.setns(fd, nstype) != 0:
        return _error()
    return None


def mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> str | None:
    """``mount(2)``; an error text on failure."""

    def enc(s: str | None) -> bytes | None:
        return s.encode() if s is not None else None

    if _libc.mount(enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data)) != 0:
        return _error()
    return None


def umount(target: str) -> str | None:
    """``umount2(target, MNT_DETACH)``; an error text on failure."""
    if _libc.umount2(target.encode(), MNT_DETACH) != 0:
        return _error()
    return None


def prctl(option: int, arg: int = 0) -> str | None:
    """``prctl(option, arg, 0, 0, 0)``; an error text on failure."""
    if _libc.prctl(option, ctypes.c_ulong(arg), 0, 0, 0) != 0:
        return _error()
    return None


def die_with_parent() -> None:
    """SIGKILL when the parent process ends."""
    prctl(PR_SET_PDEATHSIG, 9)


def set_undumpable() -> None:
    """Makes the calling process non-dumpable: a process of the same user without
    ``CAP_SYS_PTRACE`` (a confined child) can neither ptrace it nor read its memory through
    ``/proc/PID/mem``."""
    prctl(PR_SET_DUMPABLE, 0)


def has_capability(cap: int) -> bool:
    """Whether ``cap`` is in the calling thread's effective set."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("CapEff:"):
                return bool(int(line.split()[1], 16) >> cap & 1)
    return False


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def drop_capabilities() -> str | None:
    """Drops every capability (bounding, ambient, effective, permitted, inheritable) and sets
    ``no_new_privs``: the process can no longer mount, raise its limits, load kernel modules,
    bypass file permissions, or regain anything by running a set-uid program."""
    err = prctl(PR_SET_NO_NEW_PRIVS, 1)
    if err:
        return f"no_new_privs: {err}"
    prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL)
    for cap in range(64):
        if _libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 and ctypes.get_errno() == errno.EINVAL:
            break
    header = _CapHeader(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3
    data = (_CapData * 2)()
    if _libc.capset(ctypes.byref(header), data) != 0:
        return f"capset: {_error()}"
    return None


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def install_seccomp(program: bytes) -> str | None:
    """Installs a compiled classic-BPF seccomp filter (``sock_filter`` records, 8 bytes each)
    on the calling thread and its future children. Needs ``no_new_privs`` (or CAP_SYS_ADMIN)."""
    buf = ctypes.create_string_buffer(program, len(program))
    prog = _SockFprog(len(program) // 8, ctypes.cast(buf, ctypes.c_void_p))
    if _libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0) != 0:
        return f"seccomp: {_error()}"
    return None
