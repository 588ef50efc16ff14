"""A whole ksmith refresh on a Ray cluster.

    $KSMITH_VENV/bin/python scripts/ray_refresh.py --config CFG --workdir DIR
        [--address auto|local|ADDR] [--shards N] [--ksmith PATH] [--until STAGE]
        [--evaluators] [--evaluator-port 8700]

Run it on the head node (after `ray start --head`, and `ray start --address=HEAD:6379` on every
other node). Every node needs the ksmith binary at the same path (`--ksmith`, default
target/release/ksmith of this checkout) and the Python environment of `make venv` at the same
path; the configuration's sources must be reachable from every node (git URLs, or paths on a
file system the nodes share). What runs where:

1. crawl and extract, sharded: one Ray task per shard (`--shards`, default one per node, spread
   over the nodes) runs `ksmith crawl` and `ksmith extract --shard i/N` in a work directory of
   its node (`~/.cache/ksmith/ray-shards/i`, so a nightly refresh that lands on the same node is
   incremental) and sends back the shard's `repos.parquet` and `modules.parquet`; the head
   writes them under DIR/shards/i and runs `ksmith merge`;
2. probe on the actor pool: `ksmith probe --set probe.ray_address=ADDR` (one sandboxed worker
   per CPU of the cluster; a lost node's modules run again elsewhere);
3. dedup and cluster on the head;
4. rollouts (when a teacher is configured: `KSMITH_TEACHER_URL` pointing at the vLLM/SGLang
   replicas you run, or `[[teacher.endpoints]]`): with `--evaluators`, the evaluator pool
   (`python -m ksmith.ray_pool`, one actor per GPU) is started first and `ksmith rollout` uses
   it through `--set eval.remote_url=...`; then select, export and the report.

Each step prints the ksmith command it runs; a failing step stops the refresh with its exit
status, and every stage's report is in DIR/reports/.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
#: The stages after the merge, in order; `--until` stops after one of them.
GLOBAL_STAGES = ("probe", "dedup", "cluster", "rollout", "select", "export")


def shard_task(ksmith: str, config_text: str, cwd: str, index: int, count: int, threads: int) -> dict:
    """Crawls and extracts shard `index` of `count` on this node; returns its tables' bytes.

    Runs in `cwd` (the head's working folder) where the node has it, so that relative source
    paths of the configuration mean the same on a node with the same (shared) file system."""
    work = Path.home() / ".cache" / "ksmith" / "ray-shards" / str(index)
    work.mkdir(parents=True, exist_ok=True)
    config = work / "ksmith.toml"
    config.write_text(config_text, encoding="utf-8")
    common = ["--config", str(config), "--workdir", str(work), "--shard", f"{index}/{count}", "--quiet"]
    common += ["--threads", str(threads)]
    for stage in ("crawl", "extract"):
        where = cwd if Path(cwd).is_dir() else None
        done = subprocess.run([ksmith, stage, *common], capture_output=True, text=True, cwd=where)
        if done.returncode != 0:
            raise RuntimeError(f"shard {index}/{count}: ksmith {stage} failed ({done.returncode}): {done.stderr}")
    return {name: (work / name).read_bytes() for name in ("repos.parquet", "modules.parquet")}


def run(command: list[str]) -> None:
    """Runs one ksmith command, echoing it; a failure ends the refresh with its status."""
    print("+ " + " ".join(command), flush=True)
    status = subprocess.run(command).returncode
    if status != 0:
        print(f"ray_refresh: `{' '.join(command)}` failed with status {status}", file=sys.stderr)
        sys.exit(status)


def start_evaluators(address: str, port: int, unconfined: bool) -> tuple[subprocess.Popen, str]:
    """Starts the evaluator pool on the cluster and waits for its URL; `unconfined` passes the
    configuration's opt-out of the whole sandbox on to its actors."""
    env = dict(os.environ, PYTHONPATH=str(REPO / "python"))
    where = ["--local"] if address == "local" else ["--address", address]
    opt_out = ["--allow-unconfined"] if unconfined else []
    pool = subprocess.Popen(
        [sys.executable, "-m", "ksmith.ray_pool", *where, "--port", str(port), "--host", "127.0.0.1", *opt_out],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    line = pool.stdout.readline() if pool.stdout else ""
    if not line:
        sys.exit(f"ray_refresh: the evaluator pool did not start (status {pool.wait()})")
    return pool, json.loads(line)["listening"]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="scripts/ray_refresh.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", required=True, type=Path)
    ap.add_argument("--workdir", required=True, type=Path)
    ap.add_argument("--address", default="auto", help="Ray cluster (`local`: a private one-node cluster)")
    ap.add_argument("--shards", type=int, default=0, help="crawl/extract shards; 0: one per node")
    ap.add_argument("--ksmith", default=str(REPO / "target/release/ksmith"))
    ap.add_argument("--until", choices=GLOBAL_STAGES, default="export")
    ap.add_argument("--evaluators", action="store_true", help="start the Ray evaluator pool for rollouts")
    ap.add_argument("--evaluator-port", type=int, default=8700)
    a = ap.parse_args(argv)
    if not Path(a.ksmith).is_file():
        sys.exit(f"ray_refresh: no ksmith binary at {a.ksmith}; build it (cargo build --release -p ksmith-cli)")

    import ray

    started = time.monotonic()
    if a.address == "local":
        ray.init(include_dashboard=False, log_to_driver=False)
    else:
        ray.init(address=a.address, log_to_driver=False)
    nodes = [n for n in ray.nodes() if n.get("Alive")]
    count = a.shards or len(nodes)
    threads = max(1, int(min(n["Resources"].get("CPU", 1) for n in nodes)))
    config_text = a.config.read_text(encoding="utf-8")
    task = ray.remote(num_cpus=threads, scheduling_strategy="SPREAD")(shard_task)
    print(f"ray_refresh: {len(nodes)} node(s), {count} shard(s) of crawl + extract", flush=True)
    tables = ray.get([task.remote(a.ksmith, config_text, os.getcwd(), i, count, threads) for i in range(count)])
    ray.shutdown()
    shard_dirs = []
    for i, files in enumerate(tables):
        shard = a.workdir / "shards" / str(i)
        shard.mkdir(parents=True, exist_ok=True)
        for name, data in files.items():
            (shard / name).write_bytes(data)
        shard_dirs += ["--from", str(shard)]
    print(f"ray_refresh: shards done in {time.monotonic() - started:.1f} s", flush=True)

    common = ["--config", str(a.config), "--workdir", str(a.workdir)]
    run([a.ksmith, "merge", *common, *shard_dirs])
    ray_address = "local" if a.address == "local" else a.address
    pool = None
    try:
        for stage in GLOBAL_STAGES:
            extra = []
            if stage == "probe":
                extra = ["--set", f"probe.ray_address={ray_address}"]
            if stage == "rollout" and a.evaluators:
                unconfined = tomllib.loads(config_text).get("sandbox", {}).get("require", True) is False
                pool, url = start_evaluators(a.address, a.evaluator_port, unconfined)
                extra = ["--set", f"eval.remote_url={url}"]
            run([a.ksmith, stage, *common, *extra])
            if stage == a.until:
                break
    finally:
        if pool is not None:
            pool.terminate()
            pool.wait()
    if a.until == "export":
        run([a.ksmith, "report", *common])
    print(f"ray_refresh: done in {time.monotonic() - started:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
