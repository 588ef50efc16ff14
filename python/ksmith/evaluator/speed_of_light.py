"""Speed-of-light times: how fast a task could run on a GPU at its datasheet peaks.

    SOL = max(sum over FLOP classes of FLOPs / peak FLOP/s, bytes / peak bandwidth)

FLOPs come from PyTorch's own formulas (`torch.utils.flop_counter`, matmuls, convolutions and
attention; elementwise work is not counted: it is bandwidth-bound), split into convolutions and
the rest (matmul-like), because torch runs them at different precisions: with float32 data a
convolution uses TF32 tensor cores by default (`torch.backends.cudnn.allow_tf32`) while a matmul
does not (`torch.backends.cuda.matmul.allow_tf32`, `torch.get_float32_matmul_precision()`).
The TF32 policy is explicit and recorded with every figure:

- ``torch_flags`` (the default): each class at the peak of the precision torch's flags give it
  (what eager actually runs);
- ``never``: every float32 FLOP at the float32 peak (the slowest SOL: a kernel that keeps full
  float32 precision);
- ``always``: every float32 FLOP at the TF32 peak (the fastest).

Bytes are the compulsory traffic by default: inputs, outputs, parameters and buffers, each moved
once (no implementation can move less, so the SOL is a lower bound on the time); the probe's
`est_bytes` (every eager operator's reads and writes) is an upper bound instead and gives a SOL
that eager nearly reaches on memory-bound tasks.

Peaks (`ksmith/shared/gpu_peaks.json`, dense datasheet figures, each with its source) are looked
up by the device name; an unknown device has no SOL, and the reason says so.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

PEAKS_FILE = os.path.join(os.path.dirname(os.path.dirname(__file__)), "shared", "gpu_peaks.json")
TF32_POLICIES = ("torch_flags", "never", "always")
#: Data types whose FLOPs run at their own peak; float32 is decided by the TF32 policy.
OWN_PEAK = {"bfloat16", "float16", "float64"}


def load_peaks(path: str = PEAKS_FILE) -> list[dict[str, Any]]:
    """The table's GPUs, in match order."""
    with open(path) as f:
        return list(json.load(f)["gpus"])


def peaks_for(device: str, table: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The first entry whose every `match` string is in `device` (case-insensitive), or None."""
    name = device.lower()
    for entry in table:
        if all(m.lower() in name for m in entry["match"]):
            return entry
    return None


def tf32_classes(policy: str, matmul_tf32: bool, conv_tf32: bool) -> dict[str, bool]:
    """Whether each FLOP class (`matmul`, `conv`) of float32 data runs at the TF32 peak under
    `policy` (`matmul_tf32` / `conv_tf32`: torch's flags, read by the caller)."""
    if policy not in TF32_POLICIES:
        raise ValueError(f"unknown TF32 policy {policy!r}; known: {', '.join(TF32_POLICIES)}")
    if policy == "never":
        return {"matmul": False, "conv": False}
    if policy == "always":
        return {"matmul": True, "conv": True}
    return {"matmul": matmul_tf32, "conv": conv_tf32}


def sol(
    device: str,
    dtype: str,
    flops: dict[str, float],
    bytes_moved: float,
    tf32: dict[str, bool],
    table: list[dict[str, Any]],
) -> dict[str, Any]:
    """The speed-of-light of one call on `device` for data of `dtype` (`float32`, `bfloat16`,
    ...): `flops` by class (`matmul`, `conv`), `bytes_moved`, `tf32` from `tf32_classes`.
    Returns {"ms", "compute_ms", "memory_ms", "bound", "gpu", "peaks"} or {"ms": None, "why"}."""
    entry = peaks_for(device, table)
    if entry is None:
        return {"ms": None, "why": f"no peaks known for the device {device!r} (ksmith/shared/gpu_peaks.json)"}
    peaks = entry["flops"]
    compute_s = 0.0
    used: dict[str, str] = {}
    for kind, n in flops.items():
        if n <= 0:
            continue
        if dtype in OWN_PEAK:
            precision = dtype
        elif dtype == "float32":
            precision = "tf32" if tf32.get(kind, False) else "float32"
        else:
            return {"ms": None, "why": f"no peak for {dtype} arithmetic"}
        if precision not in peaks:
            return {"ms": None, "why": f"no {precision} peak for {entry['name']}"}
        compute_s += n / float(peaks[precision])
        used[kind] = precision
    memory_s = bytes_moved / float(entry["bytes_per_s"])
    return {
        "ms": max(compute_s, memory_s) * 1e3,
        "compute_ms": compute_s * 1e3,
        "memory_ms": memory_s * 1e3,
        "bound": "compute" if compute_s > memory_s else "memory",
        "gpu": entry["name"],
        "precision": used,
    }


def fraction(sol_ms: float | None, measured_ms: float | None) -> float | None:
    """The share of speed-of-light a measured time reaches (SOL / measured, 1 = at peak)."""
    if sol_ms is None or not measured_ms or measured_ms <= 0:
        return None
    return sol_ms / measured_ms


def flop_classes(counts: Mapping[Any, float]) -> dict[str, float]:
    """FlopCounterMode's global per-operator counts split into `conv` (convolutions) and
    `matmul` (the rest: matmuls, attention)."""
    out = {"matmul": 0.0, "conv": 0.0}
    for op, n in counts.items():
        out["conv" if "convolution" in str(op) else "matmul"] += float(n)
    return out


def dominant_dtype(tensors: list[Any]) -> str:
    """The floating dtype holding the most bytes among `tensors` (float32 when none)."""
    import torch

    by: dict[str, int] = {}
    for t in tensors:
        if isinstance(t, torch.Tensor) and t.is_floating_point():
            key = str(t.dtype).replace("torch.", "")
            by[key] = by.get(key, 0) + t.numel() * t.element_size()
    return max(by, key=lambda k: by[k]) if by else "float32"


def for_task(
    device: str | None,
    flops: dict[str, float],
    bytes_moved: float,
    dtype: str,
    policy: str,
    table: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """A task's speed-of-light as the evaluator reports it (the protocol's `SpeedOfLight`): `ms`
    (or None and `why`), `bound`, `gpu`, and what it was computed from. `device` is the GPU's
    name, None on the CPU. The evaluator's children run with TF32 off (`torch_flags` gives
    float32 peaks there)."""
    tf32 = tf32_classes(policy, False, False)
    base: dict[str, Any] = {
        "ms": None,
        "why": None,
        "bound": None,
        "gpu": None,
        "flops": float(sum(flops.values())),
        "bytes": float(bytes_moved),
        "dtype": dtype,
        "tf32_policy": policy,
    }
    if device is None:
        return dict(base, why="no GPU (the CPU's Triton interpreter): no speed-of-light")
    got = sol(device, dtype, flops, bytes_moved, tf32, table if table is not None else load_peaks())
    if got["ms"] is None:
        return dict(base, why=got["why"])
    return dict(base, ms=got["ms"], bound=got["bound"], gpu=got["gpu"])
