#!/usr/bin/env bash
# A sample run for the multi-turn and agent datasets, on CPU or GPU: the tasks of data/gpu-tasks
# (shrunk to CPU sizes unless SIZES=gpu), a scripted teacher whose first answer per task is a
# broken translation (so every island has a failing turn, then its repair, then a faster
# version), rollout, select and export counting tokens with the trainer tests' tiny model, then
# the trainer tests (`make test-trainers`'s) on those datasets instead of the fixture's.
#
#   scripts/multiturn_sample_run.sh [OUTDIR]        (default: $OUT or /tmp/ksmith-multiturn-sample)
#
# Environment: KSMITH_BIN (default target/release/ksmith), KSMITH_VENV and KSMITH_TRAINERS_VENV
# (as the Makefile's), ITERATIONS (default 3), SIZES (`cpu`, the default, or `gpu`: the tasks'
# own sizes, for a GPU machine). On CPU every program is untimed: chains are repairs of the
# failing translation, and the GRPO datasets are left out (export.json says why).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${1:-${OUT:-/tmp/ksmith-multiturn-sample}}"
bin="${KSMITH_BIN:-$here/target/release/ksmith}"
venv="${KSMITH_VENV:-$HOME/.cache/ksmith/venv}"
trainers="${KSMITH_TRAINERS_VENV:-$HOME/.cache/ksmith/trainers-venv}"
export KSMITH_PYTHON="$venv/bin/python"
work="$out/work"
mkdir -p "$out"
rm -rf "$work" "$out/tasks" "$out/answers"

# Tasks (shrunk on CPU: the Triton interpreter times out on GPU sizes) and answers: a broken
# translation (its store removed, so the output is never written), the translation, the faster one.
mkdir -p "$out/tasks"
for f in "$here"/data/gpu-tasks/*.py; do
    if [[ "${SIZES:-cpu}" == gpu ]]; then
        cp "$f" "$out/tasks/"
    else
        sed -e 's/^N = [0-9]*/N = 64/' -e 's/^ROWS = [0-9]*/ROWS = 32/' -e 's/^COLS = [0-9]*/COLS = 64/' \
            "$f" >"$out/tasks/$(basename "$f")"
    fi
done
for d in "$here"/data/gpu-tasks/answers/*/; do
    t="$(basename "$d")"
    mkdir -p "$out/answers/$t"
    "$KSMITH_PYTHON" - "$d/0.py" "$out/answers/$t/0.py" <<'PY'
import re, sys
src = open(sys.argv[1]).read()
broken = re.sub(r"\n(\s*)tl\.store\(", r"\n\1pass  # tl.store(", src, count=1)
assert broken != src, sys.argv[1]
open(sys.argv[2], "w").write(broken)
PY
    cp "$d/0.py" "$out/answers/$t/1.py"
    cp "$d/1.py" "$out/answers/$t/2.py"
done

# The trainer tests' tiny model: its tokenizer counts the exported lengths.
"$trainers/bin/python" -c "import sys; sys.path.insert(0, sys.argv[1]); from support import make_tiny_model; \
make_tiny_model(sys.argv[2])" "$here/python/tests/trainers" "$out/tiny"

# shellcheck source=scripts/lib/teacher.sh
source "$here/scripts/lib/teacher.sh"
start_scripted_teacher "$out/answers" "$out"
write_rollout_config "$out/sample.toml"
cat >>"$out/sample.toml" <<TOML

[export]
tokenizer = "$out/tiny/tokenizer.json"
TOML

"$bin" import-tasks --from "$out/tasks" --config "$out/sample.toml" --workdir "$work"
for stage in rollout select export report; do
    "$bin" "$stage" --config "$out/sample.toml" --workdir "$work"
done
"$KSMITH_PYTHON" - "$work/datasets/export.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
for name, d in sorted(r["written"].items()):
    print(f"written  {name:24} {d['splits']}  longest {d['lengths']['total']['max']} tokens")
for name, why in sorted(r["omitted"].items()):
    print(f"left out {name:24} {why}")
PY

cd "$here"
# GPU-sized programs are evaluated on the GPU by the agent tests (the Triton interpreter times out).
device=cpu
[[ "${SIZES:-cpu}" == gpu ]] && device=cuda
KSMITH_TRAINERS_DATASETS="$work/datasets" KSMITH_TRAINERS_MODEL="$out/tiny" KSMITH_EVAL_DEVICE="$device" \
    "$trainers/bin/python" -m pytest -q -rs -m trainers python/tests/trainers
