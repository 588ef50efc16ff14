"""The result fields of the protocol's response, shared by the runner and the sandbox."""

from __future__ import annotations

from typing import Any


def empty_result(status: str) -> dict[str, Any]:
    """A response body with `status` and every other field empty."""
    return {
        "status": status,
        "error_class": None,
        "error_message": None,
        "program": None,
        "output_shapes": [],
        "output_dtypes": [],
        "param_count": None,
        "forward_ms": None,
        "repair_steps": [],
        "attempts": 0,
        "aten_ops": None,
        "aten_trace": [],
        "aten_calls": [],
        "attempt_log": [],
        "size_status": None,
        "size_reason_code": None,
        "size_reason": None,
        "sizes": "{}",
        "alt_sizes": "[]",
        "sized_on": None,
        "size_trials": 0,
        "est_flops": None,
        "est_bytes": None,
        "param_bytes": None,
        "peak_bytes": None,
        "est_ms": None,
        "submodules": [],
    }
