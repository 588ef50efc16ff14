"""`python -m ksmith.evaluator {worker,serve,check,evaluate}`.

- `worker --device cpu|cuda [--options JSON]`: the JSON-lines worker (see `protocol`).
- `serve --port P [--host H] --device D [--options JSON] [--allow-unconfined]`: the HTTP
  endpoint, which first starts itself again inside the sandbox launcher (`ksmith.confine`,
  keeping the network for its listener; every child still gets none).
- `check FILE`: static checks of a candidate, as JSON.
- `evaluate --reference FILE --candidate FILE [--device D] [--no-measure] [--allow-unconfined]`:
  one evaluation in a sandboxed worker (`launched`), as JSON.

Without the whole sandbox (bubblewrap missing, ...) `serve` and `evaluate` refuse to run any
candidate, with one line saying what is missing and how to fix it; `--allow-unconfined` is the
explicit opt-out (what is missing is written on stderr first).
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from ..confine.policy import EXIT_UNAVAILABLE

UNCONFINED_HELP = "run candidates even where the sandbox is incomplete (an explicit opt-out; warned on stderr)"


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
    s.add_argument("--allow-unconfined", action="store_true", help=UNCONFINED_HELP)
    c = sub.add_parser("check")
    c.add_argument("file")
    e = sub.add_parser("evaluate")
    e.add_argument("--reference", required=True)
    e.add_argument("--candidate", required=True)
    e.add_argument("--device", default="cpu")
    e.add_argument("--options", default="{}")
    e.add_argument("--no-measure", action="store_true")
    e.add_argument("--allow-unconfined", action="store_true", help=UNCONFINED_HELP)
    a = ap.parse_args(argv)
    if a.cmd == "worker":
        from .worker import run_worker

        return run_worker(a.device, json.loads(a.options))
    if a.cmd == "serve":
        from ..confine.policy import POLICY_VAR, Policy

        if POLICY_VAR not in os.environ:
            policy = Policy(
                require=not a.allow_unconfined,
                share_net=True,
                gpu=a.device.startswith("cuda"),
                opt_out="--allow-unconfined",
            )
            launcher = [sys.executable, "-s", "-m", "ksmith.confine", "--policy", policy.to_json(), "--"]
            os.execv(sys.executable, [*launcher, "-s", "-m", "ksmith.evaluator", *(argv or sys.argv[1:])])
        from ..confine import SandboxError
        from .server import make_server

        try:
            server = make_server(a.host, a.port, a.device, json.loads(a.options))
        except SandboxError as e:
            print(e, file=sys.stderr)
            return EXIT_UNAVAILABLE
        print(json.dumps({"listening": f"http://{a.host}:{server.server_address[1]}"}), flush=True)
        try:
            server.serve_forever()
        finally:
            server.evaluator.close()
        return 0
    if a.cmd == "check":
        from .static_check import check

        v = check(open(a.file).read())
        print(json.dumps(v.__dict__))
        return 0
    from ..confine import Policy, SandboxError
    from .launched import LaunchedWorker

    policy = Policy(require=not a.allow_unconfined, opt_out="--allow-unconfined")
    try:
        ev = LaunchedWorker(a.device, json.loads(a.options), policy)
    except SandboxError as e:
        print(e, file=sys.stderr)
        return EXIT_UNAVAILABLE
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
