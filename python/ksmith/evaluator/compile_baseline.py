"""The `torch.compile` baseline of a task: the reference compiled by inductor and timed the way
the reference and every candidate are, once per task and evaluator (the worker keeps it with the
task's facts, `evaluate.TaskFacts`), so a step's speedup can be stated over compile as well as
over eager.

Measured in a reference child of its own (``mode = "compiled"``, `reference_child`), confined
like every child that runs crawled code: it builds the reference, compiles it with
`torch.compile` in the configured mode (`compile_baseline`: ``default``, inductor's default mode,
or ``max-autotune-no-cudagraphs``; ``off`` measures nothing), makes the first call (the
compilation) and checks its outputs against eager with the judge's tolerances
(`compare.output_errors`). The worker waits `compile_baseline_timeout_s` for that (a compile
cannot be interrupted inside the process: past the limit the child is killed). Then, on `go`
with the GPU held alone, the compiled model is timed like a candidate, with the eager
reference's CUDA graphs beside it on the same buffer sets and fresh inputs (`timing.Companion`):
the compiled model by its best method (CUDA graphs where it can be captured, else direct calls
to a device-wide sync), re-measured while noisy (`timing.Timer.settle`), in one process (the
pairs cancel what moves a whole process). Its speedup over eager is the ratio of the two medians
of that process; its timing carries both sides' samples, paired, so that the labels can draw the
interval of a step's speedup over compile (`ksmith_core::speedup_interval`: the step's speedup
over eager over compile's, replicate by replicate, each normalized by the eager reference of its
own process).

A task that cannot be compiled (dynamo or inductor raises, the outputs differ from eager, the
compile passes its time limit, the child dies) gets a reason in `why`, never a failure: the task
is evaluated as before. On the CPU the baseline is not measured (`why` = ``cpu``): the CPU's
evaluator reports no times at all (Triton's interpreter), so a compiled time would have nothing
to be compared with.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from typing import Any

import torch

from . import compare, messages
from .child_common import Channel, as_list, clone_all
from .inputs import nonnegative, refresh
from .timing import Companion, Timer, combine, input_sets

#: The option `compile_baseline`: ``off`` or a `torch.compile` mode.
MODES = ("off", "default", "max-autotune-no-cudagraphs")


def check_mode(mode: str) -> None:
    """Refuses a `compile_baseline` outside `MODES` (`ValueError` naming the option)."""
    if mode not in MODES:
        raise ValueError(f"compile_baseline must be one of {', '.join(MODES)}, got {mode!r}")


def unmeasured(mode: str, why: str, compile_s: float | None = None) -> dict[str, Any]:
    """The baseline of a task that has none, with the reason (the protocol's `CompileBaseline`)."""
    return {"mode": mode, "timing": None, "speedup_over_eager": None, "compile_s": compile_s, "why": why}


def measured(mode: str, compile_s: float, stats: dict[str, Any]) -> dict[str, Any]:
    """The baseline from the compiled model's timing `stats` (`Timer.settle`'s, with the eager
    reference beside it): the timing in the protocol's form (with both sides' samples, paired)
    and the speedup over eager (eager median beside it / compiled median)."""
    timing = combine([stats])
    # every result of the task carries the baseline: each sample once (the pairs), not again in
    # the process's own lists
    timing.pop("samples_ms", None)
    if timing.get("reference_in_process"):
        timing["reference_in_process"] = {k: v for k, v in timing["reference_in_process"].items() if k != "samples_ms"}
    beside = float((stats.get("reference_in_process") or {}).get("median_ms", 0.0))
    ms = float(stats["median_ms"])
    if beside <= 0 or ms <= 0:
        return unmeasured(mode, "the compiled model or the eager reference beside it timed no positive time", compile_s)
    out = unmeasured(mode, "", compile_s)
    out.update(timing=timing, speedup_over_eager=beside / ms, why=None)
    return out


def run(ch: Channel, cfg: dict[str, Any], model: Any, inputs: list[Any], expected: list[Any], get_inputs: Any) -> None:
    """The child's side (``mode = "compiled"`` of `reference_child`): compiles `model`, checks
    its first call's outputs against `expected` (eager's on `inputs`), sends `BaselineCompiled`
    and times it on `go` beside the eager model (see the module doc). A failure raises: the child
    reports it as `ReferenceFailed` and the worker records it as the reason."""
    import torch._inductor.config as inductor_config

    # the compile runs in this confined process, not in a pool of compile workers
    inductor_config.compile_threads = 1
    mode = str(cfg["compile_baseline"])
    t0 = time.monotonic()
    compiled: Callable[..., Any] = torch.compile(model, mode=None if mode == "default" else mode)
    with torch.no_grad():
        out = as_list(compiled(*clone_all(inputs)))
    compile_s = time.monotonic() - t0
    ok, errors = compare.output_errors(out, expected, cfg["tolerances"], cfg["relative_error"])
    if not ok:
        worst = compare.worst_error(errors)
        raise RuntimeError(f"the compiled reference's outputs differ from eager (worst error {worst:.3g})")
    ch.send(messages.BaselineCompiled(compile_s=compile_s))
    if ch.wait_command().split(" ")[0] != "go":
        return
    sets = input_sets(cfg["timing"], inputs, cfg["device"])
    nonneg = nonnegative(inputs)

    def prepare(row: int | None, s: int) -> None:
        refresh(sets[s], nonneg, secrets.randbits(62), get_inputs)

    def call(fn: Any, static: list[Any]) -> Callable[[], Any]:
        def timed() -> Any:
            with torch.no_grad():
                return fn(*static)

        return timed

    timer = Timer(cfg["timing"], cfg["device"])
    eager_graphs, _ = timer.capture_all([call(model, s) for s in sets])
    beside = (
        Companion([g.replay for g in eager_graphs])
        if eager_graphs
        else Companion([call(model, s) for s in sets], direct=True)
    )
    fns = [call(compiled, s) for s in sets]
    graphs, err = timer.capture_all(fns)
    stats = timer.settle(fns, graphs, prepare=prepare, companion=beside)
    ch.send(messages.Timed(timing=stats, capture_error=err))
