"""The warm probe worker: ``python -m ksmith.probe.worker``, started by the sandbox launcher
(``python -m ksmith.confine --policy JSON -- -m ksmith.probe.worker``), which passes the sandbox
policy (workspace folder and size, process limit, whether all of it is required).

Imports torch once (one intra-op thread; the only ops it runs are on the ``meta`` device, which
computes nothing and starts no thread, so forking is safe), then speaks JSON lines on
stdin/stdout:

- at start it writes ``{"v": 1, "type": "hello", "pid": ..., "torch": "...", "sandbox": {...}}``;
- for each request line ``{"v": 1, "id": "...", "program": "...", "seed": 42, "timeout_s": 30,
  "memory_mb": 4096, "max_steps": 16, "restarts": 3, "output_cap_bytes": 1048576,
  "override": null, "sizing": {...} or null}`` it writes one response line ``{"v": 1, "type": "result", "id": "...",
  "status": ..., ...}`` (the fields of ``ksmith_core::tables::ProbeRow``);
- a request it cannot parse gets ``{"v": 1, "type": "error", "id": null, "message": "..."}``.

The protocol goes through a private copy of the original stdout; the worker's own fd 1 points
at stderr and children close the protocol descriptors, so nothing a module prints can reach it.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys

from ..confine import Policy, SandboxError
from ..confine.policy import EXIT_UNAVAILABLE
from . import PROTOCOL_VERSION
from .result import empty_result


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.parse_args(argv)
    policy = Policy.take_from_env()

    for key in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[key] = "1"
    os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
    proto_fd = os.dup(1)
    os.dup2(2, 1)
    proto = os.fdopen(proto_fd, "w", buffering=1, encoding="utf-8")
    requests = os.fdopen(os.dup(0), "r", encoding="utf-8")
    close_in_children = [proto_fd, requests.fileno()]

    import torch

    torch.set_num_threads(1)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:
        pass

    try:  # imported here once rather than in every child (seeding touches numpy.random)
        import numpy.random  # noqa: F401
    except ImportError:
        pass

    from .execute import run_request, warm_aten_recording
    from .sandbox import Sandbox
    from .work import warm_up

    # The sizing step's meta-device tracing imports PyTorch's Python decompositions on first use
    # (seconds): once here, not in every child.
    warm_up(torch)

    try:
        sandbox = Sandbox(policy)
    except SandboxError as e:
        sys.stderr.write(f"{e}\n")  # the one line: what is missing and how to fix it
        return EXIT_UNAVAILABLE
    # Only torch's own code runs here (a tiny nn.Linear), never a module's.
    warm_aten_recording(torch)
    # Everything imported so far moves to the permanent generation: a garbage collection in a
    # forked child then leaves those pages alone instead of copying them all (measured: a full
    # collection in a child costs ~100 ms of CPU without this, ~10 ms with it).
    gc.collect()
    gc.freeze()

    def send(obj) -> None:
        obj["v"] = PROTOCOL_VERSION
        proto.write(json.dumps(obj) + "\n")
        proto.flush()

    send(
        {
            "type": "hello",
            "pid": os.getpid(),
            "torch": torch.__version__,
            "python": sys.version.split()[0],
            "sandbox": sandbox.info,
        }
    )

    def runner(request):
        try:
            return run_request(request, torch)
        except BaseException as exc:  # noqa: BLE001 - reported, never raised past the child
            out = empty_result("crashed")
            out["error_class"] = type(exc).__name__
            out["error_message"] = f"probe runner error: {exc}"[:2000]
            return out

    try:
        for line in requests:
            if not line.strip():
                continue
            try:
                request = json.loads(line)
                if not isinstance(request, dict) or not isinstance(request.get("program"), str):
                    raise ValueError("a request is an object with a string `program`")
                if request.get("v") != PROTOCOL_VERSION:
                    raise ValueError(f"protocol version {request.get('v')!r}, this worker speaks {PROTOCOL_VERSION}")
            except ValueError as exc:
                send({"type": "error", "id": None, "message": str(exc)})
                continue
            response = sandbox.run(request, close_in_children, runner)
            response["type"] = "result"
            response["id"] = request.get("id")
            send(response)
    finally:
        sandbox.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
