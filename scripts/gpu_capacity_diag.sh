#!/usr/bin/env bash
# GPU memory with many evaluations at once, in one device call: the rollout bench
# (scripts/multi_gpu_bench.sh, latency 0, one GPU per run) with HIGH evaluations and tasks in
# flight beside LOW on a second GPU (in sequence on one GPU when only one is visible), while
# scripts/gpu_memory_sampler.py samples every second each GPU's memory and each process's (by
# role: judge, harness, reference) and keeps the evaluator workers' logs (their stderr: a
# failure's whole text, the capacity notices, the KSMITH_EVAL_TRACE lines).
#
#   scripts/gpu_capacity_diag.sh OUTDIR
#
# Environment (defaults in brackets): KSMITH_BIN, KSMITH_PYTHON (as multi_gpu_bench.sh);
# HIGH [32], LOW [16]; RUN_S [240 side by side, 150 each in sequence]; WARMUP_S [30];
# LIMIT_S [470]: each bench is stopped past this many seconds from the start (its logs stay).
# Outputs (few files, as a device call returns them): OUTDIR/summary.md (each bench's table, the
# memory summary, the warnings of the rollouts and the capacity lines of the workers) and
# OUTDIR/logs.tar.gz (rollout logs, worker logs, samples, bench tables).
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${1:?usage: gpu_capacity_diag.sh OUTDIR}"
py="${KSMITH_PYTHON:-$(command -v python3)}"
export KSMITH_PYTHON="$py" KSMITH_EVAL_TRACE=1
high="${HIGH:-32}"
low="${LOW:-16}"
limit_s="${LIMIT_S:-470}"
work=/tmp/ksmith-capacity-diag
rm -rf "$work"
mkdir -p "$work" "$out"
t0=$(date +%s)
visible=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)
if [[ "$visible" -lt 1 ]]; then
    echo "gpu_capacity_diag: no GPU visible" >&2
    exit 1
fi

bench() { # $1: label, $2: GPU, $3: evaluations and tasks in flight, $4: seconds left
    mkdir -p "$work/rt-$1"
    RUNTIME_DIR="$work/rt-$1" FIRST_GPU="$2" GPUS=1 LATENCIES=0 INFLIGHT="$3" PARALLEL_TASKS="$3" \
        LABEL="$1" RUN_S="$run_s" WARMUP_S="${WARMUP_S:-30}" DEADLINE_S=100000 \
        timeout "$4" "$here/scripts/multi_gpu_bench.sh" "$work/$1" >"$work/$1.log" 2>&1
    echo "bench $1 (GPU $2, $3 at once) ended with $? after $(( $(date +%s) - t0 )) s" | tee -a "$work/ended.txt"
}
sampler() { # $1: folder, then LABEL=GLOB of worker logs
    local dir="$1"
    shift
    local args=()
    for spec in "$@"; do args+=(--logs "$spec"); done
    "$py" "$here/scripts/gpu_memory_sampler.py" sample "$dir" "${args[@]}" &
    sampler_pid=$!
}

if [[ "$visible" -ge 2 ]]; then
    run_s="${RUN_S:-240}"
    sampler "$work/mem" "high=$work/rt-high/ksmith-eval-*/worker-*.log" "low=$work/rt-low/ksmith-eval-*/worker-*.log"
    bench high 0 "$high" "$limit_s" &
    high_pid=$!
    bench low 1 "$low" "$limit_s" &
    wait "$high_pid" $!
    kill -TERM "$sampler_pid"
    wait "$sampler_pid"
    "$py" "$here/scripts/gpu_memory_sampler.py" summary "$work/mem" --gpu "0=$high at once" --gpu "1=$low at once" \
        >"$work/memory.md"
else
    run_s="${RUN_S:-150}"
    half=$(( limit_s / 2 ))
    for spec in "high $high" "low $low"; do
        read -r label n <<<"$spec"
        sampler "$work/mem-$label" "$label=$work/rt-$label/ksmith-eval-*/worker-*.log"
        bench "$label" 0 "$n" "$half"
        kill -TERM "$sampler_pid"
        wait "$sampler_pid"
        "$py" "$here/scripts/gpu_memory_sampler.py" summary "$work/mem-$label" --gpu "0=$n at once" \
            >>"$work/memory.md"
    done
fi

{
    echo "# GPU capacity diagnostic ($(date -u +%Y-%m-%dT%H:%MZ), $visible GPU(s): $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1))"
    echo
    cat "$work/ended.txt"
    for label in high low; do
        echo
        echo "## $label"
        echo
        cat "$work/$label/bench.md" 2>/dev/null || echo "(no table: see $label.log in logs.tar.gz)"
        echo
        echo "rollout warnings:"
        grep -h -E 'warning|taken out|ran out of GPU memory|rollout exited' "$work/$label"/runs/*/rollout.log 2>/dev/null |
            cut -c1-600 | head -40
    done
    echo
    echo "## GPU memory"
    echo
    cat "$work/memory.md"
    echo
    echo "## Worker logs: capacity and failures"
    echo
    for f in "$work"/mem*/logs/*.log; do
        [[ -e "$f" ]] || continue
        echo "$(basename "$f"): $(grep -c capacity_retry "$f") capacity retries"
        grep -h -E 'ran out of GPU memory|waits for the GPU|OutOfMemoryError|out of memory|Traceback|Error' "$f" | cut -c1-400 | head -20
    done
} >"$out/summary.md"
tar -C "$work" -czf "$out/logs.tar.gz" --exclude='work' --exclude='tasks' --exclude='rt-*' . 2>/dev/null
ls -l "$out"
cat "$out/summary.md"
