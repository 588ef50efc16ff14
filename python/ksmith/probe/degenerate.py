"""Whether a program that runs can be a task, judged the way the evaluator will use it.

The evaluator builds ``Model(*get_init_inputs())`` once (training mode, as KernelBench does),
calls it twice on each trial's inputs and compares every candidate with it on inputs drawn with
other seeds. A program fails that use, or makes it meaningless, when:

- its forward draws random numbers (dropout still active, sampling): two calls on the same
  inputs differ, or the random generator moves during a call (a rare draw, such as a stochastic
  depth of 1 %, can leave a small batch untouched), and no candidate can match either (status
  ``nondeterministic``);
- its forward writes its own parameters or buffers (an EMA codebook, a ``self.training`` branch
  that copies into a weight): the reference does work the task does not mean, and its outputs
  change call after call. Batch norm's running statistics are the exception: updating them is
  part of batch norm's training forward (one fused kernel in torch), O(channels) beside the
  normalization itself;
- its output is constant (every element equal, e.g. a gain initialised to zero), or does not
  change when the inputs are drawn with another seed (an input the output ignores, inputs that do
  not depend on the seed at all): a candidate returning a cached constant would pass;
- every output equals one of its inputs within the evaluator's float32 tolerance (a residual
  block whose layer scale starts at 1e-6 returns ``x + 1e-6 * f(x)``): a candidate copying the
  input would pass.

The last four are ``degenerate``. :func:`judge` runs the verified program once more from
scratch for this; a program that fails on a second draw of its inputs fails here too.
"""

from __future__ import annotations

from typing import Any

from ..shared.outputs import same_values
from .loading import exec_program, seed_all, split_init
from .work import flatten_outputs

#: Buffers of batch-norm layers that their training forward updates by design.
BATCH_NORM_STATS = ("running_mean", "running_var", "num_batches_tracked")


#: The evaluator's float32 ``(atol, rtol)`` and relative error (``evaluator/defaults.json``; a
#: test ties them): an output this close to an input passes the evaluator as a copy of it.
COPY_TOLERANCE = (1e-4, 1e-4)
COPY_RELATIVE_ERROR = 1e-3


class SecondDrawFailed(Exception):
    """The program does not run on inputs drawn with another seed."""


def _as_list(value) -> list[Any]:
    return list(value) if isinstance(value, (list, tuple)) else [value]


def _clone(values: list[Any], torch) -> list[Any]:
    return [v.clone() if isinstance(v, torch.Tensor) else v for v in values]


def _state(model, torch) -> dict[str, Any]:
    """A copy of the parameters and buffers a forward must leave alone (a sparse one dense:
    Whisper's ``alignment_heads``; sparse tensors have no bitwise comparison)."""
    norm = torch.nn.modules.batchnorm._NormBase
    skip = {
        f"{name}.{stat}" if name else stat
        for name, module in model.named_modules()
        if isinstance(module, norm)
        for stat in BATCH_NORM_STATS
    }
    out = {}
    for name, t in list(model.named_parameters()) + list(model.named_buffers()):
        if name not in skip:
            t = t.detach()
            out[name] = (t if t.layout == torch.strided else t.to_dense()).clone()
    return out


def _changed(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """The parameters and buffers whose values a call changed (compared bitwise, NaN matching NaN)."""
    return sorted(n for n, t in before.items() if n not in after or not same_values([t], [after[n]]))


def _constant(outputs: list[Any], torch) -> bool:
    """Every output with more than one element holds one value (NaN counts as a value), and there
    is at least one such output."""
    big = [o for o in outputs if o.numel() > 1]
    if not big:
        return False
    for o in big:
        flat = o.reshape(-1)
        first = flat[:1].expand_as(flat)
        if not torch.equal(torch.nan_to_num(flat), torch.nan_to_num(first)):
            return False
    return True


def _copies_an_input(outputs: list[Any], inputs: list[Any], torch) -> int | None:
    """The index of an input that every output equals within the evaluator's tolerance (element
    test and relative error of the whole output), None when some output is not a copy of an input
    (or there is no floating output)."""
    floats = [o for o in outputs if isinstance(o, torch.Tensor) and o.is_floating_point()]
    if not floats or len(floats) != len(outputs):
        return None
    atol, rtol = COPY_TOLERANCE
    for i, x in enumerate(inputs):
        if not isinstance(x, torch.Tensor) or not x.is_floating_point():
            continue
        ok = True
        for o in floats:
            if o.shape != x.shape:
                ok = False
                break
            a, b = o.detach().to(torch.float64), x.detach().to(torch.float64)
            if not torch.allclose(a, b, atol=atol, rtol=rtol):
                ok = False
                break
            norm = float(torch.linalg.vector_norm(b))
            if norm > 0 and float(torch.linalg.vector_norm(a - b)) / norm > COPY_RELATIVE_ERROR:
                ok = False
                break
        if ok:
            return i
    return None


def judge(text: str, seed: int, torch) -> tuple[str, str] | None:
    """``(kind, reason)`` when the program cannot be a task (kind ``random``: its forward draws
    random numbers; ``writes``: it writes its own parameters or buffers; ``degenerate``: anything
    else above), None when it can. (The first two may go away in eval mode: :mod:`.eval_mode`.)
    Kind ``drew``: nothing else is wrong, but the random generator moved during a call whose two
    runs agreed: a task in eval mode where eval mode draws nothing, else a task as it is (a
    draw that cannot change the output, such as a condition dropped with probability 0).

    Outputs, input draws and parameters are compared bitwise
    (:func:`~ksmith.shared.outputs.same_values`, the probe's own comparison). Raises
    :class:`SecondDrawFailed` when the program fails on its second input draw.
    """
    ns = exec_program(text, "<ksmith-judged-program>")
    seed_all(seed, torch)
    model = ns["Model"](*split_init(ns["get_init_inputs"]()))
    seed_all(seed, torch)
    first = _as_list(ns["get_inputs"]())
    seed_all(seed + 7919, torch)
    second = _as_list(ns["get_inputs"]())
    before = _state(model, torch)
    with torch.no_grad():
        generator = torch.random.get_rng_state()
        out = flatten_outputs(model(*_clone(first, torch)), torch, [])
        drew = not torch.equal(generator, torch.random.get_rng_state())
        written = _changed(before, _state(model, torch))
        again = flatten_outputs(model(*_clone(first, torch)), torch, [])
        if not written and not same_values(out, again):
            return (
                "random",
                "its forward draws random numbers: two calls on the same inputs give different outputs "
                "(dropout or sampling active in training mode), which no candidate can match",
            )
        if written:
            shown = ", ".join(written[:4]) + (", ..." if len(written) > 4 else "")
            return (
                "writes",
                f"its forward writes its own parameters or buffers ({shown}): the reference would do work "
                "the task does not mean and change from call to call",
            )
        if _constant(out, torch):
            return (
                "degenerate",
                "its output is constant (every element equal): a candidate returning that constant would pass",
            )
        copied = _copies_an_input(out, first, torch)
        if copied is not None:
            return (
                "degenerate",
                f"its output equals its input {copied} within the evaluator's tolerance (e.g. a residual "
                "branch scaled by a tiny layer scale): a candidate copying the input would pass",
            )
        if same_values(first, second):
            return (
                "degenerate",
                "its inputs do not change with the seed: a candidate returning the outputs it cached would pass",
            )
        try:
            other = flatten_outputs(model(*_clone(second, torch)), torch, [])
        except Exception as exc:  # noqa: BLE001 - module code: any error is data
            raise SecondDrawFailed(f"{type(exc).__name__}: {exc}") from exc
        if same_values(out, other):
            return (
                "degenerate",
                "its output does not depend on its inputs (the same for two input draws): a candidate "
                "returning a constant would pass",
            )
    if drew:
        # A stochastic depth of 0.9 % keeps every sample of a small batch: the two calls agree
        # here and differ at the GPU's batch (a Swin block, refused on an H200). Whether the
        # draw matters is eval mode's question (`execute._judge_in_eval_mode`).
        return (
            "drew",
            "its forward draws random numbers (the random generator moved during a call; the two calls "
            "agreed at these sizes)",
        )
    return None
