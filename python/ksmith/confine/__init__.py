"""The sandbox for untrusted code, shared by the probe (crawled modules) and the evaluator
(generated kernels).

Two layers:

- `launch`: the launcher (``python -m ksmith.confine --policy JSON -- ARGS``) starts a worker
  inside bubblewrap: a read-only view of only the interpreter, its environment and the runtime
  package, a fresh ``/proc``, a tmpfs for scratch, new user/PID/IPC/UTS/network namespaces, an
  allow-listed environment, a seccomp filter and a pids cgroup.
- `jail` and `child`: inside, the worker confines each child before it runs untrusted code: its
  own PID namespace and ``/proc`` (no sibling or worker visible), its own tmpfs workspace as the
  only writable place, the other workspaces hidden, no network, a minimal ``/dev``, limits
  (processes, CPU, file size, memory), no capabilities and a stricter seccomp filter.

`policy` carries what to set up from the caller to both layers; `seccomp` compiles the filters;
`cgroups` makes the pids cgroups; `syscalls` wraps the Linux calls.
"""

from .child import Limits, mirror
from .jail import ChildSpec, Jail, PidNamespaces, enter
from .policy import Policy, SandboxError, passed_env
from .syscalls import die_with_parent, set_undumpable

__all__ = [
    "ChildSpec",
    "Jail",
    "Limits",
    "PidNamespaces",
    "Policy",
    "SandboxError",
    "die_with_parent",
    "enter",
    "mirror",
    "passed_env",
    "set_undumpable",
]
