"""The CUDA backend's build child: compiles a candidate's inline extensions, confined, and loads
nothing it built.

`main(DIR, secret)`, in a process forked from the fork server like the other children, confines
itself (`child_common.enter_sandbox`) before it reads anything, then builds each extension listed
in `DIR/config.json` (``extensions``: the module name and the `cuda_source.ExtensionSpec` of
each) the way `torch.utils.cpp_extension.load_inline` does (the same generated `main.cpp` with
its bindings and `cuda.cu`, the same ninja build), into `DIR/build/<module>/`, and answers
`messages.ExtensionsBuilt` with each binary's path, or `messages.ExtensionsFailed` with the
compiler's first errors. It never imports a binary: no code of the candidate runs here, so what
the worker adopts into the build cache (`cudacache`) is what the compilers made of the text.
The worker gives it ``compile_timeout_s``; it needs no GPU (the architecture comes from the
worker, ``TORCH_CUDA_ARCH_LIST``) and holds no gate, so builds run beside other candidates' timing.
"""

from __future__ import annotations

import inspect
import json
import os
import time
from typing import Any

from . import cudacache, messages
from .child_common import Channel, enter_sandbox
from .cuda_source import ExtensionSpec


def sources(spec: ExtensionSpec, module: str) -> tuple[str, str]:
    """The `main.cpp` and `cuda.cu` texts `load_inline` would write for `spec` (implicit headers
    and the pybind11 bindings of `spec.functions`)."""
    cpp = ["#include <torch/extension.h>", *spec.cpp_sources, f"PYBIND11_MODULE({module}, m) {{"]
    for fn in spec.functions:
        bound = f"torch::wrap_pybind_function({fn})" if spec.with_pytorch_error_handling else fn
        cpp.append(f'm.def("{fn}", {bound}, "{fn}");')
    cpp.append("}")
    cuda = ["#include <torch/types.h>", "#include <cuda.h>", "#include <cuda_runtime.h>", *spec.cuda_sources]
    return "\n".join(cpp), "\n".join(cuda)


def build(spec: ExtensionSpec, module: str, folder: str) -> str:
    """Builds `spec` as `module` in `folder`; the binary's path. Raises what the build raises."""
    from torch.utils import cpp_extension

    os.makedirs(folder, exist_ok=True)
    cpp, cuda = sources(spec, module)
    paths = [os.path.join(folder, "main.cpp"), os.path.join(folder, "cuda.cu")]
    for path, text in zip(paths, (cpp, cuda)):
        with open(path, "w") as f:
            f.write(text)
    builder = getattr(cpp_extension, "_write_ninja_file_and_build_library", None)
    if builder is None:
        raise cudacache.ToolchainMissing(
            "this torch has no torch.utils.cpp_extension._write_ninja_file_and_build_library (the build step of "
            "load_inline)"
        )
    arguments = {
        "name": module,
        "sources": paths,
        "extra_cflags": list(spec.extra_cflags),
        "extra_cuda_cflags": list(spec.extra_cuda_cflags),
        "extra_sycl_cflags": [],
        "extra_ldflags": list(spec.extra_ldflags),
        "extra_include_paths": [],
        "build_directory": folder,
        "verbose": False,
        "with_cuda": True,
        "with_sycl": False,
    }
    # torch versions differ in the SYCL arguments: pass what this one takes
    accepted = inspect.signature(builder).parameters
    builder(**{k: v for k, v in arguments.items() if k in accepted})
    binary = os.path.join(folder, f"{module}.so")
    if not os.path.isfile(binary):
        raise RuntimeError(f"the build of {module} ended without {module}.so")
    return binary


def run(d: str, cfg: dict[str, Any]) -> messages.Message:
    """Builds every extension of `cfg`; the answer to send."""
    t0 = time.monotonic()
    files: dict[str, str] = {}
    for item in cfg["extensions"]:
        module = str(item["module"])
        spec = ExtensionSpec.from_dict(item["spec"])
        try:
            binary = build(spec, module, os.path.join(d, "build", module))
        except (cudacache.ToolchainMissing, OSError) as e:
            # no CUDA_HOME, no compiler to start: the machine's fault, not the candidate's
            return messages.ExtensionsFailed(f"{type(e).__name__}: {e}", toolchain=True)
        except RuntimeError as e:
            if str(e).startswith("Ninja is required"):
                return messages.ExtensionsFailed(str(e), toolchain=True)
            text = str(e)
            return messages.ExtensionsFailed(cudacache.first_errors(text, d) or text[-2000:], toolchain=False)
        except Exception as e:  # noqa: BLE001 - the compiler's verdict on the candidate's sources
            text = str(e)
            return messages.ExtensionsFailed(cudacache.first_errors(text, d) or text[-2000:], toolchain=False)
        files[module] = os.path.relpath(binary, d)
    return messages.ExtensionsBuilt(files=files, seconds=round(time.monotonic() - t0, 3))


def main(d: str, secret: bytes) -> int:
    """The child's entry point (called in a process forked from the fork server)."""
    ch = Channel(secret)
    cfg = json.load(open(os.path.join(d, "config.json")))
    if not enter_sandbox(cfg, ch):
        return 0
    ch.send(run(d, cfg))
    return 0
