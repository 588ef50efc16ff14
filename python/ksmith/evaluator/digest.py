"""Digests of timed calls: how the judge checks the outputs of calls it never saw, chosen after the
fact among all the timed calls.

After every timed call (untimed, and the same after every call, so nothing tells a call that will
be checked from one that will not) the harness reduces, on the device and without waiting for it,
each output to a few numbers: the count of its non-finite elements and `SUMS` weighted sums of
its other elements, `sum_j w[(j + r) mod m] * out_j`, with weights `w` drawn once per timing from a
seed (`weights`) and shifts `r` drawn afresh after each call (so what the weights of a call are is
decided only once the call has returned); and each input tensor to one such sum (an input the call
changed shows). The worker then picks some calls and the judge writes the same fresh inputs (from
the call's seed, `inputs.refresh`), runs the reference, reduces its outputs with the same weights
and shifts, and compares (`compare_outputs`).

Why a random weighted sum tells a wrong output from a right one: for an error vector `e` (the
candidate's output minus the reference's) the difference of the two sums is `sum_j w_j e_j`, with
standard deviation `||e||_2` over the draw of the weights. An output within the comparison's
tolerances has `||e||_2 <= E`, where `E` is the smaller of the relative limit times `||ref||_2`
(where that criterion applies, see `compare`) and `||atol + rtol |ref| ||_2`; such a difference
exceeds `Z * E` with probability below 2e-9 per sum. An output computed for other inputs, or not
at all, has `||e||_2` of the order of `||ref||_2`, hundreds of times `E`, and passes one sum with
probability about `Z * E / ||ref||_2` (below 1 % for float32) and all `SUMS` sums with its power.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from .compare import NOISE_FLOOR, relative_limit, tolerance

#: Weighted sums per output (each with its own shift).
SUMS = 2
#: Numbers per output in a digest: the non-finite count, then the sums.
PER_OUTPUT = 1 + SUMS
#: How many standard deviations of an output at the edge of the tolerances a sum may be off.
Z = 6.0
#: The sums' own rounding (float32 accumulation), relative to `||ref||_2`.
ROUNDING = 1e-5
#: An input's sum may differ from the judge's by this much relative to `||input||_2` and still be
#: the same values (reduction order); a changed input is off by far more.
INPUT_TOLERANCE = 1e-6


def weights(numel: int, seed: int, device: str | torch.device) -> torch.Tensor:
    """The `numel` float32 weights of seed `seed` (standard normal), the same on both sides."""
    gen = torch.Generator(device=device).manual_seed(seed)
    return torch.randn(max(numel, 1), generator=gen, dtype=torch.float32, device=device)


def _shifted_dot(v: torch.Tensor, w: torch.Tensor, shift: int) -> torch.Tensor:
    """`sum_j w[(j + shift) mod m] * v_j` for the flat `v` of `m` elements (two dots over views:
    no copy of the weights)."""
    m = v.numel()
    r = shift % m
    w = w[:m].to(v.dtype)
    if r == 0:
        return torch.dot(v, w)
    return torch.dot(v[: m - r], w[r:]) + torch.dot(v[m - r :], w[:r])


def _flat(t: torch.Tensor) -> torch.Tensor:
    """`t` as a flat tensor the sums can take: float32 for floating outputs of at most 32 bits,
    float64 for float64 and every integer or bool tensor."""
    v = t.detach().reshape(-1)
    if v.dtype == torch.bool or not v.is_floating_point() or v.dtype == torch.float64:
        return v.to(torch.float64)
    return v.to(torch.float32)


def tensor_digest(t: torch.Tensor, w: torch.Tensor, shifts: list[int]) -> list[torch.Tensor]:
    """The `PER_OUTPUT` numbers of one output (0-d tensors on the weights' device)."""
    v = _flat(t).to(w.device)
    if v.numel() == 0 or v.numel() > w.numel():
        return [torch.zeros((), dtype=torch.float64, device=w.device)] * PER_OUTPUT
    finite = torch.isfinite(v)
    bad = (v.numel() - finite.sum()).to(torch.float64)
    v = torch.nan_to_num(v, nan=0.0, posinf=0.0, neginf=0.0)
    return [bad] + [_shifted_dot(v, w, s).to(torch.float64) for s in shifts[:SUMS]]


def output_digest(outs: list[Any], w: torch.Tensor, shifts: list[int]) -> torch.Tensor:
    """The digest of a call's outputs: `PER_OUTPUT` numbers per output (a number output: 0 and
    its value), as one float64 vector on the weights' device."""
    device = w.device
    parts: list[torch.Tensor] = []
    for o in outs:
        if isinstance(o, torch.Tensor):
            parts += tensor_digest(o, w, shifts)
        else:
            value = float(o) if isinstance(o, (int, float, bool)) else math.nan
            parts += [torch.zeros((), dtype=torch.float64, device=device)] + [
                torch.tensor(value, dtype=torch.float64, device=device)
            ] * SUMS
    if not parts:
        return torch.zeros(0, dtype=torch.float64, device=device)
    return torch.stack(parts)


def input_digest(inputs: list[Any], w: torch.Tensor, shift: int) -> torch.Tensor:
    """One weighted sum per input tensor (float64 vector on the weights' device)."""
    device = w.device
    parts = []
    for x in inputs:
        if isinstance(x, torch.Tensor):
            v = _flat(x).to(w.device)
            if v.numel() == 0 or v.numel() > w.numel():
                parts.append(torch.zeros((), dtype=torch.float64, device=device))
            else:
                parts.append(_shifted_dot(v, w, shift).to(torch.float64))
    if not parts:
        return torch.zeros(0, dtype=torch.float64, device=device)
    return torch.stack(parts)


def signature(outs: list[Any]) -> list[Any]:
    """What a call's outputs are: per output, [shape, dtype] for a tensor, its type's name
    otherwise (the judge compares it with the reference's)."""
    return [
        [list(o.shape), str(o.dtype).replace("torch.", "")] if isinstance(o, torch.Tensor) else type(o).__name__
        for o in outs
    ]


def compare_outputs(
    cand: torch.Tensor,
    ref_outs: list[Any],
    w: torch.Tensor,
    shifts: list[int],
    tolerances: dict[str, Any],
    relative: dict[str, float] | None,
) -> tuple[bool, float]:
    """Whether the candidate's digest `cand` (host float64 vector) matches the reference's
    outputs `ref_outs` reduced with the same weights and shifts, within the tolerances (see the
    module doc), and the largest deviation in units of its bound (above 1: fails)."""
    ref = output_digest(ref_outs, w, shifts).cpu()
    if cand.numel() != ref.numel():
        return False, math.inf
    worst = 0.0
    for i, r in enumerate(ref_outs):
        c_part = cand[i * PER_OUTPUT : (i + 1) * PER_OUTPUT]
        r_part = ref[i * PER_OUTPUT : (i + 1) * PER_OUTPUT]
        if isinstance(r, torch.Tensor):
            if float(c_part[0]) != float(r_part[0]):
                return False, math.inf  # not as many non-finite elements
            bound = _bound(r, tolerances, relative)
        else:
            atol, rtol = tolerance(torch.float32, tolerances)
            bound = atol + rtol * abs(float(r_part[1]))
        for c, x in zip(c_part[1:].tolist(), r_part[1:].tolist()):
            if c == x or (math.isnan(c) and math.isnan(x)):
                continue
            dev = abs(c - x) / bound if bound > 0 else (0.0 if c == x else math.inf)
            if not dev <= 1.0:
                return False, dev if dev == dev else math.inf
            worst = max(worst, dev)
    return True, worst


def _bound(r: torch.Tensor, tolerances: dict[str, Any], relative: dict[str, float] | None) -> float:
    """How far a sum over the output `r`'s elements may be off (see the module doc)."""
    v = _flat(r)
    v = torch.nan_to_num(v, nan=0.0, posinf=0.0, neginf=0.0).to(torch.float64)
    norm = float(torch.linalg.vector_norm(v))
    if r.dtype == torch.bool or not r.is_floating_point():
        return 1e-9 * norm + 1e-9  # integers: the same values, up to the sums' rounding
    atol, rtol = tolerance(r.dtype, tolerances)
    allowed = float(torch.linalg.vector_norm(atol + rtol * v.abs()))
    if norm / max(v.numel(), 1) ** 0.5 > atol * NOISE_FLOOR:
        allowed = min(allowed, relative_limit(r.dtype, relative) * norm)
    return Z * allowed + ROUNDING * norm


def same_inputs(cand: torch.Tensor, pristine: list[Any], w: torch.Tensor, shift: int) -> bool:
    """Whether the inputs a timed call left behind (their sums, `cand`) are the fresh values it
    was given (`pristine`, the judge's own copy)."""
    ref = input_digest(pristine, w, shift).cpu()
    if cand.numel() != ref.numel():
        return False
    norms = [
        float(torch.linalg.vector_norm(_flat(x).to(torch.float64))) for x in pristine if isinstance(x, torch.Tensor)
    ]
    return all(abs(float(c) - float(r)) <= INPUT_TOLERANCE * n + 1e-12 for c, r, n in zip(cand, ref, norms))
