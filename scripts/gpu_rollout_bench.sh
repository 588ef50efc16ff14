#!/usr/bin/env bash
# End-to-end rollout on a GPU with a scripted teacher: import the tasks of data/gpu-tasks, run
# rollout, select, export and report, and print every step (verdict, speedup, timing method).
#
#   scripts/gpu_rollout_bench.sh [OUTDIR]        (default: $OUT or /tmp/ksmith-gpu-bench)
#
# Environment: KSMITH_BIN (default target/release/ksmith), KSMITH_PYTHON (an interpreter with
# torch and triton; default python3), ITERATIONS (default 3), PARALLEL_TASKS (default 1), TASKS
# (the task folder; default data/gpu-tasks), BACKEND (`triton`, the default, with the answers of data/gpu-tasks/answers;
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
# shellcheck source=scripts/lib/teacher.sh
source "$here/scripts/lib/teacher.sh"
start_scripted_teacher "$answers" "$out"
write_rollout_config "$out/bench.toml" "$backend"

t0=$(date +%s)
"$bin" import-tasks --from "${TASKS:-$here/data/gpu-tasks}" --config "$out/bench.toml" --workdir "$work"
for stage in rollout select export report; do
    "$bin" "$stage" --config "$out/bench.toml" --workdir "$work"
done
echo "wall time: $(( $(date +%s) - t0 )) s"
"$KSMITH_PYTHON" - "$work" "$bin" "$out/bench.toml" <<'PY'
import json, shutil, subprocess, sys
import pyarrow.parquet as pq
work, binary, config = sys.argv[1:4]
tasks = {r["task_id"]: r["repo"].split("/")[-1] for r in pq.read_table(f"{work}/tasks.parquet").to_pylist()}
rows = sorted(pq.read_table(f"{work}/steps.parquet").to_pylist(), key=lambda r: (tasks[r["task_id"]], r["iteration"]))
f = lambda x, spec=".3f": format(x, spec) if x is not None else "-"  # noqa: E731
# Each task's baselines (the evaluator measures them once per task): eager, torch.compile, SOL.
seen = set()
for r in rows:
    ev = json.loads(r["eval_json"]) if r["eval_json"] else {}
    cb, sol, rt = ev.get("compile_baseline"), ev.get("speed_of_light") or {}, ev.get("reference_timing") or {}
    if r["task_id"] in seen or not cb:
        continue
    seen.add(r["task_id"])
    ct = cb.get("timing") or {}
    print(f"baseline {tasks[r['task_id']]:22} eager {f(rt.get('median_ms'), '.4f')} ms  compile[{cb['mode']}] "
          f"{f(ct.get('median_ms'), '.4f')} ms ({f(cb.get('speedup_over_eager'))}x eager, compiled in "
          f"{f(cb.get('compile_s'), '.1f')} s)  SOL {f(sol.get('ms'), '.4f')} ms ({sol.get('bound') or sol.get('why')})"
          f"{'  no compile baseline: ' + cb['why'] if cb.get('why') else ''}")
print(f"{'task':22} {'it':>2} {'kind':10} {'edit':16} {'verdict':15} {'speedup':>8} {'x compile':>9} {'cand ms':>9} "
      f"{'ref ms':>9} {'cv':>6} method")
for r in rows:
    ev = json.loads(r["eval_json"]) if r["eval_json"] else {}
    ct, rt = ev.get("candidate_timing") or {}, ev.get("reference_timing") or {}
    assert r["backend"] == rows[0]["backend"], "one backend per run here"
    verdict = (r["eval_status"] or "-") + (f":{r['hack']}" if r["hack"] else "")
    print(f"{tasks[r['task_id']]:22} {r['iteration']:>2} {r['kind']:10} {r['edit_outcome']:16} {verdict:15} "
          f"{f(r['speedup']):>8} {f(r.get('speedup_over_compile')):>9} {ct.get('median_ms', float('nan')):9.4f} "
          f"{rt.get('median_ms', float('nan')):9.4f} {ct.get('cv', float('nan')):6.4f} {ct.get('method', '-')}")
hw = next((json.loads(r["eval_json"])["hardware"] for r in rows if r["eval_json"]), {})
print("hardware:", hw, "backend:", rows[0]["backend"] if rows else "-")
for name in ("sft", "grpo"):
    try:
        print(f"{name}.parquet rows:", pq.read_table(f"{work}/{name}.parquet").num_rows)
    except Exception as e:  # noqa: BLE001
        print(name, "unreadable:", e)
# The labels of every correct timed step: select once more on a copy with trivial_steps = "keep"
# and every step a performance candidate's labels (the run's own selection, above, is untouched).
def iv(x):
    return f"{x['value']:.3f} [{x['low']:.3f}, {x['high']:.3f}]" if x else "-"
def labels_line(name, r, lab):
    sol = lab["sol_fraction"]
    trivial = {True: "TRIVIAL", False: "not trivial", None: "trivial: not judged"}[lab.get("trivial")]
    return (f"{name:4} {tasks[r['task_id']]:22} {r['iteration']:>2} {r.get('kind', r.get('selection')):12} "
            f"eager {iv(lab['over_eager']):28} compile {iv(lab.get('over_compile')):28} parent "
            f"{iv(lab['over_parent']):28} SOL {(f'{sol:.3f}' if sol is not None else '-'):>6} {trivial:19} "
            f"{lab['why_null'] or ''}")
for name, col in (("sft", "labels"), ("grpo", "parent_labels")):
    try:
        sel = pq.read_table(f"{work}/{name}.parquet").to_pylist()
    except Exception:  # noqa: BLE001 - said above
        continue
    for r in sorted(sel, key=lambda r: (tasks[r["task_id"]], r["iteration"])):
        print(labels_line(name, r, r[col]))
    print(f"{name} selected steps:", sorted(r["step_id"] for r in sel))
selection = json.load(open(f"{work}/selection.json"))
print("significance:", selection.get("significance"))
print("trivial steps per task:", {tasks[k]: v for k, v in (selection.get("trivial_by_task") or {}).items()})
headroom = json.load(open(f"{work}/rollout/headroom.json"))
for k, h in sorted(headroom.items(), key=lambda kv: tasks[kv[0]]):
    hr = h.get("headroom")
    if hr:
        print(f"headroom {tasks[k]:22} {'NONE' if hr['none'] else 'yes':4} eager at {hr['eager_sol_fraction']:.2f} of SOL, "
              f"compile at {f(hr.get('compile_sol_fraction'), '.2f')} (share {h['sol_share']})")
    else:
        print(f"headroom {tasks[k]:22} not judged: {h.get('why')}")
every = f"{work}-labels"
shutil.rmtree(every, ignore_errors=True)
shutil.copytree(work, every)
sets = ["select.trivial_steps=keep", "select.sft_min_speedup=0.001", "select.sft_min_gain_over_parent=0.001",
        "select.max_family_share=1.0"]
cmd = [binary, "select", "--config", config, "--workdir", every, "--force"]
for s_ in sets:
    cmd += ["--set", s_]
subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
print("every correct step's labels (select on a copy with", ", ".join(sets) + "):")
for r in sorted(pq.read_table(f"{every}/sft.parquet").to_pylist(), key=lambda r: (tasks[r["task_id"]], r["iteration"])):
    if r["kind"] == "performance":
        print(labels_line("step", r, r["labels"]))
PY
