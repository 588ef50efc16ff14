"""The trusted child: runs the REFERENCE program of a task (never any candidate code).

`main(DIR, secret)`, in a process forked from the fork server (`forkserver`), reads
`DIR/reference.py` and `DIR/config.json`, builds the trials' inputs (see `inputs`), runs `Model` on
each (twice: a reference that does not repeat itself is a broken task), records outputs, inputs
after the call (a reference may mutate its inputs on purpose), whether each output aliases an
input, lower-precision variants of the outputs (float16, bfloat16 and, on GPU, TF32 matmuls: the
precision-downgrade check compares against them) and the reference's work estimate; writes it all
to `DIR/ref.pt` (plain tensors) and, on a GPU, times the reference when the worker says `go` (the
worker serializes timing on its GPU)."""

from __future__ import annotations

import copy
import json
import os
from typing import Any

from . import messages
from .child_common import (
    Channel,
    as_list,
    clone_all,
    enter_sandbox,
    error_text,
    hardware,
    load_module,
    same_values,
    to_device,
)


def _shares_storage(a: Any, b: Any) -> bool:
    import torch

    if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):
        return False
    try:
        return a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr() and a.untyped_storage().nbytes() > 0
    except Exception:  # noqa: BLE001
        return False


def _cpu(values: list[Any]) -> list[Any]:
    import torch

    return [torch.Tensor.cpu(v).clone() if isinstance(v, torch.Tensor) else v for v in values]


def _same(a: list[Any], b: list[Any], atol: float, rtol: float) -> bool:
    import torch

    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor):
            if x.shape != y.shape or x.dtype != y.dtype:
                return False
            if x.is_floating_point():
                if not torch.allclose(x.double(), y.double(), atol=atol, rtol=rtol, equal_nan=True):
                    return False
            elif not torch.equal(x, y):
                return False
        elif x != y:
            return False
    return True


def main(d: str, secret: bytes) -> int:
    """The child's entry point (called in a process forked from the fork server)."""
    ch = Channel(secret)
    cfg = json.load(open(os.path.join(d, "config.json")))
    if not enter_sandbox(cfg, ch):
        return 0
    device = cfg["device"]
    import torch

    from .inputs import make_inputs
    from .integrity import OpLog

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    try:
        mod = load_module(os.path.join(d, "reference.py"), "ksmith_reference")
        seed = int(cfg["seed"])
        torch.manual_seed(seed)
        init = list(mod.get_init_inputs())
        torch.manual_seed(seed)
        model = mod.Model(*init).to(device)
        state = {k: torch.Tensor.cpu(v).clone() for k, v in model.state_dict().items()}
        trials = []
        work = 0.0
        for k in range(int(cfg["trials"]) + 1):
            inputs = make_inputs(mod.get_inputs, seed + 7919 * (k + 1), k)
            dev_in = to_device(clone_all(inputs), device)
            before = clone_all(dev_in)
            with torch.no_grad():
                if k == 0:
                    log = OpLog(None)
                    with log:
                        out = as_list(model(*dev_in))
                    work = log.total()
                else:
                    out = as_list(model(*dev_in))
                again = as_list(model(*to_device(clone_all(inputs), device)))
            outputs = _cpu(out)
            if not _same(outputs, _cpu(again), 1e-5, 1e-5):
                raise RuntimeError("the reference gives different outputs for the same inputs (nondeterministic task)")
            if any(
                isinstance(o, torch.Tensor) and o.is_floating_point() and o.numel() > 0 and bool(torch.isnan(o).all())
                for o in outputs
            ):
                raise RuntimeError("the reference output is all NaN on the generated inputs")
            alias = [any(_shares_storage(o, x) for x in dev_in) for o in out]
            low = {}
            variants = [("float16", torch.float16), ("bfloat16", torch.bfloat16)]
            for name, dt in variants:
                try:
                    m2 = copy.deepcopy(model).to(dt)
                    ins = [
                        x.to(dt) if isinstance(x, torch.Tensor) and x.is_floating_point() else x
                        for x in to_device(clone_all(inputs), device)
                    ]
                    with torch.no_grad():
                        o2 = as_list(m2(*ins))
                    low[name] = [
                        torch.Tensor.cpu(o).to(torch.float32)
                        if isinstance(o, torch.Tensor) and o.is_floating_point()
                        else o
                        for o in o2
                    ]
                except Exception:  # noqa: BLE001 - a variant the reference cannot run is skipped
                    pass
            if device.startswith("cuda"):
                torch.backends.cuda.matmul.allow_tf32 = True
                torch.backends.cudnn.allow_tf32 = True
                with torch.no_grad():
                    low["tf32"] = _cpu(as_list(model(*to_device(clone_all(inputs), device))))
                torch.backends.cuda.matmul.allow_tf32 = False
                torch.backends.cudnn.allow_tf32 = False
            trials.append(
                {
                    "inputs": inputs,
                    "outputs": outputs,
                    "mutated": not same_values(dev_in, before),
                    "alias": alias,
                    "low": low,
                }
            )
            del before, dev_in, out, again
        torch.save({"init": init, "state": state, "trials": trials, "work": work}, os.path.join(d, "ref.pt"))
        ch.send(messages.TrialsDone(hardware=hardware(device), work=work))
        if device.startswith("cuda") and cfg.get("measure", True):
            from .timing import Timer, input_sets

            ch.send(messages.ReadyToTime())
            if ch.wait_command() != "go":
                return 0
            sets = input_sets(cfg["timing"], trials[0]["inputs"], device)

            def timed(static: list[Any]) -> Any:
                def fn() -> Any:
                    with torch.no_grad():
                        return model(*static)

                return fn

            fns = [timed(static) for static in sets]
            timer = Timer(cfg["timing"])
            graphs, err = timer.capture_all(fns)
            stats = timer.measure(fns, graphs)
            ch.send(messages.Timed(timing=stats, capture_error=err))
        return 0
    except BaseException as e:  # noqa: BLE001 - every failure of the task is reported
        ch.send(messages.ReferenceFailed(error_text(e)))
        return 3
