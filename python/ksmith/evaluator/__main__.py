"""`python -m ksmith.evaluator {worker,serve,check,evaluate}`.

- `worker --device cpu|cuda [--options JSON]`: the JSON-lines worker (see `protocol`).
- `serve --port P [--host H] --device D [--options JSON] [--require-sandbox]`: the HTTP endpoint,
  which first starts itself again inside the sandbox launcher (`ksmith.confine`, keeping the
  network for its listener; every child still gets none).
- `check FILE`: static checks of a candidate, as JSON.
- `evaluate --reference FILE --candidate FILE [--device D] [--no-measure]`: one evaluation, as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import sys


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m ksmith.evaluator")
    sub = ap.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("worker")
    w.add_argument("--device", default="cpu")
    w.add_argument("--options", default="{}")
    s = sub.add_parser("serve")
    s.add_argument("--port", type=int, required=True)
    s.add_argument("--host", default="127.0.0.1")
    s.add_argument("--device", default="cpu")
    s.add_argument("--options", default="{}")
    s.add_argument("--require-sandbox", action="store_true", help="refuse to serve without the whole sandbox")
    c = sub.add_parser("check")
    c.add_argument("file")
    e = sub.add_parser("evaluate")
    e.add_argument("--reference", required=True)
    e.add_argument("--candidate", required=True)
    e.add_argument("--device", default="cpu")
    e.add_argument("--options", default="{}")
    e.add_argument("--no-measure", action="store_true")
    a = ap.parse_args(argv)
    if a.cmd == "worker":
        from .worker import run_worker

        return run_worker(a.device, json.loads(a.options))
    if a.cmd == "serve":
        from ..confine.policy import POLICY_VAR, Policy

        if POLICY_VAR not in os.environ:
            policy = Policy(require=a.require_sandbox, share_net=True, gpu=a.device.startswith("cuda"))
            launcher = [sys.executable, "-s", "-m", "ksmith.confine", "--policy", policy.to_json(), "--"]
            os.execv(sys.executable, [*launcher, "-s", "-m", "ksmith.evaluator", *(argv or sys.argv[1:])])
        from .server import make_server

        server, evaluator = make_server(a.host, a.port, a.device, json.loads(a.options))
        print(json.dumps({"listening": f"http://{a.host}:{server.server_address[1]}"}), flush=True)
        try:
            server.serve_forever()
        finally:
            evaluator.close()
        return 0
    if a.cmd == "check":
        from .static_check import check

        v = check(open(a.file).read())
        print(json.dumps(v.__dict__))
        return 0
    from .evaluate import DeviceEvaluator

    ev = DeviceEvaluator(a.device, json.loads(a.options))
    try:
        res = ev.evaluate(
            {
                "task_id": a.reference,
                "reference": open(a.reference).read(),
                "candidate": open(a.candidate).read(),
                "measure": not a.no_measure,
            }
        )
    finally:
        ev.close()
    json.dump(res, sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
