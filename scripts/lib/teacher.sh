# shellcheck shell=bash
# The scripted teacher for end-to-end runs, sourced by scripts/gpu_rollout_bench.sh and
# scripts/multiturn_sample_run.sh (they set $KSMITH_PYTHON and $here, the checkout's root).
#
#   start_scripted_teacher ANSWERS DIR   starts scripts/scripted_teacher.py on the answer folder
#                                        ANSWERS in the background (stopped when the script
#                                        exits), waits for the url it prints to DIR/teacher.json
#                                        and sets TEACHER_URL; fails when none comes in 10 s.
#   write_rollout_config FILE [BACKEND]  writes FILE: a rollout of $ITERATIONS (default 3)
#                                        iterations on one island, $PARALLEL_TASKS (default 1)
#                                        task(s) at a time, measured,
#                                        for BACKEND (`[rollout] backend`, default triton), with
#                                        the scripted teacher as the one endpoint; a caller
#                                        appends its own sections.

start_scripted_teacher() {
    local answers="$1" dir="$2"
    rm -f "$dir/teacher.json"
    "$KSMITH_PYTHON" "$here/scripts/scripted_teacher.py" --answers "$answers" >"$dir/teacher.json" &
    scripted_teacher_pid=$!
    trap 'kill "$scripted_teacher_pid" 2>/dev/null || true' EXIT
    for _ in $(seq 50); do
        [[ -s "$dir/teacher.json" ]] && break
        sleep 0.2
    done
    if [[ ! -s "$dir/teacher.json" ]]; then
        echo "scripted teacher ($answers): no url in $dir/teacher.json after 10 s" >&2
        return 1
    fi
    TEACHER_URL="$("$KSMITH_PYTHON" -c 'import json,sys; print(json.load(open(sys.argv[1]))["url"])' "$dir/teacher.json")"
}

write_rollout_config() {
    cat >"$1" <<TOML
[rollout]
iterations = ${ITERATIONS:-3}
num_islands = 1
parallel_tasks = ${PARALLEL_TASKS:-1}
measure = true
backend = "${2:-triton}"

[teacher]
max_retries = 1

[[teacher.endpoints]]
url = "$TEACHER_URL"
model = "scripted-teacher"
TOML
}
