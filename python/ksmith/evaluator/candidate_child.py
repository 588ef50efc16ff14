"""The untrusted child: the harness that imports and runs ONE candidate.

`python -m ksmith.evaluator.candidate_child DIR`. `DIR/task.pt` holds what the candidate may see
(init inputs, the reference's weights, each trial's inputs, the post-timing trial's inputs; never
a reference output). The harness installs its instruments (see `integrity`) BEFORE importing
the candidate, then:

1. imports the candidate and builds `ModelNew` (seed set as for the reference; the reference's
   `state_dict` is loaded when names and shapes match exactly) -> `compile_error` on failure;
2. runs every trial twice on fresh clones of the inputs, after poisoning freed memory of the
   outputs' sizes with NaN, and writes outputs and inputs-after-the-call to `DIR/out_<k>.pt` as
   plain CPU tensors; the worker compares them (the harness never judges correctness);
3. on a GPU, profiles one call (share of GPU time in the candidate's Triton kernels);
4. on `go` from the worker (which holds the GPU for timing): CUDA-graph capture of every
   buffer set (see `timing`), the stream check when capture fails, timing, then one call on the
   post-timing inputs copied into the first set's buffers (`DIR/post_out.pt`), so the timed code
   path is checked on fresh values too.

Messages go over the private channel (see `child_common`); violations the harness sees are
reported as `{"type": "violation", "hack": ..., "message": ...}` and end the run.
"""

from __future__ import annotations

import json
import os
import sys

from .child_common import (
    Channel,
    as_list,
    clone_all,
    close,
    enter_sandbox,
    error_text,
    hardware,
    load_module,
    same_values,
    to_device,
)

CANDIDATE_MODULE = "ksmith_candidate"


class Violation(Exception):
    """An integrity violation seen by the harness."""

    def __init__(self, hack: str, message: str):
        super().__init__(message)
        self.hack = hack
        self.message = message


def main(d: str) -> int:
    import time

    t_start = time.monotonic()
    phases: dict[str, float] = {}

    def mark(name: str) -> None:
        phases[name] = round(time.monotonic() - t_start, 3)

    ch = Channel()
    cfg = json.load(open(os.path.join(d, "config.json")))
    if not enter_sandbox(cfg, ch):
        return 0
    device = cfg["device"]
    import torch
    import triton  # noqa: F401 - imported before the candidate so its identities are captured

    from .integrity import Identities, LaunchCounter, OpLog, ThreadWatch

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    launches = LaunchCounter(CANDIDATE_MODULE)
    threads = ThreadWatch()
    ids = Identities()
    mark("imports")
    task = torch.load(os.path.join(d, "task.pt"), weights_only=True)
    if device.startswith("cuda"):
        torch.empty(1, device=device)  # CUDA context before arming the thread watch
    threads.arm()

    def check(where: str) -> None:
        hack, msg = ids.violations()
        if hack:
            raise Violation(hack, f"{where}: {msg}")
        t = threads.violation()
        if t:
            raise Violation("background_thread", f"{where}: {t}")

    # 1. import and construct
    try:
        mod = load_module(os.path.join(d, "candidate.py"), CANDIDATE_MODULE)
        check("import")
        torch.manual_seed(int(task["seed"]))
        model = mod.ModelNew(*task["init"])
        model = model.to(device)
        check("construction")
        ref_state = task["state"]
        weights = "seeded" if ref_state else "none"
        own = model.state_dict()
        if (
            ref_state
            and set(own) == set(ref_state)
            and all(tuple(own[k].shape) == tuple(ref_state[k].shape) for k in own)
        ):
            model.load_state_dict({k: v.to(device) for k, v in ref_state.items()})
            weights = "reference_state_dict"
    except Violation as v:
        ch.send({"type": "violation", "hack": v.hack, "message": v.message})
        return 0
    except BaseException as e:  # noqa: BLE001 - the candidate's failure is its verdict
        ch.send({"type": "compile_error", "message": error_text(e)})
        return 0
    mark("import_candidate")
    ch.send({"type": "compiled", "weights": weights})

    def poison() -> None:
        for shape, dtype in task["out_meta"]:
            dt = getattr(torch, dtype)
            fill = float("nan") if dt.is_floating_point else 77
            buf = torch.full(shape, fill, dtype=dt, device=device)
            del buf

    def storage(t):
        try:
            return t.untyped_storage().data_ptr() if t.untyped_storage().nbytes() > 0 else None
        except Exception:  # noqa: BLE001
            return None

    def expect_stream() -> None:
        if device.startswith("cuda"):
            launches.expected_stream = torch.cuda.current_stream()

    def stream_check(where: str) -> None:
        if launches.foreign_stream_launches:
            raise Violation(
                "side_stream",
                f"{where}: {launches.foreign_stream_launches} Triton launches on a stream other than the one "
                "forward() was called on",
            )

    def run_once(inputs, log=None):
        expect_stream()
        with torch.no_grad():
            if log is not None:
                with log:
                    out = model(*inputs)
            else:
                out = model(*inputs)
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        outs = as_list(out)
        for i, o in enumerate(outs):
            if isinstance(o, torch.Tensor) and type(o) is not torch.Tensor:
                raise Violation(
                    "lazy_output",
                    f"output {i} has type {type(o).__module__}.{type(o).__qualname__}, not exactly torch.Tensor",
                )
            if not isinstance(o, (torch.Tensor, int, float, bool)) and o is not None:
                raise Violation("lazy_output", f"output {i} has type {type(o).__qualname__}, not a tensor")
        return outs

    # 2. correctness trials
    oplog = OpLog(launches)
    try:
        for k, trial in enumerate(task["trials"]):
            runs = []
            alias = []
            mutated = False
            first = None
            for r in range(2):
                inputs = to_device(clone_all(trial["inputs"]), device)
                before = clone_all(inputs)
                poison()
                outs = run_once(inputs, oplog if (k == 0 and r == 0) else None)
                check(f"trial {k}")
                stream_check(f"trial {k}")
                if r == 0:
                    in_ptrs = {storage(x) for x in inputs if isinstance(x, torch.Tensor)}
                    p_ptrs = {storage(p) for p in list(model.parameters()) + list(model.buffers())}
                    alias = [
                        isinstance(o, torch.Tensor)
                        and storage(o) is not None
                        and (storage(o) in in_ptrs or storage(o) in p_ptrs)
                        for o in outs
                    ]
                    mutated = not same_values(inputs, before)
                    first = outs
                    runs.append([torch.Tensor.cpu(o).clone() if isinstance(o, torch.Tensor) else o for o in outs])
                elif k == 0:
                    # the worker checks the second run itself on the first trial...
                    runs.append([torch.Tensor.cpu(o).clone() if isinstance(o, torch.Tensor) else o for o in outs])
                else:
                    # ...and the harness on the others (a failed check only ever rejects)
                    repeat_ok = close(first, outs, cfg["tolerances"])
                del outs, before
            torch.save(
                {"runs": runs, "mutated": mutated, "alias": alias, "repeat_ok": repeat_ok if k > 0 else None},
                os.path.join(d, f"out_{k}.pt"),
            )
            del first
        mark("trials")
        share = None
        if device.startswith("cuda") and launches.total() > 0:
            share = _gpu_share(
                torch, model, to_device(clone_all(task["trials"][0]["inputs"]), device), set(launches.counts)
            )
            check("profile")
    except Violation as v:
        ch.send({"type": "violation", "hack": v.hack, "message": v.message})
        return 0
    except BaseException as e:  # noqa: BLE001
        ch.send({"type": "runtime_error", "message": error_text(e)})
        return 0
    mark("profile")
    ch.send(
        {
            "type": "correctness_done",
            "phases": dict(phases),
            "launches": dict(launches.counts),
            "torch_work": oplog.work,
            "torch_calls": oplog.calls,
            "gpu_share": share,
            "hardware": hardware(device),
        }
    )

    # 4. timing
    if not (device.startswith("cuda") and cfg.get("measure")):
        return 0
    ch.send({"type": "ready_to_time"})
    if ch.wait_command() != "go":
        return 0
    from .timing import Timer, input_sets

    try:
        sets = input_sets(cfg["timing"], task["trials"][0]["inputs"], device)
        holders: list[dict] = [{} for _ in sets]

        def timed(static, holder):
            def fn():
                expect_stream()
                with torch.no_grad():
                    holder["out"] = model(*static)
                return holder["out"]

            return fn

        fns = [timed(static, holder) for static, holder in zip(sets, holders)]
        timer = Timer(cfg["timing"])
        graphs, capture_error = timer.capture_all(fns)
        check("capture")
        stream = None
        if not graphs:
            local, full = timer.stream_disagreement(fns[0])
            stream = [local, full]
            if full > 2.0 * local + 0.015:
                raise Violation(
                    "side_stream",
                    f"CUDA-graph capture failed ({capture_error.splitlines()[0] if capture_error else ''}) and a "
                    f"device-wide sync takes {full:.3f} ms vs {local:.3f} ms on the calling stream: work escapes the "
                    "timed stream",
                )
        stats = timer.measure(fns, graphs)
        check("timing")
        stream_check("timing")
        for s, p in zip(sets[0], task["post"]["inputs"]):
            if isinstance(s, torch.Tensor):
                s.copy_(p.to(device))
        if graphs:
            graphs[0].replay()
        else:
            fns[0]()
        torch.cuda.synchronize()
        outs = as_list(holders[0]["out"])
        torch.save(
            {"runs": [[torch.Tensor.cpu(o).clone() if isinstance(o, torch.Tensor) else o for o in outs]]},
            os.path.join(d, "post_out.pt"),
        )
        check("post-timing call")
    except Violation as v:
        ch.send({"type": "violation", "hack": v.hack, "message": v.message})
        return 0
    except BaseException as e:  # noqa: BLE001
        ch.send({"type": "runtime_error", "message": "during timing: " + error_text(e)})
        return 0
    mark("timing")
    ch.send(
        {"type": "timing", "timing": stats, "capture_error": capture_error, "stream": stream, "phases": dict(phases)}
    )
    return 0


def _gpu_share(torch, model, inputs, kernels: set) -> float:
    """Share of GPU kernel time spent in the candidate's Triton kernels during one call."""
    from torch.profiler import ProfilerActivity, profile

    with torch.no_grad():
        model(*inputs)
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            model(*inputs)
            torch.cuda.synchronize()
    total = 0.0
    mine = 0.0
    for ev in prof.events():
        t = float(getattr(ev, "device_time", 0.0) or getattr(ev, "cuda_time", 0.0) or 0.0)
        if t <= 0 or getattr(ev, "device_type", None) is None or "CUDA" not in str(ev.device_type):
            continue
        total += t
        if any(ev.name == k or ev.name.startswith(k + "_") or ev.name.startswith(k + "(") for k in kernels):
            mine += t
    return mine / total if total > 0 else 1.0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
