"""What both children (reference and candidate) share: the private message channel to the
worker, loading a program from a file, moving inputs to the device, normalizing outputs.

The channel: the child duplicates its original stdout (the message pipe the fork server gave it)
to a private descriptor for messages and points file descriptor 1 at stderr, so anything the
program prints lands in the log, never in the channel. Messages are sealed JSON lines (see
`messages`); commands from the worker arrive on stdin.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import traceback
from types import ModuleType
from typing import Any

from .messages import Message, SandboxFailed, seal


class Channel:
    """Sealed JSON-lines messages to the worker (see `messages.seal`); commands from it."""

    def __init__(self, secret: bytes) -> None:
        fd = os.dup(1)
        os.dup2(2, 1)
        sys.stdout = sys.stderr
        self._out = os.fdopen(fd, "w", buffering=1)
        self._secret = secret
        self._seq = 0

    def send(self, msg: Message) -> None:
        self._out.write(seal(self._secret, self._seq, msg) + "\n")
        self._out.flush()
        self._seq += 1

    def wait_command(self) -> str:
        line = sys.stdin.readline()
        return line.strip() or "stop"


def enter_sandbox(cfg: dict[str, Any], ch: Channel) -> bool:
    """Confines this child with the worker's `ksmith.confine.ChildSpec` (``cfg["sandbox"]``;
    none when the worker runs children unconfined) before any program is loaded: the process
    forks, this one stays outside as a supervisor that ends as the confined one ends
    (`ksmith.confine.mirror`), and the confined one returns. When the sandbox is required and a
    part of it fails, it sends `sandbox_error` (the worker's fault, not the program's) and
    returns False: the child must then exit without running anything."""
    spec = cfg.get("sandbox")
    if not spec:
        return True
    from ..confine import ChildSpec, SandboxError, enter, mirror

    try:
        iso = enter(ChildSpec.from_dict(spec))
    except SandboxError as e:
        ch.send(SandboxFailed(str(e)))
        return False
    if iso.pid:
        mirror(iso)
    return True


def load_module(path: str, name: str) -> ModuleType:
    """Imports the program at `path` as module `name` (a real file, which `@triton.jit` needs)."""
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def to_device(values: Any, device: str) -> Any:
    """Moves tensors (recursively in lists/tuples) to `device`, leaving other values alone."""
    import torch

    if isinstance(values, torch.Tensor):
        return values.to(device)
    if isinstance(values, (list, tuple)):
        return type(values)(to_device(v, device) for v in values)
    return values


def clone_all(values: Any) -> Any:
    """Fresh copies of every tensor (the candidate never sees the trusted side's tensors)."""
    import torch

    if isinstance(values, torch.Tensor):
        return torch.Tensor.clone(values)
    if isinstance(values, (list, tuple)):
        return type(values)(clone_all(v) for v in values)
    return values


def as_list(out: Any) -> list[Any]:
    """A forward's result as a list of outputs."""
    if isinstance(out, (list, tuple)):
        return list(out)
    return [out]


def error_text(exc: BaseException, limit: int = 6000) -> str:
    """The exception with its traceback, trimmed from the front (the end says the most)."""
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return text if len(text) <= limit else "...\n" + text[-limit:]


def headline(exc: BaseException, limit: int = 500) -> str:
    """The exception's own line (``torch.OutOfMemoryError: CUDA out of memory. ...``), on one
    line: what a message that is cut to its first line must still say."""
    text = " ".join(traceback.format_exception_only(type(exc), exc)[-1].split())
    return text if len(text) <= limit else text[:limit] + " ..."


def failure_text(exc: BaseException) -> str:
    """`headline` first, then `error_text`: a trusted child's failure as the worker passes it on
    (a warning that keeps one line names the exception, not ``Traceback (most recent call
    last):``)."""
    return headline(exc) + "\n" + error_text(exc)


def hardware(device: str) -> dict[str, Any]:
    """The device, driver, CUDA, torch and triton versions as the protocol's `Hardware` (the
    worker adds the timing settings)."""
    import torch
    import triton

    if device.startswith("cuda"):
        name = torch.cuda.get_device_name(torch.cuda.current_device())
    else:
        name = "cpu (triton interpreter)"
    return {
        "device": name,
        "driver": os.environ.get("KSMITH_GPU_DRIVER") or None,
        "torch": torch.__version__,
        "triton": triton.__version__,
        "cuda": torch.version.cuda if device.startswith("cuda") else None,
    }
