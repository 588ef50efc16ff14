"""The untrusted child: the harness that imports and runs ONE candidate.

`main(DIR, secret)`, in a process forked from the fork server (`forkserver`). `DIR/candidate.py`
is the candidate, `DIR/reference.py` the task's program (the candidate may see it: it is the
task), `DIR/config.json` the run's settings and the facts the worker keeps of the task (the
fingerprints of the reference's inputs and weights, the size sets that hold; never a reference
output). The harness installs its instruments (see `integrity`) BEFORE it loads anything, then
says it is ready and waits for the worker's ``next``, which the worker sends under the GPU's shared
gate (`gate`): nothing of the harness touches the GPU (not even CUDA's start) outside the gate.
Then it runs its phases (`Harness.run`):

1. `prepare`: builds, from the task's program, the init inputs, the reference's weights and every
   trial's inputs on the device, at the visible sizes and at each size set, and checks their
   fingerprints against the reference's (-> `unreproducible`, the task's fault); on a GPU with
   `reference_in_process`, the timing's buffer sets and the reference's CUDA graph on each
   (`capture_reference`), and the digests' kernel compiled for the task's dtypes
   (`digest.warm`), before anything of the candidate is loaded;
2. `build`: installs what its backend needs (`backend.HarnessSide.before_import`: for CUDA, the
   extensions the worker built, verified), imports the candidate and builds `ModelNew` (seed set
   as for the reference; the reference's `state_dict` is loaded when names and shapes match
   exactly) -> `compile_error` on failure; on a GPU one untimed call then compiles its kernels
   (`warm`; failing there is a `runtime_error`), all of this within the same gated span as
   `prepare`;
3. the correctness calls, one result file each, each started by the worker's ``next`` (so the
   worker holds the GPU's shared gate while it runs, and has judged the previous file): every
   trial twice on fresh clones of the inputs, after poisoning freed memory of the outputs' sizes
   with NaN; one call at each hidden size set (the candidate rebuilt there, from its own program
   rewritten where it defines the size constants, see `shapes`, after the worker's ``next`` since
   its first call there compiles and runs on the GPU); the identity check: one call, then
   new values written into the very same input tensors and a second call, whose outputs must be
   the new values' (a result keyed on the identity of the inputs shows). The harness never judges
   correctness: the worker hands each file to the judge (`reference_child`);
4. `profile`: on a GPU, the share of GPU time of one call in the candidate's kernels (its
   backend's, see `backend.HarnessSide`: Triton's launched kernels; for CUDA its `__global__`
   kernels, whose launches are counted here);
5. `capture`: on the worker's ``next`` (under its gate, as a correctness call: capturing times
   nothing), a CUDA graph of a call on every buffer set (see `timing`);
6. `time`: on ``go SEED`` from the worker (which holds the GPU alone meanwhile): the stream check
   when capture failed (the candidate is then
   timed with direct calls, paying its own launches, and the reference beside it still by its
   graphs), timing with a number of warm-up calls and samples drawn from SEED, each
   sample paired with one of the reference on the same set, and every sample alike
   (`TimedCalls`): fresh input values written into its buffers before it, from a seed drawn for
   that sample, and a digest of its outputs and inputs after it (see `digest`), all of them in
   one result file. The worker picks the calls the judge checks only afterwards. On the CPU the
   same runs as a short rehearsal whose times are not reported (a candidate that counts its
   calls, or behaves differently once called in a loop, shows there too).

A candidate can be timed in more than one process (see `timing`): the worker forks a fresh harness
and judge for each. The first runs every phase; a later one (``correctness = "timing"`` in its
config) prepares the visible sizes only and makes the correctness calls that guard the timing:
trial 0 twice, under the dispatch log (PyTorch work, Triton launches, mutated or aliased inputs,
the outputs' types), and the profile, before the same timing with its checked calls. So a
candidate that behaves in one process and not in another is judged by the same checks in each.

Messages (`messages`) go over the private channel (see `child_common`); violations the harness
sees end the run with a `Violation` message.
"""

from __future__ import annotations

import json
import os
import random
import secrets
import sys
import time
from collections.abc import Callable
from typing import Any

import torch

from ..shared.outputs import close, same_values
from . import backends, compare, digest, messages, shapes
from .backend import kernel_share
from .child_common import (
    Channel,
    as_list,
    clone_all,
    enter_sandbox,
    error_text,
    hardware,
    load_module,
)
from .inputs import fingerprint, nonnegative, refresh
from .task import REFERENCE_MODULE, TaskProgram, init_fingerprint, state_of
from .timing import Companion

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


class Shape:
    """What the harness holds for one size set (None: the visible sizes): init inputs, the
    reference's weights and every trial's inputs, on the device."""

    def __init__(self, index: int | None, sizes: dict[str, int] | None, init: list[Any], state: dict[str, Any]):
        self.index = index
        self.sizes = sizes
        self.init = init
        self.state = state
        self.inputs: list[list[Any]] = []

    @property
    def label(self) -> str:
        return "the visible sizes" if self.sizes is None else f"hidden size set {shapes.label(self.sizes)}"


class Harness:
    """One candidate's run: the instruments, the task and the model, phase by phase."""

    def __init__(self, d: str, ch: Channel, cfg: dict[str, Any]):
        import triton  # noqa: F401 - imported before the candidate so its identities are captured

        from .integrity import AuditWatch, Identities, LaunchCounter, OpLog, ThreadWatch

        self.d = d
        self.ch = ch
        self.cfg = cfg
        self.device: str = cfg["device"]
        self.cuda = self.device.startswith("cuda")
        #: Every correctness call (the first timing process), or those that guard the timing only.
        self.full = cfg.get("correctness", "full") == "full"
        self.t_start = time.monotonic()
        self.phases: dict[str, float] = {}
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        self.side = backends.harness_for(cfg)
        self.launches = LaunchCounter(CANDIDATE_MODULE, own=[digest.sums_kernel])
        self.threads = ThreadWatch()
        self.ids = Identities()
        self.oplog = OpLog(self.launches)
        self.audit = AuditWatch(CANDIDATE_MODULE, d, enabled=bool(cfg.get("audit", True)))
        self.mark("imports")
        self.model: Any = None
        self.module: Any = None
        self.source = open(os.path.join(d, "candidate.py")).read()
        self.shapes: list[Shape] = []
        #: The task's `get_inputs` at the visible sizes (fresh values of timed calls).
        self.get_inputs: Any = None
        self.files = 0
        self.weights = "none"
        # the reference timed beside the candidate (`capture_reference`)
        self.timer: Any = None
        self.sets: list[list[Any]] = []
        # the timing's calls on each buffer set and their CUDA graphs (`capture`)
        self.holders: list[dict[str, Any]] = []
        self.fns: list[Callable[[], Any]] = []
        self.graphs: list[Any] = []
        self.capture_error = ""
        self.reference_graphs: list[Any] = []
        self.reference_model: Any = None
        self.reference_error = ""

    # -- helpers ---------------------------------------------------------------------------
    def mark(self, name: str) -> None:
        self.phases[name] = round(time.monotonic() - self.t_start, 3)

    def check(self, where: str) -> None:
        """Raises `Violation` for a patched function, a moved precision switch, a thread or an
        escape the audit hook saw."""
        hack, msg = self.ids.violations()
        if hack:
            raise Violation(hack, f"{where}: {msg}")
        t = self.threads.violation()
        if t:
            raise Violation("background_thread", f"{where}: {t}")
        escape = self.audit.violation()
        if escape:
            raise Violation("sandbox_escape", f"{where}: {escape}")

    def failed(self, e: BaseException, kind: type[messages.Message], prefix: str = "") -> Stop:
        """The end of the run for an error the candidate raised: an escape the audit hook saw
        decides first (the candidate may have caught the hook's error and raised another)."""
        escape = self.audit.violation()
        if escape:
            return Stop(messages.Violation("sandbox_escape", f"{escape}; then it raised:\n{error_text(e)}"))
        return Stop(kind(prefix + error_text(e)))  # type: ignore[call-arg]

    def expect_stream(self) -> None:
        if self.cuda:
            self.launches.expected_stream = torch.cuda.current_stream()

    def stream_check(self, where: str) -> None:
        if self.launches.foreign_stream_launches:
            raise Violation(
                "side_stream",
                f"{where}: {self.launches.foreign_stream_launches} Triton launches on a stream other than the one "
                "forward() was called on",
            )

    def poison(self, out_meta: list[list[Any]]) -> None:
        """Fills freed memory of the outputs' sizes with NaN (77 for integers), so an output the
        candidate never writes shows."""
        for shape, dtype in out_meta:
            dt = getattr(torch, dtype)
            fill = float("nan") if dt.is_floating_point else 77
            buf = torch.full(shape, fill, dtype=dt, device=self.device)
            del buf

    def run_once(self, inputs: list[Any], log: Any = None) -> list[Any]:
        """One forward call (under `log` when given); its outputs as a list, each checked to be a
        plain tensor or number."""
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

    @staticmethod
    def host_copy(outs: list[Any]) -> list[Any]:
        return [torch.Tensor.cpu(o).clone() if isinstance(o, torch.Tensor) else o for o in outs]

    @staticmethod
    def storage(t: Any) -> int | None:
        try:
            return t.untyped_storage().data_ptr() if t.untyped_storage().nbytes() > 0 else None
        except Exception:  # noqa: BLE001
            return None

    def wait_next(self, label: str) -> None:
        """Says the next call (`label`) is ready and waits for the worker's ``next`` (anything
        else ends the run)."""
        self.ch.send(messages.Ready(label))
        if self.ch.wait_command() != "next":
            raise SystemExit(0)

    def send_result(
        self, payload: dict[str, Any], kind: str, label: str, size_set: int | None, trial: int, **kw: bool
    ) -> None:
        """Writes one result file and tells the worker."""
        name = f"out_{self.files}.pt"
        self.files += 1
        torch.save(payload, os.path.join(self.d, name))
        self.ch.send(messages.ResultReady(kind=kind, label=label, file=name, size_set=size_set, trial=trial, **kw))

    # -- phases ----------------------------------------------------------------------------
    def start(self) -> None:
        """Waits for the worker's ``next`` (sent under the GPU's shared gate), then starts CUDA
        and arms the thread watch (CUDA's own threads start first)."""
        self.wait_next("start")
        self.mark("started")
        if self.cuda:
            torch.empty(1, device=self.device)
        self.mark("cuda")
        self.threads.arm()

    def prepare(self) -> None:
        """The task's init inputs, weights and trial inputs at every size, checked against the
        reference's fingerprints."""
        task = self.cfg["task"]
        trials = int(self.cfg["trials"])
        reference = open(os.path.join(self.d, "reference.py")).read()
        wanted: list[tuple[int | None, dict[str, int] | None, str, list[str]]] = [
            (None, None, task["init_fingerprint"], [t["fingerprint"] for t in task["trials"]])
        ]
        for i, s in enumerate(task["size_sets"] if self.full else []):
            wanted.append((i, s["sizes"], s["init_fingerprint"], [s["fingerprint"]]))
        for index, sizes, init_fp, trial_fps in wanted:
            program = TaskProgram(reference, self.d, int(self.cfg["seed"]), self.device, sizes, index)
            model = program.build_model()
            shape = Shape(index, sizes, program.init, state_of(model))
            if index is not None or not self.reference_beside():
                del model
            if init_fingerprint(shape.init, shape.state) != init_fp:
                raise Stop(messages.Unreproducible(f"{shape.label}: the init inputs or weights differ"))
            if index is None:
                self.get_inputs = program.module.get_inputs
            count = trials + 1 if index is None else 1
            for k in range(count):
                inputs = program.inputs(k)
                if fingerprint(inputs) != trial_fps[k]:
                    raise Stop(
                        messages.Unreproducible(
                            f"{shape.label}, trial {k}: `get_inputs()` gives other inputs in another process than in "
                            "the reference's (it depends on more than the seed)"
                        )
                    )
                shape.inputs.append(inputs)
            self.shapes.append(shape)
            if index is None and self.reference_beside():
                self.capture_reference(model, shape.inputs[0])
                del model
        for name in [n for n in sys.modules if n == REFERENCE_MODULE or n.startswith(REFERENCE_MODULE + "_s")]:
            del sys.modules[name]
        if self.cfg.get("steer"):
            # the timed calls' digests compiled now, before the candidate, not while timing
            outs = [getattr(torch, dtype) for _, dtype in task["out_meta"]]
            ins = [x.dtype for x in self.shapes[0].inputs[0] if isinstance(x, torch.Tensor)]
            digest.warm(outs + ins, self.device)
        self.mark("prepare")

    def reference_beside(self) -> bool:
        """Whether the reference is timed beside the candidate in this process (a GPU and
        `reference_in_process`, see `timing`)."""
        return self.cuda and bool(self.cfg["timing"].get("reference_in_process"))

    def capture_reference(self, model: Any, inputs: list[Any]) -> None:
        """The timing's buffer sets and the reference's CUDA graph on each, made before the
        candidate is imported: what the graphs run is the task's own work whatever the candidate
        later does to PyTorch. The candidate is timed on the same sets. When a graph cannot be
        captured, the reference is not timed here (`reference_error` says why)."""
        from .timing import Timer, input_sets

        cfg = self.cfg["timing"]

        def call(static: list[Any]) -> Callable[[], Any]:
            def fn() -> Any:
                with torch.no_grad():
                    return model(*static)

            return fn

        try:
            self.timer = Timer(cfg, self.device)
            self.sets = input_sets(cfg, inputs, self.device)
            graphs, err = self.timer.capture_all([call(s) for s in self.sets])
        except Exception as e:  # noqa: BLE001 - the task's own capture failing only drops the pairing
            graphs, err = [], error_text(e)
        self.reference_graphs = graphs
        self.reference_error = err
        # the graphs read the model's weights; direct calls (where a graph fails) call it
        self.reference_model = model
        self.mark("reference graphs")

    def construct(self, module: Any, shape: Shape) -> Any:
        """`ModelNew(*init)` on the device, with the reference's weights where names and shapes
        match; the weights' origin in `self.weights`."""
        torch.manual_seed(int(self.cfg["seed"]))
        model = module.ModelNew(*shape.init).to(self.device)
        own = model.state_dict()
        ref_state = shape.state
        self.weights = "seeded" if ref_state else "none"
        if (
            ref_state
            and set(own) == set(ref_state)
            and all(tuple(own[k].shape) == tuple(ref_state[k].shape) for k in own)
        ):
            model.load_state_dict(ref_state)
            self.weights = "reference_state_dict"
        return model

    def build(self) -> messages.Compiled:
        """Imports the candidate and builds `ModelNew`; on a GPU, one untimed call compiles its
        kernels."""
        try:
            self.side.before_import()
            self.audit.arm()
            self.module = load_module(os.path.join(self.d, "candidate.py"), CANDIDATE_MODULE)
            self.check("import")
            self.model = self.construct(self.module, self.shapes[0])
            self.check("construction")
        except Violation as v:
            raise Stop(messages.Violation(v.hack, v.message)) from None
        except BaseException as e:  # noqa: BLE001 - the candidate's failure is its verdict
            raise self.failed(e, messages.CompileFailed) from None
        self.mark("import_candidate")
        return messages.Compiled(self.weights)

    def warm(self) -> None:
        """On a GPU, one call (compiling the candidate's kernels) before the correctness calls,
        still within the gated span that `start` opened; its failure ends the run as a failure
        to run (`runtime_error`), not to compile."""
        if not self.cuda:
            return
        try:
            self.run_once(clone_all(self.shapes[0].inputs[0]))
            self.check("first call")
        except Violation as v:
            raise Stop(messages.Violation(v.hack, v.message)) from None
        except BaseException as e:  # noqa: BLE001 - the candidate's failure is its verdict
            raise self.failed(e, messages.RunFailed) from None
        self.mark("compile")

    def trial(self, k: int) -> None:
        """Trial `k`: two runs on fresh clones; one result file (both runs for trial 0, whose
        second run the judge compares; the harness compares the others itself)."""
        shape = self.shapes[0]
        runs: list[list[Any]] = []
        alias: list[bool] = []
        mutated = False
        first: list[Any] = []
        repeat_ok = None
        for r in range(2):
            inputs = clone_all(shape.inputs[k])
            before = clone_all(inputs)
            self.poison(self.cfg["task"]["out_meta"])
            outs = self.run_once(inputs, self.oplog if (k == 0 and r == 0) else None)
            self.check(f"trial {k}")
            self.stream_check(f"trial {k}")
            if r == 0:
                alias = self.aliases(inputs, outs)
                mutated = not same_values(inputs, before)
                first = outs
                runs.append(self.host_copy(outs))
            elif k == 0:
                runs.append(self.host_copy(outs))
            else:
                repeat_ok = close(first, outs, lambda dtype: compare.tolerance(dtype, self.cfg["tolerances"]))
            del outs, before
        payload = {"runs": runs, "mutated": mutated, "alias": alias, "repeat_ok": repeat_ok}
        self.send_result(payload, "trial", f"trial {k}", None, k, repeat=k == 0, diagnose=True)

    def aliases(self, inputs: list[Any], outs: list[Any]) -> list[bool]:
        in_ptrs = {self.storage(x) for x in inputs if isinstance(x, torch.Tensor)}
        p_ptrs = {self.storage(p) for p in list(self.model.parameters()) + list(self.model.buffers())}
        return [
            isinstance(o, torch.Tensor)
            and self.storage(o) is not None
            and (self.storage(o) in in_ptrs or self.storage(o) in p_ptrs)
            for o in outs
        ]

    def hidden(self, shape: Shape) -> None:
        """One call at a hidden size set: after the worker's ``next``, the candidate rebuilt there
        (from its own program with the size constants rewritten, where it defines them), its
        first call there (compiling), then the call. Failing there is a finding (`ItemFailed`),
        not the end of the run."""
        assert shape.sizes is not None
        label = shape.label
        keep = self.model
        failure = None
        self.wait_next(label)
        try:
            module = self.module
            if shapes.touches(self.source, shape.sizes):
                path = os.path.join(self.d, f"candidate_s{shape.index}.py")
                with open(path, "w") as f:
                    f.write(shapes.rewrite(self.source, shape.sizes))
                module = load_module(path, f"{CANDIDATE_MODULE}_s{shape.index}")
                self.check(label)
            self.model = self.construct(module, shape)
            self.check(label)
            if self.cuda:
                self.run_once(clone_all(shape.inputs[0]))  # compiles for the new sizes
                self.check(label)
        except Violation:
            raise
        except BaseException as e:  # noqa: BLE001 - failing at a hidden size is being incorrect there
            self.check(label)
            failure = error_text(e)
        if failure is not None:
            self.model = keep
            self.ch.send(messages.ItemFailed(label, failure))
            return
        try:
            inputs = clone_all(shape.inputs[0])
            before = clone_all(inputs)
            outs = self.run_once(inputs)
            self.check(label)
            self.stream_check(label)
            payload = {
                "runs": [self.host_copy(outs)],
                "mutated": not same_values(inputs, before),
                "alias": self.aliases(inputs, outs),
                "repeat_ok": None,
            }
        except Violation:
            raise
        except BaseException as e:  # noqa: BLE001
            self.check(label)
            self.model = keep
            self.ch.send(messages.ItemFailed(label, error_text(e)))
            return
        self.model = keep
        self.send_result(payload, "hidden", label, shape.index, 0)

    def identity(self) -> None:
        """The identity check: the same input tensors, new values written into them between two
        calls."""
        shape = self.shapes[0]
        trials = int(self.cfg["trials"])
        a, b = (0, 1) if trials >= 2 else (0, trials)
        inputs = clone_all(shape.inputs[a])
        self.run_once(inputs)
        for x, fresh in zip(inputs, shape.inputs[b]):
            if isinstance(x, torch.Tensor):
                x.copy_(fresh)
        outs = self.run_once(inputs)
        self.check("identity check")
        payload = {"runs": [self.host_copy(outs)], "mutated": False, "alias": [], "repeat_ok": None}
        self.send_result(payload, "identity", "identity check (new values in the same input tensors)", None, b)

    def correctness(self) -> messages.CorrectnessDone:
        """Every correctness call (see the module doc; trial 0 only in a later timing process),
        then (on a GPU) the profile of one call."""
        try:
            for k in range(int(self.cfg["trials"]) if self.full else 1):
                self.wait_next(f"trial {k}")
                self.trial(k)
            self.mark("trials")
            for shape in self.shapes[1:]:
                self.hidden(shape)
            if self.full:
                self.wait_next("identity check")
                self.identity()
            self.mark("checks")
            self.wait_next("profile")
            share = None
            launches = dict(self.launches.counts)
            if self.cuda and (self.side.LAUNCHES_FROM_PROFILE or self.launches.total() > 0):
                kernels = self.side.kernels(self.launches.counts)
                share, seen = _gpu_share(self.model, clone_all(self.shapes[0].inputs[0]), kernels, self.side.owns)
                self.check("profile")
                if self.side.LAUNCHES_FROM_PROFILE:
                    launches = seen
        except Violation as v:
            raise Stop(messages.Violation(v.hack, v.message)) from None
        except Stop:
            raise
        except BaseException as e:  # noqa: BLE001
            raise self.failed(e, messages.RunFailed) from None
        self.mark("profile")
        return messages.CorrectnessDone(
            phases=dict(self.phases),
            launches=launches,
            torch_work=self.oplog.work,
            torch_calls=self.oplog.calls,
            gpu_share=share,
            hardware=hardware(self.device),
        )

    def capture(self) -> None:
        """On the worker's ``next`` (under its gate, not alone: capturing times nothing): the
        timing's buffer sets and their calls, and a CUDA graph of a call on each (see `timing`;
        on the CPU, none). Done before the worker holds the GPU alone for `time`, whose hold
        then covers the samples only."""
        from .timing import Timer, input_sets

        self.wait_next("capture")
        shape = self.shapes[0]
        try:
            self.timer = self.timer or Timer(self.cfg["timing"], self.device)
            self.sets = self.sets or input_sets(self.cfg["timing"], shape.inputs[0], self.device)
            self.holders = [{} for _ in self.sets]

            def timed(static: list[Any], holder: dict[str, Any]) -> Callable[[], Any]:
                def fn() -> Any:
                    self.expect_stream()
                    with torch.no_grad():
                        holder["out"] = self.model(*static)
                    return holder["out"]

                return fn

            self.fns = [timed(static, holder) for static, holder in zip(self.sets, self.holders)]
            self.graphs, self.capture_error = self.timer.capture_all(self.fns)
            self.mark("capture")
            self.check("capture")
        except Violation as v:
            raise Stop(messages.Violation(v.hack, v.message)) from None
        except BaseException as e:  # noqa: BLE001
            raise self.failed(e, messages.RunFailed, "during the timing's capture: ") from None

    def time(self, seed: int) -> messages.Timed:
        """Timing over the buffer sets `capture` made, every sample alike (`TimedCalls`); the
        digests of the timed calls in one result file, named in the answer."""
        self.mark("go")
        rng = random.Random(seed)
        try:
            stream = None
            if self.cuda and not self.graphs:
                check = self.timer.stream_disagreement(self.fns[0])
                stream = check.summary()
                if check.escapes():
                    raise Violation(
                        "side_stream",
                        f"CUDA-graph capture failed ({_first_line(self.capture_error)}) and the same direct "
                        f"call, timed to the end of a device-wide sync, takes {check.escaped_ms:.3f} ms longer after "
                        f"its work on the calling stream ({check.local_ms:.3f} ms) than a call that does nothing: "
                        "work escapes the timed stream",
                    )
            calls = TimedCalls(self, self.sets, self.holders)
            stats = self.timer.settle(
                self.fns, self.graphs, rng, calls.prepare, calls.observe, self.companion(self.sets)
            )
            self.mark("samples")
            if self.reference_beside() and "reference_in_process" not in stats:
                stats["reference_in_process_error"] = self.reference_error
            self.check("timing")
            self.stream_check("timing")
            name = f"out_{self.files}.pt"
            self.files += 1
            calls.save(os.path.join(self.d, name))
        except Violation as v:
            raise Stop(messages.Violation(v.hack, v.message)) from None
        except BaseException as e:  # noqa: BLE001
            raise self.failed(e, messages.RunFailed, "during timing: ") from None
        self.mark("timing")
        return messages.Timed(
            timing=stats,
            capture_error=self.capture_error,
            stream=stream,
            phases=dict(self.phases),
            table=name,
            rows=calls.rows,
        )

    def companion(self, sets: list[list[Any]]) -> Companion | None:
        """The reference beside the candidate, timed by its best method whatever the candidate's
        (see `timing`): its graphs, or where they could not be captured, direct calls of its model
        on the same sets (None without `reference_in_process`)."""
        if not self.reference_beside() or self.reference_model is None:
            return None
        if self.reference_graphs:
            return Companion([g.replay for g in self.reference_graphs])
        model = self.reference_model

        def call(static: list[Any]) -> Callable[[], Any]:
            def fn() -> Any:
                with torch.no_grad():
                    return model(*static)

            return fn

        return Companion([call(static) for static in sets], direct=True)

    def run(self) -> None:
        """The phases in order; a `Stop` ends the run with its message."""
        try:
            self.start()
            self.prepare()
            compiled = self.build()
            self.warm()
            self.ch.send(compiled)
            self.ch.send(self.correctness())
            if not self.cfg.get("steer"):
                return
            self.capture()
            self.ch.send(messages.ReadyToTime())
            command = self.ch.wait_command().split(" ")
            if command[0] != "go":
                return
            self.ch.send(self.time(int(command[1])))
        except Stop as s:
            self.ch.send(s.message)


class TimedCalls:
    """The harness's side of every timed call (see `timing` and `digest`): `prepare` writes fresh
    values (`inputs.refresh`, from a seed drawn for that call) into the call's buffer set;
    `observe` checks the outputs' types and reduces outputs and inputs to a digest under keys
    drawn after the call (`digest.call_digest`, on the device, not waited for). Rows are recorded
    for the timed samples (not the estimate's); `save` writes them for the judge."""

    def __init__(self, h: Harness, sets: list[list[Any]], holders: list[dict[str, Any]]):
        self.h = h
        self.sets = sets
        self.holders = holders
        self.nonneg = nonnegative(h.shapes[0].inputs[0])
        self.current = [0] * len(sets)
        self.seeds: list[int] = []
        self.keys: list[list[int]] = []
        self.sums: list[torch.Tensor] = []
        #: Per row: which outputs are tensors, and the values of those that are not.
        self.numbers: list[tuple[list[bool], list[Any]]] = []
        self.signature: list[Any] | None = None
        #: Rows whose outputs are not of the first row's structure.
        self.changed: list[int] = []

    @property
    def rows(self) -> int:
        return len(self.seeds)

    def prepare(self, row: int | None, s: int) -> None:
        seed = secrets.randbits(62)
        refresh(self.sets[s], self.nonneg, seed, self.h.get_inputs)
        self.current[s] = seed

    def observe(self, row: int | None, s: int) -> None:
        outs = as_list(self.holders[s]["out"])
        for i, o in enumerate(outs):
            if isinstance(o, torch.Tensor) and type(o) is not torch.Tensor:
                raise Violation(
                    "lazy_output",
                    f"a timed call's output {i} has type {type(o).__module__}.{type(o).__qualname__}, not exactly "
                    "torch.Tensor",
                )
        keys = digest.draw_keys()
        sums, numbers = digest.call_digest(outs, self.sets[s], keys)
        if row is None:
            return
        sig = digest.signature(outs)
        if self.signature is None:
            self.signature = sig
        elif sig != self.signature:
            self.changed.append(self.rows)
        self.seeds.append(self.current[s])
        self.keys.append(keys)
        self.sums.append(sums)
        self.numbers.append(([isinstance(o, torch.Tensor) for o in outs], numbers))

    def save(self, path: str) -> None:
        """The rows, for the judge: seeds, keys, digests (on the host, outputs and inputs apart),
        the first row's output structure and the rows whose structure differs."""
        outputs, inputs = [], []
        for sums, (kinds, numbers) in zip(_host_rows(self.sums), self.numbers):
            o, i = digest.assemble(kinds, sums, numbers)
            outputs.append(o)
            inputs.append(i)
        payload = {
            "seeds": torch.tensor(self.seeds, dtype=torch.int64),
            "keys": torch.tensor(self.keys, dtype=torch.int64).reshape(-1, 2),
            "outputs": outputs,
            "inputs": inputs,
            "signature": self.signature,
            "changed": self.changed,
        }
        torch.save(payload, path)


def _host_rows(rows: list[torch.Tensor]) -> list[torch.Tensor]:
    """The device tensors `rows` on the host, with one copy (one synchronization)."""
    if not rows:
        return []
    flat = torch.cat([r.reshape(-1) for r in rows]).cpu()
    return [x.reshape(r.shape) for x, r in zip(torch.split(flat, [r.numel() for r in rows]), rows)]


def _first_line(text: str) -> str:
    return text.splitlines()[0][:300] if text else ""


def main(d: str, secret: bytes) -> int:
    """The child's entry point (called in a process forked from the fork server)."""
    ch = Channel(secret)
    cfg = json.load(open(os.path.join(d, "config.json")))
    if not enter_sandbox(cfg, ch):
        return 0
    Harness(d, ch, cfg).run()
    return 0


def _gpu_share(
    model: Any, inputs: list[Any], kernels: set[str], owns: Callable[[str, set[str]], bool]
) -> tuple[float, dict[str, int]]:
    """Share of GPU kernel time spent in the candidate's `kernels` during one call (a profiled
    kernel is the candidate's when `owns` says so), and how many times each was launched."""
    from torch.profiler import ProfilerActivity, profile

    with torch.no_grad():
        model(*inputs)
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            model(*inputs)
            torch.cuda.synchronize()
    timed = []
    for ev in prof.events():
        t = float(getattr(ev, "device_time", 0.0) or getattr(ev, "cuda_time", 0.0) or 0.0)
        if getattr(ev, "device_type", None) is not None and "CUDA" in str(ev.device_type):
            timed.append((ev.name, t))
    return kernel_share(timed, kernels, owns)
