"""How much work one forward call does: FLOPs, bytes moved, kernels, peak memory, and the time
that work would take in PyTorch eager on the reference GPU.

:func:`measure` calls ``model(*inputs)`` once under ``torch.utils.flop_counter.FlopCounterMode``
(PyTorch's own FLOP formulas) and, inside it, :class:`WorkMode`, a ``TorchDispatchMode`` that
sees every ATen operator eager would run and counts

- the bytes it reads and writes (its tensor arguments and results; a view moves nothing and
  launches nothing: its results alias an argument without writing it, per the operator's
  schema),
- the kernels (every operator that is not a view),
- the tensor memory alive at once: parameters, buffers and inputs, plus the results of the
  operators while some tensor still holds their storage (tracked by storage, freed when the
  last tensor on it is collected), whose maximum is the peak.

It works the same on the ``meta`` device, where nothing is computed or allocated: that is how
the sizing step (:mod:`.sizing`) measures a program at sizes that would take seconds on the CPU.

:func:`eager_ms` turns the counts into an estimate of one eager forward call on the reference
GPU (an H200): each kernel takes the longer of its arithmetic at ``FLOPS`` and its traffic at
``BYTES_PER_S``, at least ``LAUNCH_US``; the host issues one kernel every ``HOST_US``; the call
takes the longer of the two sums. The constants are effective rates, not datasheet peaks; the
GPU check (``scripts/sized_gpu_check.py``) measures how far the estimate is off.
"""

from __future__ import annotations

import dataclasses
import weakref

#: Effective float32 arithmetic rate of eager kernels on an H200 (FLOP/s).
FLOPS = 40e12
#: Effective memory bandwidth of eager kernels on an H200 (bytes/s).
BYTES_PER_S = 3.2e12
#: Shortest kernel (microseconds).
LAUNCH_US = 2.5
#: Host time to issue one eager operator (microseconds).
HOST_US = 6.0


@dataclasses.dataclass
class Work:
    """What one forward call does."""

    flops: float = 0.0
    #: Bytes read and written by the kernels.
    bytes: float = 0.0
    #: Kernels launched (operators that are not views).
    kernels: int = 0
    #: Bytes of parameters and buffers.
    param_bytes: int = 0
    #: Bytes of the forward inputs.
    input_bytes: int = 0
    #: Most tensor bytes alive at once (parameters, buffers and inputs included).
    peak_bytes: int = 0
    #: Sum over kernels of the longer of arithmetic and traffic time, at least LAUNCH_US (µs).
    device_us: float = 0.0

    def eager_ms(self) -> float:
        """The estimated time of one eager forward call on the reference GPU (ms)."""
        return max(self.device_us, self.kernels * HOST_US) / 1000.0


def flatten_outputs(value, torch, out: list) -> list:
    """Every tensor in a (nested) value, in order, appended to ``out``."""
    if isinstance(value, torch.Tensor):
        out.append(value)
    elif isinstance(value, (list, tuple)):
        for v in value:
            flatten_outputs(v, torch, out)
    elif isinstance(value, dict):
        for k in value:
            flatten_outputs(value[k], torch, out)
    return out


def _storage_key(t) -> tuple[int, int]:
    try:
        s = t.untyped_storage()
        return s._cdata, s.nbytes()
    except (RuntimeError, NotImplementedError):  # sparse and other storage-less layouts
        return id(t), t.numel() * t.element_size()


def _is_view(func) -> bool:
    """True when every result of the operator aliases an argument it does not write."""
    returns = func._schema.returns
    if not returns:
        return False
    for r in returns:
        info = r.alias_info
        if info is None or info.is_write:
            return False
    return True


def make_mode(torch):
    """The ``WorkMode`` class for this torch (imported lazily: the probe worker loads torch once)."""
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils.flop_counter import flop_registry

    view_cache: dict = {}

    class WorkMode(TorchDispatchMode):
        """Counts bytes, kernels, per-kernel time and live memory of the operators it sees."""

        def __init__(self, baseline_keys: set[int]):
            super().__init__()
            self.work = Work()
            self.baseline = baseline_keys
            self.live: dict[int, list[int]] = {}  # storage -> [bytes, tensors holding it]
            self.live_bytes = 0
            self.peak_live = 0

        def _release(self, key: int) -> None:
            entry = self.live.get(key)
            if entry is None:
                return
            entry[1] -= 1
            if entry[1] <= 0:
                self.live_bytes -= entry[0]
                del self.live[key]

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            out = func(*args, **kwargs)
            view = view_cache.get(func)
            if view is None:
                view = view_cache[func] = _is_view(func)
            if view:
                return out
            work = self.work
            ins = flatten_outputs(args, torch, [])
            flatten_outputs(kwargs, torch, ins)
            outs = flatten_outputs(out, torch, [])
            moved = 0
            for t in ins:
                moved += t.numel() * t.element_size()
            arg_ids = {id(t) for t in ins}
            for t in outs:
                moved += t.numel() * t.element_size()
                if id(t) in arg_ids:
                    continue  # an in-place result: the argument's storage, already counted
                key, size = _storage_key(t)
                if key in self.baseline:
                    continue
                entry = self.live.get(key)
                if entry is None:
                    self.live[key] = [size, 1]
                    self.live_bytes += size
                else:
                    entry[1] += 1
                weakref.finalize(t, self._release, key)
            if self.live_bytes > self.peak_live:
                self.peak_live = self.live_bytes
            flops = 0
            formula = flop_registry.get(func._overloadpacket)
            if formula is not None:
                try:
                    flops = formula(*args, **kwargs, out_val=out)
                except Exception:  # noqa: BLE001 - a formula that does not fit this call counts 0
                    flops = 0
            work.flops += flops
            work.kernels += 1
            work.bytes += moved
            work.device_us += max(flops / FLOPS * 1e6, moved / BYTES_PER_S * 1e6, LAUNCH_US)
            return out

    return WorkMode


def _bytes_of(tensors) -> tuple[int, set[int]]:
    total = 0
    keys: set[int] = set()
    for t in tensors:
        key, size = _storage_key(t)
        if key not in keys:
            keys.add(key)
            total += size
    return total, keys


def measure(model, inputs, torch, mode_class=None):
    """Calls ``model(*inputs)`` once without gradients and returns ``(output, Work)``."""
    mode_class = mode_class or make_mode(torch)
    state = list(model.parameters()) + list(model.buffers())
    param_bytes, param_keys = _bytes_of(state)
    in_tensors = flatten_outputs(list(inputs), torch, [])
    input_bytes, input_keys = _bytes_of([t for t in in_tensors if _storage_key(t)[0] not in param_keys])
    mode = mode_class(param_keys | input_keys)
    with torch.no_grad(), mode:
        out = model(*inputs)
    work = mode.work
    work.param_bytes = param_bytes
    work.input_bytes = input_bytes
    work.peak_bytes = param_bytes + input_bytes + mode.peak_live
    return out, work


def warm_up(torch) -> None:
    """Measures a tiny model on ``meta`` once, so that what the ``meta`` kernels import on first
    use (PyTorch's Python decompositions and meta functions: seconds) is loaded in the warm worker
    before it forks, not in every child. Computes nothing and starts no thread."""
    with torch.device("meta"):
        model = torch.nn.Sequential(torch.nn.Conv2d(2, 2, 3), torch.nn.Flatten(), torch.nn.LayerNorm(8))
        x = torch.rand(1, 2, 4, 4)
    measure(model, [x], torch)
