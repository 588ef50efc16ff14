"""Whether the worker's GPU still works: asked after an evaluation went wrong in a way a failing
device causes (an internal error, a reference that did not run, a candidate's timeout), so that a
device with a sticky CUDA error or a hung kernel is taken out of the pool and its request
evaluated on another device, instead of a task being called broken or a candidate judged on a
dead GPU.

The check runs in a fresh process (no CUDA state of the worker's, which never initializes CUDA
itself): it starts CUDA on the worker's device, runs a small matrix product and synchronizes,
within `CHECK_TIMEOUT_S`. On the CPU there is nothing to check.
"""

from __future__ import annotations

import subprocess
import sys
from typing import Any

#: Longest a working device takes to start CUDA and run the check (a fresh interpreter imports
#: torch first).
CHECK_TIMEOUT_S = 90.0

_CHECK = (
    "import torch\n"
    "x = torch.randn(256, 256, device='cuda')\n"
    "s = float((x @ x).sum().item())\n"
    "torch.cuda.synchronize()\n"
    "assert s == s, 'NaN from a matrix product of finite numbers'\n"
    "print('ok')\n"
)

#: Statuses of a candidate's result after which the device is checked: a hung kernel ends as the
#: candidate's timeout, and its device may not recover from the kill.
CHECKED_STATUSES = frozenset({"timeout"})


def device_failure(env: dict[str, str], timeout_s: float = CHECK_TIMEOUT_S) -> str | None:
    """Why the GPU of `env` (the fork server's environment: its ``CUDA_VISIBLE_DEVICES``) fails
    the check, or None when it passes."""
    check_env = {k: v for k, v in env.items() if k != "PYTORCH_NVML_BASED_CUDA_CHECK"}
    try:
        out = subprocess.run(
            [sys.executable, "-s", "-c", _CHECK],
            env=check_env,
            capture_output=True,
            text=True,
            timeout=timeout_s,
        )
    except subprocess.TimeoutExpired:
        return f"the device check (a small matrix product) did not finish within {timeout_s:.0f} s"
    except OSError as e:
        return f"the device check could not start: {e}"
    if out.returncode != 0 or out.stdout.strip() != "ok":
        tail = (out.stderr or out.stdout).strip().splitlines()[-3:]
        return f"the device check failed (exit {out.returncode}): " + " | ".join(tail)
    return None


def after(evaluator: Any, result: dict[str, Any] | None) -> str | None:
    """After a request: why the evaluator's device failed, when it is a GPU and the request ended
    as an error (`result` None) or with a status in `CHECKED_STATUSES`; else None."""
    if not getattr(evaluator, "cuda", False):
        return None
    if result is not None and result.get("status") not in CHECKED_STATUSES:
        return None
    failure: str | None = evaluator.device_failure()
    return failure
