#!/usr/bin/env bash
# Serves the evaluator pool on a Ray cluster: one actor per GPU of the cluster, behind the
# evaluator's HTTP protocol. Run it on a node of the cluster (after `ray start --head` or
# `ray start --address=HEAD:6379` on every node), then point ksmith at it:
#
#   scripts/ray-evaluators.sh --port 8700 --host 0.0.0.0
#   # configs: [eval] remote_url = "http://THIS_NODE:8700"
#
# Every node needs the ksmith Python environment (`make venv`) and this checkout's python/
# folder at the same path. Arguments go to `python -m ksmith.ray_pool` (see its --help):
# `--address ADDR` (default auto), `--local` for a private one-node cluster, `--cpu-actors N`
# for Triton-interpreter actors on a cluster without GPUs, `--options JSON` for the worker.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${KSMITH_VENV:-$HOME/.cache/ksmith/venv}"
[[ -x "$venv/bin/python" ]] || { echo "error: no Python environment at $venv; run make venv" >&2; exit 1; }
export PYTHONPATH="$here/python${PYTHONPATH:+:$PYTHONPATH}"
export RAY_USAGE_STATS_ENABLED="${RAY_USAGE_STATS_ENABLED:-0}"
exec "$venv/bin/python" -m ksmith.ray_pool "$@"
