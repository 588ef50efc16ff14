"""The trusted side of one device: evaluates requests, keeps what it knows of each task, decides
verdicts.

`DeviceEvaluator(device, options).evaluate(request)` returns a dict shaped like the Rust
`EvalResult`, or raises `BrokenReference`. Many threads may call it at once.

Per task (task id, reference text and size sets), a **build** child (`reference_child`) runs the
reference once and the worker keeps its facts only (`TaskFacts`: fingerprints, mutation and alias
facts, output shapes, the work estimate, the size sets that hold, the reference's timing): no
tensor, so the worker's memory does not grow with the tasks' sizes. A task whose reference fails
(or does not fit ``memory_budget_mb``, or gives other inputs in another process) is remembered as
broken: later requests for it are refused at once with the same message.

Per candidate, two children are forked at once (see `forkserver`): the candidate's harness
(`candidate_child`) and a **judge** (`reference_child` in judge mode). The harness writes one
result file per correctness call when the worker says ``next``; the worker copies it into the
judge's workspace and the judge compares it on the device with the reference's outputs for the
same inputs, computed there and then. One file is in flight at a time, so memory stays bounded
by one trial. The verdict is decided from the judge's findings and the instruments' report
(`decide`, whose docstring has the order).

Many evaluations run at once, each admitted by the worker (`capacity`; on a GPU while one more
fits in its free memory, `gpu_memory`): a child that runs out of GPU memory while its evaluation
shares the worker with others (a judge, the task's reference, a candidate's harness) raises
`DeviceBusy`, and the evaluation is run again (under a lowered limit, then alone), never answered
with the failure; alone, the failure is answered as any other.

The judge reads each result file as the candidate's to forge (`result_file`): one that no honest
harness writes is the candidate's `sandbox_escape`, never a failure of the judge.

Before those: the static checks (`static_check`, when on), then a compile error, a harness
violation (timer patch, precision switch, thread, lazy output, an escape the audit hook saw), a
crash, a timeout, a forged line on the harness's channel (`sandbox_escape`).

The GPU is shared through a gate (`gate`): correctness calls and comparisons run side by side,
timing runs alone, and no child touches the GPU before the worker's ``start`` (reference and
judge) or first ``next`` (harness), sent under the gate (its `starting` mode: see `gate` for why a
start and a short call yield differently to a waiting timing). On a GPU a candidate that passes is
timed (every timed call alike, see `timing`); on the CPU the same runs as a rehearsal whose times
are not reported. Then the worker picks `timing.checks` of the timed calls (all on the CPU) and
the judge checks their digests (`digest`): a wrong one is `output_caching`; a slow minority of
calls that a re-measurement shows again is `timing_anomaly`.

The task's `torch.compile` baseline (`compile_baseline`) is measured once per task after the
reference, in a confined reference child of its own (compiled mode), and kept with the task's
facts; every result carries it (`compile_baseline`), or the reason there is none (``cpu`` on the
CPU, ``off``, or what stopped the compile: never a failure of the task).

Timing processes: the reference and each candidate are timed in `timing.processes` processes and,
while their medians disagree, in more (`timing.another_process`); the figure used is the median
of the per-process medians (`timing.combine`). The reference's first is its build child, the
others children of their own (`reference_child` in time mode). Each of a candidate's is a
`Run.supervise` of a fresh harness and judge: the first with every correctness call, the later
ones with those that guard the timing (see `candidate_child`), each judged by the same rules, so
a verdict found in any process is the candidate's. On the CPU both rehearse `timing.processes`
processes (never one more: their times say nothing).

The speedup: with `timing.reference_in_process` (the default), the median over the candidate's
timing processes of (the reference timed beside the candidate / the candidate) in each process
(`timing.in_process_speedup`), unless the reference beside it is more than
`timing.reference_drift` away from the reference's own timing (both by the reference's best
method, its CUDA graphs, whatever the candidate's: a candidate whose graph cannot be captured is
timed with direct calls and pays its own launches) and that own figure is the less noisy one
(then, with a warning, and without the option): the reference's own median over the candidate's.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import hashlib
import json
import os
import pathlib
import secrets
import shutil
import sys
import tempfile
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from typing import Any

import torch

from ..confine import Jail, Limits, Policy, set_undumpable
from ..confine.launch import ensure_gpu_nodes
from ..confine.policy import SandboxError as SandboxRefused
from ..confine.policy import refusal
from . import backends, compare, compile_baseline, decide, health, messages, shapes, speed_of_light
from .backend import Backend, CandidateFailed, Prepared
from .capacity import ATTEMPTS, Admission, Attempt, DeviceBusy
from .forkserver import ForkServer, ForkServerDied
from .gate import GpuGate, Together
from .gpu_memory import CONTEXT_MB, DeviceMemory, MemoryGate, parse_smi
from .idle import DRAIN_BOUND_S, IdleProbe
from .sandbox import Child, ChildDied, ChildForged, ChildTimeout, child_env, server_env
from .timing import another_process, combine, in_process_speedup, per_process, settings

# The worker's default options, defined once: `ksmith-eval` embeds the same file for the
# defaults of `[eval]`, and the reward function runs on them through `merge_options`.
DEFAULT_OPTIONS = json.loads(pathlib.Path(__file__).with_name("defaults.json").read_text())
# The verdict names, shared with Rust (`EvalStatus`, `HackKind`; tests on both sides check them).
VERDICTS = json.loads((pathlib.Path(__file__).parent.parent / "verdicts.json").read_text())
#: The CPU's rehearsal of timing (Triton's interpreter is slow; its times are not reported). The
#: number of processes is the options' (`timing.another_process`).
CPU_REHEARSAL = {
    "warmup": 1,
    "warmup_ms": 0.0,
    "min_samples": 4,
    "max_samples": 4,
    "budget_ms": 1.0,
    "buffer_sets": 1,
    "buffer_mb": 0.0,
    "checks": 4,
}


#: Where an evaluation's time goes, in seconds (`evaluate_profiled`): the static checks; the
#: task's reference facts (built once per task and worker, else found at once); forking the
#: harness and the judge; the harness's start (confinement, the task's inputs prepared) up to its
#: first GPU work; compile (the backend's build step before the harness, e.g. a CUDA candidate's
#: extension or its cached build; then CUDA started, the candidate imported and its first call
#: compiled); the correctness calls and their judging, and the capture of the timing's CUDA
#: graphs; the timing (the GPU held alone); the judge's check of the timed calls; ending the
#: children. `gate_wait`: the time spent waiting for the GPU's gate
#: (another candidate's timing, or the starts a timing waits for), also counted in the phase
#: that waited (reference, compile, correctness, timing_check), except timing, which starts once
#: it holds the GPU. `paused`: the time the evaluation's children spent stopped during a start
#: for another candidate's timing (`gate`), also counted in the phase that was paused. `drain`:
#: the time a timing, once it held the GPU, waited for the GPU work of the starts it stopped to
#: drain; `undrained`: where that did not drain, the wait for those starts to end (both also in
#: `gate_wait`). `admission`: the time the evaluation waited for the worker's admission
#: (`capacity`: a limit lowered after the GPU ran out of memory, the GPU's free memory,
#: `gpu_memory`, or a retry waiting to run alone).
PHASES = (
    "static_check",
    "reference",
    "spawn",
    "start",
    "compile",
    "correctness",
    "timing",
    "timing_check",
    "finish",
    "gate_wait",
    "paused",
    "drain",
    "undrained",
    "admission",
)


class Profile(dict[str, float]):
    """Seconds by phase (`PHASES`) of one evaluation."""

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        start = time.monotonic()
        try:
            yield
        finally:
            self.add(name, time.monotonic() - start)

    def add(self, name: str, seconds: float) -> None:
        self[name] = self.get(name, 0.0) + seconds

    @contextlib.contextmanager
    def gated(self, gate: contextlib.AbstractContextManager[None]) -> Iterator[None]:
        """Holds `gate`, the wait for it counted as `gate_wait`."""
        start = time.monotonic()
        with gate:
            self.add("gate_wait", time.monotonic() - start)
            yield


class SandboxError(RuntimeError):
    """A child could not confine itself: the worker's environment is at fault, not the program
    (answered as an `internal` error, never as a verdict)."""


def _sandboxed(msg: messages.Message) -> messages.Message:
    if isinstance(msg, messages.SandboxFailed):
        raise SandboxError("the evaluator could not confine a child process: " + msg.message)
    return msg


class BrokenReference(Exception):
    """The task's reference program does not run (or the task cannot be evaluated here)."""

    def __init__(self, task_id: str, message: str):
        super().__init__(message)
        self.task_id = task_id
        self.message = message


def merge_options(options: dict[str, Any] | None) -> dict[str, Any]:
    out: dict[str, Any] = json.loads(json.dumps(DEFAULT_OPTIONS))
    for k, v in (options or {}).items():
        if k not in out:
            raise ValueError(f"unknown evaluator option `{k}`")
        if isinstance(out[k], dict) and isinstance(v, dict):
            out[k].update(v)
        else:
            out[k] = v
    return out


@dataclasses.dataclass
class TaskFacts:
    """What the worker keeps of one task (no tensor; see `messages.BuildDone`)."""

    key: str
    seed: int
    build: messages.BuildDone
    #: The reference's timing over its processes by its best method (`timing.combine`; on the
    #: CPU the rehearsal's): what every candidate is compared with.
    timing: dict[str, Any]
    warnings: list[str]
    #: The task's speed-of-light on this device (`speed_of_light.for_task`).
    light: dict[str, Any]
    #: The task's `torch.compile` baseline on this device, or why there is none
    #: (`compile_baseline`).
    compiled: dict[str, Any]

    def child_view(self) -> dict[str, Any]:
        """What the candidate's harness is told: fingerprints and output shapes, never outputs."""
        return {
            "init_fingerprint": self.build.init_fingerprint,
            "trials": [{"fingerprint": t["fingerprint"]} for t in self.build.trials],
            "size_sets": [
                {"sizes": s["sizes"], "init_fingerprint": s["init_fingerprint"], "fingerprint": s["fingerprint"]}
                for s in self.build.size_sets
            ],
            "out_meta": self.build.out_meta,
        }


def _trim(text: str, limit: int) -> str:
    return text if len(text) <= limit else "...\n" + text[-limit:]


class DeviceEvaluator:
    """Evaluates candidates on one device (`cpu` = Triton interpreter, or `cuda`).

    Children are confined (`ksmith.confine`) unless the option `confine` is off. The sandbox
    policy is the launcher's (``KSMITH_SANDBOX``) when this process was started by it, else the
    defaults. When the policy requires the whole sandbox (the default) anything missing, the
    option `confine` off included, stops the evaluator before any child exists
    (`ksmith.confine.SandboxError`, whose text is the one line to show); under the caller's
    explicit opt-out what is missing is printed once on stderr. Evaluators of one process that
    share a GPU share its gate (`gate`: another evaluator's), so that one's timing never runs
    beside the other's work."""

    def __init__(
        self,
        device: str,
        options: dict[str, Any] | None = None,
        runtime_dir: str | None = None,
        policy: Policy | None = None,
        gate: GpuGate | None = None,
    ):
        self.device = device
        self.cuda = device.startswith("cuda")
        self.opts = merge_options(options)
        speed_of_light.tf32_classes(str(self.opts["sol_tf32"]), False, False)  # refuses an unknown policy
        compile_baseline.check_mode(str(self.opts["compile_baseline"]))
        #: What every child is told of timing: one process's share on a GPU, else the rehearsal.
        self.timing = per_process(self.opts["timing"]) if self.cuda else {**self.opts["timing"], **CPU_REHEARSAL}
        self.jail = None
        policy = dataclasses.replace(policy or Policy.take_from_env(), gpu=self.cuda)
        if not self.opts["confine"] and policy.require:
            raise SandboxRefused(
                refusal("the option confine = false runs candidates unconfined", "drop it", policy.opt_out)
            )
        if self.opts["confine"]:
            if policy.gpu and policy.outer is None:
                ensure_gpu_nodes()
            self.jail = Jail(policy)
            if self.jail.missing:
                print(
                    "ksmith evaluator: children run without part of the sandbox: " + "; ".join(self.jail.missing),
                    file=sys.stderr,
                    flush=True,
                )
        set_undumpable()
        self.runtime_dir = runtime_dir
        self.root = tempfile.mkdtemp(prefix="ksmith-eval-", dir=runtime_dir)
        # removed at exit too when the owner never calls `close` (the reward function's evaluators)
        weakref.finalize(self, _remove, [self.root])
        #: The backends used so far, by name (`backend`), each with what it keeps (its caches).
        self.backends: dict[str, Backend] = {}
        self._backends_lock = threading.Lock()
        self.server_env = server_env(device)
        self._forks: ForkServer | None = None
        self._forks_lock = threading.Lock()
        self.tasks: collections.OrderedDict[str, TaskFacts] = collections.OrderedDict()
        self.broken: collections.OrderedDict[str, BrokenReference] = collections.OrderedDict()
        self.task_locks: dict[str, threading.Lock] = {}
        self.lock = threading.Lock()
        #: Waits, before a timing, for the GPU work of the starts the gate stopped (`gate`, `idle`).
        self.idle_probe: IdleProbe | None = None
        if gate is None and self.cuda and self.opts["pause_starts_for_timing"]:
            self.idle_probe = IdleProbe(self.server_env, DRAIN_BOUND_S)
            self.idle_probe.start()  # in the background: no timing waits for its start
        self.gate = gate or GpuGate(
            self.cuda, self.idle_probe, (lambda hold: self._trace("gate", **hold)) if _tracing() else None
        )
        #: How many evaluations run at once: on a GPU while one more fits in its memory
        #: (`gpu_memory`), and fewer after it ran out (`capacity`).
        memory = None
        if self.cuda:
            reading = DeviceMemory(lambda: parse_smi(_gpu_query("memory.used,memory.total")))
            memory = MemoryGate(reading, 2 * CONTEXT_MB + float(self.opts["timing"]["buffer_mb"]))
        self.admission = Admission(
            lambda text: print(f"ksmith evaluator: {text}", file=sys.stderr, flush=True), memory=memory
        )
        self.default_hardware = {
            "device": "cpu (triton interpreter)",
            "driver": None,
            "torch": torch.__version__,
            "triton": _triton_version(),
            "cuda": torch.version.cuda if self.cuda else None,
        }
        #: The timing settings every result's stamp carries.
        self.timing_settings = settings(self.opts["timing"]) if self.cuda else "not measured (CPU rehearsal)"
        if self.cuda:
            name, driver = _gpu_name_driver()
            os.environ.setdefault("KSMITH_GPU_DRIVER", driver)
            self.server_env["KSMITH_GPU_DRIVER"] = os.environ["KSMITH_GPU_DRIVER"]
            self.default_hardware.update(device=name or "cuda", driver=os.environ["KSMITH_GPU_DRIVER"] or None)

    # -- children --------------------------------------------------------------------------
    @contextlib.contextmanager
    def _workspace(self, kind: str, config: dict[str, Any], files: dict[str, str]) -> Iterator[str]:
        """A child's folder with `files` and its `config.json` (and its sandbox, when confined);
        removed afterwards. Confined, it is a tmpfs holding ``disk_mb`` plus the memory limit (the
        result files go there, one at a time)."""
        if self.jail is None:
            d = tempfile.mkdtemp(prefix=f"{kind}-", dir=self.root)
            try:
                self._write(d, config, files, None)
                yield d
            finally:
                shutil.rmtree(d, ignore_errors=True)
            return
        mb = int(self.opts["memory_limit_mb"])
        with self.jail.workspace(self.root, f"{kind}-", size_mb=int(self.jail.policy.disk_mb) + mb) as d:
            data = (mb + 1024) * 2**20 if kind == "cand" and mb and not self.cuda else None
            spec = self.jail.spec(d, Limits(processes=int(self.opts["max_processes"]), data_bytes=data))
            try:
                self._write(d, config, files, spec.to_dict())
                yield d
            finally:
                self.jail.release(spec)

    @staticmethod
    def _write(d: str, config: dict[str, Any], files: dict[str, str], sandbox: dict[str, Any] | None) -> None:
        for name, text in files.items():
            with open(os.path.join(d, name), "w") as f:
                f.write(text)
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump({**config, "sandbox": sandbox}, f)

    def forks(self) -> ForkServer:
        """The fork server, started on first use and again when it has died."""
        with self._forks_lock:
            if self._forks is None or not self._forks.alive:
                if self._forks is not None:
                    self._forks.close()
                self._forks = ForkServer(self.server_env, os.path.join(self.root, "forkserver.log"))
            return self._forks

    def _spawn(self, module: str, d: str, extra_env: dict[str, str] | None = None) -> Child:
        """Forks the child `module` on workspace `d` (PID 1 of a PID namespace of its own where
        the sandbox may make one)."""
        env = child_env(self.server_env, d, extra_env)
        args = (module, d, env, self.opts["memory_limit_mb"], self.opts["log_limit"], self.jail is not None)
        try:
            return Child(self.forks(), *args)
        except ForkServerDied:
            return Child(self.forks(), *args)  # once more, on a new server

    def _config(self, seed: int, **extra: Any) -> dict[str, Any]:
        """What every child's `config.json` holds."""
        return {
            "device": self.device,
            "trials": self.opts["trials"],
            "seed": seed,
            "tolerances": self.opts["tolerances"],
            "relative_error": self.opts["relative_error"],
            "timing": self.timing,
            "audit": self.opts["audit"],
            **extra,
        }

    def sandbox_info(self) -> dict[str, Any]:
        """What confines the children (the worker's hello carries it)."""
        if self.jail is None:
            return {"confined": False, "missing": ["everything: children run unconfined (option confine = false)"]}
        return self.jail.info

    def backend(self, name: str) -> Backend:
        """The backend `name` of this evaluator (created on first use); `ValueError` for an
        unknown name."""
        with self._backends_lock:
            if name not in self.backends:
                self.backends[name] = backends.create(name, self)
            return self.backends[name]

    def compute_capability(self) -> str | None:
        """The GPU's compute capability (``9.0``) from `nvidia-smi`, None on the CPU or when it
        cannot be read (the CUDA backend builds for it)."""
        if not self.cuda:
            return None
        return _gpu_query("compute_cap") or None

    def close(self) -> None:
        if self._forks is not None:
            self._forks.close()
        if self.idle_probe is not None:
            self.idle_probe.close()
        shutil.rmtree(self.root, ignore_errors=True)
        for b in self.backends.values():
            b.close()
        if self.jail is not None:
            self.jail.close()

    # -- reference -------------------------------------------------------------------------
    def reference(
        self,
        task_id: str,
        source: str,
        alt_sizes: list[dict[str, int]] | None = None,
        profile: Profile | None = None,
        attempt: Attempt | None = None,
    ) -> TaskFacts:
        """The facts of a task, built once (see the module doc); `BrokenReference` when the task
        cannot be evaluated (remembered). The build's waits for the GPU's gate go to `profile`'s
        `gate_wait`. `DeviceBusy` (nothing remembered) when a child of the build ran out of GPU
        memory while `attempt` shared the worker (`capacity`)."""
        profile = Profile() if profile is None else profile
        recorded = bool(alt_sizes)
        sets = alt_sizes if alt_sizes else shapes.derive(source)
        digest = hashlib.sha256(source.encode() + json.dumps(sets, sort_keys=True).encode()).hexdigest()[:16]
        key = f"{task_id}:{digest}"
        with self.lock:
            if key in self.broken:
                b = self.broken[key]
                raise BrokenReference(b.task_id, b.message)
            lock = self.task_locks.setdefault(key, threading.Lock())
        with lock:
            with self.lock:
                if key in self.broken:
                    b = self.broken[key]
                    raise BrokenReference(b.task_id, b.message)
                if key in self.tasks:
                    self.tasks.move_to_end(key)
                    return self.tasks[key]
            try:
                facts = self._build(key, task_id, source, sets, recorded, profile, attempt)
            except BrokenReference as e:
                self.remember_broken(key, e)
                raise
            with self.lock:
                self.tasks[key] = facts
                while len(self.tasks) > max(1, int(self.opts["max_cached_tasks"])):
                    self.tasks.popitem(last=False)
            return facts

    def remember_broken(self, key: str, e: BrokenReference) -> None:
        """Refuses the task `key` from now on with `e`'s message."""
        with self.lock:
            self.tasks.pop(key, None)
            self.broken[key] = e
            while len(self.broken) > 4 * max(1, int(self.opts["max_cached_tasks"])):
                self.broken.popitem(last=False)

    def _build(
        self,
        key: str,
        task_id: str,
        source: str,
        sets: list[dict[str, int]],
        recorded: bool,
        profile: Profile,
        attempt: Attempt | None,
    ) -> TaskFacts:
        o = self.opts
        seed = int(o["seed"]) if o["seed"] is not None else secrets.randbelow(2**31 - 1)
        config = self._config(
            seed,
            mode="build",
            measure=True,
            size_sets=sets,
            max_size_sets=int(o["hidden_shapes"]),
            memory_budget_mb=int(o["memory_budget_mb"]),
        )
        with self._reference_child(task_id, config, source, profile) as child:
            with profile.gated(self.gate.starting(child)):
                child.command("start")
                msg = _sandboxed(child.receive(o["compile_timeout_s"] + o["run_timeout_s"]))
            if isinstance(msg, messages.ReferenceFailed):
                self.admission.check(attempt, "the task's reference", msg.message)
                raise BrokenReference(task_id, _trim(msg.message + "\n" + child.log_tail(), o["log_limit"]))
            if not isinstance(msg, messages.BuildDone):
                raise BrokenReference(task_id, f"unexpected message {msg.TYPE}")
            build = msg
            stats = [self._reference_timing(child, task_id, 1, profile, attempt=attempt)]
        while another_process([t["median_ms"] for t in stats], self.timing, self.cuda):
            config = self._config(seed, mode="time")
            with self._reference_child(task_id, config, source, profile) as child:
                stats.append(self._reference_timing(child, task_id, len(stats) + 1, profile, True, attempt))
        warnings = [f"hidden shapes: {why}" for why in build.dropped]
        if not build.size_sets:
            origin = "recorded" if recorded else "derived from the task's module-level size constants"
            warnings.append(f"no hidden size set checked (none {origin} held)")
        if any(s.get("noisy") for s in stats):
            warnings.append(
                "the reference's own timing stayed noisy after re-measuring (CV "
                + ", ".join(f"{r['cv']:.2%}" for s in stats for r in s.get("rounds", [s]))
                + f", above timing.max_cv = {float(self.timing.get('max_cv', 0.0)):.1%})"
            )
        light = speed_of_light.for_task(
            self.default_hardware["device"] if self.cuda else None,
            build.flops,
            build.input_bytes + build.output_bytes + build.state_bytes,
            build.dtype,
            str(o["sol_tf32"]),
        )
        compiled = self._compile_baseline(task_id, seed, source, profile, attempt)
        return TaskFacts(
            key=key, seed=seed, build=build, timing=combine(stats), warnings=warnings, light=light, compiled=compiled
        )

    def _compile_baseline(
        self, task_id: str, seed: int, source: str, profile: Profile, attempt: Attempt | None
    ) -> dict[str, Any]:
        """The task's `torch.compile` baseline, measured in a confined reference child of its own
        (see `compile_baseline`), or why there is none: ``off``, ``cpu``, or what stopped it (the
        compile raised, its outputs differ from eager, it passed `compile_baseline_timeout_s`, the
        child failed). Never raises for the task; `DeviceBusy` when it ran out of GPU memory
        while `attempt` shared the worker (not kept as the task's reason)."""
        o = self.opts
        mode = str(o["compile_baseline"])
        if mode == "off":
            return compile_baseline.unmeasured(mode, 'off (compile_baseline = "off")')
        if not self.cuda:
            return compile_baseline.unmeasured(mode, "cpu")
        return self._measure_compiled(task_id, seed, source, mode, profile, attempt)

    def _measure_compiled(
        self, task_id: str, seed: int, source: str, mode: str, profile: Profile, attempt: Attempt | None = None
    ) -> dict[str, Any]:
        """The compile baseline's child run (compile, check, time; on the CPU a rehearsal whose
        times say nothing), or the reason it gave none; `DeviceBusy` as `_compile_baseline`
        says."""
        o = self.opts
        limit = float(o["compile_baseline_timeout_s"])
        config = self._config(seed, mode="compiled", compile_baseline=mode)
        try:
            with self._reference_child(task_id, config, source, profile) as child:
                paused_before = child.paused_s()
                with profile.gated(self.gate.starting(child)):
                    child.command("start")
                    try:
                        msg = _sandboxed(child.receive(limit + o["run_timeout_s"]))
                    except ChildTimeout:
                        return compile_baseline.unmeasured(
                            mode, f"compiling took longer than compile_baseline_timeout_s = {limit:.0f} s"
                        )
                if not isinstance(msg, messages.BaselineCompiled):
                    why = msg.message if isinstance(msg, messages.ReferenceFailed) else f"unexpected message {msg.TYPE}"
                    self.admission.check(attempt, "the task's compile baseline", why)
                    return compile_baseline.unmeasured(mode, "torch.compile failed: " + _trim(why, 600))
                # the child's own clock ran while another candidate's timing stopped it
                compile_s = max(0.0, msg.compile_s - (child.paused_s() - paused_before))
                if compile_s > limit:
                    return compile_baseline.unmeasured(
                        mode,
                        f"compiling took {compile_s:.0f} s, over compile_baseline_timeout_s = {limit:.0f} s",
                        compile_s,
                    )
                with profile.gated(self.gate.exclusive(profile.add)):
                    child.command("go 0")
                    msg = child.receive(o["timing_timeout_s"])
                if not isinstance(msg, messages.Timed):
                    why = msg.message if isinstance(msg, messages.ReferenceFailed) else f"unexpected message {msg.TYPE}"
                    self.admission.check(attempt, "the task's compile baseline", why)
                    return compile_baseline.unmeasured(mode, "timing the compiled reference failed: " + _trim(why, 600))
                return compile_baseline.measured(mode, compile_s, msg.timing)
        except BrokenReference as e:
            return compile_baseline.unmeasured(mode, "the compile baseline's child failed: " + _trim(e.message, 600))

    @contextlib.contextmanager
    def _reference_child(
        self, task_id: str, config: dict[str, Any], source: str, profile: Profile | None = None
    ) -> Iterator[Child]:
        """A reference child (build or time mode) on a workspace of its own; its failures are the
        task's (`BrokenReference`). The seconds it was stopped go to `profile`'s `paused`."""
        o = self.opts
        with self._workspace("ref", config, {"reference.py": source}) as d:
            child = self._spawn("ksmith.evaluator.reference_child", d)
            try:
                yield child
            except ChildForged as e:
                raise BrokenReference(task_id, f"the reference wrote on the harness's channel: {e}") from None
            except ChildTimeout as e:
                raise BrokenReference(task_id, f"the reference timed out: {e}") from None
            except ChildDied as e:
                raise BrokenReference(task_id, f"{e}\n{_trim(e.log, o['log_limit'])}") from None
            finally:
                child.finish()
                if profile is not None:
                    profile.add("paused", child.paused_s())

    def _reference_timing(
        self,
        child: Child,
        task_id: str,
        process: int,
        profile: Profile,
        start: bool = False,
        attempt: Attempt | None = None,
    ) -> dict[str, Any]:
        """The reference's timing in its `process`-th process (`child`; told to `start` first
        when it is a fresh time-mode child; its start and its preparation for timing under the
        gate's `starting` mode): on `go`, with the GPU held alone. `DeviceBusy` when it ran out of
        GPU memory while `attempt` shared the worker (`capacity`)."""
        o = self.opts
        with profile.gated(self.gate.starting(child)):
            if start:
                child.command("start")
            msg = _sandboxed(child.receive(o["compile_timeout_s"] + o["run_timeout_s"]))
        if isinstance(msg, messages.ReadyToTime):
            with profile.gated(self.gate.exclusive(profile.add)):
                child.command("go 0")
                msg = child.receive(o["timing_timeout_s"])
        if isinstance(msg, messages.Timed):
            return msg.timing
        why = msg.message if isinstance(msg, messages.ReferenceFailed) else f"unexpected message {msg.TYPE}"
        self.admission.check(attempt, "the task's reference", why)
        raise BrokenReference(task_id, f"timing the reference failed (timing process {process}): {why}")

    # -- candidate -------------------------------------------------------------------------
    def evaluate(self, request: dict[str, Any]) -> dict[str, Any]:
        return self.evaluate_profiled(request)[0]

    def evaluate_profiled(self, request: dict[str, Any]) -> tuple[dict[str, Any], dict[str, float]]:
        """The result of `request` and where its time went (seconds by phase, `PHASES`; an
        attempt that ran out of GPU memory beside others is run again, see `capacity`, and its
        time stays in the phases)."""
        t0 = time.monotonic()
        profile = Profile()
        res = self._retried("an evaluation", profile, lambda attempt: self._evaluate(request, profile, attempt))
        res["elapsed_ms"] = int((time.monotonic() - t0) * 1000)
        phases = {k: round(v, 4) for k, v in profile.items()}
        self._trace("evaluation", t=round(t0, 4), status=res["status"], phases=phases)
        return res, phases

    def preflight(self, request: dict[str, Any]) -> dict[str, Any]:
        return self.preflight_profiled(request)[0]

    def preflight_profiled(self, request: dict[str, Any]) -> tuple[dict[str, Any], dict[str, float]]:
        """Builds and runs the task's reference of `request` on this device as its first
        evaluation would (the same facts, kept for the task's evaluations here; the candidate is
        not read), before anyone writes a candidate for it: what it gives (the reference's median
        time, the build's warnings) and where its time went; `BrokenReference` when it does not
        run here (remembered, as in `reference`). Run again like an evaluation when it ran out of
        GPU memory beside others (`capacity`)."""
        t0 = time.monotonic()
        profile = Profile()
        task_id = request["task_id"]

        def build(attempt: Attempt) -> dict[str, Any]:
            reference, alt, _ = self._task_here(request)
            with profile.phase("reference"):
                facts = self.reference(task_id, reference, alt, profile, attempt)
            return {
                "task_id": task_id,
                "reference_ms": facts.timing.get("median_ms") if self.cuda else None,
                "warnings": list(facts.warnings),
            }

        built = self._retried("a preflight", profile, build)
        built["elapsed_ms"] = int((time.monotonic() - t0) * 1000)
        return built, {k: round(v, 4) for k, v in profile.items()}

    def _retried(self, what: str, profile: Profile, run: Callable[[Attempt], dict[str, Any]]) -> dict[str, Any]:
        """`run(attempt)` admitted by the worker, and run again while it runs out of GPU memory
        beside others (`capacity`): at most `ATTEMPTS` times, the last alone."""
        for number in range(ATTEMPTS):
            try:
                with self._admitted(number, profile) as attempt:
                    res = run(attempt)
            except DeviceBusy as busy:
                self.admission.ran_out(busy)
                self._trace("capacity_retry", attempt=number, crowd=busy.crowd)
                continue
            self.admission.ended()
            return res
        raise RuntimeError(f"{what} ran out of GPU memory in {ATTEMPTS} attempts, the last alone")

    def _task_here(self, req: dict[str, Any]) -> tuple[str, list[dict[str, int]] | None, dict[str, int] | None]:
        """The reference of `req` as this device judges it, its hidden size sets, and the size
        set it was rewritten to (or None): on the CPU, correctness only, at the task's smallest
        recorded size set, not at the sizes chosen for a GPU (see `shapes`); the other sets stay
        hidden ones."""
        alt = shapes.parse_sets(req["alt_sizes"]) if req.get("alt_sizes") else None
        reference = req["reference"]
        if alt and not self.cuda:
            primary, others = shapes.smallest(reference, alt)
            if primary is not None:
                return shapes.rewritten(reference, primary), others, primary
        return reference, alt, None

    @contextlib.contextmanager
    def _admitted(self, number: int, profile: Profile) -> Iterator[Attempt]:
        """Attempt `number` of an evaluation, admitted by the worker (`capacity`); the wait is
        `profile`'s `admission`."""
        start = time.monotonic()
        with self.admission.slot(number) as attempt:
            profile.add("admission", time.monotonic() - start)
            yield attempt

    def device_failure(self) -> str | None:
        """Why this evaluator's GPU fails its check (`health`), or None (always on the CPU)."""
        return health.device_failure(self.server_env) if self.cuda else None

    def _result(self, status: str, hack: str | None = None, log: str = "", **kw: Any) -> dict[str, Any]:
        if status not in VERDICTS["eval_status"] or (hack is not None and hack not in VERDICTS["hack"]):
            raise ValueError(f"verdict outside the shared vocabulary (verdicts.json): {status} {hack}")
        base: dict[str, Any] = {
            "status": status,
            "hack": hack,
            "error_log": _trim(log, self.opts["log_limit"]),
            "errors": [],
            "trials_passed": 0,
            "trials": 0,
            "candidate_timing": None,
            "reference_timing": None,
            "speedup": None,
            "speed_of_light": None,
            "compile_baseline": None,
            "warnings": [],
            "hardware": dict(kw.pop("hardware", None) or self.default_hardware, timing=self.timing_settings),
            "elapsed_ms": 0,
        }
        base.update(kw)
        base["errors"] = compare.public(base["errors"])
        return base

    def _trace(self, what: str, **kw: Any) -> None:
        """One line of the worker's trace on its log (`KSMITH_EVAL_TRACE`)."""
        if _tracing():
            # one write per line: the worker's threads trace at once
            sys.stderr.write(json.dumps({"trace": what, "now": round(time.monotonic(), 4), **kw}) + "\n")
            sys.stderr.flush()

    def _evaluate(self, req: dict[str, Any], profile: Profile, attempt: Attempt | None = None) -> dict[str, Any]:
        task_id, candidate = req["task_id"], req["candidate"]
        backend = self.backend(req.get("backend") or backends.DEFAULT)
        backend.check_available()
        warnings: list[str] = []
        if self.opts["static_checks"]:
            with profile.phase("static_check"):
                v = backend.static_check(candidate)
            warnings = list(v.warnings)
            if v.status:
                return self._result(v.status, v.hack, v.message, warnings=warnings)
        reference, alt, primary = self._task_here(req)
        if primary is not None:
            candidate = shapes.rewritten(candidate, primary)
            warnings.append(f"judged on the CPU at the task's smallest size set {shapes.label(primary)}")
        try:
            with profile.phase("compile"):
                prepared = backend.prepare(candidate)
        except CandidateFailed as e:
            return self._result(e.status, e.hack, e.message, warnings=warnings)
        with profile.phase("reference"):
            facts = self.reference(task_id, reference, alt, profile, attempt)
        measure = bool(req.get("measure", True)) and self.cuda
        run = Run(self, task_id, facts, measure, warnings, backend, prepared, profile, attempt)
        while run.another():
            verdict = self._candidate_process(run, reference, candidate)
            if verdict is not None:
                return verdict
        return run.final()

    def _candidate_process(self, run: Run, reference: str, candidate: str) -> dict[str, Any] | None:
        """One process of `run`: a fresh harness and judge, supervised; the verdict, or None when
        the candidate passed there (see `Run.supervise`)."""
        facts = run.facts
        prepared = run.prepared
        files = {"reference.py": reference}
        judge_cfg = self._config(facts.seed, mode="judge", size_sets=[s["sizes"] for s in facts.build.size_sets])
        cand_cfg = self._config(
            facts.seed,
            steer=run.steer,
            task=facts.child_view(),
            correctness="timing" if run.processes else "full",
            backend=run.backend.NAME,
            **prepared.config,
        )
        with (
            self._workspace("judge", judge_cfg, files) as dj,
            self._workspace("cand", cand_cfg, {**files, "candidate.py": candidate}) as dc,
        ):
            with run.profile.phase("spawn"):
                judge = self._spawn("ksmith.evaluator.reference_child", dj)
            child = None
            try:
                with run.profile.phase("spawn"):
                    child = self._spawn("ksmith.evaluator.candidate_child", dc, prepared.env)
                return run.supervise(child, judge, dc, dj)
            finally:
                with run.profile.phase("finish"):
                    if child is not None:
                        child.finish()
                        run.profile.add("paused", child.paused_s())
                        run.backend.after_child(candidate, dc, prepared)
                    judge.command("stop")
                    judge.finish()
                    if run.judge_start is not None:
                        run.judge_start.end()
                        run.judge_start = None
                    run.profile.add("paused", judge.paused_s())


class JudgeStart:
    """A judge's start (its CUDA context, the task's reference built: seconds, mostly CUDA's
    start, which took a harness 8.5 s with 16 evaluations at once on an H200) run in a thread of
    its own beside the harness's start and compilation, instead of after them: under the gate's
    `starting` mode with the judge as its pausable child, so that a timing stops it like any
    start. Where the candidate is never judged (it does not compile), the start was for nothing
    and the judge is ended as before (`end`)."""

    def __init__(self, run: Run, judge: Child):
        self.run = run
        self.judge = judge
        self.msg: messages.Message | None = None
        self.error: BaseException | None = None
        #: Seconds waited for the gate (added to the evaluation's profile by `result`).
        self.gate_wait = 0.0
        self.thread = threading.Thread(target=self._start, name="ksmith-judge-start", daemon=True)
        self.thread.start()

    def _start(self) -> None:
        o = self.run.o
        asked = time.monotonic()
        try:
            with _judge_failures(self.judge), self.run.ev.gate.starting(self.judge):
                self.gate_wait = time.monotonic() - asked
                self.judge.command("start")
                self.msg = _sandboxed(self.judge.receive(o["compile_timeout_s"] + o["run_timeout_s"]))
        except BaseException as e:  # noqa: BLE001 - raised where the judge is needed (`result`)
            self.error = e

    def result(self) -> messages.Message:
        """The judge's answer to its start, once it came (its failure raised here)."""
        self.end()
        self.run.profile.add("gate_wait", self.gate_wait)
        if self.error is not None:
            raise self.error
        if self.msg is None:
            raise RuntimeError("the judge's start ended without an answer")
        return self.msg

    def end(self) -> None:
        """Waits for the thread (the judge ended or answered; a wait for the gate lasts at most
        a timing's hold)."""
        self.thread.join()


class Budget:
    """Seconds a child has for a series of answers, waits for the GPU's gate and the time it was
    stopped for another candidate's timing excluded: the gate is held by other candidates, so
    neither must turn into this candidate's timeout."""

    def __init__(self, seconds: float, what: str, paused: Callable[[], float] = lambda: 0.0):
        """`paused`: the seconds the child has been stopped so far (`Child.paused_s`)."""
        self.seconds = float(seconds)
        self.what = what
        self.deadline = time.monotonic() + self.seconds
        self.paused = paused
        self.paused_before = paused()

    def extend(self, seconds: float) -> None:
        self.deadline += seconds

    def left(self) -> float:
        """The seconds left; raises `ChildTimeout` naming the budget once none is."""
        left = self.deadline + (self.paused() - self.paused_before) - time.monotonic()
        if left <= 0:
            raise ChildTimeout(f"{self.what}: no answer within {self.seconds:.0f} s in all")
        return left


class Run:
    """One candidate's evaluation, as the worker drives it (see the module doc): one
    `supervise` per timing process."""

    def __init__(
        self,
        ev: DeviceEvaluator,
        task_id: str,
        facts: TaskFacts,
        measure: bool,
        warnings: list[str],
        backend: Backend,
        prepared: Prepared,
        profile: Profile | None = None,
        attempt: Attempt | None = None,
    ):
        """`backend`: the candidate's; `prepared`: what its compile step gave the harness;
        `attempt`: the worker's admission of this attempt (`capacity`: a child that runs out of GPU
        memory while it shares the worker raises `DeviceBusy`)."""
        self.ev = ev
        self.attempt = attempt
        self.backend = backend
        self.prepared = prepared
        #: Where the evaluation's time goes (`PHASES`).
        self.profile = profile if profile is not None else Profile()
        self.o = ev.opts
        self.task_id = task_id
        self.facts = facts
        self.measure = measure
        #: Whether the harness times (on a GPU when measuring, on the CPU as a rehearsal).
        self.steer = measure or not ev.cuda
        self.warnings = warnings + facts.warnings
        self.trials = int(self.o["trials"])
        #: Processes supervised so far, and the timing of each that passed.
        self.processes = 0
        self.stats: list[dict[str, Any]] = []
        # the current process's state (see `supervise`)
        self.findings = decide.Findings()
        #: The first process's findings, which the result reports (every correctness call).
        self.reported = self.findings
        #: The current process's judge starting beside its harness (`judge_begin`).
        self.judge_start: JudgeStart | None = None
        #: Whether the current process's correctness calls run inside one pausable hold of the
        #: gate (`correctness_hold`), so that each call does not take the gate again.
        self.held = False
        #: The last judged file: its kind and the judge's finding.
        self.last: tuple[str, messages.Judged] | None = None

    def another(self) -> bool:
        """Whether to supervise one more process: the first; then, when the harness times, as
        `timing.another_process` says from the medians so far."""
        if self.processes == 0:
            return True
        return self.steer and another_process([t["median_ms"] for t in self.stats], self.ev.timing, self.measure)

    def final(self) -> dict[str, Any]:
        """The result of a candidate that passed in every process: the first process's
        correctness figures, the timings combined over the processes (`timing.combine`)."""
        f = self.reported
        kw: dict[str, Any] = {"errors": f.worst, "trials": len(f.trials), "trials_passed": f.passed}
        if self.measure:
            timing = combine(self.stats)
            ref = self.facts.timing
            kw.update(candidate_timing=timing, reference_timing=ref)
            kw["speedup"] = ref["median_ms"] / timing["median_ms"] if timing["median_ms"] > 0 else None
            beside, why = in_process_speedup(self.stats, ref, self.ev.timing)
            if beside is not None:
                kw["speedup"] = beside
            else:
                # the pairs did not give the figure: its interval is drawn from both sides apart
                timing.pop("process_reference_samples_ms", None)
            if why:
                self.warn(why)
        return self.result("correct", **kw)

    def warn(self, text: str) -> None:
        if text not in self.warnings:
            self.warnings.append(text)

    def result(self, status: str, hack: str | None = None, log: str = "", **kw: Any) -> dict[str, Any]:
        f = self.findings
        kw.setdefault("errors", f.worst)
        kw.setdefault("trials", len(f.trials))
        kw.setdefault("trials_passed", f.passed)
        kw.setdefault("speed_of_light", self.facts.light)
        kw.setdefault("compile_baseline", self.facts.compiled)
        return self.ev._result(status, hack, log, warnings=self.warnings, hardware=self.facts.build.hardware, **kw)

    def verdict(self, v: decide.Verdict) -> dict[str, Any]:
        return self.result(v.status, v.hack, v.message)

    # -- the judge -------------------------------------------------------------------------
    @staticmethod
    def hand_over(dc: str, dj: str, ready: messages.ResultReady) -> None:
        """Moves one result file from the harness's workspace to the judge's (CPU work: outside
        the GPU gate, so that no timing waits for it)."""
        name = os.path.basename(ready.file)
        if name != ready.file or not name.startswith("out_"):
            raise ChildForged(f"a result file outside the workspace: {ready.file!r}")
        src = os.path.join(dc, name)
        try:
            shutil.copyfile(src, os.path.join(dj, name))
        except OSError as e:
            raise ChildDied(f"the result file {name} cannot be read: {e}", "") from None
        os.unlink(src)

    def judge_begin(self, judge: Child) -> None:
        """Starts the judge beside the harness's own start (`JudgeStart`); `judge_started` waits
        for it."""
        self.judge_start = JudgeStart(self, judge)

    def judge_started(self, judge: Child) -> None:
        """Waits for the judge's start (`judge_begin`; begun now for a harness that skipped its
        ``Ready``), once per process, before its first file (the wait for the gate is not the
        candidate's time: the judge has its own time limit)."""
        start = self.judge_start or JudgeStart(self, judge)
        self.judge_start = None
        msg = start.result()
        if not isinstance(msg, messages.JudgeReady):
            self.busy("the judge", getattr(msg, "message", ""))
            raise RuntimeError(f"the judge did not start: {getattr(msg, 'message', msg.TYPE)}")

    def judge(self, judge: Child, ready: messages.ResultReady) -> messages.Judged:
        """The judge's finding on one result file (handed over by `hand_over`)."""
        request = {
            "file": ready.file,
            "label": ready.label,
            "size_set": ready.size_set,
            "trial": ready.trial,
            "repeat": ready.repeat,
            "diagnose": ready.diagnose,
        }
        return self.ask_judge(judge, request)

    def ask_judge(self, judge: Child, request: dict[str, Any]) -> messages.Judged:
        """The judge's answer to `request` (its file already handed over)."""
        with _judge_failures(judge):
            judge.command(json.dumps(request))
            msg = judge.receive(self.o["run_timeout_s"])
        if isinstance(msg, messages.ReferenceFailed):
            self.busy("the judge", msg.message)
            raise RuntimeError(msg.message)
        if not isinstance(msg, messages.Judged):
            raise RuntimeError(f"unexpected message from the judge: {msg.TYPE}")
        return msg

    def next_file(self, child: Child, judge: Child, dc: str, dj: str, budget: Budget) -> messages.Message:
        """The harness's next message; when it is ready for a call (`messages.Ready`, after its
        ungated work), ``next`` under the shared gate, then its result file handed to the judge
        (ungated) and judged under the shared gate again (the finding is recorded). Returns the
        message that answers. Time spent waiting for the gate is not the candidate's: `budget`
        is extended by it. The gate is held only while GPU work runs: a timing waits for every
        shared holder, and every other candidate waits for the timing."""
        msg = child.receive(budget.left())
        if not isinstance(msg, messages.Ready):
            return msg
        waited = time.monotonic()
        with self.profile.gated(self._short_call()):
            budget.extend(time.monotonic() - waited)
            child.command("next")
            msg = child.receive(budget.left())
        if isinstance(msg, messages.ResultReady):
            self.hand_over(dc, dj, msg)
            waited = time.monotonic()
            with self.profile.gated(self._short_call()):
                budget.extend(time.monotonic() - waited)
                finding = self.judge(judge, msg)
            self.findings.add(msg.kind, finding)
            self.last = (msg.kind, finding)
        return msg

    # -- the run ---------------------------------------------------------------------------
    def supervise(self, child: Child, judge: Child, dc: str, dj: str) -> dict[str, Any] | None:
        """One process: the harness's correctness calls (all in the first process, those that
        guard the timing in a later one), then its timing when it times. The verdict's result
        (with that process's correctness figures), or None when the candidate passed (its timing
        appended to `stats`)."""
        o = self.o
        self.processes += 1
        first = self.processes == 1
        self.findings = decide.Findings()
        if first:
            self.reported = self.findings
        self.last = None
        try:
            with self.profile.phase("start"):
                msg = _sandboxed(child.receive(o["compile_timeout_s"]))
            if isinstance(msg, messages.Ready):
                # the judge starts beside the harness (`JudgeStart`), whose GPU work starts now
                # (CUDA, the task's inputs, the candidate built and compiled by a first call): a
                # start, under the gate's `starting` mode
                self.judge_begin(judge)
                with self.profile.phase("compile"), self.profile.gated(self.ev.gate.starting(child)):
                    child.command("next")
                    msg = _sandboxed(child.receive(o["compile_timeout_s"]))
            if isinstance(msg, messages.Unreproducible):
                broken = BrokenReference(self.task_id, "the task's inputs are not reproducible: " + msg.message)
                self.ev.remember_broken(self.facts.key, broken)
                raise broken
            if isinstance(msg, messages.CompileFailed):
                self.busy("the candidate's harness", msg.message)
                return self.result("compile_error", log=msg.message + "\n" + child.log_tail())
            if isinstance(msg, (messages.Violation, messages.RunFailed)):
                return self.harness_failed(msg, child)
            if not isinstance(msg, messages.Compiled):
                return self.result("runtime_error", log=f"unexpected message from the harness: {msg.TYPE}")
            if msg.weights == "seeded":
                self.warn("weights: seeded")
            # before the correctness hold: waiting inside it for the judge's own start, which
            # waits for the gate, would deadlock with a timing that waits for starts to end
            with self.profile.phase("correctness"):
                self.judge_started(judge)
            with self.correctness_hold(child, judge):
                budget = Budget(o["run_timeout_s"], "the correctness calls (run_timeout_s)", child.paused_s)
                while True:
                    with self.profile.phase("correctness"):
                        msg = self.next_file(child, judge, dc, dj, budget)
                    if isinstance(msg, messages.ResultReady) and self.last:
                        early = decide.early(*self.last)
                        if early:
                            return self.verdict(early)
                        continue
                    if isinstance(msg, messages.ItemFailed):
                        self.busy("the candidate's harness", msg.message)
                        self.findings.add("hidden", msg)
                        continue
                    if isinstance(msg, messages.CorrectnessDone):
                        break
                    return self.harness_failed(msg, child)
                self.ev._trace("correctness_done", process=self.processes, phases=msg.phases)
                trials = self.trials if first else 1
                v = decide.after_correctness(
                    self.findings, msg, float(self.facts.build.work), trials, o, self.backend.LABEL
                )
                if v:
                    return self.verdict(v)
                if not self.steer:
                    return None
                # the timing's CUDA graphs captured (GPU work that times nothing) in the same
                # hold as the correctness calls, so the timing's hold covers its samples only
                with self.profile.phase("correctness"):
                    msg = self.next_file(child, judge, dc, dj, budget)
                if not isinstance(msg, messages.ReadyToTime):
                    return self.harness_failed(msg, child)
        except ChildForged as e:
            return self.result("hacked", "sandbox_escape", str(e))
        except ChildTimeout as e:
            return self.result("timeout", log=f"{e}\n{child.log_tail()}")
        except ChildDied as e:
            return self.result("runtime_error", log=f"{e}\n{e.log}")
        return self.timed(child, judge, dc, dj)

    @contextlib.contextmanager
    def correctness_hold(self, child: Child, judge: Child) -> Iterator[None]:
        """The correctness calls of one process, held as one pausable start of the gate (harness
        and judge stopped together for another candidate's timing) where the gate pauses starts
        and `pause_correctness_for_timing` is on; else each call takes the gate's shared mode in
        turn (`next_file`). With 16 evaluations in flight a timing nearly always holds or waits for
        the GPU, so every one of a process's 20-30 gated calls waited behind it."""
        if not (self.o["pause_correctness_for_timing"] and self.ev.gate.pausing()):
            yield
            return
        asked = time.monotonic()
        with self.profile.gated(self.ev.gate.starting(Together(child, judge))):
            self.profile.add("correctness", time.monotonic() - asked)
            self.held = True
            try:
                yield
            finally:
                self.held = False

    def _short_call(self) -> contextlib.AbstractContextManager[None]:
        """The gate's `shared` mode for one correctness call, or nothing inside the process's
        correctness hold (`correctness_hold`), which already holds the gate for it."""
        return contextlib.nullcontext() if self.held else self.ev.gate.shared()

    def busy(self, what: str, text: str) -> None:
        """`DeviceBusy` when `text`, the failure of `what`, is running out of GPU memory while this
        attempt shared the worker (`capacity`)."""
        self.ev.admission.check(self.attempt, what, text)

    def harness_failed(self, msg: messages.Message, child: Child) -> dict[str, Any]:
        if isinstance(msg, messages.Violation):
            return self.result("hacked", msg.hack, msg.message)
        if isinstance(msg, messages.RunFailed):
            self.busy("the candidate's harness", msg.message)
            return self.result("runtime_error", log=msg.message + "\n" + child.log_tail())
        return self.result("runtime_error", log=f"unexpected message from the harness: {msg.TYPE}")

    def timed(self, child: Child, judge: Child, dc: str, dj: str) -> dict[str, Any] | None:
        """Timing (the GPU alone; the harness has captured its graphs and waits for ``go``) or the
        CPU's rehearsal, then the judge's check of the timed calls picked afterwards: the
        verdict's result, or None (the timing appended to `stats`)."""
        o = self.o
        try:
            with self.profile.gated(self.ev.gate.exclusive(self.profile.add)), self.profile.phase("timing"):
                child.command(f"go {secrets.randbits(62)}")
                msg = child.receive(o["timing_timeout_s"])
            self.ev._trace("timing_done", process=self.processes, type=msg.TYPE, phases=getattr(msg, "phases", None))
            if not isinstance(msg, messages.Timed) or not msg.table:
                return self.harness_failed(msg, child)
            timed = msg
            ready = messages.ResultReady(kind="timed", label="timed calls", file=msg.table, size_set=None, trial=0)
            self.hand_over(dc, dj, ready)
            request = {
                "file": ready.file,
                "label": ready.label,
                "rows": pick(timed.rows, int(self.ev.timing["checks"])),
            }
            waited = time.monotonic()
            with self.profile.phase("timing_check"), self.profile.gated(self.ev.gate.shared()):
                finding = self.ask_judge(judge, request)
            self.ev._trace("timed_judged", process=self.processes, wait_s=round(time.monotonic() - waited, 3))
            self.findings.add("timed", finding)
            early = decide.early("timed", finding)
            if early:
                return self.verdict(early)
        except ChildForged as e:
            return self.result("hacked", "sandbox_escape", f"during timing: {e}")
        except ChildTimeout as e:
            return self.result("timeout", log=f"during timing: {e}\n{child.log_tail()}")
        except ChildDied as e:
            return self.result("runtime_error", log=f"during timing: {e}\n{e.log}")
        v = decide.after_timing(self.findings, timed.timing)
        if v:
            return self.verdict(v)
        self.stats.append(timed.timing)
        if not self.measure:
            return None
        if timed.stream:
            self.warn(
                f"stream check: {timed.stream[0]:.4f} ms on the calling stream vs {timed.stream[1]:.4f} ms to the "
                f"end of a device-wide sync ({timed.stream[2]:.4f} ms after a call that does nothing)"
            )
        if timed.timing["method"] != "cuda_graph":
            beside = timed.timing.get("reference_in_process") or {}
            against = f"against the reference beside it timed by {beside['method']}" if beside else "alone"
            why = timed.capture_error.splitlines()[0][:300] if timed.capture_error else "no CUDA graph"
            self.warn(
                "timed with direct calls from an idle GPU to a device-wide sync (CUDA events), paying its own "
                f"launches, {against}: {why}"
            )
        shared = [r for r in timed.timing.get("rounds", []) if r.get("interfered")]
        if shared:
            self.warn(
                f"{len(shared)} of {len(timed.timing['rounds'])} measurements showed slow calls that the reference "
                "beside the candidate showed alike (candidate / reference slow: "
                + ", ".join(f"{r['slow_share']:.0%} / {r['reference_slow_share']:.0%}" for r in shared)
                + "): interference from outside the candidate, measured again"
            )
        if timed.timing.get("noisy"):
            self.warn(
                "the timing stayed noisy after re-measuring (CV "
                + ", ".join(f"{r['cv']:.2%}" for r in timed.timing.get("rounds", []))
                + f", above timing.max_cv = {float(self.ev.timing.get('max_cv', 0.0)):.1%}): the least noisy is used"
            )
        return None


def pick(rows: int, checks: int) -> list[int]:
    """`checks` of the `rows` timed calls (all when there are no more), drawn by the worker after
    the timing (so the candidate cannot have known), in order."""
    if rows <= checks:
        return list(range(rows))
    chosen: set[int] = set()
    while len(chosen) < checks:
        chosen.add(secrets.randbelow(rows))
    return sorted(chosen)


@contextlib.contextmanager
def _judge_failures(judge: Child) -> Iterator[None]:
    """A judge that dies, hangs or writes a forged line fails the evaluation, not the candidate:
    raised as `RuntimeError` with the judge's log."""
    try:
        yield
    except (ChildDied, ChildTimeout, ChildForged) as e:
        raise RuntimeError(f"the judge (the reference's child) failed: {e}\n{judge.log_tail()}") from None


def _tracing() -> bool:
    """Whether the worker traces its evaluations and the GPU gate's holds on its log (one JSON
    line each; `scripts/gate_trace.py` reads them)."""
    return bool(os.environ.get("KSMITH_EVAL_TRACE"))


def _remove(folders: list[str]) -> None:
    for folder in folders:
        shutil.rmtree(folder, ignore_errors=True)


def _triton_version() -> str:
    try:
        import triton

        return str(triton.__version__)
    except Exception:  # noqa: BLE001
        return "unavailable"


def _gpu_name_driver() -> tuple[str, str]:
    """The name and driver version of the first visible GPU from `nvidia-smi`, or empty strings."""
    row = _gpu_query("name,driver_version").split(",")
    return row[0].strip(), (row[1].strip() if len(row) > 1 else "")


def _gpu_query(fields: str) -> str:
    """`nvidia-smi`'s row of `fields` (comma-separated) for the first visible GPU (it ignores
    `CUDA_VISIBLE_DEVICES`, so that variable's first entry picks the row), or an empty string."""
    import subprocess

    try:
        out = subprocess.run(
            ["nvidia-smi", f"--query-gpu={fields}", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=20,
        )
    except (OSError, subprocess.SubprocessError):
        return ""
    rows = out.stdout.strip().splitlines() if out.returncode == 0 else []
    first = (os.environ.get("CUDA_VISIBLE_DEVICES") or "0").split(",")[0].strip()
    idx = int(first) if first.isdigit() else 0
    if not rows:
        return ""
    return (rows[idx] if idx < len(rows) else rows[0]).strip()
