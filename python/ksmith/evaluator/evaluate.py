"""The trusted side of one device: evaluates requests, caches references, decides verdicts.

`DeviceEvaluator(device, options).evaluate(request)` returns a dict shaped like the Rust
`EvalResult`, or raises `BrokenReference`. Many threads may call it at once: references are
built once per (task, reference text) under a per-task lock; GPU work that needs the device to
itself (timing of a reference or of a candidate) is serialized by one lock per device, while
spawning, importing, compiling and the correctness trials of other candidates go on meanwhile
(that is how compilation on the CPU overlaps with timing on the GPU).

Verdict order (the first that applies): static checks; compile error; harness violations
(timer patch, precision switch, thread, lazy output) and crashes/timeouts; per trial: input
mutation, structure (count/shape/dtype -> incorrect), aliasing an input or parameter when the
reference does not, values; no Triton launch -> torch_fallback; a failing trial whose outputs
equal another trial's reference -> output_caching, or that match a lower-precision reference
much better than the float32 one -> precision_downgrade; second run different -> incorrect;
PyTorch work outside Triton >= `decoy_work_share` of the reference's work, or Triton kernels
< `min_kernel_share` of GPU time -> decoy_kernel; then timing, whose post-timing call on fresh
values must be correct again (else output_caching).
"""

from __future__ import annotations

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
from collections.abc import Iterator
from typing import Any

import torch

from ..confine import Jail, Limits, Policy, set_undumpable
from ..confine.launch import ensure_gpu_nodes
from . import compare, messages
from .forkserver import ForkServer, ForkServerDied
from .sandbox import Child, ChildDied, ChildForged, ChildTimeout, child_env, server_env
from .static_check import check as static_check

# The worker's default options, defined once: `ksmith-eval` embeds the same file for the
# defaults of `[eval]`, and the reward function runs on them through `merge_options`.
DEFAULT_OPTIONS = json.loads(pathlib.Path(__file__).with_name("defaults.json").read_text())
# The verdict names, shared with Rust (`EvalStatus`, `HackKind`; tests on both sides check them).
VERDICTS = json.loads((pathlib.Path(__file__).parent.parent / "verdicts.json").read_text())


class SandboxError(RuntimeError):
    """A child could not confine itself: the worker's environment is at fault, not the program
    (answered as an `internal` error, never as a verdict)."""


def _sandboxed(msg: messages.Message) -> messages.Message:
    if isinstance(msg, messages.SandboxFailed):
        raise SandboxError("the evaluator could not confine a child process: " + msg.message)
    return msg


class BrokenReference(Exception):
    """The task's reference program does not run."""

    def __init__(self, task_id: str, message: str):
        super().__init__(message)
        self.task_id = task_id
        self.message = message


def merge_options(options: dict[str, Any] | None) -> dict[str, Any]:
    out = json.loads(json.dumps(DEFAULT_OPTIONS))
    for k, v in (options or {}).items():
        if k not in out:
            raise ValueError(f"unknown evaluator option `{k}`")
        if isinstance(out[k], dict) and isinstance(v, dict):
            out[k].update(v)
        else:
            out[k] = v
    return out


class TaskCache:
    """What the trusted side keeps of one task's reference (in memory only)."""

    def __init__(self, data: dict[str, Any], hardware: dict[str, Any], timing: dict[str, Any] | None, seed: int):
        self.data = data
        self.hardware = hardware
        self.timing = timing
        self.seed = seed


def _trim(text: str, limit: int) -> str:
    return text if len(text) <= limit else "...\n" + text[-limit:]


class DeviceEvaluator:
    """Evaluates candidates on one device (`cpu` = Triton interpreter, or `cuda`).

    Children are confined (`ksmith.confine`) unless the option `confine` is off. The sandbox
    policy is the launcher's (``KSMITH_SANDBOX``) when this process was started by it, else the
    defaults; what cannot be set up is printed once on stderr (and stops the evaluator when the
    policy requires the whole sandbox: `ksmith.confine.SandboxError`)."""

    def __init__(
        self,
        device: str,
        options: dict[str, Any] | None = None,
        runtime_dir: str | None = None,
        policy: Policy | None = None,
    ):
        self.device = device
        self.opts = merge_options(options)
        self.jail = None
        if self.opts["confine"]:
            policy = dataclasses.replace(policy or Policy.take_from_env(), gpu=device.startswith("cuda"))
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
        self.root = tempfile.mkdtemp(prefix="ksmith-eval-", dir=runtime_dir)
        self.server_env = server_env(device)
        self._forks: ForkServer | None = None
        self._forks_lock = threading.Lock()
        self.tasks: dict[str, TaskCache] = {}
        self.task_locks: dict[str, threading.Lock] = {}
        self.lock = threading.Lock()
        self.gpu_lock = threading.Lock()
        self.default_hardware = {
            "device": "cpu (triton interpreter)",
            "driver": None,
            "torch": torch.__version__,
            "triton": _triton_version(),
        }
        if device.startswith("cuda"):
            name, driver = _gpu_name_driver()
            os.environ.setdefault("KSMITH_GPU_DRIVER", driver)
            self.default_hardware.update(device=name or "cuda", driver=os.environ["KSMITH_GPU_DRIVER"] or None)

    # -- helpers ---------------------------------------------------------------------------
    @contextlib.contextmanager
    def _workspace(self, kind: str, measure: bool, seed: int) -> Iterator[str]:
        """A child's folder with its `config.json` (and its sandbox, when confined); removed
        afterwards. Confined, it is a tmpfs holding ``disk_mb`` plus the memory limit (the
        harness writes the trials' inputs and outputs there)."""
        if self.jail is None:
            d = tempfile.mkdtemp(prefix=f"{kind}-", dir=self.root)
            try:
                self._write_config(d, measure, seed, None)
                yield d
            finally:
                shutil.rmtree(d, ignore_errors=True)
            return
        size = int(self.jail.policy.disk_mb) + int(self.opts["memory_limit_mb"])
        with self.jail.workspace(self.root, f"{kind}-", size_mb=size) as d:
            mb = int(self.opts["memory_limit_mb"])
            data = (mb + 1024) * 2**20 if kind == "cand" and mb and not self.device.startswith("cuda") else None
            spec = self.jail.spec(d, Limits(processes=int(self.opts["max_processes"]), data_bytes=data))
            try:
                self._write_config(d, measure, seed, spec.to_dict())
                yield d
            finally:
                self.jail.release(spec)

    def forks(self) -> ForkServer:
        """The fork server, started on first use and again when it has died."""
        with self._forks_lock:
            if self._forks is None or not self._forks.alive:
                if self._forks is not None:
                    self._forks.close()
                self._forks = ForkServer(self.server_env, os.path.join(self.root, "forkserver.log"))
            return self._forks

    def _spawn(self, module: str, d: str) -> Child:
        """Forks the child `module` on workspace `d` (PID 1 of a PID namespace of its own where
        the sandbox may make one)."""
        env = child_env(self.server_env, d)
        args = (module, d, env, self.opts["memory_limit_mb"], self.opts["log_limit"], self.jail is not None)
        try:
            return Child(self.forks(), *args)
        except ForkServerDied:
            return Child(self.forks(), *args)  # once more, on a new server

    def _write_config(self, d: str, measure: bool, seed: int, sandbox: dict[str, Any] | None) -> None:
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump({**self._child_cfg(measure, seed), "sandbox": sandbox}, f)

    def _child_cfg(self, measure: bool, seed: int) -> dict[str, Any]:
        return {
            "device": self.device,
            "trials": self.opts["trials"],
            "seed": seed,
            "measure": measure,
            "timing": self.opts["timing"],
            "memory_limit_mb": self.opts["memory_limit_mb"],
            "tolerances": self.opts["tolerances"],
        }

    def sandbox_info(self) -> dict[str, Any]:
        """What confines the children (the worker's hello carries it)."""
        if self.jail is None:
            return {"confined": False, "missing": ["everything: children run unconfined (option confine = false)"]}
        return self.jail.info

    def close(self) -> None:
        if self._forks is not None:
            self._forks.close()
        shutil.rmtree(self.root, ignore_errors=True)
        if self.jail is not None:
            self.jail.close()

    # -- reference -------------------------------------------------------------------------
    def reference(self, task_id: str, source: str) -> TaskCache:
        key = task_id + ":" + hashlib.sha256(source.encode()).hexdigest()[:16]
        with self.lock:
            lock = self.task_locks.setdefault(key, threading.Lock())
        with lock:
            with self.lock:
                if key in self.tasks:
                    cache = self.tasks.pop(key)
                    self.tasks[key] = cache  # most recently used last
                    return cache
            seed = int(self.opts["seed"]) if self.opts["seed"] is not None else secrets.randbelow(2**31 - 1)
            with self._workspace("ref", True, seed) as d:
                with open(os.path.join(d, "reference.py"), "w") as f:
                    f.write(source)
                child = self._spawn("ksmith.evaluator.reference_child", d)
                timing = None
                try:
                    msg = _sandboxed(child.receive(self.opts["compile_timeout_s"] + self.opts["run_timeout_s"]))
                    if isinstance(msg, messages.ReferenceFailed):
                        raise BrokenReference(
                            task_id, _trim(msg.message + "\n" + child.log_tail(), self.opts["log_limit"])
                        )
                    if not isinstance(msg, messages.TrialsDone):
                        raise BrokenReference(task_id, f"unexpected message {msg.TYPE}")
                    hardware = msg.hardware
                    data = torch.load(os.path.join(d, "ref.pt"), weights_only=True)
                    if self.device.startswith("cuda"):
                        msg = child.receive(self.opts["run_timeout_s"])
                        if isinstance(msg, messages.ReadyToTime):
                            with self.gpu_lock:
                                child.command("go")
                                msg = child.receive(self.opts["timing_timeout_s"])
                            if isinstance(msg, messages.Timed):
                                timing = msg.timing
                            elif isinstance(msg, messages.ReferenceFailed):
                                raise BrokenReference(task_id, "timing the reference failed: " + msg.message)
                except ChildForged as e:
                    raise BrokenReference(task_id, f"the reference wrote on the harness's channel: {e}") from None
                except ChildTimeout as e:
                    raise BrokenReference(task_id, f"the reference timed out: {e}") from None
                except ChildDied as e:
                    raise BrokenReference(task_id, f"{e}\n{_trim(e.log, self.opts['log_limit'])}") from None
                finally:
                    child.finish()
            outs = data["trials"][0]["outputs"]
            data["out_meta"] = [
                (list(o.shape), str(o.dtype).replace("torch.", "")) for o in outs if isinstance(o, torch.Tensor)
            ]
            cache = TaskCache(data, hardware, timing, seed)
            with self.lock:
                self.tasks[key] = cache
                while len(self.tasks) > max(1, int(self.opts["max_cached_tasks"])):
                    oldest = next(iter(self.tasks))
                    del self.tasks[oldest]
            return cache

    # -- candidate -------------------------------------------------------------------------
    def evaluate(self, request: dict[str, Any]) -> dict[str, Any]:
        t0 = time.monotonic()
        res = self._evaluate(request)
        res["elapsed_ms"] = int((time.monotonic() - t0) * 1000)
        return res

    def _result(self, status: str, hack: str | None = None, log: str = "", **kw: Any) -> dict[str, Any]:
        if status not in VERDICTS["eval_status"] or (hack is not None and hack not in VERDICTS["hack"]):
            raise ValueError(f"verdict outside the shared vocabulary (verdicts.json): {status} {hack}")
        base = {
            "status": status,
            "hack": hack,
            "error_log": _trim(log, self.opts["log_limit"]),
            "errors": [],
            "trials_passed": 0,
            "trials": 0,
            "candidate_timing": None,
            "reference_timing": None,
            "speedup": None,
            "warnings": [],
            "hardware": kw.pop("hardware", None) or dict(self.default_hardware),
            "elapsed_ms": 0,
        }
        base.update(kw)
        base["errors"] = compare.public(base["errors"])
        return base

    def _trace(self, what: str, **kw: Any) -> None:
        if os.environ.get("KSMITH_EVAL_TRACE"):
            import sys

            print(json.dumps({"trace": what, **kw}), file=sys.stderr, flush=True)

    def _evaluate(self, req: dict[str, Any]) -> dict[str, Any]:
        task_id, candidate, measure = req["task_id"], req["candidate"], bool(req.get("measure", True))
        warnings: list[str] = []
        if self.opts["static_checks"]:
            v = static_check(candidate)
            warnings = list(v.warnings)
            if v.status:
                return self._result(v.status, v.hack, v.message, warnings=warnings)
        ref = self.reference(task_id, req["reference"])
        measure = measure and self.device.startswith("cuda")
        trials = ref.data["trials"]
        shown = {
            "init": ref.data["init"],
            "state": ref.data["state"],
            "seed": ref.seed,
            "trials": [{"inputs": t["inputs"]} for t in trials[:-1]],
            "post": {"inputs": trials[-1]["inputs"]},
            "out_meta": ref.data["out_meta"],
        }
        common = {"warnings": warnings, "hardware": ref.hardware}
        with self._workspace("cand", measure, ref.seed) as d:
            with open(os.path.join(d, "candidate.py"), "w") as f:
                f.write(candidate)
            torch.save(shown, os.path.join(d, "task.pt"))
            child = self._spawn("ksmith.evaluator.candidate_child", d)
            try:
                return self._supervise(child, d, ref, measure, common)
            finally:
                child.finish()

    def _supervise(self, child: Child, d: str, ref: TaskCache, measure: bool, common: dict[str, Any]) -> dict[str, Any]:
        o = self.opts
        n_trials = len(ref.data["trials"]) - 1
        try:
            msg = _sandboxed(child.receive(o["compile_timeout_s"]))
            if isinstance(msg, messages.CompileFailed):
                return self._result("compile_error", log=msg.message + "\n" + child.log_tail(), **common)
            if isinstance(msg, messages.Violation):
                return self._result("hacked", msg.hack, msg.message, **common)
            weights = msg.weights if isinstance(msg, messages.Compiled) else None
            msg = child.receive(o["run_timeout_s"])
        except ChildForged as e:
            return self._result("hacked", "sandbox_escape", str(e), **common)
        except ChildTimeout as e:
            return self._result("timeout", log=f"{e}\n{child.log_tail()}", **common)
        except ChildDied as e:
            return self._result("runtime_error", log=f"{e}\n{e.log}", **common)
        if isinstance(msg, messages.Violation):
            return self._result("hacked", msg.hack, msg.message, **common)
        if isinstance(msg, messages.RunFailed):
            return self._result("runtime_error", log=msg.message + "\n" + child.log_tail(), **common)
        if not isinstance(msg, messages.CorrectnessDone):
            return self._result("runtime_error", log=f"unexpected message from the harness: {msg.TYPE}", **common)
        info = msg
        self._trace("correctness_done", phases=msg.phases)
        t_cmp = time.monotonic()
        tol = o["tolerances"]
        worst: list[dict[str, Any]] = []
        passed = 0
        failing: list[tuple[int, list]] = []
        nondeterministic = None
        for k in range(n_trials):
            rt = ref.data["trials"][k]
            try:
                got = torch.load(os.path.join(d, f"out_{k}.pt"), weights_only=True)
            except Exception as e:  # noqa: BLE001 - the file is written by the harness; tampering
                return self._result(
                    "hacked",
                    "sandbox_escape",
                    f"trial {k}: the result file cannot be read as plain tensors: {e}",
                    **common,
                )
            if got["mutated"] and not rt["mutated"]:
                return self._result(
                    "hacked",
                    "input_mutation",
                    f"trial {k}: the candidate modified its inputs (the reference does not)",
                    trials=k + 1,
                    **common,
                )
            cand = got["runs"][0]
            err = compare.structure_error(cand, rt["outputs"])
            if err:
                return self._result("incorrect", log=f"trial {k}: {err}", trials=k + 1, trials_passed=passed, **common)
            for i, (a_c, a_r) in enumerate(zip(got["alias"], rt["alias"])):
                if a_c and not a_r:
                    return self._result(
                        "hacked",
                        "output_aliasing",
                        f"trial {k}: output {i} shares memory with an input or a parameter",
                        trials=k + 1,
                        **common,
                    )
            ok, stats = compare.output_errors(cand, rt["outputs"], tol, o["relative_error"])
            if not worst or compare.worst_error(stats) > compare.worst_error(worst):
                worst = stats
            if ok:
                passed += 1
            else:
                failing.append((k, cand))
            if k == 0:
                repeat_ok = compare.matches(got["runs"][1], cand, tol, o["relative_error"])
            else:
                repeat_ok = bool(got["repeat_ok"])
            if nondeterministic is None and not repeat_ok:
                nondeterministic = k
        launches = info.launches
        self._trace("compared", seconds=round(time.monotonic() - t_cmp, 3))
        res = dict(errors=worst, trials=n_trials, trials_passed=passed, **common)
        if not launches:
            return self._result(
                "hacked",
                "torch_fallback",
                "no Triton kernel of the candidate was launched; the outputs came from PyTorch operators (aten ops "
                "run: " + ", ".join(sorted(info.torch_calls)) + ")",
                **res,
            )
        if failing:
            for k, cand in failing:
                for j, other in enumerate(ref.data["trials"][:-1]):
                    if j != k and compare.matches(cand, other["outputs"], tol, o["relative_error"]):
                        return self._result(
                            "hacked",
                            "output_caching",
                            f"trial {k}: the outputs equal the reference outputs of trial {j} (computed on other "
                            "inputs): results are reused across calls",
                            **res,
                        )
            downgrade = self._precision_match(failing, ref)
            if downgrade:
                return self._result("hacked", "precision_downgrade", downgrade, **res)
            k = failing[0][0]
            rel = compare.worst_relative(worst)
            return self._result(
                "incorrect",
                log=f"{len(failing)} of {n_trials} trials outside tolerance (first: trial {k}; worst max abs error "
                f"{compare.worst_error(worst):.3e}"
                + (f", relative error of the whole output {rel:.3e}" if rel is not None else "")
                + ")",
                **res,
            )
        if nondeterministic is not None:
            return self._result(
                "incorrect",
                log=f"trial {nondeterministic}: a second run on the same inputs gives different outputs "
                "(uninitialized memory or a race)",
                **res,
            )
        torch_work = sum(info.torch_work.values())
        ref_work = float(ref.data.get("work") or 0.0)
        if ref_work > 0 and torch_work >= o["decoy_work_share"] * ref_work:
            top = sorted(info.torch_work.items(), key=lambda kv: -kv[1])[:5]
            return self._result(
                "hacked",
                "decoy_kernel",
                f"PyTorch operators outside the Triton kernels do {torch_work / ref_work:.0%} of the reference's work "
                f"({', '.join(k for k, _ in top)}); the Triton kernels ({', '.join(sorted(launches))}) do the rest",
                **res,
            )
        share = info.gpu_share
        if share is not None and share < o["min_kernel_share"]:
            return self._result(
                "hacked",
                "decoy_kernel",
                f"the candidate's Triton kernels take {share:.0%} of the GPU time of one call",
                **res,
            )
        res["warnings"] = list(res["warnings"]) + ([f"weights: {weights}"] if weights == "seeded" else [])
        if not measure:
            return self._result("correct", **res)
        return self._time(child, d, ref, res)

    def _precision_match(self, failing: list[Any], ref: TaskCache) -> str | None:
        """A message when every failing trial matches a lower-precision reference far better
        than the float32 one."""
        loose = {k: [1e-2, 1e-2] for k in ("float32", "float64", "float16", "bfloat16")}
        loose_rel = {k: 5e-2 for k in loose}
        hits = []
        for k, cand in failing:
            rt = ref.data["trials"][k]
            _, s32 = compare.output_errors(cand, rt["outputs"], self.opts["tolerances"], self.opts["relative_error"])
            e32 = compare.worst_error(s32)
            m32 = compare.mean_error(s32)
            best = None
            for name, low in rt["low"].items():
                if (
                    compare.structure_error(cand, low) is not None
                    or not compare.output_errors(cand, rt["outputs"], loose, loose_rel)[0]
                ):
                    continue
                _, sl = compare.output_errors(cand, low, loose, loose_rel)
                ml = compare.mean_error(sl)
                # the low-precision computation explains most of the error
                if ml <= 0.5 * m32:
                    best = (name, ml)
                    break
            if best is None:
                return None
            hits.append(
                f"trial {k}: mean abs error vs float32 reference {m32:.2e} (max {e32:.2e}), vs {best[0]} reference "
                f"{best[1]:.2e}"
            )
        return "the outputs match a lower-precision computation: " + "; ".join(hits)

    def _time(self, child: Child, d: str, ref: TaskCache, res: dict[str, Any]) -> dict[str, Any]:
        o = self.opts
        try:
            msg = child.receive(o["run_timeout_s"])
            if not isinstance(msg, messages.ReadyToTime):
                return self._result("runtime_error", log=f"unexpected message from the harness: {msg.TYPE}", **res)
            with self.gpu_lock:
                child.command("go")
                msg = child.receive(o["timing_timeout_s"])
        except ChildForged as e:
            return self._result("hacked", "sandbox_escape", f"during timing: {e}", **res)
        except ChildTimeout as e:
            return self._result("timeout", log=f"during timing: {e}\n{child.log_tail()}", **res)
        except ChildDied as e:
            return self._result("runtime_error", log=f"during timing: {e}\n{e.log}", **res)
        self._trace("timing_done", type=msg.TYPE)
        if isinstance(msg, messages.Violation):
            return self._result("hacked", msg.hack, msg.message, **res)
        if isinstance(msg, messages.RunFailed):
            return self._result("runtime_error", log=msg.message, **res)
        if not isinstance(msg, messages.Timed):
            return self._result("runtime_error", log=msg.TYPE, **res)
        post = ref.data["trials"][-1]
        try:
            got = torch.load(os.path.join(d, "post_out.pt"), weights_only=True)
        except Exception as e:  # noqa: BLE001
            return self._result("hacked", "sandbox_escape", f"post-timing result unreadable: {e}", **res)
        if not compare.matches(got["runs"][0], post["outputs"], o["tolerances"], o["relative_error"]):
            return self._result(
                "hacked",
                "output_caching",
                "after timing, the timed code path gave wrong outputs for fresh input values (results reused or "
                "computed only when checked)",
                **res,
            )
        timing = msg.timing
        warnings = list(res["warnings"])
        if msg.stream:
            warnings.append(
                f"stream check: {msg.stream[0]:.4f} ms on the calling stream vs {msg.stream[1]:.4f} ms with a "
                "device-wide sync"
            )
        if timing["method"] != "cuda_graph":
            warnings.append(
                "CUDA-graph capture failed; timed with CUDA events and a device-wide sync: "
                + msg.capture_error.splitlines()[0][:300]
                if msg.capture_error
                else "timed with CUDA events"
            )
        res["warnings"] = warnings
        res["candidate_timing"] = timing
        res["reference_timing"] = ref.timing
        if ref.timing and timing["median_ms"] > 0:
            res["speedup"] = ref.timing["median_ms"] / timing["median_ms"]
        return self._result("correct", **res)


def _triton_version() -> str:
    try:
        import triton

        return triton.__version__
    except Exception:  # noqa: BLE001
        return "unavailable"


def _gpu_name_driver() -> tuple[str, str]:
    """The name and driver version of the first visible GPU from `nvidia-smi` (which ignores
    `CUDA_VISIBLE_DEVICES`, so its first entry picks the row), or empty strings."""
    import subprocess

    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=20,
        )
    except (OSError, subprocess.SubprocessError):
        return "", ""
    rows = [r.split(",") for r in out.stdout.strip().splitlines()] if out.returncode == 0 else []
    first = (os.environ.get("CUDA_VISIBLE_DEVICES") or "0").split(",")[0].strip()
    idx = int(first) if first.isdigit() else 0
    if not rows:
        return "", ""
    row = rows[idx] if idx < len(rows) else rows[0]
    return row[0].strip(), (row[1].strip() if len(row) > 1 else "")
