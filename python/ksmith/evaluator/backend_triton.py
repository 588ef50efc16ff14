"""The Triton backend (see `backend`): kernels compiled by Triton's JIT at the harness's first
call, with a persistent cache per candidate program (`tritoncache`); launches counted by the
launch hook (`integrity.LaunchCounter`)."""

from __future__ import annotations

import os
import shutil
import tempfile
from typing import Any

from . import tritoncache
from .backend import Backend, HarnessSide, Prepared


class TritonBackend(Backend):
    """Triton on the worker's side: nothing to build before the harness; the harness compiles
    into its workspace, reading the worker's cache of its own program, and the worker adopts what
    it compiled afterwards (see `tritoncache`)."""

    NAME = "triton"
    LABEL = "Triton"

    def __init__(self, ev: Any):
        super().__init__(ev)
        # outside the evaluator's root, whose other folders each child hides: children read it
        self.root = tempfile.mkdtemp(prefix="ksmith-triton-", dir=ev.runtime_dir)

    def prepare(self, candidate: str) -> Prepared:
        cache = tritoncache.program_folder(self.root, candidate)
        return Prepared(env={"TRITON_CACHE_MANAGER": tritoncache.MANAGER, tritoncache.SHARED_VAR: cache})

    def after_child(self, candidate: str, workspace: str, prepared: Prepared) -> None:
        cache = prepared.env[tritoncache.SHARED_VAR]
        tritoncache.adopt(os.path.join(workspace, "triton-cache"), cache, self.root)

    def close(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


class TritonHarness(HarnessSide):
    """Triton in the harness: launches counted by the launch hook; a profiled kernel is the
    candidate's when it bears a launched kernel's name."""

    LABEL = "Triton"
