#!/usr/bin/env python3
"""GPU memory while evaluator workers run: samples it, then says what each kind of process holds.

    gpu_memory_sampler.py sample DIR [--interval S] [--logs LABEL=GLOB ...]
    gpu_memory_sampler.py summary DIR [--gpu INDEX=LABEL ...]

`sample` runs until it is terminated (SIGTERM or SIGINT), every `--interval` seconds (1):
`nvidia-smi`'s memory used and total and utilization of every GPU (DIR/devices.csv: t, index,
bus id, used MiB, total MiB, util %), and the memory of every process with a CUDA context
(DIR/apps.csv: t, bus id, pid, used MiB, role). A process's role is read once from its working
folder, which is its workspace for an evaluator child (`judge-...`: a judge, `cand-...`: a
candidate's harness, `ref-...`: a reference's build, time or compile child), else from its command
line (`idle`: the gate's idle probe, `health`: the device check, else `other`). It also copies the
files of each `--logs` glob (the evaluator workers' logs, which the pool removes when it stops)
into DIR/logs/ as LABEL-NAME whenever they grew.

`summary` prints, per GPU (named by `--gpu`), the peak memory used and the samples above 95 % of
it, and per role the processes at once at the peak and each process's memory (median, max): what
one evaluation holds on the GPU (a harness and a judge) and how many fit.
"""

from __future__ import annotations

import argparse
import csv
import glob
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time
from typing import Any

ROLES = (("judge-", "judge"), ("cand-", "harness"), ("ref-", "reference"))


def _smi(query: str) -> list[list[str]]:
    try:
        out = subprocess.run(
            ["nvidia-smi", query, "--format=csv,noheader,nounits"], capture_output=True, text=True, timeout=20
        )
    except (OSError, subprocess.SubprocessError):
        return []
    if out.returncode != 0:
        return []
    return [[c.strip() for c in line.split(",")] for line in out.stdout.splitlines() if line.strip()]


def _mib(text: str) -> str:
    return text if text.replace(".", "", 1).isdigit() else ""


def role(pid: str) -> str:
    """What the process with a CUDA context is (see the module doc)."""
    try:
        cwd = os.path.basename(os.readlink(f"/proc/{pid}/cwd"))
    except OSError:
        cwd = ""
    for prefix, name in ROLES:
        if cwd.startswith(prefix):
            return name
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmd = f.read().replace(b"\0", b" ").decode("utf-8", "replace")
    except OSError:
        return "unknown (gone or hidden)"
    if "ksmith.evaluator.idle" in cmd or "idle" in cwd:
        return "idle"
    if "torch.randn(256, 256" in cmd:
        return "health"
    return "other"


def sample(out: str, interval: float, logs: list[str]) -> None:
    """The `sample` command (see the module doc)."""
    os.makedirs(os.path.join(out, "logs"), exist_ok=True)
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    signal.signal(signal.SIGINT, lambda *_: stop.append(1))
    roles: dict[str, str] = {}
    sizes: dict[str, int] = {}
    globs = [spec.split("=", 1) for spec in logs]
    with (
        open(os.path.join(out, "devices.csv"), "a", newline="") as fd,
        open(os.path.join(out, "apps.csv"), "a", newline="") as fa,
    ):
        dev, app = csv.writer(fd), csv.writer(fa)
        while not stop:
            t = f"{time.time():.2f}"
            for row in _smi("--query-gpu=index,pci.bus_id,memory.used,memory.total,utilization.gpu"):
                if len(row) == 5:
                    dev.writerow([t, row[0], row[1], _mib(row[2]), _mib(row[3]), _mib(row[4])])
            for row in _smi("--query-compute-apps=gpu_bus_id,pid,used_memory"):
                if len(row) == 3:
                    pid = row[1]
                    if pid not in roles:
                        roles[pid] = role(pid)
                    app.writerow([t, row[0], pid, _mib(row[2]), roles[pid]])
            fd.flush()
            fa.flush()
            for label, pattern in globs:
                for path in glob.glob(pattern):
                    try:
                        size = os.path.getsize(path)
                        if sizes.get(path) != size:
                            shutil.copyfile(path, os.path.join(out, "logs", f"{label}-{os.path.basename(path)}"))
                            sizes[path] = size
                    except OSError:
                        continue
            time.sleep(interval)


def _rows(path: str) -> list[list[str]]:
    try:
        with open(path, newline="") as f:
            return [r for r in csv.reader(f) if r]
    except OSError:
        return []


def summary(out: str, names: dict[str, str]) -> str:
    """The `summary` command's text (see the module doc)."""
    devices = _rows(os.path.join(out, "devices.csv"))
    apps = _rows(os.path.join(out, "apps.csv"))
    bus_index = {r[2]: r[1] for r in devices}
    lines = [
        "| GPU | run | samples | peak used MiB | total MiB | samples >= 95 % | util mean % |",
        "|---|---|---|---|---|---|---|",
    ]
    for index in sorted({r[1] for r in devices}):
        mine = [r for r in devices if r[1] == index and r[3]]
        if not mine:
            continue
        used = [float(r[3]) for r in mine]
        total = float(mine[0][4] or 0)
        full = sum(1 for u in used if total and u >= 0.95 * total)
        util = [float(r[5]) for r in mine if r[5]]
        mean_util = f"{statistics.mean(util):.0f}" if util else "-"
        lines.append(
            f"| {index} | {names.get(index, '')} | {len(mine)} | {max(used):.0f} | {total:.0f} | {full} | {mean_util} |"
        )
    lines += [
        "",
        "| GPU | role | processes at the peak sample | MiB per process, median | max | processes seen |",
        "|---|---|---|---|---|---|",
    ]
    by_gpu: dict[str, dict[str, list[list[str]]]] = {}
    for r in apps:
        by_gpu.setdefault(bus_index.get(r[1], r[1]), {}).setdefault(r[0], []).append(r)
    for index, samples in sorted(by_gpu.items()):
        peak_t = max(samples, key=lambda t: sum(float(r[3] or 0) for r in samples[t]))
        per_role: dict[str, Any] = {}
        for rows in samples.values():
            for r in rows:
                per_role.setdefault(r[4], {"mib": [], "pids": set()})
                per_role[r[4]]["pids"].add(r[2])
                if r[3]:
                    per_role[r[4]]["mib"].append(float(r[3]))
        for name, d in sorted(per_role.items()):
            at_peak = sum(1 for r in samples[peak_t] if r[4] == name)
            med = f"{statistics.median(d['mib']):.0f}" if d["mib"] else "n/a"
            top = f"{max(d['mib']):.0f}" if d["mib"] else "n/a"
            lines.append(f"| {index} | {name} | {at_peak} | {med} | {top} | {len(d['pids'])} |")
    if not apps:
        lines.append("| - | (nvidia-smi listed no process: per-process memory not visible here) | | | | |")
    return "\n".join(lines) + "\n"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("sample")
    s.add_argument("dir")
    s.add_argument("--interval", type=float, default=1.0)
    s.add_argument("--logs", action="append", default=[], help="LABEL=GLOB of files to keep")
    m = sub.add_parser("summary")
    m.add_argument("dir")
    m.add_argument("--gpu", action="append", default=[], help="INDEX=LABEL")
    a = p.parse_args()
    if a.cmd == "sample":
        sample(a.dir, a.interval, a.logs)
        return 0
    names = dict(spec.split("=", 1) for spec in a.gpu)
    sys.stdout.write(summary(a.dir, names))
    return 0


if __name__ == "__main__":
    sys.exit(main())
