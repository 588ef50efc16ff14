"""Loading a program into a fresh module, and the random generators its runs are seeded with.

The repair search (:mod:`.execute`) and the sizing step (:mod:`.sizing`) both run program texts
this way: ``exec`` in a module of its own, registered as an imported file would be, with every
generator seeded first.
"""

from __future__ import annotations

import functools
import linecache
import random
import sys
import types
from typing import Any

PROGRAM_FILE = "<ksmith-program>"
PROGRAM_MODULE = "__ksmith_program__"


class ProbeTimeout(BaseException):
    """Raised by the SIGALRM handler when the module runs past its time limit."""


def seed_all(seed: int, torch) -> None:
    """Seeds torch's CPU generator, random and numpy (when loaded).

    ``torch.manual_seed`` would also queue a CUDA seeding with a captured stack trace (several
    ms per call); the probe runs on CPU only, so the CPU generator is seeded directly.
    """
    random.seed(seed)
    torch.default_generator.manual_seed(seed)
    np = sys.modules.get("numpy")
    if np is not None:
        np_random = sys.modules.get("numpy.random")
        if np_random is not None:
            np_random.seed(seed % (2**32))


@functools.lru_cache(maxsize=4)
def _compiled(text: str, name: str) -> types.CodeType:
    """The program's code object; cached, since verification and the sizing step's confirmation
    run the same text twice (a code object is immutable: running it again is running it anew)."""
    return compile(text, name, "exec")


def rng_state(torch) -> tuple:
    """The state of the generators :func:`seed_all` seeds."""
    np_random = sys.modules.get("numpy.random")
    return (
        random.getstate(),
        torch.default_generator.get_state(),
        np_random.get_state() if np_random is not None else None,
    )


def set_rng_state(state: tuple, torch) -> None:
    """Puts the generators back to a :func:`rng_state`."""
    py, cpu, np_state = state
    random.setstate(py)
    torch.default_generator.set_state(cpu)
    if np_state is not None:
        sys.modules["numpy.random"].set_state(np_state)


def exec_program(text: str, name: str = PROGRAM_FILE) -> dict[str, Any]:
    """Executes the program text in a fresh module, with its lines available to tracebacks.

    The module is registered in ``sys.modules`` under its ``__name__`` (replacing the previous
    program's) as an imported file would be: ``dataclasses``, ``typing`` and ``pickle`` look a
    class's module up there (a ``@dataclass`` with string annotations fails without it).
    """
    linecache.cache[name] = (len(text), None, text.splitlines(keepends=True), name)
    code = _compiled(text, name)
    module = types.ModuleType(PROGRAM_MODULE)
    module.__file__ = name
    sys.modules[PROGRAM_MODULE] = module
    namespace: dict[str, Any] = module.__dict__
    exec(code, namespace)  # noqa: S102 - this is the point of the sandboxed child
    return namespace


def split_init(raw) -> list:
    """What ``get_init_inputs()`` returned, as the constructor's positional arguments: the
    KernelBench contract, ``Model(*get_init_inputs())``, which the evaluator follows too."""
    if isinstance(raw, (list, tuple)):
        return list(raw)
    raise TypeError(f"get_init_inputs() returned {type(raw).__name__}, expected a list")
