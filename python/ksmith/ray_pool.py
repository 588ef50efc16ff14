"""The evaluator pool on a Ray cluster: one actor per GPU, behind the evaluator's HTTP protocol.

    python -m ksmith.ray_pool [--address ADDR | --local] [--port 8700] [--host 0.0.0.0]
                              [--cpu-actors N] [--options JSON]

Connects to a Ray cluster (`--address auto` on a node of the trainers' cluster, or `--local` to
start a private one-node cluster), creates one `EvaluatorActor` per GPU of the cluster (each
pinned to its GPU by Ray through `CUDA_VISIBLE_DEVICES`), or `--cpu-actors` Triton-interpreter
actors on a cluster without GPUs, and serves `POST /v1/evaluate`, `POST /v1/preflight` and `GET
/v1/health` with the same protocol as `python -m ksmith.evaluator serve`. ksmith points at it
with `[eval] remote_url` and needs nothing else. Each actor runs its evaluator worker inside the
sandbox launcher, as the local pool does (`ksmith.evaluator.launched`); on a node without the
whole sandbox the actor refuses to start (the error says what is missing and how to fix it)
unless `--allow-unconfined`. Each request goes to an idle actor (one candidate per GPU at a
time, so timings are not disturbed); an actor that dies is restarted by Ray and the request in
flight gets an error answer, never a made-up verdict.

Prints one JSON line `{"listening": URL, "actors": N, "devices": [...]}` once it serves.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import sys


def _actor_class(ray):
    @ray.remote(max_restarts=-1, max_task_retries=0)
    class EvaluatorActor:
        """One sandboxed evaluator worker (`ksmith.evaluator.launched`) on the device Ray assigned
        to this actor."""

        def __init__(self, options: dict | None, allow_unconfined: bool):
            from ksmith.confine import Policy
            from ksmith.evaluator.launched import LaunchedWorker

            gpus = ray.get_gpu_ids()
            self.device = "cuda" if gpus else "cpu"
            policy = Policy(require=not allow_unconfined, opt_out="--allow-unconfined")
            self.evaluator = LaunchedWorker(self.device, options, policy)

        def health(self) -> dict:
            body = dict(self.evaluator.hello)
            body["node"] = ray.get_runtime_context().get_node_id()
            body["actor_pid"] = os.getpid()
            body["cuda_visible_devices"] = os.environ.get("CUDA_VISIBLE_DEVICES")
            return body

        def evaluate(self, request: dict) -> dict:
            from ksmith.evaluator.evaluate import BrokenReference

            try:
                return {"result": self.evaluator.evaluate(request)}
            except BrokenReference as e:
                return {"broken_reference": {"message": e.message, "task_id": e.task_id}}

        def preflight(self, request: dict) -> dict:
            from ksmith.evaluator.evaluate import BrokenReference

            try:
                return {"result": self.evaluator.preflight(request)}
            except BrokenReference as e:
                return {"broken_reference": {"message": e.message, "task_id": e.task_id}}

    return EvaluatorActor


class ActorPool:
    """Hands each request to an idle actor; callers block while every actor is busy."""

    def __init__(self, ray, actors: list):
        self.ray = ray
        self.actors = actors
        self.idle: queue.Queue = queue.Queue()
        for a in actors:
            self.idle.put(a)

    def evaluate(self, request: dict) -> dict:
        return self._on_idle_actor("evaluate", request)

    def preflight(self, request: dict) -> dict:
        """The task's reference built on an idle actor's device (the protocol's `preflight`)."""
        return self._on_idle_actor("preflight", request)

    def _on_idle_actor(self, method: str, request: dict) -> dict:
        from ksmith.evaluator.evaluate import BrokenReference

        actor = self.idle.get()
        try:
            answer = self.ray.get(getattr(actor, method).remote(request))
        finally:
            self.idle.put(actor)
        if "broken_reference" in answer:
            b = answer["broken_reference"]
            raise BrokenReference(b["task_id"], b["message"])
        return answer["result"]

    def health(self) -> dict:
        actors = self.ray.get([a.health.remote() for a in self.actors])
        return {"type": "hello", "pool": "ray", "actors": len(actors), "workers": actors}


def start_pool(ray, cpu_actors: int, options: dict | None, allow_unconfined: bool = False) -> ActorPool:
    """Creates one actor per GPU of the cluster, or `cpu_actors` interpreter actors without GPUs.
    An actor whose node lacks part of the sandbox fails to start (its error is the one line
    saying what is missing) unless `allow_unconfined`."""
    gpus = int(ray.cluster_resources().get("GPU", 0))
    cls = _actor_class(ray)
    if gpus > 0:
        actors = [cls.options(num_gpus=1, num_cpus=1).remote(options, allow_unconfined) for _ in range(gpus)]
    else:
        if cpu_actors < 1:
            raise SystemExit("the Ray cluster has no GPU; give --cpu-actors N for interpreter actors")
        actors = [cls.options(num_cpus=1).remote(options, allow_unconfined) for _ in range(cpu_actors)]
    pool = ActorPool(ray, actors)
    pool.health()  # waits until every actor has started (and fails loudly if one cannot)
    return pool


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m ksmith.ray_pool")
    where = ap.add_mutually_exclusive_group()
    where.add_argument("--address", default="auto", help="Ray cluster address (default: auto)")
    where.add_argument("--local", action="store_true", help="start a private one-node Ray cluster")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8700)
    ap.add_argument("--cpu-actors", type=int, default=0)
    ap.add_argument("--num-cpus", type=int, default=None, help="CPUs of the --local cluster")
    ap.add_argument("--options", default="{}")
    ap.add_argument(
        "--allow-unconfined",
        action="store_true",
        help="run candidates on nodes where the sandbox is incomplete (an explicit opt-out; warned on stderr)",
    )
    a = ap.parse_args(argv)

    import ray

    from ksmith.confine.policy import EXIT_UNAVAILABLE, REFUSAL
    from ksmith.evaluator.server import serve_with

    if a.local:
        ray.init(num_cpus=a.num_cpus, include_dashboard=False, log_to_driver=False)
    else:
        ray.init(address=a.address, log_to_driver=False)
    try:
        try:
            pool = start_pool(ray, a.cpu_actors, json.loads(a.options), a.allow_unconfined)
        except ray.exceptions.RayActorError as e:
            # An actor whose node lacks part of the sandbox refused: that one line is the error.
            text = str(e)
            if REFUSAL not in text:
                raise
            print(REFUSAL + text.rsplit(REFUSAL, 1)[1].splitlines()[0], file=sys.stderr, flush=True)
            return EXIT_UNAVAILABLE
        server = serve_with(a.host, a.port, pool.evaluate, pool.preflight, pool.health)
        devices = sorted({w["device"] for w in pool.health()["workers"]})
        listening = f"http://{a.host}:{server.server_address[1]}"
        print(json.dumps({"listening": listening, "actors": len(pool.actors), "devices": devices}), flush=True)
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass
    finally:
        ray.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
