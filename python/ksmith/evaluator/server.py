"""HTTP mode of the worker (`python -m ksmith.evaluator serve --port P`): the same protocol,
one request per POST, for evaluators on other machines (e.g. one per GPU on a Ray cluster)."""

from __future__ import annotations

import json
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from ..confine import Policy
from . import protocol
from .backend import BackendUnavailable
from .evaluate import BrokenReference, DeviceEvaluator
from .worker import error_body, hello

MAX_BODY = 16 * 2**20


def make_server(
    host: str, port: int, device: str, options: dict[str, Any] | None, policy: Policy | None = None
) -> tuple[ThreadingHTTPServer, DeviceEvaluator]:
    """The HTTP endpoint of one local evaluator on `device`, and the evaluator (to close)
    (sandbox `policy`: the launcher's by default; `ksmith.confine.SandboxError` when it requires
    what is missing)."""
    evaluator = DeviceEvaluator(device, options, policy=policy)
    server = serve_with(host, port, evaluator.evaluate, evaluator.preflight, lambda: hello(device, evaluator))
    return server, evaluator


def serve_with(
    host: str,
    port: int,
    evaluate: Callable[[dict[str, Any]], dict[str, Any]],
    preflight: Callable[[dict[str, Any]], dict[str, Any]],
    health: Callable[[], dict[str, Any]],
) -> ThreadingHTTPServer:
    """An HTTP server speaking the protocol in front of any `evaluate(request) -> result`
    callable (a local `DeviceEvaluator`, or a pool of Ray actors), with its
    `preflight(request) -> reference` (`POST /v1/preflight`); `health()` answers
    `GET /v1/health`. `evaluate` and `preflight` may raise `BrokenReference` (HTTP 422)."""

    class Handler(BaseHTTPRequestHandler):
        def _answer(self, code: int, body: dict[str, Any]) -> None:
            data = protocol.encode(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:  # noqa: N802 - http.server naming
            if self.path == "/v1/health":
                self._answer(200, health())
            else:
                self._answer(
                    404,
                    {
                        "type": "error",
                        "error": {"kind": "bad_request", "message": f"no route {self.path}", "task_id": None},
                    },
                )

        def do_POST(self) -> None:  # noqa: N802
            routes = {"/v1/evaluate": ("result", evaluate, True), "/v1/preflight": ("reference", preflight, False)}
            if self.path not in routes:
                self._answer(
                    404,
                    {
                        "type": "error",
                        "error": {"kind": "bad_request", "message": f"no route {self.path}", "task_id": None},
                    },
                )
                return
            length = int(self.headers.get("Content-Length") or 0)
            if length <= 0 or length > MAX_BODY:
                self._answer(
                    413 if length > MAX_BODY else 400,
                    {
                        "type": "error",
                        "error": {"kind": "bad_request", "message": f"body of {length} bytes", "task_id": None},
                    },
                )
                return
            task_id = None
            try:
                body = json.loads(self.rfile.read(length))
                if not isinstance(body, dict) or body.get("v") != protocol.VERSION:
                    raise protocol.ProtocolError(
                        f"protocol version {body.get('v') if isinstance(body, dict) else None!r} is not supported"
                    )
                field, serve, candidate = routes[self.path]
                req = protocol.check_request(body.get("request"), candidate=candidate)
                task_id = req["task_id"]
                self._answer(200, {"type": field, field: serve(req)})
            except (protocol.ProtocolError, ValueError) as e:
                self._answer(400, {"type": "error", "error": error_body(protocol.ProtocolError(str(e)), task_id)})
            except BrokenReference as e:
                self._answer(422, {"type": "error", "error": error_body(e)})
            except BackendUnavailable as e:
                self._answer(503, {"type": "error", "error": error_body(e, task_id)})
            except Exception as e:  # noqa: BLE001
                self._answer(500, {"type": "error", "error": error_body(e, task_id)})

        def log_message(self, fmt: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer((host, port), Handler)
    server.daemon_threads = True
    return server
