#!/usr/bin/env bash
# Builds (or checks) the Python environment ksmith runs: torch, triton and the test tools.
#
# The environment lives outside the clone, at $KSMITH_VENV (default ~/.cache/ksmith/venv), so
# every clone and every CI run on this machine reuses it. It is rebuilt only when
# python/requirements.txt changes (its hash is kept in the venv) or the venv is broken.
# Idempotent: a second run with nothing changed only checks that torch and triton import.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
req="$here/python/requirements.txt"
venv="${KSMITH_VENV:-$HOME/.cache/ksmith/venv}"
python="${KSMITH_BOOTSTRAP_PYTHON:-python3}"
stamp="$venv/.ksmith-requirements.sha256"
want="$(sha256sum "$req" | cut -d' ' -f1)"

check() {
    "$venv/bin/python" - <<'PY'
import torch, triton, numpy, pyarrow, pytest  # noqa: F401
print(f"ksmith venv ok: torch {torch.__version__}, triton {triton.__version__}, numpy {numpy.__version__}")
PY
}

if [[ -x "$venv/bin/python" && -f "$stamp" ]]; then
    if [[ "$(cat "$stamp")" == "$want" ]] && check; then exit 0; fi
    # Requirements changed (or an import broke): update the existing environment in place,
    # which downloads only what changed, before falling back to a rebuild.
    echo "updating the ksmith Python environment in $venv" >&2
    if "$venv/bin/python" -m pip install --quiet --progress-bar off -r "$req" && check; then
        echo "$want" > "$stamp"
        exit 0
    fi
    echo "ksmith venv at $venv is broken; rebuilding" >&2
fi

command -v "$python" >/dev/null || { echo "error: $python not found; install Python 3.10+ with pip and venv" >&2; exit 1; }
echo "building the ksmith Python environment in $venv (torch and triton, about 3 GB; a few minutes)" >&2
mkdir -p "$(dirname "$venv")"
# The stamp is written last: an install that dies half-way leaves no stamp and is redone.
rm -rf "$venv"
"$python" -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --upgrade pip
"$venv/bin/python" -m pip install --quiet --progress-bar off -r "$req"
check
echo "$want" > "$stamp"
