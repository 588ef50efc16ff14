"""The untrusted child: the harness that imports and runs ONE candidate.

`main(DIR, secret)`, in a process forked from the fork server (`forkserver`). `DIR/task.pt` holds
what the candidate may see (init inputs, the reference's weights, each trial's inputs, the post-
timing trial's inputs; never a reference output). The harness installs its instruments (see
`integrity`) BEFORE importing the candidate, then runs its phases (`Harness.run`):

1. `build`: imports the candidate and builds `ModelNew` (seed set as for the reference; the
   reference's `state_dict` is loaded when names and shapes match exactly) -> `compile_error`
   on failure;
2. `trials`: runs every trial twice on fresh clones of the inputs, after poisoning freed memory
   of the outputs' sizes with NaN, and writes outputs and inputs-after-the-call to
   `DIR/out_<k>.pt` as plain CPU tensors; the worker compares them (the harness never judges
   correctness);
3. `profile`: on a GPU, the share of GPU time of one call in the candidate's Triton kernels;
4. `time`: on `go` from the worker (which holds the GPU for timing): CUDA-graph capture of every
   buffer set (see `timing`), the stream check when capture fails, timing, then one call on the
   post-timing inputs copied into the first set's buffers (`DIR/post_out.pt`), so the timed code
   path is checked on fresh values too.

Messages (`messages`) go over the private channel (see `child_common`); violations the harness
sees end the run with a `Violation` message.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from typing import Any

from . import messages
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


class Stop(Exception):
    """The run ends here; `message` is what the worker is told."""

    def __init__(self, message: messages.Message):
        super().__init__(message.TYPE)
        self.message = message


class Harness:
    """One candidate's run: the instruments, the task and the model, phase by phase."""

    def __init__(self, d: str, ch: Channel, cfg: dict[str, Any]):
        import torch
        import triton  # noqa: F401 - imported before the candidate so its identities are captured

        from .integrity import Identities, LaunchCounter, OpLog, ThreadWatch

        self.d = d
        self.ch = ch
        self.cfg = cfg
        self.device: str = cfg["device"]
        self.cuda = self.device.startswith("cuda")
        self.torch = torch
        self.t_start = time.monotonic()
        self.phases: dict[str, float] = {}
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        self.launches = LaunchCounter(CANDIDATE_MODULE)
        self.threads = ThreadWatch()
        self.ids = Identities()
        self.oplog = OpLog(self.launches)
        self.mark("imports")
        self.task: dict[str, Any] = torch.load(os.path.join(d, "task.pt"), weights_only=True)
        if self.cuda:
            torch.empty(1, device=self.device)  # CUDA context before arming the thread watch
        self.threads.arm()
        self.model: Any = None

    # -- helpers ---------------------------------------------------------------------------
    def mark(self, name: str) -> None:
        self.phases[name] = round(time.monotonic() - self.t_start, 3)

    def check(self, where: str) -> None:
        """Raises `Violation` for a patched function, a moved precision switch or a thread."""
        hack, msg = self.ids.violations()
        if hack:
            raise Violation(hack, f"{where}: {msg}")
        t = self.threads.violation()
        if t:
            raise Violation("background_thread", f"{where}: {t}")

    def expect_stream(self) -> None:
        if self.cuda:
            self.launches.expected_stream = self.torch.cuda.current_stream()

    def stream_check(self, where: str) -> None:
        if self.launches.foreign_stream_launches:
            raise Violation(
                "side_stream",
                f"{where}: {self.launches.foreign_stream_launches} Triton launches on a stream other than the one "
                "forward() was called on",
            )

    def poison(self) -> None:
        """Fills freed memory of the outputs' sizes with NaN (77 for integers), so an output the
        candidate never writes shows."""
        torch = self.torch
        for shape, dtype in self.task["out_meta"]:
            dt = getattr(torch, dtype)
            fill = float("nan") if dt.is_floating_point else 77
            buf = torch.full(shape, fill, dtype=dt, device=self.device)
            del buf

    def run_once(self, inputs: list[Any], log: Any = None) -> list[Any]:
        """One forward call (under `log` when given); its outputs as a list, each checked to be a
        plain tensor or number."""
        torch = self.torch
        self.expect_stream()
        with torch.no_grad():
            if log is not None:
                with log:
                    out = self.model(*inputs)
            else:
                out = self.model(*inputs)
        if self.cuda:
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

    def host_copy(self, outs: list[Any]) -> list[Any]:
        return [self.torch.Tensor.cpu(o).clone() if isinstance(o, self.torch.Tensor) else o for o in outs]

    # -- phases ----------------------------------------------------------------------------
    def build(self) -> messages.Compiled:
        """Imports the candidate and builds `ModelNew` with the reference's weights where they fit."""
        torch = self.torch
        try:
            mod = load_module(os.path.join(self.d, "candidate.py"), CANDIDATE_MODULE)
            self.check("import")
            torch.manual_seed(int(self.task["seed"]))
            model = mod.ModelNew(*self.task["init"])
            model = model.to(self.device)
            self.check("construction")
            ref_state = self.task["state"]
            weights = "seeded" if ref_state else "none"
            own = model.state_dict()
            if (
                ref_state
                and set(own) == set(ref_state)
                and all(tuple(own[k].shape) == tuple(ref_state[k].shape) for k in own)
            ):
                model.load_state_dict({k: v.to(self.device) for k, v in ref_state.items()})
                weights = "reference_state_dict"
        except Violation as v:
            raise Stop(messages.Violation(v.hack, v.message)) from None
        except BaseException as e:  # noqa: BLE001 - the candidate's failure is its verdict
            raise Stop(messages.CompileFailed(error_text(e))) from None
        self.model = model
        self.mark("import_candidate")
        return messages.Compiled(weights)

    def storage(self, t: Any) -> int | None:
        try:
            return t.untyped_storage().data_ptr() if t.untyped_storage().nbytes() > 0 else None
        except Exception:  # noqa: BLE001
            return None

    def trial(self, k: int, trial: dict[str, Any]) -> None:
        """Trial `k`: two runs on fresh clones; writes `out_<k>.pt`."""
        torch = self.torch
        runs: list[list[Any]] = []
        alias: list[bool] = []
        mutated = False
        first: list[Any] = []
        repeat_ok = None
        for r in range(2):
            inputs = to_device(clone_all(trial["inputs"]), self.device)
            before = clone_all(inputs)
            self.poison()
            outs = self.run_once(inputs, self.oplog if (k == 0 and r == 0) else None)
            self.check(f"trial {k}")
            self.stream_check(f"trial {k}")
            if r == 0:
                in_ptrs = {self.storage(x) for x in inputs if isinstance(x, torch.Tensor)}
                p_ptrs = {self.storage(p) for p in list(self.model.parameters()) + list(self.model.buffers())}
                alias = [
                    isinstance(o, torch.Tensor)
                    and self.storage(o) is not None
                    and (self.storage(o) in in_ptrs or self.storage(o) in p_ptrs)
                    for o in outs
                ]
                mutated = not same_values(inputs, before)
                first = outs
                runs.append(self.host_copy(outs))
            elif k == 0:
                # the worker checks the second run itself on the first trial...
                runs.append(self.host_copy(outs))
            else:
                # ...and the harness on the others (a failed check only ever rejects)
                repeat_ok = close(first, outs, self.cfg["tolerances"])
            del outs, before
        torch.save(
            {"runs": runs, "mutated": mutated, "alias": alias, "repeat_ok": repeat_ok if k > 0 else None},
            os.path.join(self.d, f"out_{k}.pt"),
        )

    def trials(self) -> messages.CorrectnessDone:
        """Every correctness trial, then (on a GPU) the profile of one call."""
        try:
            for k, trial in enumerate(self.task["trials"]):
                self.trial(k, trial)
            self.mark("trials")
            share = None
            if self.cuda and self.launches.total() > 0:
                inputs = to_device(clone_all(self.task["trials"][0]["inputs"]), self.device)
                share = _gpu_share(self.torch, self.model, inputs, set(self.launches.counts))
                self.check("profile")
        except Violation as v:
            raise Stop(messages.Violation(v.hack, v.message)) from None
        except BaseException as e:  # noqa: BLE001
            raise Stop(messages.RunFailed(error_text(e))) from None
        self.mark("profile")
        return messages.CorrectnessDone(
            phases=dict(self.phases),
            launches=dict(self.launches.counts),
            torch_work=self.oplog.work,
            torch_calls=self.oplog.calls,
            gpu_share=share,
            hardware=hardware(self.device),
        )

    def time(self) -> messages.Timed:
        """Timing over the buffer sets, then the post-timing call on fresh values."""
        torch = self.torch
        from .timing import Timer, input_sets

        try:
            sets = input_sets(self.cfg["timing"], self.task["trials"][0]["inputs"], self.device)
            holders: list[dict[str, Any]] = [{} for _ in sets]

            def timed(static: list[Any], holder: dict[str, Any]) -> Callable[[], Any]:
                def fn() -> Any:
                    self.expect_stream()
                    with torch.no_grad():
                        holder["out"] = self.model(*static)
                    return holder["out"]

                return fn

            fns = [timed(static, holder) for static, holder in zip(sets, holders)]
            timer = Timer(self.cfg["timing"])
            graphs, capture_error = timer.capture_all(fns)
            self.check("capture")
            stream = None
            if not graphs:
                local, full = timer.stream_disagreement(fns[0])
                stream = [local, full]
                if full > 2.0 * local + 0.015:
                    raise Violation(
                        "side_stream",
                        f"CUDA-graph capture failed ({capture_error.splitlines()[0] if capture_error else ''}) and a "
                        f"device-wide sync takes {full:.3f} ms vs {local:.3f} ms on the calling stream: work escapes "
                        "the timed stream",
                    )
            stats = timer.measure(fns, graphs)
            self.check("timing")
            self.stream_check("timing")
            for s, p in zip(sets[0], self.task["post"]["inputs"]):
                if isinstance(s, torch.Tensor):
                    s.copy_(p.to(self.device))
            if graphs:
                graphs[0].replay()
            else:
                fns[0]()
            torch.cuda.synchronize()
            outs = as_list(holders[0]["out"])
            torch.save({"runs": [self.host_copy(outs)]}, os.path.join(self.d, "post_out.pt"))
            self.check("post-timing call")
        except Violation as v:
            raise Stop(messages.Violation(v.hack, v.message)) from None
        except BaseException as e:  # noqa: BLE001
            raise Stop(messages.RunFailed("during timing: " + error_text(e))) from None
        self.mark("timing")
        return messages.Timed(timing=stats, capture_error=capture_error, stream=stream, phases=dict(self.phases))

    def run(self) -> None:
        """The phases in order; a `Stop` ends the run with its message."""
        try:
            self.ch.send(self.build())
            self.ch.send(self.trials())
            if not (self.cuda and self.cfg.get("measure")):
                return
            self.ch.send(messages.ReadyToTime())
            if self.ch.wait_command() != "go":
                return
            self.ch.send(self.time())
        except Stop as s:
            self.ch.send(s.message)


def main(d: str, secret: bytes) -> int:
    """The child's entry point (called in a process forked from the fork server)."""
    ch = Channel(secret)
    cfg = json.load(open(os.path.join(d, "config.json")))
    if not enter_sandbox(cfg, ch):
        return 0
    Harness(d, ch, cfg).run()
    return 0


def _gpu_share(torch: Any, model: Any, inputs: list[Any], kernels: set[str]) -> float:
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
