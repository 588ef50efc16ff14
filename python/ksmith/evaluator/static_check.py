"""Static checks on a candidate program, run before anything of it executes.

The checks read the program with Python's `ast` module. They decide three things:

- whether the program is a candidate at all (parses, defines `ModelNew`, and at least one
  kernel of its backend is reachable from `ModelNew` through the module-level names it uses:
  a `@triton.jit` / `@triton.autotune` function for `triton`; for `cuda`, a module-level name
  bound to a `load_inline` extension the evaluator can build from the text, whose sources define
  a `__global__` kernel and pass the source rules of `cuda_source`) -- otherwise
  `static_rejected` (or `compile_error` for a syntax error);
- whether it uses a construct that only serves to cheat or escape -- then `hacked` with the hack
  class (threads and processes: `background_thread`; side streams: `side_stream`; assignments to
  attributes of imported modules: `timer_patch`; tensor subclasses and `__torch_function__`:
  `lazy_output`; `torch.compile`: `torch_fallback`; TF32 / matmul-precision switches:
  `precision_downgrade`; a `try` around a kernel launch: `try_except_fallback`; imports that
  give a capability (processes, files, the network, native code, interpreter internals) or are
  outside the allow-list of harmless modules, `eval`/`exec`/`open`/`__import__`, dynamic
  `getattr`/`setattr` and dunder escapes: `sandbox_escape`);
- non-fatal warnings (a `try` that does not guard a launch, lower-precision dtypes, PyTorch
  compute calls inside `ModelNew`), which the runtime checks then settle.

Static checks are a first filter only: dynamic Python can evade any of them, so every hack class
also has a runtime or parent-side check.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from . import cuda_source

#: The `try` statements (`try`/`except` and `try`/`except*`).
_TRY_NODES = (ast.Try, ast.TryStar)

#: Modules a candidate may import (the root name): the kernel's libraries and standard modules
#: that give no capability (`time`, `json`, `weakref` as such are harmless; patching or misusing
#: them is what the other checks and the runtime layer look for).
ALLOWED_IMPORTS = frozenset(
    {
        "torch",
        "triton",
        "numpy",
        "math",
        "cmath",
        "numbers",
        "decimal",
        "fractions",
        "random",
        "statistics",
        "functools",
        "itertools",
        "operator",
        "collections",
        "heapq",
        "bisect",
        "array",
        "copy",
        "enum",
        "abc",
        "dataclasses",
        "typing",
        "typing_extensions",
        "contextlib",
        "warnings",
        "string",
        "re",
        "textwrap",
        "json",
        "time",
        "weakref",
        "__future__",
    }
)
#: Modules that give a capability a kernel never needs, by what they give (the verdict names it).
CAPABILITY_IMPORTS = {
    "processes": frozenset({"os", "posix", "subprocess", "signal", "pty", "resource", "spawn", "sched", "pwd", "grp"}),
    "files": frozenset(
        {
            "io",
            "pathlib",
            "shutil",
            "tempfile",
            "glob",
            "fileinput",
            "mmap",
            "sqlite3",
            "shelve",
            "dbm",
            "zipfile",
            "tarfile",
            "gzip",
            "bz2",
            "lzma",
            "pickle",
            "marshal",
            "csv",
        }
    ),
    "the network": frozenset(
        {
            "socket",
            "ssl",
            "http",
            "urllib",
            "urllib3",
            "requests",
            "ftplib",
            "smtplib",
            "poplib",
            "imaplib",
            "xmlrpc",
            "socketserver",
            "select",
            "selectors",
            "email",
        }
    ),
    "native code": frozenset({"ctypes", "_ctypes", "cffi"}),
    "interpreter internals": frozenset(
        {
            "sys",
            "gc",
            "inspect",
            "importlib",
            "builtins",
            "types",
            "code",
            "codeop",
            "dis",
            "atexit",
            "traceback",
            "faulthandler",
            "tracemalloc",
            "sysconfig",
            "site",
            "runpy",
            "pkgutil",
            "linecache",
            "ast",
            "__main__",
        }
    ),
}
#: Imports that run work outside the measured call.
THREAD_IMPORTS = frozenset({"threading", "_thread", "multiprocessing", "concurrent", "asyncio"})
#: Builtins that reach outside the program or run generated code.
FORBIDDEN_BUILTINS = frozenset(
    {
        "eval",
        "exec",
        "compile",
        "__import__",
        "open",
        "globals",
        "locals",
        "vars",
        "breakpoint",
        "delattr",
        "setattr",
    }
)
#: Attribute names that give access to interpreter internals.
FORBIDDEN_DUNDERS = frozenset(
    {
        "__globals__",
        "__builtins__",
        "__subclasses__",
        "__code__",
        "__closure__",
        "__dict__",
        "__bases__",
        "__mro__",
        "__loader__",
        "__spec__",
        "__getattribute__",
        "__setattr__",
        "__del__",
        "__reduce__",
        "__reduce_ex__",
        "__import__",
    }
)
#: Names whose use means a tensor subclass or an interposed tensor type.
LAZY_NAMES = frozenset(
    {"_make_subclass", "as_subclass", "__torch_function__", "__torch_dispatch__", "_make_wrapper_subclass"}
)
#: Stream APIs (work outside the timed stream).
STREAM_NAMES = frozenset(
    {"Stream", "stream", "ExternalStream", "wait_stream", "record_stream", "set_stream", "StreamContext"}
)
#: Compilers that generate the kernels for the candidate.
COMPILER_PATHS = ("torch.compile", "torch._dynamo", "torch._inductor", "torch.jit.script", "torch.jit.trace")
#: Switches that lower float32 matmul precision.
PRECISION_SWITCHES = frozenset(
    {
        "allow_tf32",
        "allow_fp16_reduced_precision_reduction",
        "allow_bf16_reduced_precision_reduction",
        "set_float32_matmul_precision",
        "fp32_precision",
    }
)
LOW_PRECISION_NAMES = frozenset({"half", "bfloat16", "float16", "bf16", "fp16", "float8_e4m3fn", "float8_e5m2"})


@dataclass
class StaticVerdict:
    """The outcome of the static checks."""

    #: None when the candidate may run, else `compile_error`, `static_rejected` or `hacked`.
    status: str | None = None
    #: The hack class when `status == "hacked"`.
    hack: str | None = None
    #: Why (line numbers included).
    message: str = ""
    #: Non-fatal findings.
    warnings: list[str] = field(default_factory=list)
    #: Names of the kernels reachable from `ModelNew` (Triton kernels; for `cuda`, the names the
    #: extensions are bound to).
    kernels: list[str] = field(default_factory=list)


class _Finding(Exception):
    def __init__(self, status: str, hack: str | None, message: str):
        super().__init__(message)
        self.status = status
        self.hack = hack
        self.message = message


def _dotted(node: ast.AST) -> str | None:
    """`a.b.c` for an attribute chain rooted at a name, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def _root(node: ast.AST) -> ast.AST:
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node


class _Checker:
    def __init__(self, tree: ast.Module, backend: str = "triton"):
        self.tree = tree
        self.backend = backend
        self.warnings: list[str] = []
        # local name -> full module path, for every import
        self.imported: dict[str, str] = {}
        self.defs: dict[str, ast.AST] = {}
        self.kernels: set[str] = set()

    def fail(self, status: str, hack: str | None, node: ast.AST, message: str) -> None:
        line = getattr(node, "lineno", "?")
        raise _Finding(status, hack, f"line {line}: {message}")

    def resolve(self, dotted: str | None) -> str | None:
        """Maps a local dotted name to its full path through the imports (`F.relu` ->
        `torch.nn.functional.relu`)."""
        if dotted is None:
            return None
        head, _, rest = dotted.partition(".")
        if head in self.imported:
            full = self.imported[head]
            return f"{full}.{rest}" if rest else full
        return dotted

    # -- imports ---------------------------------------------------------------------------
    def check_import(self, node: ast.AST) -> None:
        if isinstance(node, ast.Import):
            names = [
                (a.name, a.asname or a.name.split(".")[0], a.name if a.asname else a.name.split(".")[0])
                for a in node.names
            ]
        else:
            assert isinstance(node, ast.ImportFrom)
            if node.level:
                self.fail("hacked", "sandbox_escape", node, "relative imports are not allowed")
            mod = node.module or ""
            names = [(f"{mod}.{a.name}", a.asname or a.name, f"{mod}.{a.name}") for a in node.names]
            if any(a.name == "*" for a in node.names):
                self.fail("hacked", "sandbox_escape", node, f"`from {mod} import *` is not allowed")
        for full, local, bound in names:
            root = full.split(".")[0]
            if root in THREAD_IMPORTS:
                self.fail("hacked", "background_thread", node, f"import of `{full}` (threads/processes) is not allowed")
            capability = next((c for c, mods in CAPABILITY_IMPORTS.items() if root in mods), None)
            if capability:
                self.fail(
                    "hacked", "sandbox_escape", node, f"import of `{full}` gives access to {capability}, not allowed"
                )
            if root not in ALLOWED_IMPORTS:
                self.fail(
                    "hacked",
                    "sandbox_escape",
                    node,
                    f"import of `{full}` is not allowed (allowed: {', '.join(sorted(ALLOWED_IMPORTS))})",
                )
            self.check_path(full, node)
            self.imported[local] = bound

    # -- dotted paths ----------------------------------------------------------------------
    def check_path(self, full: str, node: ast.AST) -> None:
        parts = full.split(".")
        if self.backend == "cuda":
            if full.startswith("torch.utils.cpp_extension.") and full != "torch.utils.cpp_extension.load_inline":
                why = f"`{full}`: only `load_inline` of torch.utils.cpp_extension is allowed"
                self.fail("static_rejected", None, node, why)
        elif full.startswith("torch.utils.cpp_extension") or "load_inline" in parts:
            self.fail(
                "static_rejected", None, node, "CUDA/C++ extensions are not a Triton kernel (torch.utils.cpp_extension)"
            )
        if any(full == p or full.startswith(p + ".") for p in COMPILER_PATHS):
            self.fail(
                "hacked", "torch_fallback", node, f"`{full}`: a compiler would generate the kernels, not the candidate"
            )
        if parts[0] == "torch" and any(p in STREAM_NAMES for p in parts[1:]):
            self.fail(
                "hacked", "side_stream", node, f"`{full}`: CUDA streams are not allowed (work outside the timed stream)"
            )
        if parts[0] in ("torch", "triton") and any(p in LAZY_NAMES for p in parts[1:]):
            self.fail("hacked", "lazy_output", node, f"`{full}`: tensor subclasses are not allowed")
        if parts[0] == "torch" and any(p in PRECISION_SWITCHES for p in parts[1:]):
            self.fail(
                "hacked", "precision_downgrade", node, f"`{full}`: changing float32 matmul precision is not allowed"
            )
        if parts[0] in ("torch", "triton") and any(p in ("testing", "profiler", "_C", "cuda.nvtx") for p in parts[1:2]):
            if parts[1] == "_C":
                self.fail("hacked", "sandbox_escape", node, f"`{full}`: torch internals are not allowed")
        if parts[0] == "triton" and len(parts) > 1 and parts[1] in ("knobs", "runtime", "compiler", "testing"):
            if not (parts[1] == "runtime" and parts[-1] in ("Config",)):
                self.fail("hacked", "timer_patch", node, f"`{full}`: Triton runtime/knobs internals are not allowed")

    # -- the walk --------------------------------------------------------------------------
    def run(self) -> list[str]:
        for node in self.tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                self.defs[node.name] = node
            elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for t in targets:
                    for n in ast.walk(t):
                        if isinstance(n, ast.Name):
                            self.defs.setdefault(n.id, node)
        for each in ast.walk(self.tree):
            if isinstance(each, (ast.Import, ast.ImportFrom)):
                self.check_import(each)
        for each in ast.walk(self.tree):
            self.check_node(each)
        if self.backend == "cuda":
            self.find_extensions()
        else:
            for name, definition in self.defs.items():
                if isinstance(definition, (ast.FunctionDef, ast.AsyncFunctionDef)) and self.is_kernel(definition):
                    self.kernels.add(name)
        if "ModelNew" not in self.defs or not isinstance(self.defs["ModelNew"], ast.ClassDef):
            self.fail("static_rejected", None, self.tree, "the program does not define `class ModelNew`")
        reach = self.reachable("ModelNew")
        kernels = sorted(self.kernels & reach)
        what = "`load_inline` CUDA extension" if self.backend == "cuda" else "Triton kernel"
        if not self.kernels:
            defined = (
                "no `load_inline` CUDA extension is built at module level"
                if self.backend == "cuda"
                else "no `@triton.jit` or `@triton.autotune` kernel is defined"
            )
            self.fail("static_rejected", None, self.defs["ModelNew"], defined)
        if not kernels:
            self.fail(
                "static_rejected",
                None,
                self.defs["ModelNew"],
                f"no {what} is reachable from ModelNew (defined: {', '.join(sorted(self.kernels))})",
            )
        self.check_try(reach)
        self.check_torch_compute(reach)
        return kernels

    def find_extensions(self) -> None:
        """The CUDA backend's kernels: the names bound to `load_inline` extensions, each passing
        the source rules (`cuda_source`)."""
        try:
            specs = cuda_source.extensions(self.tree, self.resolve)
        except cuda_source.SpecError as e:
            raise _Finding("static_rejected", None, str(e)) from None
        for binding, spec in sorted(specs.items()):
            finding, warnings = cuda_source.source_findings(spec, binding)
            if finding is not None:
                raise _Finding(finding.status, finding.hack, finding.message)
            self.warnings.extend(warnings)
            self.kernels.add(binding)

    def is_kernel(self, fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
        for dec in fn.decorator_list:
            target = dec.func if isinstance(dec, ast.Call) else dec
            full = self.resolve(_dotted(target)) or ""
            if full in (
                "triton.jit",
                "triton.autotune",
                "triton.heuristics",
                "triton.runtime.jit.jit",
            ) or full.endswith("triton.jit"):
                return True
        return False

    def check_node(self, node: ast.AST) -> None:
        if isinstance(node, ast.Name) and node.id in FORBIDDEN_BUILTINS and node.id not in self.defs:
            self.fail("hacked", "sandbox_escape", node, f"`{node.id}` is not allowed")
        if isinstance(node, ast.Name) and node.id in LAZY_NAMES:
            self.fail("hacked", "lazy_output", node, f"`{node.id}` is not allowed")
        if isinstance(node, ast.Attribute):
            if node.attr in FORBIDDEN_DUNDERS:
                self.fail("hacked", "sandbox_escape", node, f"attribute `{node.attr}` is not allowed")
            if node.attr in LAZY_NAMES:
                self.fail(
                    "hacked", "lazy_output", node, f"`{node.attr}` (tensor subclass / interposition) is not allowed"
                )
            full = self.resolve(_dotted(node))
            if full:
                self.check_path(full, node)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if node.name in LAZY_NAMES:
                self.fail("hacked", "lazy_output", node, f"defining `{node.name}` is not allowed")
            if (
                node.name in FORBIDDEN_DUNDERS
                or node.name == "__getattr__"
                and isinstance(node, ast.FunctionDef)
                and self._is_module_level(node)
            ):
                self.fail("hacked", "sandbox_escape", node, f"defining `{node.name}` is not allowed")
        if isinstance(node, ast.ClassDef):
            for base in node.bases:
                full = self.resolve(_dotted(base)) or ""
                if full in ("torch.Tensor", "torch._C.TensorBase", "torch._C._TensorBase") or full.endswith(".Tensor"):
                    self.fail("hacked", "lazy_output", node, f"class `{node.name}` subclasses torch.Tensor")
        if isinstance(node, ast.Call):
            fname = node.func.id if isinstance(node.func, ast.Name) else None
            if fname == "getattr" and (len(node.args) < 2 or not isinstance(node.args[1], ast.Constant)):
                self.fail("hacked", "sandbox_escape", node, "`getattr` with a computed name is not allowed")
            if (
                fname == "getattr"
                and isinstance(node.args[1], ast.Constant)
                and str(node.args[1].value).startswith("__")
            ):
                self.fail("hacked", "sandbox_escape", node, "`getattr` of a dunder is not allowed")
            if fname in ("type",) and len(node.args) == 3:
                self.fail(
                    "hacked", "lazy_output", node, "creating classes with `type(name, bases, dict)` is not allowed"
                )
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
            targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
            for t in targets:
                for sub in ast.walk(t):
                    if isinstance(sub, ast.Attribute):
                        if sub.attr == "__class__":
                            self.fail("hacked", "lazy_output", node, "assigning `__class__` is not allowed")
                        root = _root(sub)
                        if isinstance(root, ast.Name) and root.id in self.imported:
                            full = self.resolve(_dotted(sub)) or root.id
                            if any(p in PRECISION_SWITCHES for p in full.split(".")):
                                self.fail(
                                    "hacked",
                                    "precision_downgrade",
                                    node,
                                    f"assignment to `{full}` lowers matmul precision",
                                )
                            self.fail("hacked", "timer_patch", node, f"assignment to `{full}` monkeypatches a library")
        if isinstance(node, ast.Global):
            for name in node.names:
                if name in self.imported:
                    self.fail("hacked", "timer_patch", node, f"rebinding the imported module `{name}` is not allowed")
        for name in LOW_PRECISION_NAMES:
            if isinstance(node, ast.Attribute) and node.attr == name:
                self.warnings.append(
                    f"line {node.lineno}: lower precision `{_dotted(node) or node.attr}` (checked at run time)"
                )
                break

    def _is_module_level(self, fn: ast.AST) -> bool:
        return fn in self.tree.body

    def reachable(self, start: str) -> set[str]:
        seen: set[str] = set()
        todo = [start]
        while todo:
            name = todo.pop()
            if name in seen or name not in self.defs:
                continue
            seen.add(name)
            for n in ast.walk(self.defs[name]):
                if isinstance(n, ast.Name) and n.id in self.defs:
                    todo.append(n.id)
        return seen

    def launches_kernel(self, node: ast.AST, reach: set[str], depth: int = 0) -> bool:
        for n in ast.walk(node):
            if isinstance(n, ast.Call):
                f = n.func
                if isinstance(f, ast.Subscript) and isinstance(f.value, ast.Name) and f.value.id in self.kernels:
                    return True
                if isinstance(f, ast.Name) and f.id in self.kernels:
                    return True
                if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id in self.kernels:
                    return True
                if depth < 4 and isinstance(f, ast.Name) and f.id in self.defs and f.id in reach:
                    target = self.defs[f.id]
                    if isinstance(target, (ast.FunctionDef, ast.AsyncFunctionDef)) and self.launches_kernel(
                        target, reach, depth + 1
                    ):
                        return True
        return False

    def check_try(self, reach: set[str]) -> None:
        for name in reach:
            for n in ast.walk(self.defs[name]):
                if isinstance(n, _TRY_NODES):
                    guarded = ast.Module(body=list(n.body), type_ignores=[])
                    if self.launches_kernel(guarded, reach):
                        self.fail(
                            "hacked",
                            "try_except_fallback",
                            n,
                            "a `try` guards a kernel launch (a fallback path would hide failures)",
                        )
                    self.warnings.append(f"line {n.lineno}: `try` statement in code reachable from ModelNew")

    def check_torch_compute(self, reach: set[str]) -> None:
        cls = self.defs["ModelNew"]
        for n in ast.walk(cls):
            if isinstance(n, ast.Call):
                full = self.resolve(_dotted(n.func)) or ""
                if full.startswith("torch.nn.functional.") or full in (
                    "torch.matmul",
                    "torch.mm",
                    "torch.bmm",
                    "torch.softmax",
                    "torch.conv2d",
                ):
                    self.warnings.append(
                        f"line {n.lineno}: PyTorch compute call `{full}` in ModelNew (checked at run time)"
                    )


def check(source: str, backend: str = "triton") -> StaticVerdict:
    """Runs every static check on `source`, a candidate of `backend` (`triton` or `cuda`)."""
    try:
        tree = ast.parse(source)
    except SyntaxError as e:
        return StaticVerdict(status="compile_error", message=f"SyntaxError: {e.msg} (line {e.lineno})")
    checker = _Checker(tree, backend)
    try:
        kernels = checker.run()
    except _Finding as f:
        return StaticVerdict(status=f.status, hack=f.hack, message=f.message, warnings=checker.warnings)
    return StaticVerdict(warnings=sorted(set(checker.warnings)), kernels=kernels)
