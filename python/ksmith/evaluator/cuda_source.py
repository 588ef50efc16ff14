"""What the CUDA backend reads from a candidate's text, before anything of it runs: its inline
extensions (KernelBench's `torch.utils.cpp_extension.load_inline` calls) and the rules on their
C++/CUDA sources.

A CUDA candidate is a Python program that builds one or more extensions at module level
(``ext = load_inline(name=..., cpp_sources=..., cuda_sources=..., functions=[...])``) and calls
their functions from ``ModelNew``. The evaluator compiles each extension itself, in a confined
build child that runs no candidate code (see `build_child`), so the call's arguments must be
readable without running the program: string literals, lists of them, or module-level names bound
to one (`extensions`). Each extension is an `ExtensionSpec`; its `digest` names it in the build
cache (with the toolchain, see `cudacache`) and in the harness, which hands the candidate's
``load_inline`` call the module built for the same spec.

The source rules (`source_findings`) refuse what a kernel never needs (processes, files, dynamic
libraries, threads, streams of its own, quoted includes that read files of the machine, kernel
names that imitate a library's) and warn about ATen or cuBLAS calls, which the runtime layer
decides (the dispatch log and the profile, see `backend_cuda`).
"""

from __future__ import annotations

import ast
import dataclasses
import hashlib
import json
import re
from typing import Any

#: `load_inline` arguments an extension may set (anything else names paths or build modes).
ALLOWED_ARGUMENTS = frozenset(
    {
        "name",
        "cpp_sources",
        "cuda_sources",
        "functions",
        "extra_cflags",
        "extra_cuda_cflags",
        "extra_ldflags",
        "verbose",
        "with_cuda",
        "with_pytorch_error_handling",
    }
)
#: Compiler flags an extension may pass (optimization, language level, macros, warnings, arch).
ALLOWED_FLAG = re.compile(
    r"^(-O[0-3s]|-std=c\+\+(14|17|20)|--use_fast_math|-use_fast_math|-lineinfo|-Xptxas=-v|"
    r"--expt-relaxed-constexpr|--expt-extended-lambda|-D[A-Za-z_][A-Za-z0-9_]*(=[A-Za-z0-9_.]*)?|"
    r"-U[A-Za-z_][A-Za-z0-9_]*|-w|-Wall|-Wno-[a-z-]+|--ftz=(true|false)|--prec-div=(true|false)|"
    r"--prec-sqrt=(true|false)|--fmad=(true|false)|-maxrregcount=\d+|--maxrregcount=\d+|"
    r"-arch=sm_\d+a?|-gencode=arch=compute_\d+a?,code=sm_\d+a?|--restrict|-fopenmp)$"
)
#: Linker flags an extension may pass: CUDA's own libraries (what they are used for is decided at
#: run time).
ALLOWED_LDFLAG = re.compile(r"^-l(cublas|cublasLt|cudart|cuda|curand|cusparse|cufft)$")
#: System headers a kernel may include (angle brackets only).
ALLOWED_HEADER = re.compile(
    r"^(torch/(extension|types|all)\.h|ATen/[A-Za-z0-9_/]+\.h|c10/[A-Za-z0-9_/]+\.h|"
    r"cuda(_runtime|_runtime_api|_fp16|_bf16|_fp8)?\.h|cuda/[a-z_]+|mma\.h|cooperative_groups(/[a-z_]+)?\.h|"
    r"cooperative_groups|cub/[A-Za-z0-9_/]+\.cuh|cublas(_v2|Lt)?\.h|vector_types\.h|math_constants\.h|"
    r"device_launch_parameters\.h|"
    r"c?math|math\.h|cstdint|stdint\.h|cstddef|cfloat|float\.h|climits|limits|algorithm|vector|array|"
    r"type_traits|utility|tuple|numeric|cassert|assert\.h|string|initializer_list|functional|optional)$"
)
#: C++ that gives a capability a kernel never needs, by what it gives (the verdict names it).
CAPABILITY_PATTERNS = {
    "processes": r"\b(system|popen|fork|vfork|execv|execve|execvp|execl|execlp|posix_spawn|kill)\s*\(",
    "files": r"(?<!::)\b(fopen|freopen|open|openat|creat|unlink|rename|mkdir|rmdir|chmod|truncate|mmap)\s*\(|"
    r"\bstd::(i|o)?fstream\b|#\s*include\s*<(fstream|filesystem|cstdio|stdio\.h|fcntl\.h|unistd\.h)>",
    "dynamic libraries": r"\b(dlopen|dlsym|dlmopen)\s*\(|#\s*include\s*<dlfcn\.h>",
    "the network": r"\b(socket|sendto|recvfrom)\s*\(|#\s*include\s*<(sys/socket\.h|netinet/[a-z]+\.h)>",
    "interpreter internals": r"\bPy[A-Z][A-Za-z]*_[A-Za-z]+\s*\(|\bpybind11::(exec|eval|module_::import)\b",
}
#: Work outside the measured call: threads, and streams of the candidate's own.
THREAD_PATTERN = r"\bstd::(thread|async|jthread)\b|\bpthread_create\s*\(|#\s*include\s*<(thread|future|pthread\.h)>"
STREAM_PATTERN = (
    r"\bcudaStreamCreate(WithFlags|WithPriority)?\s*\(|\bgetStreamFromPool\s*\(|\bsetCurrentCUDAStream\s*\(|"
    r"\bcudaStreamAttributeAccessPolicyWindow\b|\bcudaLaunchHostFunc\s*\(|\bcudaStreamAddCallback\s*\("
)
#: Switches that lower float32 precision from C++.
PRECISION_PATTERN = r"\bsetAllowTF32(CuBLAS|CuDNN)\s*\(|\bsetFloat32MatmulPrecision\s*\(|\bCUBLAS_TF32_TENSOR_OP_MATH\b"
#: Calls whose work the runtime layer attributes (warnings here).
ATEN_COMPUTE = re.compile(
    r"\b(torch|at)::(matmul|mm|bmm|addmm|linear|conv\w*|softmax|log_softmax|layer_norm|relu|gelu|silu|sigmoid|"
    r"tanh|exp|add|mul|sum|mean|max|min|einsum|baddbmm|native::\w+)\s*\(|"
    r"\.(matmul|mm|bmm|addmm|softmax|relu|sigmoid|exp|sum|mean)\s*\("
)
CUBLAS = re.compile(r"\bcublas[A-Z]\w*\s*\(|\bat::cuda::blas::\w+|\bcublasLt\w*\s*\(")
#: A `__global__` function's name (templates and launch bounds allowed between).
GLOBAL_KERNEL = re.compile(
    r"__global__\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?(?:static\s+)?(?:inline\s+)?void\s+"
    r"(?:__launch_bounds__\s*\([^)]*\)\s*)?([A-Za-z_][A-Za-z0-9_]*)\s*[(<]"
)
#: Kernel names that imitate a library's kernels (the profile attributes kernels by name).
LIBRARY_NAME = re.compile(
    r"^(sm\d+|ampere|volta|turing|hopper|blackwell|maxwell|cutlass|cublas|cudnn|xmma|nvjet|gemm|gemv|"
    r"vectorized_elementwise|elementwise|reduce|softmax_warp|cunn|at_|aten|triton)",
    re.IGNORECASE,
)
#: Namespaces of libraries whose kernels a candidate's kernels must not be declared in.
LIBRARY_NAMESPACE = re.compile(r"\bnamespace\s+(at|c10|torch|cutlass|cub|thrust|cublas|cudnn)\b")


class SpecError(Exception):
    """An extension the evaluator cannot build from the program's text."""

    def __init__(self, line: int, message: str):
        super().__init__(f"line {line}: {message}")
        self.line = line


@dataclasses.dataclass(frozen=True)
class ExtensionSpec:
    """One `load_inline` call, normalized: what decides the binary (the `name` does not: the
    evaluator names every module after its digest)."""

    cpp_sources: tuple[str, ...]
    cuda_sources: tuple[str, ...]
    functions: tuple[str, ...]
    extra_cflags: tuple[str, ...] = ()
    extra_cuda_cflags: tuple[str, ...] = ()
    extra_ldflags: tuple[str, ...] = ()
    with_pytorch_error_handling: bool = True

    @property
    def digest(self) -> str:
        """The spec's hash (the build cache adds the toolchain to it)."""
        text = json.dumps(dataclasses.asdict(self), sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()

    def module_name(self) -> str:
        """The module the evaluator builds for this spec (unique per spec, a valid identifier)."""
        return f"ksmith_ext_{self.digest[:20]}"

    def to_dict(self) -> dict[str, Any]:
        return {k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(self).items()}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ExtensionSpec:
        return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in d.items()})  # type: ignore[arg-type]

    @classmethod
    def from_call(cls, kwargs: dict[str, Any]) -> ExtensionSpec:
        """The spec of a `load_inline` call's keyword arguments (the harness's side: the same
        normalization as `extensions`). Raises `ValueError` for an argument outside
        `ALLOWED_ARGUMENTS` or of the wrong type."""
        extra = sorted(set(kwargs) - ALLOWED_ARGUMENTS)
        if extra:
            raise ValueError(f"load_inline: argument(s) {', '.join(extra)} are not allowed")
        return cls(
            cpp_sources=_strings(kwargs.get("cpp_sources"), "cpp_sources"),
            cuda_sources=_strings(kwargs.get("cuda_sources"), "cuda_sources"),
            functions=_functions(kwargs.get("functions")),
            extra_cflags=_strings(kwargs.get("extra_cflags"), "extra_cflags"),
            extra_cuda_cflags=_strings(kwargs.get("extra_cuda_cflags"), "extra_cuda_cflags"),
            extra_ldflags=_strings(kwargs.get("extra_ldflags"), "extra_ldflags"),
            with_pytorch_error_handling=bool(kwargs.get("with_pytorch_error_handling", True)),
        )


def _strings(value: Any, what: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise ValueError(f"load_inline: `{what}` must be a string or a list of strings")


def _functions(value: Any) -> tuple[str, ...]:
    if isinstance(value, dict):
        value = list(value)
    names = _strings(value, "functions")
    if not names:
        raise ValueError("load_inline: `functions` must name the functions to bind")
    for n in names:
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", n):
            raise ValueError(f"load_inline: `{n}` is not a C++ function name")
    return names


def _literal(node: ast.AST, constants: dict[str, ast.AST], depth: int = 0) -> Any:
    """The value of a string literal, a list/tuple of them, a dict of them (functions with
    docstrings), a boolean, or a module-level name bound to one; `ValueError` otherwise."""
    if isinstance(node, ast.Name) and node.id in constants and depth < 4:
        return _literal(constants[node.id], constants, depth + 1)
    if isinstance(node, ast.Constant) and isinstance(node.value, (str, bool)):
        return node.value
    if isinstance(node, (ast.List, ast.Tuple)):
        return [_literal(e, constants, depth) for e in node.elts]
    if isinstance(node, ast.Dict) and all(k is not None for k in node.keys):
        return {_literal(k, constants, depth): _literal(v, constants, depth) for k, v in zip(node.keys, node.values)}  # type: ignore[arg-type]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _literal(node.left, constants, depth), _literal(node.right, constants, depth)
        if isinstance(left, str) and isinstance(right, str):
            return left + right
    raise ValueError("not a literal")


def _constants(tree: ast.Module) -> dict[str, ast.AST]:
    """Module-level names bound once, to their value's node."""
    seen: dict[str, int] = {}
    values: dict[str, ast.AST] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            name = node.targets[0].id
            seen[name] = seen.get(name, 0) + 1
            values[name] = node.value
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            seen[node.target.id] = seen.get(node.target.id, 0) + 1
            values[node.target.id] = node.value
    return {k: v for k, v in values.items() if seen[k] == 1}


def is_load_inline(call: ast.AST, resolve: Any) -> bool:
    """Whether `call` calls `torch.utils.cpp_extension.load_inline` (`resolve` maps a local dotted
    name to its full path)."""
    if not isinstance(call, ast.Call):
        return False
    parts = []
    f = call.func
    while isinstance(f, ast.Attribute):
        parts.append(f.attr)
        f = f.value
    if not isinstance(f, ast.Name):
        return False
    parts.append(f.id)
    return bool(resolve(".".join(reversed(parts))) == "torch.utils.cpp_extension.load_inline")


def extensions(tree: ast.Module, resolve: Any) -> dict[str, ExtensionSpec]:
    """Every extension the program builds, by the module-level name it is bound to. Raises
    `SpecError` for a `load_inline` call the evaluator cannot build from the text (not bound at
    module level to one name, an argument that is not a literal or a literal-bound name, a
    positional argument past `name`, an argument or flag not allowed)."""
    constants = _constants(tree)
    bound: dict[int, str] = {}
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and is_load_inline(node.value, resolve)
        ):
            bound[id(node.value)] = node.targets[0].id
    out: dict[str, ExtensionSpec] = {}
    for found in ast.walk(tree):
        if not is_load_inline(found, resolve):
            continue
        assert isinstance(found, ast.Call)
        call = found
        line = call.lineno
        if id(call) not in bound:
            raise SpecError(line, "`load_inline` must be called at module level and bound to one name (`ext = ...`)")
        names = ["name", "cpp_sources", "cuda_sources", "functions"]
        if len(call.args) > len(names):
            raise SpecError(line, "`load_inline`: pass the arguments past `functions` by keyword")
        kwargs: dict[str, Any] = {}
        for arg_name, arg in [*zip(names, call.args), *((k.arg, k.value) for k in call.keywords)]:
            if arg_name is None:
                raise SpecError(line, "`load_inline`: `**kwargs` is not allowed")
            try:
                kwargs[arg_name] = _literal(arg, constants)
            except ValueError:
                raise SpecError(
                    line,
                    f"`load_inline`: `{arg_name}` must be a literal (or a module-level name bound once to one): the "
                    "evaluator compiles the extension from the program's text",
                ) from None
        try:
            spec = ExtensionSpec.from_call(kwargs)
        except ValueError as e:
            raise SpecError(line, str(e)) from None
        if not any(src.strip() for src in spec.cuda_sources):
            raise SpecError(line, "`load_inline`: `cuda_sources` is empty (the CUDA backend compiles CUDA kernels)")
        for flag in (*spec.extra_cflags, *spec.extra_cuda_cflags):
            if not ALLOWED_FLAG.match(flag):
                raise SpecError(line, f"`load_inline`: compiler flag `{flag}` is not allowed")
        for flag in spec.extra_ldflags:
            if not ALLOWED_LDFLAG.match(flag):
                raise SpecError(line, f"`load_inline`: linker flag `{flag}` is not allowed")
        out[bound[id(call)]] = spec
    return out


def strip_comments(text: str) -> str:
    """C++ text without comments (string literals kept)."""
    out = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", "", out)


def kernel_names(spec: ExtensionSpec) -> list[str]:
    """The `__global__` functions of an extension's sources."""
    names: set[str] = set()
    for src in (*spec.cuda_sources, *spec.cpp_sources):
        names.update(GLOBAL_KERNEL.findall(strip_comments(src)))
    return sorted(names)


@dataclasses.dataclass
class SourceFinding:
    """A finding of the source rules: `status`/`hack` as in `static_check.StaticVerdict`."""

    status: str
    hack: str | None
    message: str


def _refusals() -> list[tuple[str, str, str | None, str]]:
    """The source rules that refuse, in order: (pattern, status, hack, why)."""
    rules = [
        (pattern, "hacked", "sandbox_escape", f"gives access to {capability}")
        for capability, pattern in CAPABILITY_PATTERNS.items()
    ]
    return [
        *rules,
        (THREAD_PATTERN, "hacked", "background_thread", "starts threads"),
        (STREAM_PATTERN, "hacked", "side_stream", "runs work outside the timed stream"),
        (PRECISION_PATTERN, "hacked", "precision_downgrade", "lowers float32 precision"),
        (LIBRARY_NAMESPACE.pattern, "static_rejected", None, "declares code in a library's namespace"),
    ]


def source_findings(spec: ExtensionSpec, binding: str) -> tuple[SourceFinding | None, list[str]]:
    """The source rules on one extension (bound to `binding`): the first refusal, if any, and the
    warnings."""
    text = strip_comments("\n".join((*spec.cpp_sources, *spec.cuda_sources)))
    where = f"extension `{binding}`"
    for inc in re.finditer(r"#\s*include\s*([<\"])([^>\"]+)[>\"]", text):
        if inc.group(1) == '"':
            why = f'{where}: `#include "{inc.group(2)}"` reads a file of the machine'
            return SourceFinding("hacked", "sandbox_escape", why), []
        if not ALLOWED_HEADER.match(inc.group(2).strip()):
            return SourceFinding("hacked", "sandbox_escape", f"{where}: header <{inc.group(2)}> is not allowed"), []
    for pattern, status, hack, why in _refusals():
        found = re.search(pattern, text)
        if found:
            return SourceFinding(status, hack, f"{where}: `{found.group(0).strip()}` {why}"), []
    kernels = kernel_names(spec)
    if not kernels:
        return SourceFinding("static_rejected", None, f"{where}: no `__global__` kernel is defined"), []
    for k in kernels:
        if LIBRARY_NAME.match(k):
            return SourceFinding(
                "static_rejected",
                None,
                f"{where}: kernel `{k}` is named like a library's kernels (the profile attributes kernels by name)",
            ), []
    warnings = []
    m = ATEN_COMPUTE.search(text)
    if m:
        warnings.append(f"{where}: ATen compute call `{m.group(0).strip()}` (checked at run time)")
    m = CUBLAS.search(text)
    if m:
        warnings.append(f"{where}: cuBLAS call `{m.group(0).strip()}` (checked at run time)")
    if re.search(r"\bstatic\s+(torch|at)::Tensor\b", text):
        warnings.append(f"{where}: a static tensor (results kept across calls are checked at run time)")
    return None, warnings
