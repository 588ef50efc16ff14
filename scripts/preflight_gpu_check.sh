#!/usr/bin/env bash
# The rollout's preflight on a GPU: every task's reference is built and run on the evaluation
# device before its first teacher call, and a task whose reference cannot run there is refused
# with no teacher call. Runs `ksmith rollout` (then select) over tasks taken from a work
# directory's tasks table, with the scripted teacher (no answers: every step is one request
# answered without code, so no candidate is evaluated and the preflights are the only GPU work),
# and prints each task's ending, its steps (= teacher requests) and the report's counters.
#
#   scripts/preflight_gpu_check.sh TASKS_PARQUET [OUTDIR]     (OUTDIR default: $OUT or /tmp/ksmith-preflight)
#
# Environment: KSMITH_BIN (default target/release/ksmith), KSMITH_PYTHON (an interpreter with
# torch, triton and pyarrow; default python3), REPO (only the tasks of this repository; default
# Swin-Transformer, whose Swin-V2 tasks make a CPU tensor inside `forward`; empty: every task),
# ITERATIONS (default 1), COMPILE_BASELINE (`[eval] compile_baseline`, default "off": the
# preflight's question is whether the reference runs; the baseline never refuses a task).
#
# Exit status 1 when a task whose program clamps `logit_scale` with a tensor made in `forward`
# (Swin-V2's) is not refused, or a refused task has steps.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
tasks="${1:?usage: scripts/preflight_gpu_check.sh TASKS_PARQUET [OUTDIR]}"
out="${2:-${OUT:-/tmp/ksmith-preflight}}"
bin="${KSMITH_BIN:-$here/target/release/ksmith}"
export KSMITH_PYTHON="${KSMITH_PYTHON:-$(command -v python3)}"
work="$out/work"
mkdir -p "$out/answers"
rm -rf "$work"
mkdir -p "$work"

"$KSMITH_PYTHON" - "$tasks" "$work/tasks.parquet" "${REPO-Swin-Transformer}" <<'PY'
import sys
import pyarrow.parquet as pq
source, target, repo = sys.argv[1:4]
table = pq.read_table(source)
rows = [r for r in table.to_pylist() if not repo or r["repo"] == repo]
if not rows:
    sys.exit(f"{source}: no task of repository {repo!r}")
# ksmith's table metadata (name, schema version, fingerprint) is the file's key-value metadata
meta = {k: v for k, v in pq.read_metadata(source).metadata.items() if k != b"ARROW:schema"}
pq.write_table(table.from_pylist(rows, schema=table.schema).replace_schema_metadata(meta), target, compression="zstd")
print(f"{len(rows)} task(s) of {repo or 'every repository'} from {source}")
PY

# shellcheck source=scripts/lib/teacher.sh
source "$here/scripts/lib/teacher.sh"
start_scripted_teacher "$out/answers" "$out"
ITERATIONS="${ITERATIONS:-1}" PARALLEL_TASKS=0 write_rollout_config "$out/preflight.toml"
cat >>"$out/preflight.toml" <<TOML

[eval]
compile_baseline = "${COMPILE_BASELINE:-off}"
TOML

t0=$(date +%s)
status=0
"$bin" rollout --config "$out/preflight.toml" --workdir "$work" || status=$?
echo "rollout: exit $status, wall time $(( $(date +%s) - t0 )) s"
if [[ ! -f "$work/steps.parquet" ]]; then
    echo "FAIL: the rollout wrote no steps.parquet (see its error above)" >&2
    exit 1
fi
"$bin" select --config "$out/preflight.toml" --workdir "$work" || echo "select: exit $?"

"$KSMITH_PYTHON" - "$work" <<'PY'
import collections, json, os, sys
import pyarrow.parquet as pq
work = sys.argv[1]
tasks = pq.read_table(f"{work}/tasks.parquet").to_pylist()
steps = collections.Counter(r["task_id"] for r in pq.read_table(f"{work}/steps.parquet").to_pylist())
endings = json.load(open(f"{work}/rollout/endings.json"))
report = json.load(open(f"{work}/reports/rollout.json"))
grpo = {r["task_id"] for r in pq.read_table(f"{work}/grpo.parquet").to_pylist()} if os.path.exists(f"{work}/grpo.parquet") else set()
bad = []
print(f"{'task':10} {'class':22} {'v2':3} {'ending':18} {'steps':>5}  reason")
for t in sorted(tasks, key=lambda t: (t["class_name"], t["task_id"])):
    e = endings.get(t["task_id"], {"ending": "-", "reason": ""})
    v2 = "logit_scale" in t["program"] and "torch.tensor(1. / 0.01)" in t["program"]
    n = steps.get(t["task_id"], 0)
    print(f"{t['task_id'][:10]:10} {t['class_name'][:22]:22} {'yes' if v2 else '':3} {e['ending']:18} {n:5}  {e['reason'][:160]}")
    refused = e["ending"] == "refused_reference"
    if v2 and not refused:
        bad.append(f"{t['task_id']} ({t['class_name']}, Swin-V2) was not refused")
    if refused and (n or t["task_id"] in grpo):
        bad.append(f"{t['task_id']} was refused but has {n} step(s) / a GRPO prompt")
print()
for k, v in sorted(report["counters"].items()):
    if k.startswith(("tasks_", "preflight_", "eval_preflight", "eval_devices", "teacher_requests")):
        print(f"{k}: {v}")
for b in bad:
    print("FAIL:", b)
sys.exit(1 if bad else 0)
PY
