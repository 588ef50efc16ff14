"""The trusted child: runs the REFERENCE program of a task (never any candidate code), in one of
four modes (``mode`` in `DIR/config.json`).

`main(DIR, secret)`, in a process forked from the fork server (`forkserver`), reads
`DIR/reference.py` and `DIR/config.json`, then waits for the worker's ``start``, which the worker
sends under the GPU's shared gate (`gate`): nothing of it touches the GPU (not even CUDA's start)
outside the gate, so no child's start disturbs a timing.

- **build** (once per task and worker): builds the model and every trial's inputs on the device
  (see `task`, `inputs`), runs `Model` on each twice (a reference that does not repeat itself, or
  whose output is all NaN, is a broken task), records per trial the inputs' fingerprint and
  whether the reference mutates its inputs or returns an alias of one, the outputs' shapes, the
  reference's work estimate (`integrity.OpLog`), and checks the task fits the memory budget
  (``memory_budget_mb``: what one evaluation holds in host memory). Then each candidate size set
  (`shapes`): the reference rebuilt from the rewritten program must run there, twice alike, and
  change some input or init value, or the set is dropped (the reason is kept). It sends
  `BuildDone` (facts, no tensor) and times the reference on `go` (the worker holds the GPU; on
  the CPU a rehearsal whose times are not reported): as the candidate is timed, fresh input
  values before every sample (`inputs.refresh`), re-measured while noisy (`timing.Timer.settle`),
  by its best method (its CUDA graphs; direct calls only where its graph cannot be captured),
  the figure every candidate is compared with, whatever the candidate's own method. Nothing is
  written to disk.
- **time** (when the worker times the reference in more than one process, see `timing`): builds
  the model and the first trial's inputs, runs them as the build does, and times the reference
  on `go`, like the build's timing.
- **compiled** (once per task and worker, on a GPU): the task's `torch.compile` baseline, compiled
  and timed beside the eager reference (see `compile_baseline`).
- **judge** (once per candidate evaluation, next to the candidate's child): builds the model (and
  the size sets' models when asked for them) and compares, on the device, each result file the
  worker hands it (`messages.ResultReady`) with the reference's outputs for that trial, computed
  there and then: one trial's tensors at a time, so its memory is bounded by one input set and
  the outputs. The file is the candidate's to forge: it is read and checked on the host first
  (`result_file`), and one that no honest harness writes is answered as forged (the candidate's
  verdict, never a failure of the judge). For a failing file it also says whether the outputs equal another trial's
  reference outputs and whether a lower-precision computation (float16, bfloat16, TF32 on a GPU)
  explains them. For the digests of a candidate's timed calls (`digest`) it writes each picked
  call's fresh inputs from its seed, runs the reference, reduces its outputs and the inputs with
  the call's keys (`digest.oracle_sums`, float64) and compares the digests (`Judge.timed`).
  It answers `messages.Judged`; the worker decides the verdict.
"""

from __future__ import annotations

import copy
import json
import os
import secrets
from typing import Any

import torch
from torch.utils.flop_counter import FlopCounterMode

from ..shared.outputs import close, same_values
from . import compare, compile_baseline, digest, messages, result_file
from .child_common import (
    Channel,
    as_list,
    clone_all,
    enter_sandbox,
    failure_text,
    hardware,
    to_device,
)
from .inputs import fingerprint, nonnegative, refresh, tensor_bytes
from .integrity import OpLog
from .speed_of_light import dominant_dtype, flop_classes
from .task import TaskProgram, init_fingerprint, state_of

#: Tolerances of the lower-precision diagnosis (a candidate far from float32 but close to float16).
LOOSE = {k: [1e-2, 1e-2] for k in ("float32", "float64", "float16", "bfloat16")}
#: The relative error of a whole output within which a candidate is still near the float32
#: reference (an elementwise bound is not: on a large output, the one element where float16
#: rounding meets cancellation is off by more than any sensible tolerance).
LOOSE_RELATIVE_LIMIT = 5e-2
LOOSE_RELATIVE = {k: LOOSE_RELATIVE_LIMIT for k in LOOSE}


#: How close two runs of the reference on the same inputs must be (its determinism check).
REPEAT_TOLERANCE = (1e-5, 1e-5)


class TaskBroken(Exception):
    """The reference cannot serve as a task (the message says why)."""


def _shares_storage(a: Any, b: Any) -> bool:
    if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):
        return False
    try:
        return a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr() and a.untyped_storage().nbytes() > 0
    except Exception:  # noqa: BLE001
        return False


def _all_nan(outputs: list[Any]) -> bool:
    return any(
        isinstance(o, torch.Tensor) and o.is_floating_point() and o.numel() > 0 and bool(torch.isnan(o).all())
        for o in outputs
    )


class Reference:
    """The reference at one size set, with its model and the facts of one trial at a time."""

    def __init__(self, program: TaskProgram):
        self.program = program
        self.model = program.build_model()
        self._last: tuple[int, dict[str, Any]] | None = None

    def run(self, k: int, log: OpLog | None = None) -> dict[str, Any]:
        """Trial `k`: inputs, outputs (checked to repeat), whether the inputs were mutated and which
        outputs alias an input. The last trial run is kept (the judge asks for one trial at a
        time)."""
        if self._last is not None and self._last[0] == k and log is None:
            return self._last[1]
        self._last = None
        inputs = self.program.inputs(k)
        dev_in = clone_all(inputs)
        before = clone_all(dev_in)
        with torch.no_grad():
            if log is not None:
                with log:
                    out = as_list(self.model(*dev_in))
            else:
                out = as_list(self.model(*dev_in))
            again = as_list(self.model(*clone_all(inputs)))
        if not close(out, again, lambda _dtype: REPEAT_TOLERANCE):
            raise TaskBroken("the reference gives different outputs for the same inputs (nondeterministic task)")
        if _all_nan(out):
            raise TaskBroken("the reference output is all NaN on the generated inputs")
        facts = {
            "inputs": inputs,
            "outputs": [o.detach() if isinstance(o, torch.Tensor) else o for o in out],
            "mutated": not same_values(dev_in, before),
            "alias": [any(_shares_storage(o, x) for x in dev_in) for o in out],
        }
        del dev_in, before, again
        self._last = (k, facts)
        return facts

    def low_precision(self, k: int) -> dict[str, list[Any]]:
        """Trial `k`'s outputs computed in float16, bfloat16 and (on a GPU) with TF32 matmuls, as
        float32 (a variant the reference cannot run is left out)."""
        inputs = self.program.inputs(k)
        low: dict[str, list[Any]] = {}
        for name, dt in (("float16", torch.float16), ("bfloat16", torch.bfloat16)):
            try:
                m2 = copy.deepcopy(self.model).to(dt)
                ins = [
                    x.to(dt) if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in clone_all(inputs)
                ]
                with torch.no_grad():
                    o2 = as_list(m2(*ins))
                low[name] = [
                    o.to(torch.float32) if isinstance(o, torch.Tensor) and o.is_floating_point() else o for o in o2
                ]
                del m2, ins, o2
            except Exception:  # noqa: BLE001 - a variant the reference cannot run is skipped
                pass
        if self.program.device.startswith("cuda"):
            torch.backends.cuda.matmul.allow_tf32 = True
            torch.backends.cudnn.allow_tf32 = True
            try:
                with torch.no_grad():
                    low["tf32"] = as_list(self.model(*clone_all(inputs)))
            finally:
                torch.backends.cuda.matmul.allow_tf32 = False
                torch.backends.cudnn.allow_tf32 = False
        return low


def _out_meta(outputs: list[Any]) -> list[list[Any]]:
    return [[list(o.shape), str(o.dtype).replace("torch.", "")] for o in outputs if isinstance(o, torch.Tensor)]


def _host_need(device: str, trials: int, input_bytes: int, output_bytes: int, model_bytes: int) -> int:
    """Bytes one evaluation of this task holds in host memory at most: on a GPU, a result file (the
    candidate's host copy, the file, the judge's load); on the CPU, besides, the candidate's
    inputs of every trial, both models and the judge's trial."""
    files = 3 * output_bytes
    if device.startswith("cuda"):
        return files
    return files + (trials + 2) * input_bytes + 2 * model_bytes + 2 * output_bytes


def build(d: str, cfg: dict[str, Any], ch: Channel, source: str) -> None:
    """The build mode (see the module doc)."""
    device, seed, trials = cfg["device"], int(cfg["seed"]), int(cfg["trials"])
    visible = Reference(TaskProgram(source, d, seed, device))
    state = state_of(visible.model)
    facts = []
    work = 0.0
    out_meta: list[list[Any]] = []
    input_bytes = output_bytes = 0
    for k in range(trials + 1):
        log = OpLog(None) if k == 0 else None
        t = visible.run(k, log)
        if log is not None:
            work = log.total()
            out_meta = _out_meta(t["outputs"])
            input_bytes = tensor_bytes(t["inputs"])
            output_bytes = tensor_bytes(t["outputs"])
        facts.append({"fingerprint": fingerprint(t["inputs"]), "mutated": t["mutated"], "alias": t["alias"]})
    need = _host_need(device, trials, input_bytes, output_bytes, tensor_bytes(state))
    budget = int(cfg["memory_budget_mb"]) * 2**20
    if need > budget:
        raise TaskBroken(
            f"the task does not fit the evaluator's memory budget: one evaluation holds about {need / 2**20:.0f} MiB "
            f"in host memory (inputs {input_bytes / 2**20:.1f} MiB, outputs {output_bytes / 2**20:.1f} MiB per "
            f"trial), above memory_budget_mb = {cfg['memory_budget_mb']}"
        )
    sets, dropped = _size_sets(d, cfg, source, visible, budget, tensor_bytes(state))
    first = visible.program.inputs(0)
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        visible.model(*clone_all(first))
    ch.send(
        messages.BuildDone(
            hardware=hardware(device),
            work=work,
            flops=flop_classes(counter.get_flop_counts().get("Global", {})),
            dtype=dominant_dtype(list(first) + list(state.values())),
            state_bytes=tensor_bytes(state),
            init_fingerprint=init_fingerprint(visible.program.init, state),
            trials=facts,
            out_meta=out_meta,
            input_bytes=input_bytes,
            output_bytes=output_bytes,
            size_sets=sets,
            dropped=dropped,
        )
    )
    if cfg.get("measure", True):
        _time(ch, cfg, visible, visible.run(0)["inputs"])


def _signature(init: list[Any], inputs: list[Any]) -> str:
    """The shapes, dtypes and plain values of a task's init inputs and inputs (not the tensors'
    values): what a size set must change."""

    def sig(v: Any) -> Any:
        if isinstance(v, torch.Tensor):
            return ("T", str(v.dtype), tuple(v.shape))
        if isinstance(v, (list, tuple)):
            return [sig(x) for x in v]
        return repr(v)

    return repr([sig(init), sig(inputs)])


def _size_sets(
    d: str, cfg: dict[str, Any], source: str, visible: Reference, budget: int, model_bytes: int
) -> tuple[list[dict[str, Any]], list[str]]:
    """The candidate size sets that hold (facts per set) and why the others were dropped."""
    from .shapes import label, rewrite

    kept: list[dict[str, Any]] = []
    dropped: list[str] = []
    visible_shape = _signature(visible.program.init, visible.run(0)["inputs"])
    for sizes in cfg.get("size_sets") or []:
        if len(kept) >= int(cfg.get("max_size_sets", 0)):
            break
        name = label(sizes)
        if rewrite(source, sizes) == source:
            dropped.append(f"size set {name}: names no module-level integer constant of the task")
            continue
        try:
            ref = Reference(TaskProgram(source, d, int(cfg["seed"]), cfg["device"], sizes=sizes, set_index=len(kept)))
            t = ref.run(0)
        except Exception as e:  # noqa: BLE001 - the reference does not hold there
            dropped.append(f"size set {name}: the reference fails there ({type(e).__name__}: {str(e)[:200]})")
            continue
        fp = fingerprint(t["inputs"])
        if _signature(ref.program.init, t["inputs"]) == visible_shape:
            dropped.append(f"size set {name}: changes no input shape or init value of the reference")
            continue
        need = _host_need(
            cfg["device"], int(cfg["trials"]), tensor_bytes(t["inputs"]), tensor_bytes(t["outputs"]), model_bytes
        )
        if need > budget:
            dropped.append(f"size set {name}: does not fit memory_budget_mb")
            continue
        kept.append(
            {
                "sizes": sizes,
                "init_fingerprint": init_fingerprint(ref.program.init, state_of(ref.model)),
                "fingerprint": fp,
                "mutated": t["mutated"],
                "alias": t["alias"],
                "out_meta": _out_meta(t["outputs"]),
            }
        )
    return kept, dropped


def _time(ch: Channel, cfg: dict[str, Any], ref: Reference, inputs: list[Any]) -> None:
    """Times the reference on `go` (the worker holds the GPU meanwhile), as the candidate is
    timed (see the module doc)."""
    from .timing import Timer, input_sets

    ch.send(messages.ReadyToTime())
    if ch.wait_command().split(" ")[0] != "go":
        return
    sets = input_sets(cfg["timing"], inputs, cfg["device"])
    nonneg = nonnegative(inputs)
    get_inputs = ref.program.module.get_inputs

    def prepare(row: int | None, s: int) -> None:
        refresh(sets[s], nonneg, secrets.randbits(62), get_inputs)

    def timed(static: list[Any]) -> Any:
        def fn() -> Any:
            with torch.no_grad():
                return ref.model(*static)

        return fn

    fns = [timed(static) for static in sets]
    timer = Timer(cfg["timing"], cfg["device"])
    graphs, err = timer.capture_all(fns)
    stats = timer.settle(fns, graphs, prepare=prepare)
    ch.send(messages.Timed(timing=stats, capture_error=err))


class Judge:
    """The judge mode (see the module doc)."""

    def __init__(self, d: str, cfg: dict[str, Any], source: str):
        self.d = d
        self.cfg = cfg
        self.source = source
        self.device: str = cfg["device"]
        self.refs: dict[int | None, Reference] = {
            None: Reference(TaskProgram(source, d, int(cfg["seed"]), self.device))
        }

    def reference(self, size_set: int | None) -> Reference:
        if size_set not in self.refs:
            sizes = self.cfg["size_sets"][size_set]
            program = TaskProgram(self.source, self.d, int(self.cfg["seed"]), self.device, sizes, size_set)
            self.refs[size_set] = Reference(program)
        return self.refs[size_set]

    def judge(self, req: dict[str, Any]) -> messages.Judged:
        if req.get("rows") is not None:
            return self.timed(req)
        path = os.path.join(self.d, os.path.basename(req["file"]))
        try:
            got = result_file.correctness(path)
        finally:
            os.unlink(path)
        if req["size_set"] is not None:
            result_file.index(req["size_set"], len(self.cfg["size_sets"]), "size set")
        trial = result_file.index(req["trial"], int(self.cfg["trials"]) + 1, "trial")
        ref = self.reference(req["size_set"])
        t = ref.run(trial)
        mutated = got["mutated"]
        alias = got["alias"]
        # compared on the host first: nothing of another structure (size) reaches the device
        structure = next((e for e in (compare.structure_error(r, t["outputs"]) for r in got["runs"]) if e), None)
        base = dict(label=req["label"], mutated=mutated, ref_mutated=t["mutated"], alias=alias, ref_alias=t["alias"])
        if structure:
            return messages.Judged(structure=structure, ok=False, errors=[], repeat_ok=None, **base)
        runs = [to_device(r, self.device) for r in got["runs"]]
        cand = runs[0]
        tol, rel = self.cfg["tolerances"], self.cfg["relative_error"]
        ok, stats = compare.output_errors(cand, t["outputs"], tol, rel)
        repeat_ok = got["repeat_ok"]
        if req.get("repeat") and len(runs) > 1:
            repeat_ok = compare.matches(runs[1], cand, tol, rel)
        verdict = messages.Judged(structure=None, ok=ok, errors=stats, repeat_ok=repeat_ok, **base)
        if not ok and req.get("diagnose"):
            verdict.equals_trial = self._equals_other(cand, int(req["trial"]), req["size_set"])
            if verdict.equals_trial is None:
                verdict.low_precision = self._low_precision(cand, ref, int(req["trial"]), stats)
        return verdict

    def timed(self, req: dict[str, Any]) -> messages.Judged:
        """The digests of a candidate's timed calls (`candidate_child.TimedCalls`): the structure
        of their outputs, then each of the calls `rows` (picked by the worker): its fresh inputs
        written from its seed, whether the call left them as they were, the reference's outputs
        and whether the digests agree (`digest`)."""
        path = os.path.join(self.d, os.path.basename(req["file"]))
        try:
            got = result_file.timed(path, req["rows"])
        finally:
            os.unlink(path)
        ref = self.reference(None)
        template = ref.run(0)
        base: dict[str, Any] = dict(label=req["label"], ref_alias=template["alias"], alias=[], repeat_ok=None)
        expected = digest.signature(template["outputs"])
        structure = None
        if got["signature"] != expected:
            structure = f"the timed calls return {got['signature']}, the reference {expected}"
        elif got["changed"]:
            structure = f"timed call {got['changed'][0]} returns outputs of another structure than the first"
        if structure:
            return messages.Judged(structure=structure, ok=False, mutated=False, ref_mutated=False, errors=[], **base)
        nonneg = nonnegative(template["inputs"])
        tol, rel = self.cfg["tolerances"], self.cfg["relative_error"]
        worst = 0.0
        for row in req["rows"]:
            keys = [int(x) for x in got["keys"][row]]
            inputs = clone_all(template["inputs"])
            refresh(inputs, nonneg, int(got["seeds"][row]), ref.program.module.get_inputs)
            mutated = not digest.same_inputs(got["inputs"][row], inputs, keys)
            before = clone_all(inputs)
            with torch.no_grad():
                outs = as_list(ref.model(*inputs))
            ref_mutated = not same_values(inputs, before)
            ok, dev = digest.compare_outputs(got["outputs"][row], outs, keys, tol, rel)
            if not ok or (mutated and not ref_mutated):
                base["label"] = f"{req['label']}: timed call {row} of {len(got['seeds'])}"
                errors = [{"index": 0, "deviation": dev}]
                return messages.Judged(
                    structure=None, ok=ok, mutated=mutated, ref_mutated=ref_mutated, errors=errors, **base
                )
            worst = max(worst, dev)
            del inputs, before, outs
        errors = [{"index": 0, "deviation": worst}]
        return messages.Judged(structure=None, ok=True, mutated=False, ref_mutated=False, errors=errors, **base)

    def _equals_other(self, cand: list[Any], k: int, size_set: int | None) -> int | None:
        """Another trial whose reference outputs `cand` matches (computed on other inputs)."""
        ref = self.reference(size_set)
        tol, rel = self.cfg["tolerances"], self.cfg["relative_error"]
        for j in range(int(self.cfg["trials"])):
            if j != k and compare.matches(cand, ref.run(j)["outputs"], tol, rel):
                return j
        return None

    def _low_precision(
        self, cand: list[Any], ref: Reference, k: int, s32: list[dict[str, Any]]
    ) -> dict[str, Any] | None:
        """The lower-precision computation that explains the failing `cand` of trial `k`: its mean
        abs error at most half of the one against float32, where the candidate is still near the
        float32 reference (`s32`, its errors against it: `compare.near`)."""
        if not compare.near(s32, LOOSE_RELATIVE_LIMIT, LOOSE["float32"][0]):
            return None
        m32 = compare.mean_error(s32)
        for name, low in ref.low_precision(k).items():
            if compare.structure_error(cand, low) is not None:
                continue
            _, sl = compare.output_errors(cand, low, LOOSE, LOOSE_RELATIVE)
            ml = compare.mean_error(sl)
            if ml <= 0.5 * m32:
                return {"name": name, "mean_low": ml, "mean32": m32, "max32": compare.worst_error(s32)}
        return None


def forged(request: dict[str, Any], why: str) -> messages.Judged:
    """The judge's answer to a result file (or a request for one) that no honest harness writes
    (`result_file.Refused`): a forged result, the candidate's verdict."""
    return messages.Judged(
        label=str(request.get("label")),
        structure=why,
        ok=False,
        errors=[],
        repeat_ok=None,
        mutated=False,
        ref_mutated=False,
        alias=[],
        ref_alias=[],
        forged=True,
    )


def main(d: str, secret: bytes) -> int:
    """The child's entry point (called in a process forked from the fork server)."""
    ch = Channel(secret)
    cfg = json.load(open(os.path.join(d, "config.json")))
    if not enter_sandbox(cfg, ch):
        return 0
    if ch.wait_command() != "start":
        return 0
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    source = open(os.path.join(d, "reference.py")).read()
    try:
        if cfg["mode"] == "build":
            build(d, cfg, ch, source)
            return 0
        if cfg["mode"] == "time":
            ref = Reference(TaskProgram(source, d, int(cfg["seed"]), cfg["device"]))
            _time(ch, cfg, ref, ref.run(0)["inputs"])
            return 0
        if cfg["mode"] == "compiled":
            ref = Reference(TaskProgram(source, d, int(cfg["seed"]), cfg["device"]))
            first = ref.run(0)
            compile_baseline.run(ch, cfg, ref.model, first["inputs"], first["outputs"], ref.program.module.get_inputs)
            return 0
        judge = Judge(d, cfg, source)
    except TaskBroken as e:
        ch.send(messages.ReferenceFailed(str(e)))
        return 3
    except BaseException as e:  # noqa: BLE001 - every failure of the task is reported
        ch.send(messages.ReferenceFailed(failure_text(e)))
        return 3
    ch.send(messages.JudgeReady())
    while True:
        line = ch.wait_command()
        if line == "stop":
            return 0
        request = json.loads(line)
        try:
            ch.send(judge.judge(request))
        except result_file.Refused as e:
            ch.send(forged(request, str(e)))
        except BaseException as e:  # noqa: BLE001 - the worker answers an internal error
            ch.send(messages.ReferenceFailed("the judge failed: " + failure_text(e)))
            return 3
