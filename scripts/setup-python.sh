#!/usr/bin/env bash
# Builds (or checks) the Python environment ksmith runs: torch, triton and the test tools.
#
# The environment lives outside the clone, at $KSMITH_VENV (default ~/.cache/ksmith/venv), so
# every clone and every CI run on this machine reuses it. It is rebuilt only when
# python/requirements.txt changes (its hash is kept in the venv) or the venv is broken.
# Idempotent: a second run with nothing changed only checks that torch and triton import.
# Concurrent runs (several `make test` at once) are serialized by a lock file next to the venv.
#
# The whole body is one function called on the last line, so bash has parsed all of it before
# anything runs: editing this file while an install is under way cannot break that install.
set -euo pipefail

main() {
    local here req src_req venv python stamp want
    here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
    req="$here/python/requirements.txt"
    # Read by extract as source (never imported): installed without their dependencies.
    src_req="$here/python/requirements-source.txt"
    venv="${KSMITH_VENV:-$HOME/.cache/ksmith/venv}"
    python="${KSMITH_BOOTSTRAP_PYTHON:-python3}"
    stamp="$venv/.ksmith-requirements.sha256"
    want="$(cat "$req" "$src_req" | sha256sum | cut -d' ' -f1)"

    mkdir -p "$(dirname "$venv")"
    exec 9>"$venv.lock"
    if command -v flock >/dev/null; then flock 9; fi

    check() {
        "$venv/bin/python" - <<'PY'
import torch, triton, numpy, pyarrow, pytest, ruff, mypy  # noqa: F401
print(f"ksmith venv ok: torch {torch.__version__}, triton {triton.__version__}, numpy {numpy.__version__}")
PY
    }

    if [[ -x "$venv/bin/python" ]]; then
        if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" ]] && check; then return 0; fi
        # Requirements changed, an import broke, or an earlier install stopped before writing
        # the stamp: update the existing environment in place, which downloads only what
        # changed, before falling back to a rebuild.
        echo "updating the ksmith Python environment in $venv" >&2
        if "$venv/bin/python" -m pip install --quiet --no-cache-dir --progress-bar off -r "$req" \
            && "$venv/bin/python" -m pip install --quiet --no-cache-dir --progress-bar off --no-deps -r "$src_req" \
            && check; then
            echo "$want" > "$stamp"
            return 0
        fi
        echo "ksmith venv at $venv is broken; rebuilding" >&2
    fi

    command -v "$python" >/dev/null || {
        echo "error: $python not found; install Python 3.10+ with pip and venv" >&2
        return 1
    }
    echo "building the ksmith Python environment in $venv (torch and triton, about 3 GB; a few minutes)" >&2
    # The stamp is written last: an install that dies half-way leaves no stamp and is redone.
    rm -rf "$venv"
    "$python" -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet --no-cache-dir --upgrade pip
    "$venv/bin/python" -m pip install --quiet --no-cache-dir --progress-bar off -r "$req"
    "$venv/bin/python" -m pip install --quiet --no-cache-dir --progress-bar off --no-deps -r "$src_req"
    check
    echo "$want" > "$stamp"
}

main "$@"
