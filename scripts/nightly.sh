#!/usr/bin/env bash
# Nightly refresh: re-crawls the sources, re-runs what changed and keeps each night's datasets
# side by side. Cron-friendly: one run at a time (a lock), quiet on success, everything logged
# to a file, and an exit code that says what failed. A failed night never replaces the last
# good dataset.
#
#   scripts/nightly.sh [CONFIG]          (default configs/nightly.toml)
#
# Environment:
#   KSMITH_STATE   state folder (default ~/.local/share/ksmith/nightly): work/, datasets/, logs/
#   KSMITH_BIN     the ksmith binary (default: target/release/ksmith, built if missing)
#
# Exit codes: 0 ok; 2 bad configuration; 3 setup failed (build or Python environment);
# 10 crawl, 11 extract, 12 probe, 13 dedup, 14 cluster, 15 rollout, 16 select, 17 export failed;
# 20 publishing the dataset failed; 75 another nightly run holds the lock.
set -uo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
config="${1:-$here/configs/nightly.toml}"
state="${KSMITH_STATE:-$HOME/.local/share/ksmith/nightly}"
bin="${KSMITH_BIN:-$here/target/release/ksmith}"
stamp="$(date -u +%Y%m%dT%H%M%SZ)"
mkdir -p "$state/logs" "$state/datasets" "$state/work"
log="$state/logs/nightly-$stamp.log"

exec 9>"$state/nightly.lock"
if ! flock -n 9; then
    echo "nightly: another run holds $state/nightly.lock" >&2
    exit 75
fi

say() { echo "[$(date -u +%H:%M:%SZ)] $*" >>"$log"; }
fail() {
    say "FAILED: $2 (exit $1)"
    echo "nightly: $2; log: $log" >&2
    exit "$1"
}

say "nightly run $stamp, config $config, pipeline $(git -C "$here" rev-parse HEAD 2>/dev/null || echo unknown)"
if [[ -z "${KSMITH_BIN:-}" ]]; then
    (cd "$here" && make --no-print-directory venv sandbox build) >>"$log" 2>&1 \
        || fail 3 "setup (make venv sandbox build) failed"
fi
"$bin" check --config "$config" --workdir "$state/work" >>"$log" 2>&1 || fail 2 "configuration $config is invalid"

code=10
for stage in crawl extract probe dedup cluster rollout select export; do
    say "stage $stage"
    "$bin" "$stage" --config "$config" --workdir "$state/work" --quiet >>"$log" 2>&1 \
        || fail "$code" "stage $stage failed"
    code=$((code + 1))
done

# Publish: copy the datasets into a folder named after the night, write its manifest, then
# move it into place and repoint `latest` atomically. Nothing is published before all of it
# is complete.
src="$state/work/datasets"
dest="$state/datasets/$stamp"
tmp="$state/datasets/.tmp-$stamp"
rm -rf "$tmp"
mkdir -p "$tmp" || fail 20 "cannot create $tmp"
if [[ -d "$src" ]]; then
    cp -a "$src/." "$tmp/" || fail 20 "cannot copy $src"
fi
cp -a "$state/work/reports" "$tmp/reports" 2>/dev/null || true
"$bin" report --workdir "$state/work" --out "$tmp/report.html" >>"$log" 2>&1 || fail 20 "report failed"
python3 - "$tmp" "$config" "$here" "$stamp" >>"$log" 2>&1 <<'PY' || fail 20 "manifest failed"
import hashlib, json, os, subprocess, sys
tmp, config, repo, stamp = sys.argv[1:5]
def commit():
    try:
        return subprocess.run(["git", "-C", repo, "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    except Exception:
        return None
reports = {}
rdir = os.path.join(tmp, "reports")
if os.path.isdir(rdir):
    for name in sorted(os.listdir(rdir)):
        with open(os.path.join(rdir, name)) as f:
            r = json.load(f)
        reports[r["stage"]] = {k: r[k] for k in ("rows_read", "rows_written", "dropped", "skipped")}
datasets = {}
for name in sorted(os.listdir(tmp)):
    d = os.path.join(tmp, name)
    if os.path.isdir(d) and name != "reports":
        datasets[name] = sorted(os.path.relpath(os.path.join(r, f), d) for r, _, fs in os.walk(d) for f in fs)
with open(config, "rb") as f:
    config_hash = hashlib.sha256(f.read()).hexdigest()
manifest = {"night": stamp, "config": config, "config_sha256": config_hash,
            "pipeline_commit": commit(), "stages": reports, "datasets": datasets}
with open(os.path.join(tmp, "manifest.json"), "w") as f:
    json.dump(manifest, f, indent=2, sort_keys=True)
PY
mv "$tmp" "$dest" || fail 20 "cannot move $tmp to $dest"
ln -sfn "$stamp" "$state/datasets/latest.tmp" && mv -T "$state/datasets/latest.tmp" "$state/datasets/latest" \
    || fail 20 "cannot repoint $state/datasets/latest"
say "published $dest"
exit 0
