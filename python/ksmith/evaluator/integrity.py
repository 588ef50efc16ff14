"""Runtime integrity instruments, installed by the harness in the candidate process BEFORE the
candidate is imported.

- `Identities`: the identity (`id`) of every function a cheat would patch (timers,
  synchronization, CUDA events and graphs, tensor copies, the timed calls' fresh values and
  digests, Triton's launch path) plus the float32
  precision switches, captured before import and compared after every phase (`timer_patch`, or
  `precision_downgrade` when a precision switch moved).
- `LaunchCounter`: wraps `JITFunction.run` / `InterpretedFunction.run` so every launch of a Triton
  kernel defined in the candidate's module is counted (no launch: `torch_fallback`).
- `OpLog`: a `TorchDispatchMode` that records the aten compute ops run OUTSIDE Triton launches,
  with a work estimate per op (the decoy-kernel check compares it with the reference's work).
- `ThreadWatch`: wraps the thread-start primitives and counts live threads (`background_thread`).
- `AuditWatch`: a Python audit hook (it cannot be removed) that records what the candidate's own
  code does outside computing: processes, signals, sockets, native libraries, files outside its
  workspace and the Python environment, writes anywhere but its workspace, a module file written
  even there (a `torch.py` next to the candidate shadows `torch` for what is imported from that
  folder), and the interpreter's frames, objects and tracing (`sandbox_escape`). The code that
  made the call decides: Triton (compiling), the import system and the harness may; the
  candidate's module, directly or through torch, the standard library or another library, may
  not. The sandbox stops these anyway; the
  hook names the attempt, so the runtime layer decides the class without the static checks.

Everything here runs in the untrusted process, so it can only ever make a candidate FAIL; every
fact that makes a candidate pass (output values, unmutated inputs) is verified by the parent.
"""

from __future__ import annotations

import _thread
import os
import sys
import threading
import time
from collections.abc import Iterable
from typing import Any, cast

import torch
from torch.utils._python_dispatch import TorchDispatchMode

# aten ops that allocate, view, copy or move data: bookkeeping, not the task's computation.
BOOKKEEPING_OPS = frozenset(
    """empty empty_like empty_strided new_empty new_empty_strided zeros zeros_like new_zeros ones ones_like
    new_ones full full_like new_full fill_ zero_ view _unsafe_view reshape as_strided permute transpose t
    expand contiguous clone copy_ _to_copy to detach alias unsqueeze squeeze flatten unflatten select slice
    split split_with_sizes chunk narrow unbind set_ lift_fresh _local_scalar_dense item resize_ stride size
    arange is_same_size _reshape_alias view_as expand_as cat stack""".split()
)
# aten ops whose work grows with a contraction dimension.
CONTRACTION_OPS = frozenset(
    {"mm", "addmm", "bmm", "baddbmm", "matmul", "linear", "addbmm", "dot", "mv", "addmv", "einsum"}
)
CONV_OPS = frozenset(
    {
        "convolution",
        "_convolution",
        "conv1d",
        "conv2d",
        "conv3d",
        "cudnn_convolution",
        "conv_transpose2d",
        "mkldnn_convolution",
        "_slow_conv2d_forward",
        "slow_conv3d_forward",
        "convolution_overrideable",
    }
)


def op_work(func: Any, args: Any, out: Any) -> float:
    """A work estimate for one aten op: multiply-adds for contractions and convolutions, output
    elements otherwise."""
    name = func.overloadpacket.__name__ if hasattr(func, "overloadpacket") else str(func)
    outs = out if isinstance(out, (tuple, list)) else [out]
    numel = sum(o.numel() for o in outs if isinstance(o, torch.Tensor))
    if name in CONTRACTION_OPS:
        tensors = [a for a in args if isinstance(a, torch.Tensor)]
        k = 1
        for t in tensors:
            if t.dim() >= 1:
                k = max(k, t.shape[-1])
        return float(numel) * k
    if name in CONV_OPS:
        tensors = [a for a in args if isinstance(a, torch.Tensor)]
        if len(tensors) >= 2:
            w = tensors[1]
            return float(numel) * max(1, w[0].numel())
    return float(numel)


def _op_name(func: Any) -> str:
    return func.overloadpacket.__name__ if hasattr(func, "overloadpacket") else str(func)


class Identities:
    """Identities of the functions a cheat would patch, and the precision switches."""

    def __init__(self) -> None:
        self.watched = self._collect()
        self.state = self._state()

    @staticmethod
    def _collect() -> dict[str, int]:
        import triton
        import triton.runtime.jit as jit

        from . import digest, inputs

        objs = {
            "time.perf_counter": time.perf_counter,
            "time.perf_counter_ns": time.perf_counter_ns,
            "time.time": time.time,
            "time.monotonic": time.monotonic,
            "torch.cuda.synchronize": torch.cuda.synchronize,
            "torch.cuda.Event": torch.cuda.Event,
            "torch.cuda.Event.record": torch.cuda.Event.record,
            "torch.cuda.Event.elapsed_time": torch.cuda.Event.elapsed_time,
            "torch.cuda.Event.synchronize": torch.cuda.Event.synchronize,
            "torch.cuda.CUDAGraph.replay": torch.cuda.CUDAGraph.replay,
            "torch.cuda.CUDAGraph.capture_begin": torch.cuda.CUDAGraph.capture_begin,
            "torch.cuda.graph": torch.cuda.graph,
            "torch.Tensor.clone": torch.Tensor.clone,
            "torch.Tensor.to": torch.Tensor.to,
            "torch.Tensor.cpu": torch.Tensor.cpu,
            "torch.Tensor.copy_": torch.Tensor.copy_,
            "torch.Tensor.detach": torch.Tensor.detach,
            "torch.Tensor.__eq__": torch.Tensor.__eq__,
            "torch.save": torch.save,
            "torch.load": torch.load,
            "torch.allclose": torch.allclose,
            "torch.equal": torch.equal,
            "torch.empty": torch.empty,
            "torch.empty_like": torch.empty_like,
            "torch.zeros": torch.zeros,
            "torch.isfinite": torch.isfinite,
            "torch.where": torch.where,
            "torch.stack": torch.stack,
            "torch.cat": torch.cat,
            "torch.Tensor.normal_": torch.Tensor.normal_,
            "torch.Tensor.abs_": torch.Tensor.abs_,
            "torch.Tensor.sum": torch.Tensor.sum,
            "torch.Tensor.reshape": torch.Tensor.reshape,
            "ksmith.evaluator.inputs.refresh": inputs.refresh,
            "ksmith.evaluator.digest.call_digest": digest.call_digest,
            "ksmith.evaluator.digest.call_sums": digest.call_sums,
            "ksmith.evaluator.digest.oracle_sums": digest.oracle_sums,
            "ksmith.evaluator.digest.weights": digest.weights,
            "ksmith.evaluator.digest.sums_kernel": digest.sums_kernel,
            "torch.nn.Module.__call__": torch.nn.Module.__call__,
            "torch.nn.Module.load_state_dict": torch.nn.Module.load_state_dict,
            "torch.profiler.profile": torch.profiler.profile,
            "triton.jit": triton.jit,
            "triton.JITFunction.run": jit.JITFunction.run,
            "threading.Thread.start": threading.Thread.start,
            "_thread.start_new_thread": _thread.start_new_thread,
        }
        try:
            from triton.runtime import interpreter

            objs["triton.InterpretedFunction.run"] = interpreter.InterpretedFunction.run
        except Exception:  # noqa: BLE001 - older triton without interpreter module
            pass
        return {k: id(v) for k, v in objs.items()}

    @staticmethod
    def _state() -> dict[str, object]:
        s = {
            "matmul.allow_tf32": torch.backends.cuda.matmul.allow_tf32,
            "cudnn.allow_tf32": torch.backends.cudnn.allow_tf32,
            "float32_matmul_precision": torch.get_float32_matmul_precision(),
            "matmul.allow_fp16_reduced": torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction,
            "matmul.allow_bf16_reduced": torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction,
        }
        return s

    def violations(self) -> tuple[str | None, str]:
        """(hack kind, message) for the first change seen, or (None, "")."""
        now = self._collect()
        changed = sorted(k for k, v in self.watched.items() if now.get(k) != v)
        if changed:
            return "timer_patch", "patched after the candidate was imported: " + ", ".join(changed)
        state = self._state()
        moved = sorted(k for k, v in self.state.items() if state.get(k) != v)
        if moved:
            return "precision_downgrade", "float32 precision switches changed: " + ", ".join(
                f"{k}={state[k]}" for k in moved
            )
        return None, ""


class LaunchCounter:
    """Counts launches of the candidate's Triton kernels (by the kernel's defining module), and
    launches of any kernel but the harness's own (`own`, by identity: the digests' kernel) on a
    stream other than the expected one."""

    def __init__(self, module_name: str, own: Iterable[Any] = ()):
        import triton.runtime.jit as jit

        self.module_name = module_name
        self.own = {id(k) for k in own}
        self.counts: dict[str, int] = {}
        self.depth = 0
        self.enabled = True
        # On a GPU: the stream the harness called forward on; launches elsewhere are counted.
        self.expected_stream: torch.cuda.Stream | None = None
        self.foreign_stream_launches = 0
        self._patch(jit.JITFunction)
        try:
            from triton.runtime import interpreter

            self._patch(interpreter.InterpretedFunction)
        except Exception:  # noqa: BLE001 - no interpreter in this triton
            pass

    def _patch(self, cls: Any) -> None:
        original = cls.run
        counter = self

        def run(fn_self: Any, *args: Any, **kwargs: Any) -> Any:
            fn = getattr(fn_self, "fn", None)
            if (
                counter.expected_stream is not None
                and id(fn_self) not in counter.own
                and torch.cuda.current_stream() != counter.expected_stream
            ):
                counter.foreign_stream_launches += 1
            counter.depth += 1
            try:
                result = original(fn_self, *args, **kwargs)
            finally:
                counter.depth -= 1
            # counted only once the launch returned: a launch that fails does no work
            if (
                not kwargs.get("warmup", False)
                and counter.enabled
                and counter.is_candidate(getattr(fn, "__module__", None))
            ):
                name = getattr(fn, "__name__", "?")
                counter.counts[name] = counter.counts.get(name, 0) + 1
            return result

        cast(Any, run).__wrapped__ = original
        cls.run = run

    def is_candidate(self, module: str | None) -> bool:
        """The candidate's module, or its rebuild at a hidden size set (``<name>_s<i>``)."""
        return module is not None and (module == self.module_name or module.startswith(self.module_name + "_s"))

    def total(self) -> int:
        return sum(self.counts.values())


class OpLog(TorchDispatchMode):
    """Records aten compute ops run outside Triton launches, with their work estimate."""

    def __init__(self, launches: LaunchCounter | None):
        super().__init__()  # type: ignore[no-untyped-call]  # torch's mode is unannotated
        self.launches = launches
        self.work: dict[str, float] = {}
        self.calls: dict[str, int] = {}

    def __torch_dispatch__(
        self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None
    ) -> Any:
        out = func(*args, **(kwargs or {}))
        if self.launches is not None and self.launches.depth > 0:
            return out
        name = _op_name(func)
        if name.rstrip("_") in BOOKKEEPING_OPS or name in BOOKKEEPING_OPS:
            return out
        try:
            w = op_work(func, args, out)
        except Exception:  # noqa: BLE001 - an estimate only
            w = 0.0
        self.work[name] = self.work.get(name, 0.0) + w
        self.calls[name] = self.calls.get(name, 0) + 1
        return out

    def total(self) -> float:
        return float(sum(self.work.values()))


class ThreadWatch:
    """Counts thread starts and live Python threads."""

    def __init__(self) -> None:
        self.starts = 0
        self.baseline = threading.active_count()
        watch = self
        orig_start = threading.Thread.start
        orig_new = _thread.start_new_thread

        def start(th_self: threading.Thread, *a: Any, **k: Any) -> None:
            watch.starts += 1
            return orig_start(th_self, *a, **k)

        def start_new_thread(*a: Any, **k: Any) -> int:
            watch.starts += 1
            return orig_new(*a, **k)

        cast(Any, threading.Thread).start = start
        _thread.start_new_thread = start_new_thread
        self.armed_starts = 0

    def arm(self) -> None:
        """Starts counting from now (after the harness's own imports)."""
        self.baseline = threading.active_count()
        self.armed_starts = self.starts

    def violation(self) -> str | None:
        alive = threading.active_count()
        started = self.starts - self.armed_starts
        if started > 0 or alive > self.baseline:
            names = [t.name for t in threading.enumerate()]
            return (
                f"threads started by the candidate: {started}; live threads {self.baseline} -> {alive} "
                f"({', '.join(names)})"
            )
        return None


#: Events whose direct caller must not be the candidate: the interpreter's frames and objects.
INTERNALS_EVENTS = frozenset(
    {
        "sys._getframe",
        "sys._current_frames",
        "sys.settrace",
        "sys.setprofile",
        "gc.get_objects",
        "gc.get_referrers",
        "gc.get_referents",
        "code.__new__",
    }
)
#: Events the candidate's code may not cause, however many frames lie between: processes,
#: signals, sockets, native libraries, changes to the file system.
CAPABILITY_EVENTS = frozenset(
    {
        "os.system",
        "os.exec",
        "os.posix_spawn",
        "os.spawn",
        "os.fork",
        "os.forkpty",
        "os.kill",
        "os.killpg",
        "subprocess.Popen",
        "pty.spawn",
        "socket.__new__",
        "socket.connect",
        "socket.bind",
        "socket.sendto",
        "socket.sendmsg",
        "ctypes.dlopen",
        "ctypes.dlsym",
        "ctypes.cdata",
        "ctypes.call_function",
        "os.remove",
        "os.rename",
        "os.mkdir",
        "os.rmdir",
        "os.chmod",
        "os.chown",
        "os.symlink",
        "os.link",
        "os.truncate",
        "os.listdir",
        "os.scandir",
        "shutil.rmtree",
        "shutil.copyfile",
        "shutil.move",
        "mmap.__new__",
    }
)


#: Files an import can load (a write of one, even in the workspace, is an escape).
IMPORTABLE_SUFFIXES = (".py", ".pyc", ".pyo", ".pyw", ".pyd", ".so", ".pth")


class AuditWatch:
    """The audit hook (see the module doc). `arm` starts it (just before the candidate is
    imported); `violation` is the first escape seen, if any (recorded even when the candidate
    catches the error the hook raises)."""

    def __init__(self, module_name: str, workdir: str, enabled: bool = True):
        """`enabled` False (the option ``audit``) installs nothing: the tests that show the sandbox
        alone holds turn it off."""
        self.module_name = module_name
        self.workdir = os.path.realpath(workdir)
        prefixes = {sys.prefix, sys.base_prefix, sys.exec_prefix, *[p for p in sys.path if p and os.path.isabs(p)]}
        self.readable = tuple(
            os.path.realpath(p) for p in (*prefixes, "/usr", "/lib", "/lib64", "/proc", "/sys", "/dev", "/etc/ld.so")
        )
        self.armed = False
        self.seen: str | None = None
        self._busy = False
        if enabled:
            sys.addaudithook(self._hook)

    def arm(self) -> None:
        self.armed = True

    def violation(self) -> str | None:
        return self.seen

    def _owner(self, frame: Any, direct: bool) -> str | None:
        """'candidate' when the candidate's code made the call (directly, when `direct`), None when
        Triton, the import system or the harness did."""
        while frame is not None:
            module = frame.f_globals.get("__name__", "") or ""
            if module == self.module_name or module.startswith(self.module_name + "_s"):
                return "candidate"
            if direct:
                return None
            if module.startswith(("triton", "ksmith.", "importlib")) or frame.f_code.co_filename.startswith(
                "<frozen importlib"
            ):
                return None
            frame = frame.f_back
        return None

    def _file(self, args: tuple[Any, ...]) -> str | None:
        """Why an `open` is an escape: a write outside the workspace, or a read outside the
        workspace and the places the interpreter and its libraries live."""
        path, mode = args[0], args[1] if len(args) > 1 else "r"
        if not isinstance(path, (str, bytes)):
            return None  # a descriptor the process already has
        real = os.path.realpath(os.fsdecode(path))
        inside = real == self.workdir or real.startswith(self.workdir + os.sep)
        writes = isinstance(mode, str) and any(c in mode for c in "wax+")
        flags = args[2] if len(args) > 2 and isinstance(args[2], int) else 0
        writes = writes or bool(flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND))
        if writes and not inside:
            return f"opens {real} for writing"
        if writes and real.endswith(IMPORTABLE_SUFFIXES):
            return f"writes {real}, a module file an import could load"
        if not writes and not inside and not real.startswith(self.readable):
            return f"reads {real}"
        return None

    def _hook(self, event: str, args: tuple[Any, ...]) -> None:
        if not self.armed or self.seen is not None or self._busy:
            return
        if event in INTERNALS_EVENTS:
            why = f"`{event}` (the interpreter's internals)"
            direct = True
        elif event in CAPABILITY_EVENTS:
            why = f"`{event}`"
            direct = False
        elif event == "open":
            why = None
            direct = False
        else:
            return
        self._busy = True  # sys._getframe below is audited too
        try:
            owner = self._owner(sys._getframe(1), direct)
            if owner == "candidate" and event == "open":
                why = self._file(args)
        finally:
            self._busy = False
        if owner != "candidate" or why is None:
            return
        self.seen = f"the candidate's code called {why}"
        raise PermissionError(f"ksmith: {self.seen}")
