#!/usr/bin/env bash
# Rollout scaling over the GPUs of one host, in one call: the rollout bench (scripted teacher,
# the real evaluator pool) over enough task variants to fill the GPUs, at each teacher latency
# on 1, 2, 4 ... GPUs, each run a fixed time window; prints steps and candidates per minute,
# each GPU's busy share (nvidia-smi) and the pool's own accounting, and where a step's time went.
#
#   scripts/multi_gpu_bench.sh [OUTDIR]        (default: $OUT or /tmp/ksmith-multi-gpu-bench)
#
# Environment (defaults in brackets):
#   KSMITH_BIN [target/release/ksmith]   KSMITH_PYTHON [python3 with torch and triton]
#   GPUS ["1 2 4 ...": powers of two up to the visible GPUs from FIRST_GPU, and their count]
#   LABEL [""]: names the build in the tables (the "x 1 GPU" ratio compares runs of one label)
#   FIRST_GPU [0]: a run on N GPUs uses GPUs FIRST_GPU .. FIRST_GPU+N-1 (so that benches of two
#     builds, e.g. before and after a change, run side by side on disjoint GPUs of one host)
#   LATENCIES ["0 2-20"]: the scripted teacher's seconds per answer (A or A-B, seeded)
#   RUN_S [50]: each run's time budget ([rollout] time_budget_s: steps start for this long)
#   WARMUP_S [15]: steps finishing before this (from the run's first step) are not counted
#   INFLIGHT [16]: [eval] inflight_per_worker (evaluations at once per GPU; 16 is the default)
#   PARALLEL_TASKS [0]: [rollout] parallel_tasks (0: derived, capacity + teacher concurrency;
#     each task in flight builds its reference on its first evaluation, so an instant teacher
#     measures that start unless the window begins after it)
#   TEACHER_CONCURRENCY [16]: [teacher] max_concurrency
#   PAUSE_STARTS [true]: [eval] pause_starts_for_timing (false: a timing waits for starts to end)
#   PAUSE_CORRECTNESS [true]: [eval] pause_correctness_for_timing (false: each correctness call
#     takes the gate)
#   TRACE [""]: 1 traces the workers (KSMITH_EVAL_TRACE: every evaluation's phases, every hold
#     of the GPU gate), keeps their logs in the run's folder (workers/) and writes
#     scripts/gate_trace.py's tables of the steady window to OUTDIR/gate.md
#   VARIANTS [16]: task variants per problem of data/gpu-tasks (48 tasks)
#   TASK_SCALE [1]: the variants' first size constant (rows, or a square's side) times this
#     (scripts/gpu_task_variants.py --scale)
#   RUNTIME_DIR [""]: [eval] runtime_dir (where the pool's runtime folder goes, with the
#     workers' logs: scripts/gpu_capacity_diag.sh copies them from there while the run lasts)
#   SANDBOX_REQUIRE [true]: [sandbox] require (false runs the workers with what of the sandbox
#     works, warned; only where bubblewrap cannot be set up)
#   DEADLINE_S [520]: runs that would end past this many seconds from the start are skipped
#     (said in the output), the most telling first: latency 0 on 1 GPU and on all, then the
#     other latencies on all, then the rest.
# Outputs: OUTDIR/bench.md (the tables, rewritten after every run), OUTDIR/runs/<gpus>gpu-<lat>/
# (meta.json, smi.log, cpu.log: the host's /proc/stat cpu line, rollout.log, work/; with TRACE,
# workers/), OUTDIR/gate.md (with TRACE).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${1:-${OUT:-/tmp/ksmith-multi-gpu-bench}}"
bin="${KSMITH_BIN:-$here/target/release/ksmith}"
export KSMITH_PYTHON="${KSMITH_PYTHON:-$(command -v python3)}"
run_s="${RUN_S:-50}"
warmup_s="${WARMUP_S:-15}"
inflight="${INFLIGHT:-16}"
concurrency="${TEACHER_CONCURRENCY:-16}"
deadline_s="${DEADLINE_S:-520}"
first_gpu="${FIRST_GPU:-0}"
t_start=$(date +%s)
mkdir -p "$out/runs"

visible=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)
if [[ "$visible" -lt 1 ]]; then
    echo "multi_gpu_bench: no GPU visible (nvidia-smi -L lists none)" >&2
    exit 1
fi
usable=$((visible - first_gpu))
if [[ "$usable" -lt 1 ]]; then
    echo "multi_gpu_bench: FIRST_GPU=$first_gpu leaves no GPU ($visible visible)" >&2
    exit 2
fi
if [[ -z "${GPUS:-}" ]]; then
    GPUS=""
    for n in 1 2 4 8 16; do [[ $n -le $usable ]] && GPUS="$GPUS $n"; done
    [[ " $GPUS " == *" $usable "* ]] || GPUS="$GPUS $usable"
fi
read -r -a gpus <<<"$GPUS"
read -r -a latencies <<<"${LATENCIES:-0 2-20}"
for n in "${gpus[@]}"; do
    if [[ $n -gt $usable ]]; then
        echo "multi_gpu_bench: GPUS asks for $n GPUs, $usable visible from GPU $first_gpu" >&2
        exit 2
    fi
done
most=${gpus[0]}
fewest=${gpus[0]}
for n in "${gpus[@]}"; do
    [[ $n -gt $most ]] && most=$n
    [[ $n -lt $fewest ]] && fewest=$n
done

tasks="$out/tasks"
rm -rf "$tasks"
"$KSMITH_PYTHON" "$here/scripts/gpu_task_variants.py" --from "$here/data/gpu-tasks" --to "$tasks" \
    --per-task "${VARIANTS:-16}" --scale "${TASK_SCALE:-1}"

# --- the scripted teacher (start, URL, stop); kept apart so it can move to a shared script ---
teacher_pid=""
teacher_url=""
start_teacher() { # $1: latency, $2: folder for its output
    "$KSMITH_PYTHON" "$here/scripts/scripted_teacher.py" --answers "$here/data/gpu-tasks/answers" \
        --latency "$1" --seed 0 --distinct >"$2/teacher.json" 2>"$2/teacher.log" &
    teacher_pid=$!
    for _ in $(seq 100); do [[ -s "$2/teacher.json" ]] && break; sleep 0.1; done
    teacher_url="$("$KSMITH_PYTHON" -c 'import json,sys; print(json.load(open(sys.argv[1]))["url"])' "$2/teacher.json")"
}
stop_teacher() {
    [[ -n "$teacher_pid" ]] && kill "$teacher_pid" 2>/dev/null || true
    [[ -n "$teacher_pid" ]] && wait "$teacher_pid" 2>/dev/null || true
    teacher_pid=""
}
smi_pid=""
stop_smi() {
    [[ -n "$smi_pid" ]] && kill "$smi_pid" 2>/dev/null || true
    [[ -n "$smi_pid" ]] && wait "$smi_pid" 2>/dev/null || true
    smi_pid=""
}
trap 'stop_teacher; stop_smi' EXIT

# Runs in order of what they tell: the first latency on the fewest GPUs of GPUS (1 by default)
# and on the most, the other latencies on the most, then the rest.
plan=("${latencies[0]} $fewest")
[[ $most -ne $fewest ]] && plan+=("${latencies[0]} $most")
for lat in "${latencies[@]:1}"; do plan+=("$lat $most"); done
for lat in "${latencies[@]}"; do
    for n in "${gpus[@]}"; do
        [[ " ${plan[*]} " == *" $lat $n "* ]] || plan+=("$lat $n")
    done
done

done_runs=()
for entry in "${plan[@]}"; do
    read -r lat n <<<"$entry"
    elapsed=$(( $(date +%s) - t_start ))
    # A run takes its budget, about 20 s to start and up to the slowest answer plus an
    # evaluation to drain.
    need=$(( run_s + 20 + ${lat##*-} + 15 ))
    if (( elapsed + need > deadline_s )); then
        echo "skipped: latency $lat on $n GPU(s) (needs ~${need} s, ${elapsed} s of ${deadline_s} spent)" | tee -a "$out/skipped.txt"
        continue
    fi
    run="$out/runs/${n}gpu-${lat}"
    rm -rf "$run"
    mkdir -p "$run"
    runtime_dir="${RUNTIME_DIR:-}"
    if [[ -n "${TRACE:-}" ]]; then
        export KSMITH_EVAL_TRACE=1
        mkdir -p "$run/workers"
        if [[ -z "$runtime_dir" ]]; then
            runtime_dir="$(mktemp -d /tmp/ksmith-bench-rt.XXXXXX)"
        fi
    fi
    devices=$(seq -s, "$first_gpu" $((first_gpu + n - 1)) | sed 's/\([0-9]*\)/"\1"/g')
    start_teacher "$lat" "$run"
    cat >"$run/bench.toml" <<TOML
[rollout]
iterations = 40
num_islands = 1
parallel_tasks = ${PARALLEL_TASKS:-0}
time_budget_s = $run_s
measure = true

[sandbox]
require = ${SANDBOX_REQUIRE:-true}

[eval]
devices = [$devices]
inflight_per_worker = $inflight
pause_starts_for_timing = ${PAUSE_STARTS:-true}
pause_correctness_for_timing = ${PAUSE_CORRECTNESS:-true}
${runtime_dir:+runtime_dir = \"$runtime_dir\"}

[teacher]
max_retries = 1
max_concurrency = $concurrency
timeout_s = 120

[[teacher.endpoints]]
url = "$teacher_url"
model = "scripted-teacher"
TOML
    cat >"$run/meta.json" <<JSON
{"label": "${LABEL:-}", "gpus": $n, "first_gpu": $first_gpu, "latency": "$lat", "inflight": $inflight, "window_start_s": $warmup_s, "window_s": $run_s}
JSON
    "$bin" import-tasks --from "$tasks" --config "$run/bench.toml" --workdir "$run/work" >"$run/import.log" 2>&1
    keeper_pid=""
    if [[ -n "${TRACE:-}" ]]; then
        # the pool removes its runtime folder (and the workers' logs in it) when the run ends
        (while :; do
            for log in "$runtime_dir"/ksmith-eval-*/worker-*.log; do
                [[ -f "$log" ]] && cp "$log" "$run/workers/"
            done
            sleep 2
        done) &
        keeper_pid=$!
    fi
    (while :; do
        echo "$(date +%s.%N) $(nvidia-smi --query-gpu=index,utilization.gpu --format=csv,noheader,nounits | tr '\n' ';')"
        echo "$(date +%s.%N) $(head -1 /proc/stat)" >>"$run/cpu.log"
        sleep 0.5
    done) >"$run/smi.log" 2>/dev/null &
    smi_pid=$!
    echo "run: latency $lat s on $n GPU(s) [$(date -u +%H:%M:%S)]"
    "$bin" rollout --config "$run/bench.toml" --workdir "$run/work" >"$run/rollout.log" 2>&1 ||
        echo "  rollout exited $? (see $run/rollout.log)"
    grep -m1 '^rollout: ' "$run/rollout.log" || true
    grep -m1 'refusing to run untrusted code' "$run/rollout.log" || true
    grep 'taken out of the pool' "$run/rollout.log" || true
    stop_smi
    stop_teacher
    [[ -n "$keeper_pid" ]] && { kill "$keeper_pid" 2>/dev/null; wait "$keeper_pid" 2>/dev/null || true; }
    done_runs+=("$run")
    "$KSMITH_PYTHON" "$here/scripts/rollout_scaling_table.py" "${done_runs[@]}" >"$out/bench.md"
    if [[ -n "${TRACE:-}" ]]; then
        "$KSMITH_PYTHON" "$here/scripts/gate_trace.py" "${done_runs[@]}" >"$out/gate.md" ||
            echo "  gate_trace.py failed (see $run/workers)"
    fi
done
if [[ ${#done_runs[@]} -eq 0 ]]; then
    echo "multi_gpu_bench: no run fitted in DEADLINE_S=$deadline_s" >&2
    exit 1
fi
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader >"$out/gpus.txt" || true
echo
echo "GPUs: $(paste -sd';' "$out/gpus.txt")"
echo "total $(( $(date +%s) - t_start )) s"
cat "$out/bench.md"
