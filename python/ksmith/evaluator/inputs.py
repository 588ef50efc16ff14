"""Fresh random inputs for a trial, built from the REFERENCE's `get_inputs()` on the device, and
fingerprints that show two processes built the same ones.

Trial `k` seeds torch (every device), `random` and numpy with its own seed, calls `get_inputs()`
with the evaluator's device as the default device (so `torch.randn(N, N)` is made on the GPU,
not on the host), then refills every floating-point tensor on the device with a distribution that
cycles over the trials: normal, uniform(-1, 1), Laplace (heavy tails) and a mixed log-normal
(magnitudes over several decades, random signs). Tensors that the task built non-negative (e.g.
`torch.rand`) stay non-negative (absolute values), so tasks with `log`/`sqrt` keep a valid
domain. No value is exactly zero. Shapes, dtypes, integer index tensors and non-tensor arguments
are the task's. A `get_inputs()` that cannot run with a GPU default device (it mixes in host
arrays) is called with the host as default and its tensors are moved.

The reference child and the candidate child each build the inputs they need themselves (no
multi-gigabyte files between processes); `fingerprint` (computed on the device, exact) lets the
candidate's harness check, before it imports the candidate, that it got the very values the
reference was judged on.

Timed calls (`refresh`): before every timed call, fresh values are written into the buffers the
call reads, in place (the buffers a CUDA graph replays on keep their addresses), from a seed drawn
for that call: floating-point tensors from the normal distribution (trial 0's), absolute values
where the task's own inputs are non-negative (`nonnegative`), integer and bool tensors from the
task's `get_inputs()` under the seed. The judge writes the same values from the same seed into
buffers of its own to check a timed call afterwards.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable
from typing import Any

import torch

DISTRIBUTIONS = ("normal", "uniform", "laplace", "mixed")
#: Elements hashed per step of `fingerprint` (bounds its temporary memory).
_CHUNK = 1 << 24


def _sample(shape: tuple[int, ...], dist: str, gen: torch.Generator) -> torch.Tensor:
    dev = gen.device
    if dist == "normal":
        x = torch.randn(shape, generator=gen, dtype=torch.float64, device=dev)
    elif dist == "uniform":
        x = torch.rand(shape, generator=gen, dtype=torch.float64, device=dev) * 2 - 1
    elif dist == "laplace":
        u = torch.rand(shape, generator=gen, dtype=torch.float64, device=dev).clamp_min(1e-12)
        s = torch.randint(0, 2, shape, generator=gen, device=dev).to(torch.float64) * 2 - 1
        x = -torch.log(u) * s / 1.4142
    else:
        mag = torch.exp(torch.randn(shape, generator=gen, dtype=torch.float64, device=dev) * 0.75)
        s = torch.randint(0, 2, shape, generator=gen, device=dev).to(torch.float64) * 2 - 1
        x = mag * s
    return x


def _refill(t: torch.Tensor, dist: str, gen: torch.Generator) -> torch.Tensor:
    if not t.is_floating_point() or t.numel() == 0:
        return t
    x = _sample(tuple(t.shape), dist, gen)
    if bool((t >= 0).all()):
        x = x.abs()
    x = torch.where(x == 0, torch.full_like(x, 1e-3), x)
    return x.to(t.dtype).contiguous()


def _seed_all(seed: int) -> None:
    torch.manual_seed(seed)
    random.seed(seed)
    try:
        import numpy

        numpy.random.seed(seed % 2**32)
    except ImportError:
        pass


def make_inputs(get_inputs: Callable[[], Any], seed: int, trial: int, device: str = "cpu") -> list[Any]:
    """The inputs of one trial, tensors on `device` (plain values as they are)."""
    _seed_all(seed)
    try:
        with torch.device(device):
            base = list(get_inputs())
    except Exception:  # noqa: BLE001 - a task that builds host arrays: the host as default device
        if device == "cpu":
            raise
        _seed_all(seed)
        base = list(get_inputs())
    gen = torch.Generator(device=device).manual_seed(seed ^ 0x5EED)
    dist = DISTRIBUTIONS[trial % len(DISTRIBUTIONS)]
    return [_refill(v.to(device), dist, gen) if isinstance(v, torch.Tensor) else v for v in base]


def nonnegative(values: list[Any]) -> list[bool]:
    """Per input: whether it is a floating-point tensor with no negative value (its fresh values
    keep that domain, see `refresh`). One host synchronization per tensor: called once, before
    timing."""
    return [isinstance(v, torch.Tensor) and v.is_floating_point() and bool((v >= 0).all()) for v in values]


def refresh(values: list[Any], nonneg: list[bool], seed: int, get_inputs: Callable[[], Any] | None) -> None:
    """Writes the fresh values of `seed` into the input tensors `values`, in place (see the
    module doc); `nonneg` is `nonnegative` of the task's inputs. An integer or bool tensor keeps
    its values where `get_inputs()` does not give one of the same shape and dtype under the seed
    (or fails).
    The same seed writes the same values into tensors of the same shapes, dtypes and strides on
    the same kind of device, wherever they lie; nothing is synchronized with the host."""
    tensors = [(i, v) for i, v in enumerate(values) if isinstance(v, torch.Tensor) and v.numel() > 0]
    exact = [(i, v) for i, v in tensors if not v.is_floating_point() and not v.is_complex()]
    if exact and get_inputs is not None:
        base = _task_inputs(get_inputs, seed, exact[0][1].device)
        for i, v in exact:
            new = base[i] if i < len(base) else None
            if isinstance(new, torch.Tensor) and new.shape == v.shape and new.dtype == v.dtype:
                v.copy_(new)
    floats = [(i, v) for i, v in tensors if v.is_floating_point()]
    if not floats:
        return
    gen = torch.Generator(device=floats[0][1].device).manual_seed(seed)
    for i, v in floats:
        v.normal_(generator=gen)
        if nonneg[i]:
            v.abs_()


def _task_inputs(get_inputs: Callable[[], Any], seed: int, device: torch.device) -> list[Any]:
    """`get_inputs()` under `seed` with `device` as the default device (the host where that
    fails, as in `make_inputs`); empty where it fails on the host too (the integer inputs then
    keep their values: the same on the harness's side and the judge's)."""
    for default in (device, None):
        _seed_all(seed)
        try:
            if default is None:
                return list(get_inputs())
            with torch.device(default):
                return list(get_inputs())
        except Exception:  # noqa: BLE001 - the task's own failure: its integer inputs stay
            continue
    return []


def _int_view(t: torch.Tensor) -> torch.Tensor:
    """The tensor's bits as integers of its element size, flattened."""
    x = t.detach().contiguous().reshape(-1)
    if x.dtype == torch.bool:
        x = x.to(torch.uint8)
    if x.is_complex():
        x = torch.view_as_real(x).reshape(-1)
    size = x.element_size()
    as_int = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[size]
    return x.view(as_int)


def _digest(t: torch.Tensor) -> int:
    """An exact hash of a tensor's bits, computed where the tensor is (integer arithmetic modulo
    2^64, so the order of the reduction does not matter)."""
    bits = _int_view(t)
    total = 0
    for start in range(0, bits.numel(), _CHUNK):
        b = bits[start : start + _CHUNK].to(torch.int64)
        idx = torch.arange(start, start + b.numel(), device=b.device, dtype=torch.int64)
        weight = (idx * 0x9E3779B1 + 0x7F4A7C15) & 0xFFFFFFFF
        total = (total + int(((b ^ (b >> 17)) * weight).sum())) % 2**64
    return total


def fingerprint(values: Any) -> str:
    """A fingerprint of tensors and plain values (lists, tuples and dicts searched), equal for
    equal dtypes, shapes and bits wherever they were computed on the same kind of device."""
    h = hashlib.sha256()

    def walk(v: Any) -> None:
        if isinstance(v, torch.Tensor):
            h.update(f"T{v.dtype}{tuple(v.shape)}:{_digest(v)};".encode())
        elif isinstance(v, (list, tuple)):
            h.update(f"L{len(v)}[".encode())
            for x in v:
                walk(x)
            h.update(b"]")
        elif isinstance(v, dict):
            h.update(f"D{len(v)}{{".encode())
            for k in sorted(v, key=str):
                h.update(f"{k!s}=".encode())
                walk(v[k])
            h.update(b"}")
        else:
            h.update(f"V{v!r};".encode())

    walk(values)
    return h.hexdigest()[:32]


def tensor_bytes(values: Any) -> int:
    """Bytes of the tensors in `values` (lists, tuples and dicts searched)."""
    if isinstance(values, torch.Tensor):
        return values.numel() * values.element_size()
    if isinstance(values, (list, tuple)):
        return sum(tensor_bytes(v) for v in values)
    if isinstance(values, dict):
        return sum(tensor_bytes(v) for v in values.values())
    return 0
