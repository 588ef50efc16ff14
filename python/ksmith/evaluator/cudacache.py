"""The CUDA backend's toolchain and its build cache, both on the worker's (trusted) side.

`find_toolchain` looks for what an inline extension needs (nvcc, ninja, a C++ compiler) and
reads their versions; what is missing is named, with how to get it. `Toolchain.key` hashes the
versions, torch's and CUDA's, and the architecture the extensions are built for.

`BuildCache` keeps the extensions built on this worker, one folder per entry, named by
`entry_key` (the extension's spec digest, see `cuda_source.ExtensionSpec`, and the toolchain's
key), with a manifest that records the module's name and the SHA-256 of its binary. It is shared
by the worker's children, and safe against a candidate writing into it:

- only the worker writes it (`adopt`): the binary comes from a build child, which runs the
  compilers on the extension's text and never loads what they produce (no candidate code runs
  there), and is copied into a fresh folder that is renamed into place whole;
- the children see it read-only (it lies outside their workspaces, and the sandbox remounts
  everything but the workspace read-only);
- every read is content-verified: `lookup` (the worker) and the harness (before it loads a
  binary) compare its SHA-256 with the manifest's, and an entry that differs is dropped (the
  worker builds it again).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from typing import Any

#: Entries a worker keeps (the most recently used).
MAX_ENTRIES = 512
#: How many lines of a failed build the feedback keeps.
ERROR_LINES = 12


class ToolchainMissing(Exception):
    """The CUDA backend cannot build here; the message names what is missing and how to get it."""


@dataclasses.dataclass(frozen=True)
class Toolchain:
    """The programs an inline extension is built with, and what decides its binary."""

    nvcc: str
    nvcc_version: str
    ninja: str
    cxx: str
    cxx_version: str
    torch: str
    cuda: str
    #: ``TORCH_CUDA_ARCH_LIST`` for the builds, e.g. ``9.0`` (the device's compute capability).
    arch: str

    def key(self) -> str:
        """The hash of everything but the paths."""
        fields = {k: v for k, v in dataclasses.asdict(self).items() if k not in ("nvcc", "ninja", "cxx")}
        return hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()

    def build_env(self) -> dict[str, str]:
        """What a build child's environment adds: the programs' folders first on ``PATH``,
        ``CUDA_HOME``, the architecture, and ``CXX``."""
        folders = []
        for program in (self.nvcc, self.ninja, self.cxx):
            folder = os.path.dirname(program)
            if folder not in folders:
                folders.append(folder)
        path = os.pathsep.join(folders + [os.environ.get("PATH", "/usr/bin:/bin")])
        return {
            "PATH": path,
            "CUDA_HOME": os.path.dirname(os.path.dirname(self.nvcc)),
            "TORCH_CUDA_ARCH_LIST": self.arch,
            "CXX": self.cxx,
            "MAX_JOBS": "2",
        }


def _version(program: str) -> str:
    out = subprocess.run([program, "--version"], capture_output=True, text=True, timeout=60)
    if out.returncode != 0:
        raise OSError(f"`{program} --version` exited with {out.returncode}")
    return out.stdout.strip()


def _find_nvcc() -> str | None:
    for var in ("CUDA_HOME", "CUDA_PATH"):
        home = os.environ.get(var)
        if home and os.access(os.path.join(home, "bin", "nvcc"), os.X_OK):
            return os.path.join(home, "bin", "nvcc")
    found = shutil.which("nvcc")
    if found:
        return found
    default = "/usr/local/cuda/bin/nvcc"
    return default if os.access(default, os.X_OK) else None


def find_toolchain(arch: str | None, torch_version: str, cuda_version: str | None) -> Toolchain:
    """The toolchain of this machine for building extensions for `arch` (a compute capability
    such as ``9.0``; None: no CUDA device); raises `ToolchainMissing` naming every part missing."""
    missing = []
    if not arch:
        missing.append("a CUDA GPU (this worker has none: the CUDA backend compiles and runs on a GPU only)")
    if not cuda_version:
        missing.append("a CUDA build of torch (torch.version.cuda is None)")
    nvcc = _find_nvcc()
    if nvcc is None:
        missing.append("nvcc (install the CUDA toolkit, or set CUDA_HOME to it)")
    venv_bin = os.path.dirname(sys.executable)
    ninja = shutil.which("ninja") or shutil.which("ninja", path=venv_bin)
    if ninja is None:
        missing.append("ninja (`pip install ninja` in the evaluator's Python environment)")
    cxx = shutil.which(os.environ.get("CXX", "c++")) or shutil.which("g++")
    if cxx is None:
        missing.append("a C++ compiler (c++ or g++; or set CXX)")
    if missing:
        raise ToolchainMissing("the CUDA backend is unavailable on this worker: missing " + "; ".join(missing))
    assert nvcc and ninja and cxx and arch and cuda_version
    try:
        return Toolchain(
            nvcc=nvcc,
            nvcc_version=_version(nvcc),
            ninja=ninja,
            cxx=cxx,
            cxx_version=_version(cxx).splitlines()[0],
            torch=torch_version,
            cuda=cuda_version,
            arch=arch,
        )
    except (OSError, subprocess.SubprocessError) as e:
        raise ToolchainMissing(f"the CUDA backend is unavailable on this worker: a compiler does not run: {e}") from e


def entry_key(spec_digest: str, toolchain_key: str) -> str:
    """The cache entry of an extension spec built by a toolchain."""
    return hashlib.sha256(f"{spec_digest}:{toolchain_key}".encode()).hexdigest()[:32]


def file_sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


@dataclasses.dataclass(frozen=True)
class Entry:
    """A built extension in the cache: its module name, binary and the binary's SHA-256."""

    module: str
    path: str
    sha256: str

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


class BuildCache:
    """The worker's cache of built extensions (see the module doc). Thread-safe; `lock(key)`
    serializes the builds of one entry, so concurrent evaluations of one extension build it
    once."""

    def __init__(self, root: str):
        self.root = root
        os.makedirs(root, exist_ok=True)
        self.hits = 0
        self.misses = 0
        self._lock = threading.Lock()
        self._locks: dict[str, threading.Lock] = {}

    def lock(self, key: str) -> threading.Lock:
        with self._lock:
            return self._locks.setdefault(key, threading.Lock())

    def _folder(self, key: str) -> str:
        if not re.fullmatch(r"[0-9a-f]{32}", key):
            raise ValueError(f"not a cache key: {key!r}")
        return os.path.join(self.root, key)

    def lookup(self, key: str, count: bool = True) -> Entry | None:
        """The entry `key` when present and its binary is the one recorded (an entry that differs
        is removed); counts a hit or a miss when `count`."""
        folder = self._folder(key)
        entry = None
        try:
            with open(os.path.join(folder, "manifest.json")) as f:
                m = json.load(f)
            path = os.path.join(folder, os.path.basename(str(m["file"])))
            if file_sha256(path) == m["sha256"]:
                entry = Entry(module=str(m["module"]), path=path, sha256=str(m["sha256"]))
            else:
                shutil.rmtree(folder, ignore_errors=True)
        except (OSError, ValueError, KeyError, TypeError):
            entry = None
        if count:
            with self._lock:
                if entry is None:
                    self.misses += 1
                else:
                    self.hits += 1
        if entry is not None:
            os.utime(folder)
        return entry

    def adopt(self, key: str, module: str, built: str) -> Entry:
        """Copies the binary `built` (a build child's output) into the entry `key`, whole or not
        at all, and keeps the `MAX_ENTRIES` most recently used entries."""
        folder = self._folder(key)
        tmp = tempfile.mkdtemp(prefix=".adopt-", dir=self.root)
        try:
            name = f"{module}.so"
            if os.path.islink(built) or not os.path.isfile(built):
                raise OSError(f"the build child's output {built} is not a plain file")
            shutil.copyfile(built, os.path.join(tmp, name))
            digest = file_sha256(os.path.join(tmp, name))
            with open(os.path.join(tmp, "manifest.json"), "w") as f:
                json.dump({"module": module, "file": name, "sha256": digest}, f)
            shutil.rmtree(folder, ignore_errors=True)
            os.rename(tmp, folder)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        self._evict()
        return Entry(module=module, path=os.path.join(folder, name), sha256=digest)

    def _evict(self) -> None:
        folders = [os.path.join(self.root, n) for n in os.listdir(self.root) if not n.startswith(".")]
        folders.sort(key=lambda p: os.stat(p).st_mtime, reverse=True)
        for old in folders[MAX_ENTRIES:]:
            shutil.rmtree(old, ignore_errors=True)

    def stats(self) -> dict[str, Any]:
        """Hits and misses so far, and the hit rate."""
        with self._lock:
            total = self.hits + self.misses
            return {"hits": self.hits, "misses": self.misses, "hit_rate": self.hits / total if total else None}


def first_errors(output: str, workspace: str = "", limit: int = ERROR_LINES) -> str:
    """The compiler's first errors in a build's output (each error line and the line after it),
    with the build folder's path and ninja's own lines removed; the output's last lines when no
    line says `error`."""
    if workspace:
        output = output.replace(workspace.rstrip("/") + "/", "")
    output = re.sub(r"^Error building extension '[^']*':\s*", "", output)
    # ninja's own lines (the commands it ran, what failed, that it stopped) say nothing of the code
    lines = [ln for ln in output.splitlines() if not ln.lstrip().startswith(("[", "FAILED:", "ninja:"))]
    picked: list[str] = []
    for i, line in enumerate(lines):
        if re.search(r"\berror\b", line, re.IGNORECASE):
            picked.append(line.strip())
            if i + 1 < len(lines) and not re.search(r"\berror\b", lines[i + 1], re.IGNORECASE):
                picked.append("  " + lines[i + 1].strip())
        if len(picked) >= limit:
            break
    if not picked:
        picked = [ln.strip() for ln in lines[-limit:]]
    return "\n".join(picked[:limit])
