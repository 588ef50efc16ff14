#!/usr/bin/env bash
# End-to-end rollout on a GPU with a scripted teacher: import the tasks of data/gpu-tasks, run
# rollout, select, export and report, and print every step (verdict, speedup, timing method).
#
#   scripts/gpu_rollout_bench.sh [OUTDIR]        (default: $OUT or /tmp/ksmith-gpu-bench)
#
# Environment: KSMITH_BIN (default target/release/ksmith), KSMITH_PYTHON (an interpreter with
# torch and triton; default python3), ITERATIONS (default 3), TASKS (the task folder; default
# data/gpu-tasks), BACKEND (`triton`, the default, with the answers of data/gpu-tasks/answers;
# or `cuda`: `[rollout] backend = "cuda"` with those of data/gpu-tasks/answers-cuda, which needs
# nvcc, ninja and a C++ compiler).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${1:-${OUT:-/tmp/ksmith-gpu-bench}}"
bin="${KSMITH_BIN:-$here/target/release/ksmith}"
export KSMITH_PYTHON="${KSMITH_PYTHON:-$(command -v python3)}"
work="$out/work"
mkdir -p "$out"
rm -rf "$work"

backend="${BACKEND:-triton}"
answers="$here/data/gpu-tasks/answers"
[[ "$backend" == cuda ]] && answers="$here/data/gpu-tasks/answers-cuda"
"$KSMITH_PYTHON" "$here/scripts/scripted_teacher.py" --answers "$answers" >"$out/teacher.json" &
teacher=$!
trap 'kill $teacher 2>/dev/null || true' EXIT
for _ in $(seq 50); do [[ -s "$out/teacher.json" ]] && break; sleep 0.2; done
url="$("$KSMITH_PYTHON" -c 'import json,sys; print(json.load(open(sys.argv[1]))["url"])' "$out/teacher.json")"

cat >"$out/bench.toml" <<TOML
[rollout]
iterations = ${ITERATIONS:-3}
num_islands = 1
parallel_tasks = 1
measure = true
backend = "$backend"

[teacher]
max_retries = 1

[[teacher.endpoints]]
url = "$url"
model = "scripted-teacher"
TOML

t0=$(date +%s)
"$bin" import-tasks --from "${TASKS:-$here/data/gpu-tasks}" --config "$out/bench.toml" --workdir "$work"
for stage in rollout select export report; do
    "$bin" "$stage" --config "$out/bench.toml" --workdir "$work"
done
echo "wall time: $(( $(date +%s) - t0 )) s"
"$KSMITH_PYTHON" - "$work" <<'PY'
import json, sys
import pyarrow.parquet as pq
work = sys.argv[1]
tasks = {r["task_id"]: r["repo"].split("/")[-1] for r in pq.read_table(f"{work}/tasks.parquet").to_pylist()}
rows = sorted(pq.read_table(f"{work}/steps.parquet").to_pylist(), key=lambda r: (tasks[r["task_id"]], r["iteration"]))
print(f"{'task':22} {'it':>2} {'kind':10} {'edit':16} {'verdict':15} {'speedup':>8} {'cand ms':>9} {'ref ms':>9} {'cv':>6} method")
for r in rows:
    ev = json.loads(r["eval_json"]) if r["eval_json"] else {}
    ct, rt = ev.get("candidate_timing") or {}, ev.get("reference_timing") or {}
    sp = r["speedup"]
    assert r["backend"] == rows[0]["backend"], "one backend per run here"
    verdict = (r["eval_status"] or "-") + (f":{r['hack']}" if r["hack"] else "")
    print(f"{tasks[r['task_id']]:22} {r['iteration']:>2} {r['kind']:10} {r['edit_outcome']:16} {verdict:15} "
          f"{(f'{sp:.3f}' if sp else '-'):>8} {ct.get('median_ms', float('nan')):9.4f} {rt.get('median_ms', float('nan')):9.4f} "
          f"{ct.get('cv', float('nan')):6.4f} {ct.get('method', '-')}")
hw = next((json.loads(r["eval_json"])["hardware"] for r in rows if r["eval_json"]), {})
print("hardware:", hw, "backend:", rows[0]["backend"] if rows else "-")
for name in ("sft", "grpo"):
    try:
        print(f"{name}.parquet rows:", pq.read_table(f"{work}/{name}.parquet").num_rows)
    except Exception as e:  # noqa: BLE001
        print(name, "unreadable:", e)
# The labels: per selected step, its intervals and share of speed-of-light; the significance
# counts; the selected step ids (two runs must print the same ones).
def iv(x):
    return f"{x['value']:.3f} [{x['low']:.3f}, {x['high']:.3f}]" if x else "-"
for name, col in (("sft", "labels"), ("grpo", "parent_labels")):
    try:
        sel = pq.read_table(f"{work}/{name}.parquet").to_pylist()
    except Exception:  # noqa: BLE001 - said above
        continue
    for r in sorted(sel, key=lambda r: (tasks[r["task_id"]], r["iteration"])):
        lab = r[col]
        sol = lab["sol_fraction"]
        print(f"{name:4} {tasks[r['task_id']]:22} {r['iteration']:>2} {r.get('kind', r.get('selection')):12} "
              f"eager {iv(lab['over_eager']):28} parent {iv(lab['over_parent']):28} "
              f"SOL {(f'{sol:.3f}' if sol is not None else '-'):>6} {lab['why_null'] or ''}")
    print(f"{name} selected steps:", sorted(r["step_id"] for r in sel))
print("significance:", json.load(open(f"{work}/selection.json")).get("significance"))
PY
