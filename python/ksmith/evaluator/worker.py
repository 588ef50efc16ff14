"""The long-lived worker: one per device, speaking the JSON-lines protocol on stdin/stdout.

The protocol channel is a private duplicate of the original stdout; descriptor 1 is pointed at
stderr so no stray print (of a library, or of Triton) can corrupt it. Candidates never run in
this process: each runs in its own child (see `sandbox`), so this process never initializes
CUDA either. Requests are served concurrently, one thread each; results are written as they
complete. An evaluation whose child ran out of GPU memory beside others is run again by the
evaluator (`capacity`), never answered as an error; the first time the worker lowers how many it
runs at once, its next answer carries a `notice` the pool prints.
"""

from __future__ import annotations

import os
import sys
import threading
from typing import Any

from ..confine import SandboxError
from ..confine.policy import EXIT_UNAVAILABLE
from . import health, protocol
from .backend import BackendUnavailable
from .evaluate import BrokenReference, DeviceEvaluator


def hello(device: str, evaluator: DeviceEvaluator | None = None) -> dict[str, Any]:
    import torch

    from .evaluate import _triton_version

    out = {
        "type": "hello",
        "device": device,
        "pid": os.getpid(),
        "torch": torch.__version__,
        "triton": _triton_version(),
    }
    if evaluator is not None:
        out["sandbox"] = evaluator.sandbox_info()
    return out


def error_body(e: BaseException, task_id: str | None = None) -> dict[str, Any]:
    if isinstance(e, BrokenReference):
        return {"kind": "broken_reference", "message": e.message, "task_id": e.task_id}
    if isinstance(e, BackendUnavailable):
        return {"kind": "backend_unavailable", "message": str(e), "task_id": task_id}
    if isinstance(e, protocol.ProtocolError):
        return {"kind": "bad_request", "message": str(e), "task_id": task_id}
    return {"kind": "internal", "message": f"{type(e).__name__}: {e}", "task_id": task_id}


def answer(evaluator: Any, msg: dict[str, Any]) -> dict[str, Any]:
    """The worker's answer to one `evaluate` message: its result with the evaluation's profile
    (seconds by phase, `DeviceEvaluator.evaluate_profiled`), or its error; to one `preflight`
    message: what building the task's reference gave (`DeviceEvaluator.preflight_profiled`), or
    its error. After an error or a result that a failing GPU may cause, the device is checked
    (`health`): when it fails, the answer is a `device_failed` error instead, so the pool takes
    the device out and sends the request to another one (a reference that fails on a sound GPU
    stays the task's `broken_reference`)."""
    rid = msg.get("id")
    task_id = None
    preflight = msg.get("type") == "preflight"
    try:
        req = protocol.check_request(msg.get("request"), candidate=not preflight)
        task_id = req["task_id"]
        if preflight:
            built, profile = evaluator.preflight_profiled(req)
        else:
            result, profile = evaluator.evaluate_profiled(req)
    except BaseException as e:  # noqa: BLE001 - every failure is answered
        body = error_body(e, task_id)
        if body["kind"] in ("internal", "broken_reference"):
            failed = health.after(evaluator, None)
            if failed:
                after = " | ".join(str(body["message"]).strip().splitlines()[-3:])[-400:]
                message = f"{failed} (after: {after})"
                body = {"kind": "device_failed", "message": message, "task_id": task_id}
        return {"type": "error", "id": rid, "error": body}
    if preflight:
        return {"type": "preflighted", "id": rid, "reference": built, "profile": profile}
    failed = health.after(evaluator, result)
    if failed:
        message = f"{failed} (after a candidate's {result.get('status')})"
        return {"type": "error", "id": rid, "error": {"kind": "device_failed", "message": message, "task_id": task_id}}
    return {"type": "result", "id": rid, "result": result, "profile": profile}


def with_notice(evaluator: DeviceEvaluator, reply: dict[str, Any]) -> dict[str, Any]:
    """`reply` with the evaluator's notice, when it has one to give (once: the GPU ran out of
    memory and the worker now runs fewer evaluations at once, `capacity`); the pool prints it."""
    notice = evaluator.admission.take_notice()
    return {**reply, "notice": notice} if notice else reply


def run_worker(device: str, options: dict[str, Any] | None) -> int:
    out_fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    out = os.fdopen(out_fd, "w", buffering=1)
    write_lock = threading.Lock()

    def send(msg: dict[str, Any]) -> None:
        line = protocol.encode(msg)
        with write_lock:
            out.write(line + "\n")
            out.flush()

    try:
        evaluator = DeviceEvaluator(device, options)
    except SandboxError as e:
        print(e, file=sys.stderr, flush=True)  # the one line: what is missing and how to fix it
        return EXIT_UNAVAILABLE
    send(hello(device, evaluator))
    threads: list[threading.Thread] = []

    def serve(msg: dict[str, Any]) -> None:
        send(with_notice(evaluator, answer(evaluator, msg)))

    try:
        for line in sys.stdin:
            if not line.strip():
                continue
            try:
                msg = protocol.parse(line)
            except protocol.ProtocolError as e:
                send({"type": "error", "id": None, "error": {"kind": "protocol", "message": str(e), "task_id": None}})
                continue
            kind = msg["type"]
            if kind == "shutdown":
                break
            if kind == "ping":
                send({"type": "pong", "id": msg.get("id")})
            elif kind in ("evaluate", "preflight"):
                t = threading.Thread(target=serve, args=(msg,), daemon=True)
                t.start()
                threads.append(t)
                threads = [x for x in threads if x.is_alive()]
            else:
                send(
                    {
                        "type": "error",
                        "id": msg.get("id"),
                        "error": {"kind": "protocol", "message": f"unknown message type `{kind}`", "task_id": None},
                    }
                )
        for t in threads:
            t.join()
    finally:
        evaluator.close()
    return 0
