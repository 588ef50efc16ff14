"""A persistent Triton cache per worker, that no candidate can write for another.

A candidate child compiles into its own workspace (``TRITON_CACHE_DIR``), which is the only place
it may write. Triton's cache manager in the children is `LayeredCache` (``TRITON_CACHE_MANAGER``):
it also reads, read-only, the worker's cache for the candidate's program (``KSMITH_TRITON_SHARED``),
so a program evaluated again (a repeat, a reward's recheck, the hidden size sets' rebuilds of the
same kernels) does not compile again. After a candidate child ends, the worker adopts what it
compiled into that program's folder (`adopt`).

The cache is keyed by the candidate's program text: a compiled kernel or launcher (native code the
next child loads) written by one candidate is only ever read by children running the very same
program, so no candidate can plant a binary for another. Kernels shared by different programs are
compiled once per program. The worker keeps the folders of the `MAX_PROGRAMS` programs evaluated
last.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile

from triton.runtime.cache import FileCacheManager

#: The variable naming the read-only cache folder of the child's program.
SHARED_VAR = "KSMITH_TRITON_SHARED"
#: What a child's ``TRITON_CACHE_MANAGER`` is.
MANAGER = "ksmith.evaluator.tritoncache:LayeredCache"
#: Programs whose compiled kernels a worker keeps.
MAX_PROGRAMS = 256
#: Most bytes adopted from one child.
MAX_ADOPTED = 64 << 20


class LayeredCache(FileCacheManager):
    """Triton's file cache in the child's own folder, falling back to the program's shared folder
    for reading."""

    def __init__(self, key: str, override: bool = False, dump: bool = False):
        super().__init__(key, override, dump)
        shared = os.environ.get(SHARED_VAR)
        self.shared_dir = os.path.join(shared, key) if shared and not (override or dump) else None

    def get_file(self, filename: str) -> str | None:
        own: str | None = super().get_file(filename)
        if own is not None or self.shared_dir is None:
            return own
        path = os.path.join(self.shared_dir, filename)
        return path if os.path.exists(path) else None

    def get_group(self, filename: str) -> dict[str, str] | None:
        own: dict[str, str] | None = super().get_group(filename)
        if own is not None or self.shared_dir is None:
            return own
        try:
            with open(os.path.join(self.shared_dir, f"__grp__{filename}")) as f:
                children = json.load(f)["child_paths"]
        except (OSError, ValueError, KeyError, TypeError):
            return None
        out = {}
        for name, path in children.items():
            # the group was written in another child's workspace: its files are here now
            here = os.path.join(self.shared_dir, os.path.basename(str(path)))
            if not os.path.exists(here):
                return None
            out[name] = here
        return out


def program_folder(root: str, program: str) -> str:
    """The shared folder of a candidate program."""
    return os.path.join(root, hashlib.sha256(program.encode()).hexdigest()[:24])


def adopt(child_cache: str, folder: str, root: str) -> None:
    """Moves the entries a child compiled (`child_cache`, its ``TRITON_CACHE_DIR``) into its
    program's `folder`, each entry whole or not at all; then keeps the `MAX_PROGRAMS` most
    recently used folders of `root`."""
    if not os.path.isdir(child_cache):
        return
    os.makedirs(folder, exist_ok=True)
    budget = MAX_ADOPTED
    for key in os.listdir(child_cache):
        src = os.path.join(child_cache, key)
        dst = os.path.join(folder, key)
        if os.path.exists(dst) or not os.path.isdir(src) or os.path.islink(src):
            continue
        tmp = tempfile.mkdtemp(prefix=".adopt-", dir=folder)
        try:
            for name in os.listdir(src):
                path = os.path.join(src, name)
                if os.path.isfile(path) and not os.path.islink(path) and not name.startswith("tmp."):
                    budget -= os.path.getsize(path)
                    if budget < 0:
                        raise OSError("over the adoption budget")
                    shutil.copyfile(path, os.path.join(tmp, name))
            os.rename(tmp, dst)
        except OSError:
            shutil.rmtree(tmp, ignore_errors=True)
    os.utime(folder)
    folders = [os.path.join(root, n) for n in os.listdir(root)]
    folders.sort(key=lambda p: os.stat(p).st_mtime, reverse=True)
    for old in folders[MAX_PROGRAMS:]:
        shutil.rmtree(old, ignore_errors=True)
