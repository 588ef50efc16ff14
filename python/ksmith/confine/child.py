"""Confining one child: what a process does to itself before it loads untrusted code.

Two calls, made by a single-threaded process (a fork of the probe worker, or an evaluator child
just started):

- `isolate()` unshares the mount, IPC, UTS and network namespaces. The process is PID 1 of a PID
  namespace of its own already when its worker could make one (`jail.Jail.new_pid_namespace`:
  inside the launcher's sandbox, or as root), so when it ends the kernel kills everything it
  started. Elsewhere (outside the sandbox, not root) it unshares a user namespace, which grants
  the capabilities for the rest, and a PID namespace, and forks: the caller stays outside as
  the forked process's supervisor (`mirror`).
- `confine()`, in the process that will run untrusted code: a fresh ``/proc`` of its PID namespace (machine-wide
  parts read-only), the other children's workspaces hidden, its own workspace (a tmpfs the
  worker mounted, see `jail.Jail.workspace`) as the only writable place besides a ``/dev/shm``
  inside it, every other mount read-only, a ``/dev`` with only the basic (and on a GPU the
  NVIDIA) nodes, the limits (processes, CPU time, file size, address space), no capabilities,
  ``no_new_privs`` and the ``child`` seccomp filter (no mount, no new namespaces, no ptrace,
  keyctl, bpf, perf_event_open...).

Inside the launcher's bubblewrap sandbox the process sees only the interpreter, the Python
environment and the runtime package anyway (see `launch`); outside it, `confine` still does
all of the above, but the rest of the machine's files stay readable.
"""

from __future__ import annotations

import dataclasses
import glob
import os
import resource
import signal

from . import seccomp
from .policy import SandboxError
from .syscalls import (
    CAP_SYS_ADMIN,
    CLONE_NEWIPC,
    CLONE_NEWNET,
    CLONE_NEWNS,
    CLONE_NEWPID,
    CLONE_NEWUSER,
    CLONE_NEWUTS,
    MS_BIND,
    MS_MOVE,
    MS_NODEV,
    MS_NOEXEC,
    MS_NOSUID,
    MS_PRIVATE,
    MS_RDONLY,
    MS_REC,
    MS_REMOUNT,
    die_with_parent,
    drop_capabilities,
    has_capability,
    install_seccomp,
    mount,
    unshare,
)

#: Device nodes every child gets (no disk, no terminal).
BASIC_DEVICES = ("null", "zero", "full", "random", "urandom")

#: Parts of a fresh ``/proc`` made read-only: kernel tunables and interfaces that act on the whole
#: machine (what container runtimes protect; a process mapped to the host's root could otherwise
#: write ``/proc/sys`` even without capabilities).
PROC_READONLY = ("sys", "sysrq-trigger", "irq", "bus", "fs")

#: Flags of a mount option list that a read-only remount must keep (locked ones cannot change).
_KEPT_FLAGS = {"nosuid": MS_NOSUID, "nodev": MS_NODEV, "noexec": MS_NOEXEC, "noatime": 1024, "nodiratime": 2048}
_MS_RELATIME = 1 << 21


def gpu_devices() -> list[str]:
    """The NVIDIA device nodes under ``/dev`` (``nvidiactl``, ``nvidia0``, ``nvidia-uvm``, the
    ``nvidia-caps`` folder...), as names relative to ``/dev``."""
    return sorted(os.path.basename(p) for p in glob.glob("/dev/nvidia*"))


@dataclasses.dataclass
class Limits:
    """Resource limits of one child (None: not set)."""

    #: Processes and threads at once (RLIMIT_NPROC where no pids cgroup holds the child).
    processes: int | None = None
    #: CPU seconds per process (SIGXCPU).
    cpu_s: int | None = None
    #: Largest file it may write, bytes (SIGXFSZ / EFBIG).
    file_bytes: int | None = None
    #: Address space, bytes.
    address_bytes: int | None = None
    #: Data segment, bytes.
    data_bytes: int | None = None


@dataclasses.dataclass
class Isolation:
    """What `isolate` did, for the process it returns in."""

    pid: int
    namespaces: int
    own_user_namespace: bool
    #: Tasks of this user in this user namespace when the child was forked (for RLIMIT_NPROC).
    tasks_before: int
    #: The user outside every user namespace (the kernel never limits root's processes).
    host_uid: int
    problems: list[str]


def _count_tasks() -> int:
    n = 0
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                n += len(os.listdir(f"/proc/{pid}/task"))
            except OSError:
                pass
    return n


def _own_user_namespace() -> str | None:
    uid, gid = os.geteuid(), os.getegid()
    err = unshare(CLONE_NEWUSER)
    if err:
        return f"user namespace: {err}"
    try:
        with open("/proc/self/setgroups", "w") as f:
            f.write("deny")
        with open("/proc/self/uid_map", "w") as f:
            f.write(f"0 {uid} 1")
        with open("/proc/self/gid_map", "w") as f:
            f.write(f"0 {gid} 1")
    except OSError as e:
        return f"user namespace maps: {e}"
    return None


def isolate(network: bool = True) -> Isolation:
    """Unshares the namespaces (see the module doc). A process that already is PID 1 of a PID
    namespace of its own (its worker forked it into one, `jail.Jail.new_pid_namespace`) stays
    as it is: ``pid`` is 0. Any other one forks after unsharing: ``pid`` is 0 in the child and
    the child's pid in the caller, which stays outside as its supervisor (`mirror`).
    Namespaces that could not be made are listed in ``problems``; the child still runs without
    them (the caller decides with `confine`'s ``require``)."""
    problems: list[str] = []
    own_user = False
    tasks = 0
    host_uid = _host_uid()
    pid_one = os.getpid() == 1
    if not has_capability(CAP_SYS_ADMIN):
        err = _own_user_namespace()
        if err:
            problems.append(err)
        else:
            own_user = True
    if not own_user:
        tasks = _count_tasks()
    wanted = CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWUTS | (CLONE_NEWNET if network else 0)
    if not pid_one:
        wanted |= CLONE_NEWPID
    done = wanted
    err = unshare(wanted)
    if err:
        done = 0
        for flag, name in (
            (CLONE_NEWNS, "mount"),
            (CLONE_NEWPID, "PID"),
            (CLONE_NEWNET, "network"),
            (CLONE_NEWIPC, "IPC"),
            (CLONE_NEWUTS, "UTS"),
        ):
            if wanted & flag:
                e = unshare(flag)
                if e:
                    problems.append(f"{name} namespace: {e}")
                else:
                    done |= flag
    if pid_one:
        return Isolation(0, done | CLONE_NEWPID, own_user, tasks, host_uid, problems)
    pid = os.fork()
    return Isolation(pid, done, own_user, tasks + 1, host_uid, problems)


def confine(
    iso: Isolation, workdir: str, devices: tuple[str, ...], limits: Limits, in_cgroup: bool, require: bool
) -> list[str]:
    """Confines the calling process (the child `isolate` returned in) to `workdir`; see the
    module doc. Returns what could not be set up; raises `SandboxError` instead when `require`.
    Never returns before the seccomp filter is in place, whatever failed."""
    die_with_parent()
    problems = list(iso.problems)

    def step(name: str, err: str | None) -> None:
        if err:
            problems.append(f"{name}: {err}")

    workdir = os.path.realpath(workdir)
    if iso.namespaces & CLONE_NEWNS:
        step("private mounts", mount(None, "/", None, MS_REC | MS_PRIVATE))
        step("hide the other workspaces", _hide_siblings(workdir))
        if iso.namespaces & CLONE_NEWPID:
            step("fresh /proc", _fresh_proc())
        step("private /dev", _private_dev(workdir, devices))
        step("read-only mounts", _read_only_except(workdir))
    os.chdir(workdir)
    step("process limit", _limit_processes(iso, limits, in_cgroup))
    step("limits", _set_limits(limits))
    step("capabilities", drop_capabilities())
    program = seccomp.compile_filter("child")
    step("seccomp", install_seccomp(program) if program else f"no filter for {os.uname().machine}")
    if problems and require:
        raise SandboxError("; ".join(problems))
    return problems


def mirror(iso: Isolation) -> None:
    """In the process `isolate` returned in with a child pid: waits for the child and ends
    the same way (exit code, or the same signal), so the process that started this one sees
    the child's end. Never returns."""
    for fd in range(3):
        try:
            os.close(fd)
        except OSError:
            pass
    signal.signal(signal.SIGTERM, lambda *_: os.kill(iso.pid, signal.SIGKILL))
    while True:
        try:
            _, status = os.waitpid(iso.pid, 0)
            break
        except InterruptedError:
            continue
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
    os._exit(os.WEXITSTATUS(status) if os.WIFEXITED(status) else 1)


# --- the steps ------------------------------------------------------------------------------


def _hide_siblings(workdir: str) -> str | None:
    """Covers the folder holding `workdir` (the worker's folder of workspaces) with an empty
    read-only tmpfs and puts back only `workdir`."""
    parent = os.path.dirname(workdir)
    keep = os.open(workdir, os.O_PATH | os.O_DIRECTORY)
    try:
        err = mount("tmpfs", parent, "tmpfs", MS_NOSUID | MS_NODEV, "size=64k,nr_inodes=16,mode=755")
        if err:
            return f"tmpfs over {parent}: {err}"
        os.mkdir(workdir, 0o700)
        err = mount(f"/proc/self/fd/{keep}", workdir, None, MS_BIND | MS_REC)
        if err:
            return f"bind {workdir}: {err}"
    finally:
        os.close(keep)
    return mount(None, parent, None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)


def _fresh_proc() -> str | None:
    """A ``/proc`` of this PID namespace over the old one, its machine-wide parts read-only."""
    err = mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    if err:
        return err
    for name in PROC_READONLY:
        part = os.path.join("/proc", name)
        if not os.path.exists(part):
            continue
        err = mount(part, part, None, MS_BIND | MS_REC) or mount(
            None, part, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC
        )
        if err:
            return f"{part} read-only: {err}"
    return None


def _private_dev(workdir: str, devices: tuple[str, ...]) -> str | None:
    """A new read-only ``/dev`` holding only `devices` (nodes or folders of the old one), the
    ``fd``/``std*`` links and ``shm`` (a folder of the workspace, so it counts against its
    size). Built in a staging folder inside `workdir`, then moved into place."""
    staging = os.path.join(workdir, ".dev")
    shm = os.path.join(workdir, ".shm")
    os.mkdir(staging, 0o755)
    os.makedirs(shm, 0o1777, exist_ok=True)
    err = mount("tmpfs", staging, "tmpfs", MS_NOSUID, "size=64k,nr_inodes=64,mode=755")
    if err:
        return f"tmpfs: {err}"
    for name in devices:
        source = os.path.join("/dev", name)
        if not os.path.exists(source):
            continue
        node = os.path.join(staging, name)
        if os.path.isdir(source):
            os.mkdir(node, 0o755)
        else:
            open(node, "w").close()
        err = mount(source, node, None, MS_BIND | MS_REC)
        if err:
            return f"bind /dev/{name}: {err}"
    os.mkdir(os.path.join(staging, "shm"), 0o1777)
    err = mount(shm, os.path.join(staging, "shm"), None, MS_BIND)
    if err:
        return f"/dev/shm: {err}"
    for name, target in (
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
    ):
        os.symlink(target, os.path.join(staging, name))
    err = mount(None, staging, None, MS_REMOUNT | MS_RDONLY | MS_NOSUID)
    if err:
        return f"read-only: {err}"
    err = mount(staging, "/dev", None, MS_MOVE)
    if err:
        return f"move into place: {err}"
    os.rmdir(staging)
    return None


def _read_only_except(workdir: str) -> str | None:
    """Remounts every mount read-only but `workdir`, ``/proc`` and ``/dev`` (set up above)."""
    keep = (workdir, "/proc", "/dev")
    failed = []
    seen = set()
    with open("/proc/self/mountinfo") as f:
        lines = f.read().splitlines()
    for line in lines:
        fields = line.split()
        point = fields[4].replace("\\040", " ")
        options = fields[5].split(",")
        if point in seen or any(point == k or point.startswith(k + "/") for k in keep):
            continue
        seen.add(point)
        if "ro" in options or not os.path.lexists(point):
            continue
        flags = MS_REMOUNT | MS_BIND | MS_RDONLY
        for name, bit in _KEPT_FLAGS.items():
            if name in options:
                flags |= bit
        if "relatime" in options:
            flags |= _MS_RELATIME
        if mount(None, point, None, flags):
            failed.append(point)
    return ("could not make read-only: " + ", ".join(failed[:5])) if failed else None


def _limit_processes(iso: Isolation, limits: Limits, in_cgroup: bool) -> str | None:
    """RLIMIT_NPROC where no pids cgroup holds the child. The kernel counts the processes of
    this user in this user namespace (the child's own one, or the launcher's sandbox, where
    the worker's other processes count too: hence the count at fork time on top), and does not
    enforce the limit for the host's root user: there only a cgroup limits processes."""
    if in_cgroup or limits.processes is None:
        return None
    if iso.host_uid == 0:
        return "no pids cgroup (the process limit needs one when running as root)"
    n = limits.processes + (2 if iso.own_user_namespace else iso.tasks_before)
    resource.setrlimit(resource.RLIMIT_NPROC, (n, n))
    return None


def _host_uid() -> int:
    """The user this process runs as outside its user namespaces (one level deep)."""
    uid = os.geteuid()
    try:
        with open("/proc/self/uid_map") as f:
            for line in f:
                inside, outside, count = (int(x) for x in line.split())
                if inside <= uid < inside + count:
                    return outside + uid - inside
    except (OSError, ValueError):
        pass
    return uid


def _set_limits(limits: Limits) -> str | None:
    try:
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        for which, value, extra in (
            (resource.RLIMIT_CPU, limits.cpu_s, 2),
            (resource.RLIMIT_FSIZE, limits.file_bytes, 0),
            (resource.RLIMIT_AS, limits.address_bytes, 0),
            (resource.RLIMIT_DATA, limits.data_bytes, 0),
        ):
            if value is not None:
                resource.setrlimit(which, (value, value + extra))
    except (OSError, ValueError) as e:
        return str(e)
    return None
