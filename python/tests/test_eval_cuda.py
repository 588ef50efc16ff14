"""The CUDA backend on the CPU (CI has no nvcc or GPU): its static rules on the project's CUDA
candidates, the extension specs the worker and the harness must agree on, the build cache's keys
and safety, the compiler's first errors, the build child's sources, the profile's attribution, and
the answer of a worker that cannot build (`backend_unavailable`). The GPU path is measured by
scripts/cuda_gpu_bench.py."""

from __future__ import annotations

import ast
import dataclasses
import json
import os
import shutil
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from ksmith.evaluator import backends, build_child, cuda_source, cudacache, decide, messages, protocol  # noqa: E402
from ksmith.evaluator.backend import (
    BackendUnavailable,  # noqa: E402
    CandidateFailed,  # noqa: E402
    kernel_share,  # noqa: E402
)
from ksmith.evaluator.backend_cuda import CudaHarness, _specs  # noqa: E402
from ksmith.evaluator.messages import ExtensionsBuilt, ExtensionsFailed  # noqa: E402
from ksmith.evaluator.static_check import check  # noqa: E402
from ksmith.evaluator.worker import error_body  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
CUDA = os.path.join(HERE, "candidates", "cuda")
MANIFEST = json.load(open(os.path.join(CUDA, "manifest.json")))
ENTRIES = MANIFEST["honest"] + MANIFEST["adversarial"]


def _source(rel: str) -> str:
    return open(os.path.join(CUDA, rel)).read()


def _specs_of(source: str) -> dict[str, cuda_source.ExtensionSpec]:
    tree = ast.parse(source)
    return cuda_source.extensions(tree, lambda d: "torch.utils.cpp_extension.load_inline" if d == "load_inline" else d)


@pytest.mark.parametrize("entry", ENTRIES, ids=lambda e: e["candidate"])
def test_static_rules_on_the_cuda_candidates(entry):
    v = check(_source(entry["candidate"]), "cuda")
    if entry.get("static"):
        assert (v.status, v.hack) == tuple(entry["expect"]), v.message
    else:
        assert v.status is None, v.message
        assert v.kernels == ["ext"]
    if entry.get("static_warning"):
        assert any(entry["static_warning"] in w for w in v.warnings), v.warnings


def test_a_cuda_candidate_is_no_triton_candidate_and_back():
    cuda = _source("honest/add_relu_half.py")
    assert check(cuda).status == "static_rejected" and "not a Triton kernel" in check(cuda).message
    triton = open(os.path.join(HERE, "candidates", "honest", "elementwise.py")).read()
    v = check(triton, "cuda")
    assert v.status == "static_rejected" and "load_inline" in v.message


def test_only_load_inline_of_cpp_extension():
    src = _source("honest/add_relu_half.py").replace(
        "from torch.utils.cpp_extension import load_inline", "from torch.utils.cpp_extension import load_inline, load"
    )
    v = check(src, "cuda")
    assert v.status == "static_rejected" and "only `load_inline`" in v.message


SPEC = cuda_source.ExtensionSpec(
    cpp_sources=("torch::Tensor f(torch::Tensor x);",),
    cuda_sources=("__global__ void k(float* o) { o[0] = 1.f; }\ntorch::Tensor f(torch::Tensor x) { return x; }",),
    functions=("f",),
)


@pytest.mark.parametrize(
    ("code", "status", "hack", "words"),
    [
        ('#include "/etc/passwd"', "hacked", "sandbox_escape", "reads a file"),
        ("#include <fstream>", "hacked", "sandbox_escape", "not allowed"),
        ('void g() { system("ls"); }', "hacked", "sandbox_escape", "processes"),
        ('void g() { void* h = dlopen("x", 0); }', "hacked", "sandbox_escape", "dynamic libraries"),
        ('void g() { FILE* f = fopen("/x", "w"); }', "hacked", "sandbox_escape", "files"),
        ("void g() { std::thread t([]{}); }", "hacked", "background_thread", "threads"),
        ("void g() { cudaStream_t s; cudaStreamCreate(&s); }", "hacked", "side_stream", "timed stream"),
        ("void g() { at::cuda::getStreamFromPool(); }", "hacked", "side_stream", "timed stream"),
        ("void g() { at::globalContext().setAllowTF32CuBLAS(true); }", "hacked", "precision_downgrade", "precision"),
        ("namespace at { __global__ void mine(float* o) {} }", "static_rejected", None, "library's namespace"),
        ("__global__ void ampere_sgemm_128x64_nn(float* o) {}", "static_rejected", None, "named like a library"),
    ],
)
def test_source_rules(code, status, hack, words):
    spec = cuda_source.ExtensionSpec(
        cpp_sources=SPEC.cpp_sources, cuda_sources=(SPEC.cuda_sources[0] + "\n" + code,), functions=("f",)
    )
    finding, _ = cuda_source.source_findings(spec, "ext")
    assert finding is not None and (finding.status, finding.hack) == (status, hack)
    assert words in finding.message


def test_source_rules_pass_an_honest_extension_and_ignore_comments():
    spec = cuda_source.ExtensionSpec(
        cpp_sources=SPEC.cpp_sources,
        cuda_sources=(SPEC.cuda_sources[0] + '\n// system("rm") in a comment\n/* std::thread */\n#include <cmath>',),
        functions=("f",),
    )
    assert cuda_source.source_findings(spec, "ext") == (None, [])
    no_kernel = cuda_source.ExtensionSpec(cpp_sources=(), cuda_sources=("int x;",), functions=("f",))
    finding, _ = cuda_source.source_findings(no_kernel, "ext")
    assert finding is not None and "no `__global__` kernel" in finding.message


def test_kernel_names_with_templates_and_launch_bounds():
    spec = cuda_source.ExtensionSpec(
        cpp_sources=(),
        cuda_sources=(
            "template <int B> __global__ void __launch_bounds__(256) tiled(float* o) {}\n"
            "__global__ static void plain (float* o) {}\n// __global__ void commented(float* o) {}",
        ),
        functions=("f",),
    )
    assert cuda_source.kernel_names(spec) == ["plain", "tiled"]


#: A call the worker can build, to which each case below adds or changes an argument.
CALL = "ext = load_inline(name='x', cpp_sources='', cuda_sources='k', functions=['f']"


@pytest.mark.parametrize(
    ("call", "words"),
    [
        ("ext = load_inline(name='x', cpp_sources=SRC.upper(), cuda_sources='', functions=['f'])", "must be a literal"),
        ("ext = load_inline('x', '', '__global__ void k(){}', ['f'], None)", "by keyword"),
        (CALL + ", build_directory='/tmp')", "not allowed"),
        (CALL + ", extra_cuda_cflags=['-Xlinker=/x'])", "compiler flag"),
        (CALL + ", extra_ldflags=['-L/tmp'])", "linker flag"),
        ("ext = load_inline(name='x', cpp_sources='', cuda_sources=' ', functions=['f'])", "`cuda_sources` is empty"),
        ("ext = load_inline(name='x', cpp_sources='', cuda_sources='k', functions=['f; system(0)'])", "not a C++"),
        ("def make():\n    return " + CALL[6:] + ")", "module level"),
    ],
)
def test_extensions_the_worker_cannot_build_from_the_text(call, words):
    src = "from torch.utils.cpp_extension import load_inline\nSRC = 'a'\n" + call + "\n"
    with pytest.raises(cuda_source.SpecError) as e:
        _specs_of(src)
    assert words in str(e.value)


def test_the_worker_and_the_harness_compute_the_same_digest():
    source = _source("honest/add_relu_half.py")
    (spec,) = _specs_of(source).values()
    # the harness's side: the call's values, as the candidate's module passes them at run time
    ns: dict = {}
    exec(source.split("ext = load_inline")[0], ns)  # noqa: S102 - the test's own candidate, no call made
    kwargs = {
        "name": "anything",
        "cpp_sources": ns["cpp_source"],
        "cuda_sources": "#include <ATen/cuda/CUDAContext.h>\n" + ns["cuda_source"],
        "functions": ["add_relu_half"],
        "extra_cuda_cflags": ["-O3"],
        "verbose": True,
    }
    assert cuda_source.ExtensionSpec.from_call(kwargs).digest == spec.digest
    assert cuda_source.ExtensionSpec.from_call({**kwargs, "functions": {"add_relu_half": "doc"}}).digest == spec.digest
    for change in ({"extra_cuda_cflags": ["-O2"]}, {"cpp_sources": [ns["cpp_source"], "// x"]}, {"functions": ["g"]}):
        assert cuda_source.ExtensionSpec.from_call({**kwargs, **change}).digest != spec.digest
    assert cuda_source.ExtensionSpec.from_dict(spec.to_dict()) == spec
    assert spec.module_name().isidentifier() and spec.digest[:20] in spec.module_name()


def _toolchain(**kw) -> cudacache.Toolchain:
    base = dict(
        nvcc="/usr/local/cuda/bin/nvcc",
        nvcc_version="Cuda compilation tools, release 13.0",
        ninja="/venv/bin/ninja",
        cxx="/usr/bin/c++",
        cxx_version="c++ (Debian 14.2.0) 14.2.0",
        torch="2.15.0+cu132",
        cuda="13.2",
        arch="9.0",
    )
    return cudacache.Toolchain(**{**base, **kw})


def test_cache_keys_depend_on_the_spec_and_every_version_but_not_on_paths():
    t = _toolchain()
    key = cudacache.entry_key(SPEC.digest, t.key())
    assert cudacache.entry_key(SPEC.digest, _toolchain(nvcc="/opt/cuda/bin/nvcc", ninja="/x/ninja").key()) == key
    for change in (
        {"nvcc_version": "release 12.8"},
        {"torch": "2.14.0"},
        {"arch": "8.0"},
        {"cuda": "12.8"},
        {"cxx_version": "g++ 13"},
    ):
        assert cudacache.entry_key(SPEC.digest, _toolchain(**change).key()) != key, change
    other = cuda_source.ExtensionSpec(cpp_sources=(), cuda_sources=("x",), functions=("f",))
    assert cudacache.entry_key(other.digest, t.key()) != key
    env = t.build_env()
    assert env["TORCH_CUDA_ARCH_LIST"] == "9.0" and env["CUDA_HOME"] == "/usr/local/cuda"
    assert env["PATH"].split(os.pathsep)[:3] == ["/usr/local/cuda/bin", "/venv/bin", "/usr/bin"]


def test_the_cache_is_content_verified(tmp_path):
    cache = cudacache.BuildCache(str(tmp_path / "cache"))
    key = cudacache.entry_key(SPEC.digest, _toolchain().key())
    assert cache.lookup(key) is None
    built = tmp_path / "out.so"
    built.write_bytes(b"\x7fELF honest binary")
    entry = cache.adopt(key, "ksmith_ext_x", str(built))
    built.write_bytes(b"changed after adoption")  # the build child's folder is not the cache
    again = cache.lookup(key)
    assert again == entry and open(entry.path, "rb").read() == b"\x7fELF honest binary"
    assert cache.stats() == {"hits": 1, "misses": 1, "hit_rate": 0.5}
    # a binary that is not the one recorded is dropped (the worker builds it again)
    with open(entry.path, "wb") as f:
        f.write(b"planted")
    assert cache.lookup(key) is None and not os.path.exists(os.path.dirname(entry.path))
    with pytest.raises(ValueError):
        cache.lookup("../" + key[3:])
    link = tmp_path / "link.so"
    link.symlink_to(built)
    with pytest.raises(OSError):
        cache.adopt(key, "ksmith_ext_x", str(link))
    assert cache.lookup(key, count=False) is None


def test_the_harness_refuses_a_binary_the_worker_did_not_record(tmp_path):
    fake = tmp_path / "mod.py"  # any importable file stands for a built module here
    fake.write_text("def f(x):\n    return x + 1\n")
    entry = {"module": "ksmith_ext_fake", "path": str(fake), "digest": SPEC.digest}
    with pytest.raises(RuntimeError, match="not the one the worker recorded"):
        CudaHarness({"extensions": [{**entry, "sha256": "0" * 64}]}).before_import()
    import torch.utils.cpp_extension as ce

    original = ce.load_inline
    try:
        CudaHarness({"extensions": [{**entry, "sha256": cudacache.file_sha256(str(fake))}]}).before_import()
        module = ce.load_inline(
            name="whatever", cpp_sources=list(SPEC.cpp_sources), cuda_sources=SPEC.cuda_sources[0], functions=["f"]
        )
        assert module.f(1) == 2
        with pytest.raises(RuntimeError, match="not one the evaluator built"):
            ce.load_inline(name="x", cpp_sources="", cuda_sources="__global__ void other() {}", functions=["f"])
    finally:
        ce.load_inline = original


def test_profile_attribution_by_demangled_name():
    kernels = {"row_softmax_kernel", "tiled"}
    owns = CudaHarness.owns
    assert owns("row_softmax_kernel(float const*, float*, int)", kernels)
    assert owns("void tiled<128>(float*)", kernels)
    assert owns("mine::tiled(float*)", kernels)
    aten = "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>(int)"
    assert not owns(aten, kernels)
    assert not owns("my_row_softmax_kernel(float*)", kernels)
    assert not owns("sm90_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize128x128x32", kernels)


#: Kernel names the profiler shows for cuBLAS, cuBLASLt and CUTLASS matrix products (Hopper's
#: xmma and nvjet kernels, CUTLASS's SIMT SGEMM, Ampere's SGEMM, small-N GEMM and split-K reduction).
LIBRARY_GEMMS = [
    "sm90_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize128x128x8_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas",
    "void cutlass::Kernel2<cutlass_80_simt_sgemm_128x64_8x5_nn_align1>("
    "cutlass_80_simt_sgemm_128x64_8x5_nn_align1::Params)",
    "ampere_sgemm_128x64_nn",
    "nvjet_sm90_tst_128x128_64x4_1x2_h_bz_coopB_NNN",
    "void gemmSN_NN_kernel<float, 256, 4, 2, 8, 4, 4, false, cublasGemvTensorStridedBatched<float const>, "
    "cublasGemvTensorStridedBatched<float const>, cublasGemvTensorStridedBatched<float> >(cublasGemmSmallNParams<"
    "cublasGemvTensorStridedBatched<float const>, cublasGemvTensorStridedBatched<float const>, "
    "cublasGemvTensorStridedBatched<float>, float>)",
    "void splitKreduce_kernel<32, 16, int, float, float, float, float, true, false, false>(cublasSplitKParams<float>, "
    "float const*, float const*, float*, float const*, float const*, float const*, float const*, float*, void*, long, "
    "float*, int*)",
]


def test_a_direct_cublas_call_is_a_decoy_by_its_profile():
    """The cuBLAS candidate's profile at the bench's size (2048^3 float32: the GEMM's time against
    one elementwise pass of the candidate's own kernel): its kernels are the ones the worker reads
    from its source, no library GEMM is counted as the candidate's, and the share decides
    `decoy_kernel` (the verdict the manifest expects for it)."""
    from ksmith.evaluator.evaluate import DEFAULT_OPTIONS

    entry = next(e for e in ENTRIES if e["candidate"] == "adversarial/cublas_call.py")
    (spec,) = _specs_of(_source(entry["candidate"])).values()
    kernels = set(cuda_source.kernel_names(spec))
    assert kernels == {"add_zero_kernel"}
    owns = CudaHarness.owns
    own = "add_zero_kernel(float*, long)"
    assert owns(own, kernels)
    for name in LIBRARY_GEMMS:
        assert not owns(name, kernels), name
    profile = [(own, 0.03), (LIBRARY_GEMMS[0], 0.9), ("an idle marker", 0.0)]
    share, seen = kernel_share(profile, kernels, owns)
    assert seen == {"add_zero_kernel": 1}
    assert share == pytest.approx(0.03 / 0.93)
    judged = messages.Judged(
        label="trial 0",
        structure=None,
        ok=True,
        errors=[],
        repeat_ok=True,
        mutated=False,
        ref_mutated=False,
        alias=[False],
        ref_alias=[False],
    )
    done = messages.CorrectnessDone(
        phases={},
        launches=seen,
        torch_work={},
        torch_calls={"aten::empty": 1},
        gpu_share=share,
        hardware={},
    )
    findings = decide.Findings(trials=[judged])
    v = decide.after_correctness(findings, done, 1.7e10, 1, DEFAULT_OPTIONS, label="CUDA")
    assert v is not None and (v.status, v.hack) == tuple(entry["runtime"]) == tuple(entry["expect"])
    assert "3% of the GPU time" in v.message
    # the candidate's own kernel doing the work passes the same check
    honest, _ = kernel_share([(own, 0.9), (LIBRARY_GEMMS[0], 0.03)], kernels, owns)
    fine = dataclasses.replace(done, gpu_share=honest)
    assert decide.after_correctness(findings, fine, 1.7e10, 1, DEFAULT_OPTIONS, label="CUDA") is None


def test_first_errors_keep_the_compilers_errors():
    out = (
        "[1/3] /usr/local/cuda/bin/nvcc ... -c /ws/build/m/cuda.cu -o cuda.cuda.o\n"
        "FAILED: cuda.cuda.o\n"
        '/ws/build/m/cuda.cu(8): error: identifier "halfway" is undefined\n'
        "      if (i < n) out[i] = fmaxf(x[i] + y[i], 0.f) * halfway;\n"
        '1 error detected in the compilation of "/ws/build/m/cuda.cu".\n'
        "ninja: build stopped: subcommand failed.\n"
    )
    text = cudacache.first_errors(out, "/ws")
    assert text.splitlines()[0] == 'build/m/cuda.cu(8): error: identifier "halfway" is undefined'
    assert "halfway;" in text and "/ws/" not in text and "FAILED" not in text
    assert cudacache.first_errors("no such words\nlast line") == "no such words\nlast line"


def test_the_build_child_writes_what_load_inline_would():
    cpp, cuda = build_child.sources(SPEC, "ksmith_ext_abc")
    assert cpp.startswith("#include <torch/extension.h>\n") and SPEC.cpp_sources[0] in cpp
    assert 'PYBIND11_MODULE(ksmith_ext_abc, m) {\nm.def("f", torch::wrap_pybind_function(f), "f");\n}' in cpp
    assert cuda.splitlines()[:3] == ["#include <torch/types.h>", "#include <cuda.h>", "#include <cuda_runtime.h>"]
    assert cuda.endswith(SPEC.cuda_sources[0])


def test_the_build_step_reads_extensions_whatever_the_static_checks_say():
    with pytest.raises(CandidateFailed) as e:
        _specs(_source("adversarial/computed_source.py"))
    assert e.value.status == "static_rejected" and "must be a literal" in e.value.message
    with pytest.raises(CandidateFailed) as e:
        _specs(open(os.path.join(HERE, "candidates", "honest", "elementwise.py")).read())
    assert e.value.status == "static_rejected" and "no `load_inline`" in e.value.message
    assert [s.functions for s in _specs(_source("honest/row_softmax.py"))] == [("row_softmax",)]


def test_a_missing_toolchain_names_every_part(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.delenv("CUDA_PATH", raising=False)
    monkeypatch.setenv("CXX", "no-such-compiler")
    monkeypatch.setattr(cudacache.os, "access", lambda *a: False)
    monkeypatch.setattr(cudacache.sys, "executable", str(tmp_path / "python"))
    with pytest.raises(cudacache.ToolchainMissing) as e:
        cudacache.find_toolchain(None, "2.15.0", None)
    text = str(e.value)
    for part in ("a CUDA GPU", "a CUDA build of torch", "nvcc", "ninja", "a C++ compiler"):
        assert part in text, part


def test_the_request_names_a_known_backend():
    base = {"task_id": "t", "reference": "r", "candidate": "c"}
    assert protocol.check_request({**base, "backend": "cuda"})["backend"] == "cuda"
    assert "backend" not in protocol.check_request(dict(base))
    with pytest.raises(protocol.ProtocolError, match="triton"):
        protocol.check_request({**base, "backend": "tilelang"})
    vocabulary = json.load(open(os.path.join(HERE, "..", "ksmith", "verdicts.json")))["backend"]
    assert backends.names() == sorted(vocabulary) == ["cuda", "triton"]
    body = error_body(BackendUnavailable("the CUDA backend is unavailable on this worker: missing nvcc"), "t")
    assert body == {
        "kind": "backend_unavailable",
        "message": "the CUDA backend is unavailable on this worker: missing nvcc",
        "task_id": "t",
    }


FAKE_NVCC = """#!/bin/sh
# nvcc as far as the build needs: its version; an error for a source with `halfway`, else an object
if [ "$1" = "--version" ]; then echo "Cuda compilation tools, release 13.0"; exit 0; fi
prev=""; for a in "$@"; do
  case "$a" in *.cu) src="$a";; esac
  if [ "$prev" = "-o" ]; then out="$a"; fi; prev="$a"
done
if grep -q halfway "$src"; then
  echo "$src(4): error: identifier \\"halfway\\" is undefined" >&2
  echo "      out[i] = x[i] * halfway;" >&2
  echo "1 error detected in the compilation of \\"$src\\"." >&2
  exit 1
fi
: > "$out"
"""
FAKE_CXX = """#!/bin/sh
# a C++ compiler as far as the build needs: its version, an empty output for -o
case "$1" in --version|-v|-dumpfullversion|-dumpversion) echo "g++ (GCC) 14.2.0"; exit 0;; esac
prev=""; for a in "$@"; do if [ "$prev" = "-o" ]; then : > "$a"; fi; prev="$a"; done
"""


@pytest.fixture
def fake_toolchain(tmp_path, monkeypatch):
    """nvcc and c++ replaced by scripts (the CPU has neither a CUDA toolkit nor the time to compile
    torch's headers): what is tested is the build child's side, the ninja build it drives and
    what it makes of the compilers' answers."""
    import torch.utils.cpp_extension as ce

    if shutil.which("ninja") is None and shutil.which("ninja", path=os.path.dirname(sys.executable)) is None:
        pytest.skip("ninja is not installed (python/requirements.txt)")
    home = tmp_path / "cuda"
    (home / "bin").mkdir(parents=True)
    nvcc, cxx = home / "bin" / "nvcc", tmp_path / "c++"
    nvcc.write_text(FAKE_NVCC)
    cxx.write_text(FAKE_CXX)
    for f in (nvcc, cxx):
        f.chmod(0o755)
    path = os.pathsep.join([str(home / "bin"), os.path.dirname(sys.executable), os.environ.get("PATH", "")])
    monkeypatch.setenv("PATH", path)
    monkeypatch.setenv("CXX", str(cxx))
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", "9.0")
    monkeypatch.setattr(ce, "CUDA_HOME", str(home))
    return tmp_path / "ws"


def _build(ws, source: str):
    (spec,) = _specs_of(source).values()
    ws.mkdir()
    return spec, build_child.run(str(ws), {"extensions": [{"module": spec.module_name(), "spec": spec.to_dict()}]})


def test_the_build_child_answers_the_compilers_first_errors(fake_toolchain):
    _, msg = _build(fake_toolchain, _source("adversarial/compile_error.py"))
    assert isinstance(msg, ExtensionsFailed) and not msg.toolchain
    assert msg.message.splitlines()[0].endswith('cuda.cu(4): error: identifier "halfway" is undefined')
    assert str(fake_toolchain) not in msg.message and "ninja" not in msg.message and "[2/3]" not in msg.message


def test_the_build_child_builds_without_loading_and_the_worker_adopts(fake_toolchain, tmp_path):
    spec, msg = _build(fake_toolchain, _source("honest/add_relu_half.py"))
    assert isinstance(msg, ExtensionsBuilt), msg
    rel = msg.files[spec.module_name()]
    assert rel == f"build/{spec.module_name()}/{spec.module_name()}.so"
    assert spec.module_name() not in sys.modules  # built, never imported
    main_cpp = (fake_toolchain / "build" / spec.module_name() / "main.cpp").read_text()
    assert f"PYBIND11_MODULE({spec.module_name()}, m)" in main_cpp
    cache = cudacache.BuildCache(str(tmp_path / "cache"))
    key = cudacache.entry_key(spec.digest, _toolchain().key())
    entry = cache.adopt(key, spec.module_name(), str(fake_toolchain / rel))
    assert cache.lookup(key) == entry and entry.path.startswith(str(tmp_path / "cache"))


def test_a_build_without_cuda_home_is_the_toolchains_fault(fake_toolchain, monkeypatch):
    import torch.utils.cpp_extension as ce

    monkeypatch.setattr(ce, "CUDA_HOME", None)
    _, msg = _build(fake_toolchain, _source("honest/add_relu_half.py"))
    assert isinstance(msg, ExtensionsFailed) and msg.toolchain and "CUDA_HOME" in msg.message


def test_the_worker_builds_once_into_its_cache_and_answers_compile_errors(fake_toolchain, monkeypatch):
    """The worker's side end to end on the CPU with the fake compilers: the toolchain found, a
    confined build child per extension, its binary adopted into the cache and served from there
    the second time; a failed build is `compile_error` with the compiler's first errors."""
    from ksmith.confine import Policy
    from ksmith.evaluator.evaluate import DeviceEvaluator

    monkeypatch.setenv("CUDA_HOME", os.path.dirname(os.path.dirname(shutil.which("nvcc") or "")))
    ev = DeviceEvaluator("cpu", {"trials": 2}, policy=Policy(require=False))
    try:
        monkeypatch.setattr(ev, "compute_capability", lambda: "9.0")
        cuda = ev.backend("cuda")
        cuda.check_available()
        with pytest.raises(CandidateFailed) as e:
            cuda.prepare(_source("adversarial/compile_error.py"))
        assert e.value.status == "compile_error"
        assert 'error: identifier "halfway" is undefined' in e.value.message
        first = cuda.prepare(_source("honest/add_relu_half.py"))
        again = cuda.prepare(_source("honest/add_relu_half.py"))
        assert (first.cached, again.cached) == (False, True)
        assert first.config == again.config
        (entry,) = first.config["extensions"]
        assert entry["path"].startswith(cuda.root + os.sep) and os.path.isfile(entry["path"])
        assert cudacache.file_sha256(entry["path"]) == entry["sha256"]
        assert first.config["cuda_kernels"] == ["add_relu_half_kernel"]
        assert cuda.stats()["hits"] == 1 and len(cuda.stats()["builds_s"]) == 1
    finally:
        ev.close()
    assert not os.path.exists(cuda.root)
