"""The versioned JSON-lines protocol between the Rust client and a worker (and, wrapped in HTTP,
a remote endpoint).

Version 1. One JSON object per line, UTF-8. Every message has `"v": 1` and a `"type"`.

Worker -> client, once at start:
    {"v":1,"type":"hello","device":"cpu"|"cuda","pid":N,"torch":"...","triton":"..."}
Client -> worker:
    {"v":1,"type":"evaluate","id":"<any string>","request":{task_id, reference, candidate, measure,
                                                               alt_sizes, backend}}
    (`alt_sizes`, optional: the task's recorded size sets, a list of {constant name: integer}; see
    `shapes`; `backend`, optional: the candidate's kernel language, `triton` (the default) or
    `cuda`, see `backends`)
    {"v":1,"type":"preflight","id":"...","request":{task_id, reference, alt_sizes, backend}}
    (the task's reference built and run on the worker's device as its first evaluation does,
    the facts kept for its evaluations, before any candidate exists; `candidate` is not read)
    {"v":1,"type":"ping","id":"..."}                 -> {"v":1,"type":"pong","id":"..."}
    {"v":1,"type":"shutdown"}                        (or end of input): finish in-flight requests, exit
Worker -> client, per request, in completion order (many may be in flight):
    {"v":1,"type":"result","id":"...","result":{EvalResult},"profile":{phase: seconds}}
    {"v":1,"type":"preflighted","id":"...","reference":{task_id, reference_ms, warnings, elapsed_ms},
     "profile":{phase: seconds}}                    (to `preflight`: the reference runs here;
                                                     `reference_ms`: its median, null on the CPU)
    {"v":1,"type":"error","id":"...","error":{"kind":"broken_reference"|"bad_request"|"protocol"|"internal"
                                                      |"device_failed"|"backend_unavailable",
                                              "message":"...","task_id":"..."}}
    (`profile`, optional: where the evaluation's time went, `evaluate.PHASES`; `notice`, optional on
    either: one line the client prints once, e.g. that the GPU ran out of memory and the worker now
    runs fewer evaluations at once, see `capacity`; `device_failed`: the
    worker's GPU failed its check after the request went wrong, see `health`: the request was not
    evaluated and the client sends it to another device; `backend_unavailable`: the request's
    backend cannot run on this worker, e.g. no nvcc; the message names what is missing)
HTTP (`serve` mode): POST /v1/evaluate with {"v":1,"request":{...}} answers 200 with
{"v":1,"result":{...}} or 4xx/5xx with {"v":1,"error":{...}}; POST /v1/preflight with the same
body answers 200 with {"v":1,"reference":{...}} or the same errors; GET /v1/health answers the
hello.
`EvalResult` is exactly the serde form of `ksmith_core::evaluation::EvalResult` (snake_case
enums, non-finite floats sent as the largest double).
"""

from __future__ import annotations

import json
from typing import Any

from ..shared.versions import EVAL_PROTOCOL

VERSION = EVAL_PROTOCOL
REQUEST_FIELDS = ("task_id", "reference", "candidate")
#: What a `preflight` request must hold (its candidate, when sent, is not read).
PREFLIGHT_FIELDS = ("task_id", "reference")


class ProtocolError(Exception):
    """A message that is not protocol version 1."""


def parse(line: str) -> dict[str, Any]:
    """Decodes one line; raises `ProtocolError` for anything but a v1 object with a type."""
    try:
        msg = json.loads(line)
    except ValueError as e:
        raise ProtocolError(f"not JSON: {e}") from None
    if not isinstance(msg, dict) or "type" not in msg:
        raise ProtocolError("a message must be an object with a `type`")
    if msg.get("v") != VERSION:
        raise ProtocolError(f"protocol version {msg.get('v')!r} is not supported (this worker speaks {VERSION})")
    return msg


def check_request(req: object, candidate: bool = True) -> dict[str, Any]:
    """Validates an evaluate request's body (a preflight's: `candidate` False, none needed)."""
    if not isinstance(req, dict):
        raise ProtocolError("`request` must be an object")
    for f in REQUEST_FIELDS if candidate else PREFLIGHT_FIELDS:
        if not isinstance(req.get(f), str):
            raise ProtocolError(f"`request.{f}` must be a string")
    if "measure" in req and not isinstance(req["measure"], bool):
        raise ProtocolError("`request.measure` must be a boolean")
    if req.get("backend") is not None:
        from .backends import names

        if req["backend"] not in names():
            raise ProtocolError(f"`request.backend` must be one of {', '.join(names())}, not {req['backend']!r}")
    if req.get("alt_sizes") is not None:
        from .shapes import parse_sets

        try:
            parse_sets(req["alt_sizes"])
        except ValueError as e:
            raise ProtocolError(f"`request.{e}`") from None
    return req


def encode(msg: dict[str, Any]) -> str:
    """One line, with `v` set."""
    msg = {"v": VERSION, **msg}
    return json.dumps(msg, allow_nan=False)
