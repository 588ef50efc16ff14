#!/usr/bin/env bash
# Builds (or checks) the trainers' test environment: verl, TRL and OpenRLHF at the releases the
# dataset cards target (python/requirements-trainers.txt), without their heavy optional
# dependencies, on top of the ksmith environment's torch (no second torch download).
#
# The environment lives at $KSMITH_TRAINERS_VENV (default ~/.cache/ksmith/trainers-venv). Its
# own site-packages come first on sys.path; a .pth file appends the ksmith environment's
# site-packages after it, so torch, numpy, pyarrow and datasets are reused and the pinned
# trainer packages win where both have one. It is rebuilt when the requirements or the ksmith
# environment (its place or its requirements) change (their hash is kept in the venv); a second run with nothing changed only
# checks the imports. Concurrent runs are serialized by a lock file next to the venv.
#
# The whole body is one function called on the last line, so bash has parsed all of it before
# anything runs.
set -euo pipefail

main() {
    local here req base venv stamp want site base_site start
    here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
    req="$here/python/requirements-trainers.txt"
    base="${KSMITH_VENV:-$HOME/.cache/ksmith/venv}"
    venv="${KSMITH_TRAINERS_VENV:-$HOME/.cache/ksmith/trainers-venv}"
    stamp="$venv/.ksmith-requirements.sha256"
    [[ -x "$base/bin/python" ]] || {
        echo "error: the ksmith environment $base is missing; run scripts/setup-python.sh first" >&2
        return 1
    }
    want="$({ cat "$req"; echo "$base"; cat "$base/.ksmith-requirements.sha256" 2>/dev/null || true; } | sha256sum | cut -d' ' -f1)"

    mkdir -p "$(dirname "$venv")"
    exec 9>"$venv.lock"
    if command -v flock >/dev/null; then flock 9; fi

    check() {
        "$venv/bin/python" - <<'PY'
import importlib.metadata as md

import openrlhf.datasets  # noqa: F401
import openrlhf.utils.agent  # noqa: F401
import torch
from trl import GRPOTrainer, SFTTrainer  # noqa: F401
from verl.experimental.agent_loop.tool_agent_loop import ToolAgentLoop  # noqa: F401
from verl.utils.dataset.multiturn_sft_dataset import MultiTurnSFTDataset  # noqa: F401
from verl.utils.dataset.rl_dataset import RLHFDataset  # noqa: F401

names = ("verl", "trl", "openrlhf", "transformers", "datasets")
print("trainers venv ok: " + ", ".join(f"{n} {md.version(n)}" for n in names) + f", torch {torch.__version__}")
PY
    }

    if [[ -x "$venv/bin/python" && -f "$stamp" && "$(cat "$stamp")" == "$want" ]] && check; then
        return 0
    fi
    start=$SECONDS
    echo "building the trainers' test environment in $venv (verl, TRL, OpenRLHF; reuses $base)" >&2
    rm -rf "$venv"
    "$base/bin/python" -m venv "$venv"
    site="$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
    base_site="$("$base/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
    echo "$base_site" > "$site/zz-ksmith-venv.pth"
    "$venv/bin/python" -m pip install --quiet --no-cache-dir --progress-bar off --no-deps -r "$req"
    check
    echo "$want" > "$stamp"
    echo "trainers venv built in $((SECONDS - start)) s" >&2
}

main "$@"
