"""The worker's side of the sandbox: what it checked at start, the workspaces and cgroups of its
children, and what each child needs to confine itself (`ChildSpec`, `enter`).

A worker makes one `Jail` at start. The constructor tries the whole child confinement once in a
throwaway child and lists what could not be set up (`missing`; `info` goes into the worker's
hello); with `Policy.require` (the default) anything missing raises `SandboxError` instead, whose
text is the one line to write (`policy.refusal`). Then, per child:

    with jail.workspace(parent) as d:          # a tmpfs of disk_mb (inside the launcher's sandbox)
        spec = jail.spec(d, limits)            # workdir, devices, limits, its pids cgroup...
        with jail.new_pid_namespace():         # the child is PID 1 of a namespace of its own
            ... fork or spawn; the child calls enter(spec) first ...
        jail.release(spec)
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from typing import Any

from . import cgroups
from .child import BASIC_DEVICES, PROC_READONLY, Isolation, Limits, confine, gpu_devices, isolate, mirror
from .policy import INSTALL_BWRAP, Policy, SandboxError, refusal
from .syscalls import (
    CAP_SYS_ADMIN,
    CLONE_NEWPID,
    MS_BIND,
    MS_NODEV,
    MS_NOEXEC,
    MS_NOSUID,
    MS_RDONLY,
    MS_REC,
    MS_REMOUNT,
    has_capability,
    mount,
    setns,
    umount,
    unshare,
)


class PidNamespaces:
    """Makes the next process a thread forks PID 1 of a new PID namespace, where this process may
    (it needs ``CAP_SYS_ADMIN`` in its user namespace: inside the launcher's sandbox, or as root).
    The worker and the evaluator's fork server each hold one."""

    def __init__(self) -> None:
        # This process's PID namespace, to return to after making each child's.
        self._own = os.open("/proc/self/ns/pid", os.O_RDONLY) if has_capability(CAP_SYS_ADMIN) else None

    @property
    def available(self) -> bool:
        return self._own is not None

    @contextlib.contextmanager
    def new(self) -> Iterator[None]:
        """The next process the calling thread forks is PID 1 of a new PID namespace (where this
        process may make one; elsewhere the child makes its own, see `child.isolate`)."""
        me = os.getpid()
        made = self._own is not None and unshare(CLONE_NEWPID) is None
        try:
            yield
        finally:
            if made and os.getpid() == me:
                err = setns(self._own, CLONE_NEWPID)  # type: ignore[arg-type]
                if err:
                    raise SandboxError(f"cannot return to this process's PID namespace: {err}")

    def close(self) -> None:
        if self._own is not None:
            os.close(self._own)
            self._own = None


@dataclasses.dataclass
class ChildSpec:
    """What one child needs to confine itself (JSON-serializable, for a child that is spawned
    rather than forked)."""

    workdir: str
    devices: list[str]
    limits: Limits
    cgroup: str | None
    require: bool
    network: bool = True

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ChildSpec:
        return cls(**{**data, "limits": Limits(**data["limits"])})


def enter(spec: ChildSpec) -> Isolation:
    """Joins the child's cgroup, `isolate`s and, in the process that will run untrusted code,
    `confine`s (see `child`). Returns in both processes (``pid`` is 0 in the confined one);
    raises `SandboxError` in the confined one when ``spec.require`` and a part failed."""
    problems = []
    joined = False
    if spec.cgroup:
        err = cgroups.join(spec.cgroup)
        if err:
            problems.append(f"pids cgroup: {err}")
        joined = err is None
    iso = isolate(spec.network)
    iso.problems = problems + iso.problems
    if iso.pid == 0:
        iso.problems = confine(iso, spec.workdir, tuple(spec.devices), spec.limits, joined, spec.require)
    return iso


class Jail:
    """The sandbox as one worker sees it (see the module doc)."""

    def __init__(self, policy: Policy, network: bool = True):
        self.policy = policy
        self.network = network
        self.devices = list(BASIC_DEVICES) + (gpu_devices() if policy.gpu else [])
        self.inside = policy.outer == "bwrap"
        self.can_mount = self.inside and has_capability(CAP_SYS_ADMIN)
        self.pid_namespaces = PidNamespaces()
        self._counter = 0
        self._own_cgroup = None
        if self.inside and self.can_mount:
            _protect_proc()
        self.cgroup = policy.cgroup if policy.cgroup and os.access(policy.cgroup, os.W_OK) else None
        if self.cgroup is None and not self.inside and os.geteuid() == 0:
            self.cgroup = self._own_cgroup = cgroups.make_base(os.getpid(), join=False)
        missing = []
        if not self.inside:
            why = policy.outer_error or "the worker was not started by the sandbox launcher (python -m ksmith.confine)"
            missing.append(f"filesystem view: {why}")
        if not self.can_mount:
            missing.append("disk limit: no private tmpfs per child (the worker may not mount outside the sandbox)")
        missing += self._trial()
        self.missing = missing
        self.info = {
            "launcher": policy.outer or "none",
            "filesystem_view": self.inside,
            "private_tmpfs": self.can_mount,
            "process_limit": "cgroup" if self.cgroup else "rlimit",
            "confined": not missing,
            "missing": missing,
        }
        if missing and policy.require:
            self.close()
            raise SandboxError(refusal("; ".join(missing), self._fix(), policy.opt_out))

    def _fix(self) -> str:
        """How to get what is missing: the launcher's advice when it could not start bubblewrap,
        else where to start the worker or what to look at."""
        if self.policy.outer_fix:
            return self.policy.outer_fix
        if not self.inside:
            return f"start the worker through the sandbox launcher (python -m ksmith.confine) and {INSTALL_BWRAP}"
        return "see docs/design/sandbox.md: what the sandbox depends on"

    def scratch(self) -> str:
        """The folder for the children's workspaces."""
        return self.policy.scratch or tempfile.gettempdir()

    @contextlib.contextmanager
    def workspace(self, parent: str | None = None, prefix: str = "run-", size_mb: int | None = None) -> Iterator[str]:
        """A new folder in `parent` (default `scratch()`), a tmpfs of `size_mb` (default
        ``disk_mb``) where the worker may mount; removed afterwards."""
        d = tempfile.mkdtemp(prefix=prefix, dir=parent or self.scratch())
        mounted = False
        if self.can_mount:
            size = int(size_mb or self.policy.disk_mb)
            inodes = max(1024, size * 64)
            options = f"size={size}m,nr_inodes={inodes},mode=700"
            mounted = mount("tmpfs", d, "tmpfs", MS_NOSUID | MS_NODEV, options) is None
        try:
            yield d
        finally:
            if mounted:
                umount(d)
            shutil.rmtree(d, ignore_errors=True)

    def new_pid_namespace(self) -> contextlib.AbstractContextManager[None]:
        """The next process the calling thread forks is PID 1 of a new PID namespace (see
        `PidNamespaces.new`)."""
        return self.pid_namespaces.new()

    def spec(self, workdir: str, limits: Limits) -> ChildSpec:
        """What the child working in `workdir` needs; makes its pids cgroup (see `release`)."""
        self._counter += 1
        cgroup = None
        if self.cgroup and limits.processes is not None:
            cgroup = cgroups.make_child(self.cgroup, f"child-{os.getpid()}-{self._counter}", limits.processes + 1)
        return ChildSpec(workdir, self.devices, limits, cgroup, self.policy.require, self.network)

    def release(self, spec: ChildSpec) -> None:
        """Removes the child's cgroup (once its processes are gone)."""
        if spec.cgroup:
            cgroups.remove(spec.cgroup)

    def close(self) -> None:
        """Removes the cgroup folder this worker made itself."""
        self.pid_namespaces.close()
        if self._own_cgroup:
            with contextlib.suppress(OSError):
                for name in os.listdir(self._own_cgroup):
                    if os.path.isdir(os.path.join(self._own_cgroup, name)):
                        cgroups.remove(os.path.join(self._own_cgroup, name))
                os.rmdir(self._own_cgroup)
            self._own_cgroup = None

    def _trial(self) -> list[str]:
        """Confines a throwaway child as every child is confined; what it could not set up."""
        with self.workspace(prefix="trial-") as d:
            spec = self.spec(d, Limits(processes=self.policy.max_processes))
            r, w = os.pipe()
            with self.new_pid_namespace():
                pid = os.fork()
            if pid == 0:
                os.close(r)
                try:
                    iso = enter(dataclasses.replace(spec, require=False))
                    if iso.pid:
                        mirror(iso)
                    problems = iso.problems
                    try:
                        with open(os.path.join(d, "written"), "w") as f:
                            f.write("ok")
                    except OSError as e:
                        problems.append(f"cannot write its workspace: {e}")
                except BaseException as e:  # noqa: BLE001 - reported to the worker
                    problems = [f"{type(e).__name__}: {e}"]
                os.write(w, json.dumps(problems).encode()[:60000])
                os._exit(0)
            os.close(w)
            with os.fdopen(r, "rb") as f:
                text = f.read().decode("utf-8", "replace")
            _, status = os.waitpid(pid, 0)
            self.release(spec)
        try:
            problems = json.loads(text)
        except ValueError:
            problems = [f"the trial child died (status {status}) without a report"]
        return [str(p) for p in problems]


def _protect_proc() -> None:
    """Makes the machine-wide parts of the worker's own ``/proc`` read-only (bubblewrap leaves
    ``/proc/sys`` writable, and the sandbox's root may be the host's root)."""
    for name in PROC_READONLY:
        part = os.path.join("/proc", name)
        if os.path.exists(part):
            mount(part, part, None, MS_BIND | MS_REC)
            mount(None, part, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC)
