"""The CUDA backend (see `backend`): KernelBench's inline CUDA, a Python program whose module-level
`torch.utils.cpp_extension.load_inline` calls build the extensions `ModelNew` calls.

On the worker's side (`CudaBackend`): the toolchain (`cudacache.find_toolchain`, once; missing:
`BackendUnavailable`), then per candidate the extensions read from its text
(`cuda_source.extensions`), each looked up in the worker's build cache by its spec and the
toolchain and, when absent, compiled by a confined build child that loads nothing it built
(`build_child`) and adopted into the cache by the worker. A failed build is `compile_error` with
the compiler's first errors. Builds of one extension are serialized (the second evaluation finds
the first's binary); builds hold no GPU gate, so they run beside other candidates' timing.

On the harness's side (`CudaHarness`): before the candidate is imported, each binary is checked
against the SHA-256 the worker recorded and imported, and `load_inline` is replaced by a function
that hands the candidate the module built for the same spec (a call the worker did not build for
raises: the candidate compiles nothing itself). The candidate's kernels are its `__global__`
functions; they are counted in the profile of one call (none: `torch_fallback`), and their share
of the call's GPU time decides `decoy_kernel` with the dispatch log, which sees the ATen calls an
extension makes through the dispatcher (a cuBLAS call made directly shows in the profile as
kernels that are not the candidate's).
"""

from __future__ import annotations

import ast
import importlib.util
import os
import re
import shutil
import tempfile
import threading
import time
import weakref
from typing import Any

from . import cuda_source, cudacache, messages
from .backend import Backend, BackendUnavailable, CandidateFailed, HarnessSide, Prepared
from .sandbox import ChildDied, ChildForged, ChildTimeout


class CudaBackend(Backend):
    """CUDA on the worker's side (see the module doc)."""

    NAME = "cuda"
    LABEL = "CUDA"

    def __init__(self, ev: Any):
        super().__init__(ev)
        # outside the evaluator's root, whose other folders each child hides: children read it
        self.root = tempfile.mkdtemp(prefix="ksmith-cuda-", dir=ev.runtime_dir)
        weakref.finalize(self, shutil.rmtree, self.root, True)
        self.cache = cudacache.BuildCache(self.root)
        self._toolchain: cudacache.Toolchain | None = None
        self._missing: str | None = None
        self._lock = threading.Lock()
        #: Seconds of every build child run, for the bench (`stats`).
        self.build_seconds: list[float] = []

    def toolchain(self) -> cudacache.Toolchain:
        """The toolchain, found once (`BackendUnavailable` while it is missing)."""
        with self._lock:
            if self._toolchain is None and self._missing is None:
                import torch

                try:
                    self._toolchain = cudacache.find_toolchain(
                        self.ev.compute_capability(), torch.__version__, torch.version.cuda
                    )
                except cudacache.ToolchainMissing as e:
                    self._missing = str(e)
            if self._toolchain is None:
                raise BackendUnavailable(self._missing or "the CUDA toolchain is unavailable")
            return self._toolchain

    def check_available(self) -> None:
        self.toolchain()

    def prepare(self, candidate: str) -> Prepared:
        toolchain = self.toolchain()
        specs = _specs(candidate)
        entries: list[dict[str, Any]] = []
        kernels: set[str] = set()
        to_build: list[tuple[str, cuda_source.ExtensionSpec]] = []
        for spec in specs:
            kernels.update(cuda_source.kernel_names(spec))
            to_build.append((cudacache.entry_key(spec.digest, toolchain.key()), spec))
        t0 = time.monotonic()
        cached = True
        for key, spec in to_build:
            with self.cache.lock(key):
                entry = self.cache.lookup(key)
                if entry is None:
                    cached = False
                    entry = self._build(key, spec, toolchain)
            entries.append({**entry.to_dict(), "digest": spec.digest})
        return Prepared(
            config={"extensions": entries, "cuda_kernels": sorted(kernels)},
            compile_s=round(time.monotonic() - t0, 3),
            cached=cached,
        )

    def _build(self, key: str, spec: cuda_source.ExtensionSpec, toolchain: cudacache.Toolchain) -> cudacache.Entry:
        """Builds `spec` in a build child and adopts its binary under `key`; `CandidateFailed`
        (`compile_error`) with the compiler's first errors when it does not build."""
        o = self.ev.opts
        module = spec.module_name()
        config = {"extensions": [{"module": module, "spec": spec.to_dict()}]}
        with self.ev._workspace("build", config, {}) as d:
            child = self.ev._spawn("ksmith.evaluator.build_child", d, toolchain.build_env())
            try:
                msg = child.receive(float(o["compile_timeout_s"]))
            except ChildTimeout as e:
                raise CandidateFailed("timeout", None, f"compiling the CUDA extension: {e}") from None
            except (ChildDied, ChildForged) as e:
                raise CandidateFailed(
                    "compile_error", None, f"the CUDA build failed: {e}\n{child.log_tail()}"
                ) from None
            finally:
                child.finish()
            if isinstance(msg, messages.SandboxFailed):
                raise RuntimeError("the evaluator could not confine the build child: " + msg.message)
            if isinstance(msg, messages.ExtensionsFailed):
                if msg.toolchain:
                    raise BackendUnavailable(msg.message)
                raise CandidateFailed("compile_error", None, "nvcc / the C++ compiler failed:\n" + msg.message)
            if not isinstance(msg, messages.ExtensionsBuilt) or module not in msg.files:
                raise RuntimeError(f"unexpected answer from the build child: {msg.TYPE}")
            self.build_seconds.append(msg.seconds)
            built = os.path.realpath(os.path.join(d, msg.files[module]))
            if not built.startswith(os.path.realpath(d) + os.sep):
                raise RuntimeError(f"the build child named a file outside its workspace: {msg.files[module]!r}")
            return self.cache.adopt(key, module, built)

    def stats(self) -> dict[str, Any]:
        """The build cache's hits and misses, and the builds' seconds."""
        return {**self.cache.stats(), "builds_s": list(self.build_seconds)}

    def close(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


def _specs(candidate: str) -> list[cuda_source.ExtensionSpec]:
    """The candidate's extensions (read again whether the static checks ran or not: the worker
    builds from them); `CandidateFailed` when they cannot be read."""
    try:
        tree = ast.parse(candidate)
    except SyntaxError as e:
        raise CandidateFailed("compile_error", None, f"SyntaxError: {e.msg} (line {e.lineno})") from None
    imported: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                imported[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module:
            for a in node.names:
                imported[a.asname or a.name] = f"{node.module}.{a.name}"

    def resolve(dotted: str) -> str:
        head, _, rest = dotted.partition(".")
        full = imported.get(head, head)
        return f"{full}.{rest}" if rest else full

    try:
        specs = cuda_source.extensions(tree, resolve)
    except cuda_source.SpecError as e:
        raise CandidateFailed("static_rejected", None, str(e)) from None
    if not specs:
        raise CandidateFailed(
            "static_rejected", None, "no `load_inline` CUDA extension is built at module level (the CUDA backend)"
        )
    return [specs[k] for k in sorted(specs)]


class CudaHarness(HarnessSide):
    """CUDA in the harness (see the module doc)."""

    LABEL = "CUDA"
    LAUNCHES_FROM_PROFILE = True

    def before_import(self) -> None:
        import torch.utils.cpp_extension as cpp_extension

        modules: dict[str, Any] = {}
        for e in self.cfg.get("extensions", []):
            if cudacache.file_sha256(e["path"]) != e["sha256"]:
                raise RuntimeError(f"the built extension {e['module']} is not the one the worker recorded")
            spec = importlib.util.spec_from_file_location(e["module"], e["path"])
            if spec is None or spec.loader is None:
                raise ImportError(f"cannot load the built extension {e['path']}")
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            modules[e["digest"]] = module

        def load_inline(*args: Any, **kwargs: Any) -> Any:
            names = ["name", "cpp_sources", "cuda_sources", "functions"]
            if len(args) > len(names):
                raise TypeError("load_inline: pass the arguments past `functions` by keyword")
            kwargs.update(zip(names, args))
            digest = cuda_source.ExtensionSpec.from_call(kwargs).digest
            if digest not in modules:
                raise RuntimeError(
                    "load_inline: this extension is not one the evaluator built from the program's text (its arguments "
                    "must be literals, or module-level names bound once to literals)"
                )
            return modules[digest]

        cpp_extension.load_inline = load_inline

    def kernels(self, launched: dict[str, int]) -> set[str]:
        return set(self.cfg.get("cuda_kernels", []))

    @staticmethod
    def owns(event: str, kernels: set[str]) -> bool:
        """A demangled kernel name (``name(args)``, ``void name<T>(args)``, ``ns::name(args)``)
        whose function name is one of `kernels`."""
        return any(re.search(rf"(^|[\s:]){re.escape(k)}\s*[(<]", event) for k in kernels)
