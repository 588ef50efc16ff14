"""The seccomp filters of the sandbox, compiled by hand to classic BPF (no libseccomp needed).

Two filters, one list of calls:

- ``child``: what untrusted code runs under. Every call in ``DENIED`` fails with EPERM, and so do
  ``mount``/``umount2``, ``unshare``, ``setns`` and a ``clone`` that asks for any new namespace
  (no new user namespace, hence no capabilities regained); ``clone3`` fails with ENOSYS (its
  flags sit behind a pointer a filter cannot read; the C library then falls back to ``clone``).
- ``worker``: what the warm worker itself runs under (given to bubblewrap): the same, except
  that it may mount, create namespaces other than user namespaces and return to its own PID
  namespace (``setns``), which confining its children needs.

System calls of another ABI than the native one (x32, or 32-bit calls on a 64-bit kernel) are
refused as a whole. Supported: x86_64 and aarch64; ``compile_filter`` returns None elsewhere.
"""

from __future__ import annotations

import errno
import os
import struct

# Denied in both filters. Each name maps to (x86_64, aarch64) numbers (from the kernel's
# unistd_64.h and asm-generic/unistd.h); None where the call does not exist on that ABI.
DENIED: dict[str, tuple[int | None, int | None]] = {
    "ptrace": (101, 117),
    "process_vm_readv": (310, 270),
    "process_vm_writev": (311, 271),
    "kcmp": (312, 272),
    "pidfd_getfd": (438, 438),
    "keyctl": (250, 219),
    "add_key": (248, 217),
    "request_key": (249, 218),
    "bpf": (321, 280),
    "perf_event_open": (298, 241),
    "userfaultfd": (323, 282),
    "io_uring_setup": (425, 425),
    "io_uring_enter": (426, 426),
    "io_uring_register": (427, 427),
    "kexec_load": (246, 104),
    "kexec_file_load": (320, 294),
    "init_module": (175, 105),
    "finit_module": (313, 273),
    "delete_module": (176, 106),
    "reboot": (169, 142),
    "swapon": (167, 224),
    "swapoff": (168, 225),
    "acct": (163, 89),
    "settimeofday": (164, 170),
    "clock_settime": (227, 112),
    "clock_adjtime": (305, 266),
    "adjtimex": (159, 171),
    "iopl": (172, None),
    "ioperm": (173, None),
    "open_by_handle_at": (304, 265),
    "name_to_handle_at": (303, 264),
    "syslog": (103, 116),
    "quotactl": (179, 60),
    "quotactl_fd": (443, 443),
    "chroot": (161, 51),
    "pivot_root": (155, 41),
    "fsopen": (430, 430),
    "fsconfig": (431, 431),
    "fsmount": (432, 432),
    "fspick": (433, 433),
    "move_mount": (429, 429),
    "open_tree": (428, 428),
    "mount_setattr": (442, 442),
    "lookup_dcookie": (212, 18),
    "vhangup": (153, 58),
    "uselib": (134, None),
    "nfsservctl": (180, 42),
    "_sysctl": (156, None),
    "create_module": (174, None),
    "get_kernel_syms": (177, None),
    "query_module": (178, None),
}
#: Denied to children only: the worker mounts, unshares and setns to confine them.
UNSHARE = (272, 97)
CHILD_ONLY: dict[str, tuple[int | None, int | None]] = {
    "mount": (165, 40),
    "umount2": (166, 39),
    "unshare": UNSHARE,
    "setns": (308, 268),
}
CLONE = (56, 220)
CLONE3 = (435, 435)

CLONE_NEWUSER = 0x10000000
#: Every CLONE_NEW* flag (time, mount, cgroup, uts, ipc, user, pid, net).
CLONE_NAMESPACES = 0x00000080 | 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000

_ARCHES = {
    # machine: (AUDIT_ARCH_*, column in the tables, lowest number of a foreign ABI or None)
    "x86_64": (0xC000003E, 0, 0x40000000),
    "aarch64": (0xC00000B7, 1, None),
}

RET_ALLOW = 0x7FFF0000
RET_KILL_PROCESS = 0x80000000
RET_ERRNO = 0x00050000

_LD_ABS = 0x20  # BPF_LD | BPF_W | BPF_ABS
_JEQ = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
_JGE = 0x35  # BPF_JMP | BPF_JGE | BPF_K
_JSET = 0x45  # BPF_JMP | BPF_JSET | BPF_K
_RET = 0x06  # BPF_RET | BPF_K

_NR, _ARCH, _ARG0 = 0, 4, 16  # offsets in struct seccomp_data (arg0's low 32 bits on little endian)


def compile_filter(kind: str, machine: str | None = None) -> bytes | None:
    """The ``child`` or ``worker`` filter for ``machine`` (default: this one) as packed
    ``sock_filter`` records, or None on an architecture without tables."""
    if kind not in ("child", "worker"):
        raise ValueError(f"unknown filter kind {kind!r}")
    arch = _ARCHES.get(machine or os.uname().machine)
    if arch is None:
        return None
    audit_arch, col, foreign = arch
    denied = dict(DENIED)
    if kind == "child":
        denied.update(CHILD_ONLY)
    numbers = sorted({nr for nrs in denied.values() if (nr := nrs[col]) is not None})
    clone_mask = CLONE_NAMESPACES if kind == "child" else CLONE_NEWUSER

    # Instructions with symbolic jump targets, resolved below.
    prog: list[tuple[int, int | str, int | str, int]] = [
        (_LD_ABS, 0, 0, _ARCH),
        (_JEQ, 0, "kill", audit_arch),
        (_LD_ABS, 0, 0, _NR),
    ]
    if foreign is not None:
        prog.append((_JGE, "eperm", 0, foreign))
    prog += [(_JEQ, "eperm", 0, nr) for nr in numbers]
    prog.append((_JEQ, "enosys", 0, CLONE3[col]))
    prog.append((_JEQ, "flags", 0, CLONE[col]))
    if kind == "worker":
        prog.append((_JEQ, "flags", 0, UNSHARE[col]))
    labels = {}
    prog.append((_RET, 0, 0, RET_ALLOW))
    labels["flags"] = len(prog)
    prog.append((_LD_ABS, 0, 0, _ARG0))
    prog.append((_JSET, "eperm", 0, clone_mask))
    prog.append((_RET, 0, 0, RET_ALLOW))
    labels["eperm"] = len(prog)
    prog.append((_RET, 0, 0, RET_ERRNO | errno.EPERM))
    labels["enosys"] = len(prog)
    prog.append((_RET, 0, 0, RET_ERRNO | errno.ENOSYS))
    labels["kill"] = len(prog)
    prog.append((_RET, 0, 0, RET_KILL_PROCESS))

    def offset(target: int | str, at: int) -> int:
        if isinstance(target, str):
            delta = labels[target] - at - 1
            if not 0 <= delta <= 255:
                raise AssertionError(f"jump of {delta} instructions")
            return delta
        return target

    out = bytearray()
    for i, (code, jt, jf, k) in enumerate(prog):
        out += struct.pack("<HBBI", code, offset(jt, i), offset(jf, i), k)
    return bytes(out)
