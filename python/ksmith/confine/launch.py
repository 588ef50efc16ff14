"""The launcher: starts a worker inside a bubblewrap sandbox.

    python -s -m ksmith.confine --policy JSON -- ARGS...

runs ``python ARGS...`` (this same interpreter) in a bubblewrap sandbox, replacing this process
(so the caller's process id, pipes and kill reach bubblewrap, which kills the sandbox when it
dies). The sandbox, for the worker and every child it starts:

- sees read-only only ``/usr`` (and the ``/bin``, ``/lib*`` links), the few files of ``/etc``
  the dynamic loader and the time zone need, the interpreter, its Python environment and every
  folder on its ``sys.path`` (the runtime package among them); nothing else of the machine:
  no ``/home``, ``/root``, ``/etc/shadow``, other work folders or sockets;
- has a fresh ``/proc`` of its own PID namespace, a minimal ``/dev`` (with the NVIDIA nodes when
  ``gpu``; then ``/sys`` too, read-only), and one writable place: ``scratch``, a tmpfs of
  ``scratch_mb`` (the workers mount one tmpfs per child in it);
- runs in new user, PID, IPC and UTS namespaces and, unless ``share_net``, a network namespace
  with no interface but a downed loopback; as uid 0 of its user namespace with the capabilities
  of that namespace only (the worker needs them to confine each child), under the ``worker``
  seccomp filter (no new user namespaces, no ptrace, keyctl, bpf...), with an environment of
  `policy.ENV_PASSED` plus what it sets (``HOME`` and ``TMPDIR`` = scratch);
- belongs, where the cgroup hierarchy is writable, to a pids cgroup folder of its own
  (`cgroups`), bound into the sandbox so the worker can cap each child.

The policy reaches the worker in ``KSMITH_SANDBOX``, with what the launcher achieved. Where
bubblewrap is missing, not where the policy says, or cannot set up the sandbox, the launcher
stops before the worker starts (``require``, the default: one line on stderr saying what is
missing and how to fix it, exit status `EXIT_UNAVAILABLE`); only the caller's explicit opt-out
(``require`` false) makes it warn on stderr and run the worker directly (its children are still
confined, see `child`, but the rest of the machine's files stay readable).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile

from . import cgroups, seccomp
from .child import gpu_devices
from .policy import ENV_SET, EXIT_UNAVAILABLE, INSTALL_BWRAP, POLICY_VAR, Policy, passed_env, refusal

#: Files of /etc the sandbox sees (the dynamic loader's cache and configuration, alternatives
#: links such as `cc`, the time zone); a user database of its own is added (`_PASSWD`).
ETC_FILES = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/alternatives", "/etc/localtime")
_PASSWD = "ksmith:x:0:0:ksmith sandbox:/nonexistent:/usr/sbin/nologin\n"
_GROUP = "ksmith:x:0:\n"
#: Where scripts/setup-bwrap.sh unpacks a carried bubblewrap package.
UNPACKED_BWRAP = os.path.expanduser("~/.cache/ksmith/bwrap/usr/bin/bwrap")


def find_bwrap(configured: str = "") -> tuple[str | None, str, str]:
    """The bubblewrap binary: `configured`, ``$KSMITH_BWRAP``, ``bwrap`` on PATH, then the one
    scripts/setup-bwrap.sh unpacked; or None, why not and how to fix it."""
    for candidate in (configured, os.environ.get("KSMITH_BWRAP", "")):
        if candidate:
            if os.access(candidate, os.X_OK):
                return candidate, "", ""
            why = f"bubblewrap is not at {candidate} ([sandbox] bwrap or KSMITH_BWRAP)"
            return None, why, f"correct that path, or leave it empty and {INSTALL_BWRAP}"
    found = shutil.which("bwrap") or (UNPACKED_BWRAP if os.access(UNPACKED_BWRAP, os.X_OK) else None)
    if found:
        return found, "", ""
    return None, "bubblewrap (bwrap) is not installed", INSTALL_BWRAP


#: Why bubblewrap may fail to set up a sandbox it could start, and where to look.
USERNS_FIX = (
    "bubblewrap needs unprivileged user namespaces (or root): check `sysctl kernel.unprivileged_userns_clone` "
    "and `kernel.apparmor_restrict_unprivileged_userns`, or run as root"
)


#: The folder holding the ``ksmith`` package (the runtime folder of a stage, or a checkout's
#: ``python/``): always in the sandbox and on its ``PYTHONPATH``.
PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def python_paths() -> list[str]:
    """The folders (and zip files) the interpreter needs, outside ``/usr``, without nesting."""
    paths = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix, PACKAGE_ROOT}
    paths.add(os.path.dirname(os.path.realpath(sys.executable)))
    paths.update(p for p in sys.path[1:] if p)
    paths.update(p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p)
    real = sorted({os.path.realpath(p) for p in paths if os.path.exists(p)}, key=lambda p: (len(p), p))
    out: list[str] = []
    for p in real:
        if p != "/" and not any(p == q or p.startswith(q.rstrip("/") + "/") for q in ["/usr", *out]):
            out.append(p)
    return out


def ensure_gpu_nodes() -> None:
    """Initializes the CUDA driver once in a throwaway process, so that every NVIDIA device
    node (``nvidia-uvm`` appears on first use) exists before the sandbox lists them."""
    try:
        subprocess.run(
            [sys.executable, "-c", "import ctypes; ctypes.CDLL('libcuda.so.1').cuInit(0)"],
            capture_output=True,
            timeout=60,
        )
    except (OSError, subprocess.SubprocessError):
        pass


def _data_fd(data: bytes) -> int:
    """A pipe's read end holding `data` (inherited by bubblewrap)."""
    r, w = os.pipe()
    os.write(w, data)
    os.close(w)
    os.set_inheritable(r, True)
    return r


def bwrap_argv(bwrap: str, policy: Policy, env: dict[str, str]) -> tuple[list[str], list[int]]:
    """bubblewrap's arguments for `policy` (everything before ``--``), and the pipes it reads
    the seccomp filter and the user database from (opened here, inherited by bubblewrap)."""
    scratch = policy.scratch or ""
    fds = [_data_fd(_PASSWD.encode()), _data_fd(_GROUP.encode())]
    a = [bwrap, "--unshare-user", "--unshare-ipc", "--unshare-pid", "--unshare-uts"]
    if not policy.share_net:
        a.append("--unshare-net")
    a += ["--uid", "0", "--gid", "0", "--cap-add", "ALL", "--die-with-parent", "--new-session"]
    a += ["--hostname", "ksmith-sandbox", "--ro-bind", "/usr", "/usr"]
    for name in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        path = "/" + name
        if os.path.islink(path):
            a += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            a += ["--ro-bind", path, path]
    for path in ETC_FILES:
        if os.path.exists(path):
            a += ["--ro-bind", path, path]
    a += ["--ro-bind-data", str(fds[0]), "/etc/passwd", "--ro-bind-data", str(fds[1]), "/etc/group"]
    for path in python_paths():
        a += ["--ro-bind", path, path]
    a += ["--proc", "/proc", "--dev", "/dev"]
    if policy.gpu:
        for name in gpu_devices():
            a += ["--dev-bind", f"/dev/{name}", f"/dev/{name}"]
        if os.path.isdir("/sys"):
            a += ["--ro-bind", "/sys", "/sys"]
    a += ["--size", str(int(policy.scratch_mb) << 20), "--tmpfs", scratch]
    if policy.cgroup:
        a += ["--bind", policy.cgroup, policy.cgroup]
    a += ["--remount-ro", "/", "--clearenv"]
    for key, value in env.items():
        a += ["--setenv", key, value]
    a += ["--chdir", scratch]
    program = seccomp.compile_filter("worker")
    if program:
        fds.append(_data_fd(program))
        a += ["--seccomp", str(fds[-1])]
    return a, fds


def _trial(argv: list[str]) -> str | None:
    """Runs the interpreter in the sandbox once; the error text of bubblewrap when it fails."""
    try:
        done = subprocess.run(
            [*argv, "--", sys.executable, "-I", "-S", "-c", "pass"],
            capture_output=True,
            text=True,
            timeout=60,
            close_fds=False,
        )
    except (OSError, subprocess.SubprocessError) as e:
        return str(e)
    if done.returncode != 0:
        return (done.stderr.strip() or f"exit status {done.returncode}")[-2000:]
    return None


def launch(policy: Policy, args: list[str]) -> None:
    """Runs ``python args`` in the sandbox (see the module doc). Never returns."""
    policy.scratch = policy.scratch or tempfile.mkdtemp(prefix="ksmith-scratch-")
    env = passed_env()
    env.update({k: os.environ[k] for k in ENV_SET if k in os.environ})
    path = env.get("PYTHONPATH", "").split(os.pathsep)
    if PACKAGE_ROOT not in path:
        env["PYTHONPATH"] = os.pathsep.join([PACKAGE_ROOT, *filter(None, path)])
    env.update(HOME=policy.scratch, TMPDIR=policy.scratch)
    command = [sys.executable, *args]
    if policy.gpu:
        ensure_gpu_nodes()
    policy.cgroup = cgroups.make_base(os.getpid(), join=True)
    bwrap, why, fix = find_bwrap(policy.bwrap)
    if bwrap is None:
        policy.outer_error, policy.outer_fix = why, fix
    else:
        policy.outer = "bwrap"
        env[POLICY_VAR] = policy.to_json()
        trial, fds = bwrap_argv(bwrap, policy, env)
        err = _trial(trial)
        for fd in fds:
            os.close(fd)
        if err is None:
            argv, _ = bwrap_argv(bwrap, policy, env)
            os.execv(bwrap, [*argv, "--", *command])
        policy.outer = None
        policy.outer_error = f"{bwrap} could not set up the sandbox: {' '.join(err.split())}"
        policy.outer_fix = USERNS_FIX
    if policy.require:
        sys.stderr.write(refusal(policy.outer_error or "", policy.outer_fix or "", policy.opt_out) + "\n")
        sys.stderr.flush()
        os._exit(EXIT_UNAVAILABLE)
    sys.stderr.write(
        f"ksmith sandbox: WARNING: running without the filesystem sandbox, as {policy.opt_out} asks: "
        f"{policy.outer_error}; untrusted code will see this machine's files\n"
    )
    sys.stderr.flush()
    env[POLICY_VAR] = policy.to_json()
    os.execve(sys.executable, command, env)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if "--" not in argv:
        sys.stderr.write("usage: python -m ksmith.confine [--policy JSON] -- PYTHON_ARGS...\n")
        return 2
    split = argv.index("--")
    parser = argparse.ArgumentParser(prog="python -m ksmith.confine")
    parser.add_argument("--policy", default="{}", help="the sandbox policy (JSON, see policy.Policy)")
    opts = parser.parse_args(argv[:split])
    try:
        policy = Policy.from_json(opts.policy)
    except (ValueError, TypeError) as e:
        sys.stderr.write(f"ksmith sandbox: bad policy: {e}\n")
        return 2
    launch(policy, argv[split + 1 :])
    return 0
