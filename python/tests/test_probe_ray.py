"""The Ray probe driver's pieces that do not need a cluster: the runner files it ships to the
actors, and the clean-up of folders left by actors that were killed. (The driver on a loopback
Ray cluster, an actor killed mid-run included, is tested from Rust: crates/ksmith-probe/tests.)"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ksmith import probe_ray  # noqa: E402

PYROOT = Path(__file__).resolve().parent.parent


def test_the_runner_files_are_the_worker_and_sandbox_packages():
    files = probe_ray.runner_files(PYROOT)
    assert "ksmith/__init__.py" in files
    for package in ("probe", "confine", "shared"):
        on_disk = sorted(p.name for p in (PYROOT / "ksmith" / package).iterdir() if p.suffix in (".py", ".json"))
        shipped = sorted(k.rsplit("/", 1)[1] for k in files if k.startswith(f"ksmith/{package}/"))
        assert shipped == on_disk
    assert files["ksmith/probe/worker.py"] == (PYROOT / "ksmith/probe/worker.py").read_text()
    # The driver itself and the evaluator are not part of what actors run.
    assert not any(k.startswith("ksmith/evaluator/") or k.endswith("probe_ray.py") for k in files)


def test_folders_of_dead_actors_are_removed_and_live_ones_kept(tmp_path):
    gone = subprocess.Popen(["true"])
    gone.wait()
    dead = tmp_path / f"{probe_ray.ORPHAN_PREFIX}{gone.pid}-abc"
    alive = tmp_path / f"{probe_ray.ORPHAN_PREFIX}{os.getpid()}-def"
    other = tmp_path / "ksmith-probe-ray-notapid-x"
    for d in (dead, alive, other):
        (d / "py").mkdir(parents=True)
    probe_ray._remove_orphans(tmp_path)
    assert not dead.exists()
    assert alive.exists() and other.exists()
