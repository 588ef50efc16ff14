"""What the sandbox should set up (`Policy`), how it travels from the launcher to the worker
(the ``KSMITH_SANDBOX`` variable), and the environment allow-list.
"""

from __future__ import annotations

import dataclasses
import json
import os

#: The variable that carries the policy from the launcher to the worker (read once, then removed
#: from the worker's environment so no child sees it).
POLICY_VAR = "KSMITH_SANDBOX"

#: Variables of the caller's environment a worker (and so a child) may see; every other one is
#: dropped (API keys, tokens, credentials). The Rust side passes the same list
#: (`ksmith_sandbox::ENV_PASSED`; a test keeps the two equal).
ENV_PASSED = (
    "PATH",
    "LANG",
    "LC_ALL",
    "TZ",
    "LD_LIBRARY_PATH",
    "CUDA_VISIBLE_DEVICES",
    "CUDA_HOME",
    "TRITON_LIBCUDA_PATH",
    "TRITON_PTXAS_PATH",
    "KSMITH_CHILD_THREADS",
    "KSMITH_EVAL_TRACE",
)

#: Exit status of a launcher or worker that stops because the sandbox is required and cannot be
#: set up (`ksmith_sandbox::EXIT_REFUSED`; a test keeps them equal).
EXIT_UNAVAILABLE = 78

#: How the one line a refusing launcher or worker writes on stderr starts
#: (`ksmith_sandbox::REFUSAL`; a test keeps them equal).
REFUSAL = "ksmith sandbox: refusing to run untrusted code: "

#: How to get the missing part of the sandbox, for a refusal where bubblewrap is the cause.
INSTALL_BWRAP = "install bubblewrap: `make sandbox`, or Debian's `bubblewrap` package"

#: Variables the launcher sets itself (besides HOME, TMPDIR and the policy).
ENV_SET = ("PYTHONPATH", "PYTHONDONTWRITEBYTECODE", "PYTHONNOUSERSITE", "PYTHONUNBUFFERED")


class SandboxError(RuntimeError):
    """A part of the sandbox could not be set up while `Policy.require` asks for all of it."""


def refusal(what: str, fix: str, opt_out: str) -> str:
    """The one line a refusing launcher or worker writes: what is missing, how to fix it and how
    to run without it (`opt_out`, the caller's explicit switch)."""
    line = f"{REFUSAL}{what}; {fix} (or opt out explicitly with {opt_out} to run it without)"
    return " ".join(line.split())


@dataclasses.dataclass
class Policy:
    """The sandbox of one worker and its children.

    Set by the caller (the Rust side, from ``[sandbox]`` and the stage's limits): ``require``,
    ``disk_mb``, ``max_processes``, ``gpu``, ``share_net``, ``scratch``, ``scratch_mb``,
    ``bwrap``, ``opt_out``. Filled in by the launcher: ``outer`` ("bwrap" when the worker runs
    inside bubblewrap), ``outer_error`` (why not), ``outer_fix`` (how to get it) and ``cgroup``
    (a pids cgroup folder the worker may make per-child cgroups in).
    """

    #: A missing part stops the launcher or the worker before any untrusted code runs (the
    #: default); False is the caller's explicit opt-out (run with the parts that work, warned).
    require: bool = True
    #: Size of each child's private tmpfs (all it may write), MiB.
    disk_mb: int = 256
    #: Processes (threads included) each child may have at once.
    max_processes: int = 64
    #: Children (and the worker) get the NVIDIA device nodes.
    gpu: bool = False
    #: The worker keeps the network (the HTTP evaluator); children never have it.
    share_net: bool = False
    #: The worker's scratch folder (children's workspaces); a tmpfs of `scratch_mb` inside.
    scratch: str | None = None
    #: Size of the scratch tmpfs, MiB (the workspaces are tmpfs mounts of their own).
    scratch_mb: int = 64
    #: The bubblewrap binary; empty: $KSMITH_BWRAP, `bwrap` on PATH, then the one
    #: scripts/setup-bwrap.sh unpacked.
    bwrap: str = ""
    #: How the caller's user opts out of `require`, named in a refusal.
    opt_out: str = "[sandbox] require = false"
    outer: str | None = None
    outer_error: str | None = None
    outer_fix: str | None = None
    cgroup: str | None = None

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self))

    @classmethod
    def from_json(cls, text: str) -> Policy:
        data = json.loads(text) if text else {}
        if not isinstance(data, dict):
            raise ValueError("a sandbox policy is a JSON object")
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - names)
        if unknown:
            raise ValueError(f"unknown sandbox policy keys: {', '.join(unknown)}")
        return cls(**data)

    @classmethod
    def take_from_env(cls) -> Policy:
        """The policy the launcher passed (removed from the environment, with the ``PWD`` that
        bubblewrap adds), or the defaults when this process was not started by the launcher."""
        text = os.environ.pop(POLICY_VAR, "")
        if text:
            os.environ.pop("PWD", None)
        return cls.from_json(text)


def passed_env(environ: dict[str, str] | None = None) -> dict[str, str]:
    """The allowed part of `environ` (default: this process's environment)."""
    source = os.environ if environ is None else environ
    return {k: source[k] for k in ENV_PASSED if k in source}
